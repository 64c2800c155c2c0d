// h3engine.Engine: one checkpoint opened in a runtime::ModelStore with a pipeline::Generator over it.
// generate(**fields) turns its keyword arguments (named as the CLI's flags: prompt, size, seconds, steps,
// seed, cache, quality, first_frame, last_frame, references, output, ...) into a pipeline::JobInput, the one
// JobBuilder validates it against the checkpoint, and the Generator runs it on a worker thread while the
// calling thread waits with the GIL released — delivering progress callbacks, and turning Ctrl-C
// (KeyboardInterrupt) or a raising callback into the job's cancel flag. Engine.cancel() does the same from
// any thread. One job at a time per engine.
#pragma once

#include "pipeline/generator.h"
#include "pipeline/job_builder.h"
#include "runtime/model_store.h"

#include <pybind11/pybind11.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h3::python {

namespace py = pybind11;

struct EngineOptions {
    std::string checkpoint;
    std::string device = "cpu";
    std::string dtype = "bf16"; // bf16 | fp32 (the DiTs and the conditioner)
    bool keep_loaded = true;    // the server's plan: DiT and decoders stay loaded between calls
    bool keep_text_encoder = false;
};

// What generate() returns (Python: h3engine.Result).
struct GenerateResult {
    py::object frames = py::none(); // uint8 [F, H, W, 3]
    py::object audio = py::none();  // float32 [2, N]
    int sample_rate = 0;
    double fps = 0;
    int width = 0, height = 0, num_frames = 0;
    uint64_t seed = 0;
    int steps = 0;
    std::string task;
    std::vector<std::string> written;
    py::object metrics = py::none(); // the JobReport's metrics (the CLI's --metrics schema)
};

// generate()'s arguments; absent values are left to the builder (its defaults and its errors).
struct GenerateArgs {
    py::object prompt, prompt_embeds, random_prompt_embeds, task, size, aspect, seconds, frames, steps, seed,
        cache, quality, first_frame, last_frame, references, output, save_latents;
    bool return_media = true;
    py::object progress;
};

class Engine {
public:
    explicit Engine(EngineOptions options); // opens the checkpoint (GIL released)
    ~Engine();

    GenerateResult generate(const GenerateArgs& args);
    void cancel() { cancel_.store(true); }
    bool busy() const { return busy_.load(); }

    const EngineOptions& options() const { return options_; }
    const runtime::CheckpointInfo& info() const { return store_->info(); }
    std::map<std::string, uint64_t> component_loads() const { return store_->load_counts(); }

private:
    pipeline::JobInput job_input(const GenerateArgs& args) const;

    EngineOptions options_;
    std::unique_ptr<runtime::ModelStore> store_;
    std::unique_ptr<pipeline::Generator> generator_;
    std::unique_ptr<pipeline::JobBuilder> builder_;
    std::atomic<bool> cancel_{false}, busy_{false};
};

} // namespace h3::python
