// h3engine.Engine: an h3::Engine (include/h3/engine.h) over one checkpoint; Engine(checkpoint, **options)
// takes every EngineOptions member by its name (residency, gpu_memory_budget, weight_dtype, dtype, precision,
// lora, attention, sp/tp/gpus, ...). generate(**fields) turns its keyword arguments (the HTTP API's names:
// prompt, size, seconds, num_inference_steps — `steps` too —, seed, cache, quality, attention, first_frame,
// last_frame, reference, lora, preset, output, ...) into the engine's job input, the engine's builder
// validates it against the checkpoint, and the engine runs it on a worker thread while the
// calling thread waits with the GIL released — delivering progress callbacks, and turning Ctrl-C
// (KeyboardInterrupt) or a raising callback into the job's cancel flag. Engine.cancel() does the same from
// any thread. One job at a time per engine.
#pragma once

#include "engine/engine_impl.h"

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

// Engine(checkpoint, **options): the keyword arguments as h3::EngineOptions (errors: ValueError naming the
// option). keep_loaded defaults to True here (a Python session keeps its models warm between calls).
h3::EngineOptions engine_options(const py::object& checkpoint, const py::kwargs& options);

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
    py::object prompt, prompt_embeds, random_prompt_embeds, task, size, aspect, seconds, frames,
        num_inference_steps, steps, seed, cache, quality, attention, first_frame, last_frame, reference,
        references, lora, lora_strict, preset, video_shift, audio_shift, output, save_latents;
    bool return_media = true;
    py::object progress;
};

// generate()'s keywords from **fields (warm_up()); an unknown name is a ValueError naming it.
GenerateArgs generate_args(const py::kwargs& fields);

class Engine {
public:
    explicit Engine(h3::EngineOptions options); // opens the checkpoint (GIL released)
    ~Engine();

    GenerateResult generate(const GenerateArgs& args);
    // Engine.warm_up(**fields): h3::Engine::warm_up for the job generate(**fields) would run (its
    // conditioning, the DiT forwards that meet one-time work, the decode unless latents only; nothing
    // written), with the GIL released; Engine.cancel() stops it. Returns {"seconds", "encode_seconds",
    // "step_seconds", "metrics"}.
    py::dict warm_up(const GenerateArgs& args);
    void cancel() { cancel_.store(true); }
    bool busy() const { return busy_.load(); }

    const h3::EngineOptions& options() const { return engine_->options(); }
    const runtime::CheckpointInfo& info() const { return engine_->impl().checkpoint(); }
    std::map<std::string, uint64_t> component_loads() const { return engine_->impl().component_loads(); }
    std::string placement() const { return engine_->impl().weights_text; }

private:
    pipeline::JobInput job_input(const GenerateArgs& args) const;

    std::unique_ptr<h3::Engine> engine_;
    std::atomic<bool> cancel_{false}, busy_{false};
};

} // namespace h3::python
