// The inside of h3::Engine (include/h3/engine.h) for the project's own front ends: the server hands the
// engine's builder and runner to its HTTP layer (decoded uploads enter as a pipeline::JobInput), the CLI and
// Python print the details of the full pipeline::JobReport, bench request opens an engine over random
// weights. Programs outside the project use engine.h alone.
//
// What Engine::open assembles, in order: the options checked (check_engine_options), the device (a launched
// rank's own GPU), the placement (runtime/placement_policy: residency, int8, budget; the device group), the
// model store, the LoRA adapters (merged into the store's DiT, or a runtime::AdapterLibrary), the job
// builder with the engine's limits, the generator.
#pragma once

#include "engine/job_request.h"
#include "pipeline/generator.h"
#include "pipeline/job_builder.h"
#include "runtime/adapter_library.h"
#include "runtime/model_store.h"
#include "runtime/placement_policy.h"

#include <h3/engine.h>

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h3 {

struct Job::Impl {
    pipeline::GenerationJob job;
};

// EngineOptions::vae_precision resolved: "auto" follows the DiT (fp8 under precision fp8, else exact); a bad
// value is an error naming the field vae_precision.
Result<model::VideoVaePrecision> video_vae_precision_of(const EngineOptions& options);

// The engine's inputs beyond EngineOptions, for the project's own front ends.
struct EngineExtras {
    runtime::ComponentSupplier supplier = {}; // bench request: random weights at the configs' width
    // Components the store must have (the server's: DiT, text encoder, decoders); checked at open.
    std::vector<runtime::Component> require = {};
    // The builder keeps each job's input (GenerationJob::source): a server whose jobs run in other
    // processes (its replicas, or the other ranks of its launched group) sends them the input.
    bool keep_job_source = false;
};

struct Engine::Impl : pipeline::JobRunner {
    EngineOptions options;
    runtime::ComputePrecision precision = runtime::ComputePrecision::kDefault;
    runtime::WeightPolicy weights;
    runtime::PlacementPlan plan;
    std::optional<runtime::ProcessRank> launched; // this process is one rank of a launched group
    std::unique_ptr<runtime::ModelStore> store;
    std::unique_ptr<runtime::AdapterLibrary> adapters; // run-time LoRA (lora_dir, or the lora files)
    std::vector<std::string> merged;                   // merged LoRA: the names the jobs must give
    std::unique_ptr<pipeline::JobBuilder> builder;
    std::unique_ptr<pipeline::Generator> generator;
    double flops_per_second = 0; // a CPU job's cost estimate (pipeline/cost_estimate.h; 0 on a GPU)
    std::string weights_text;    // what the last placement chose ("weights: DiT ..." or the planner's text)
    std::mutex run_mu;           // one job at a time

    static Result<std::unique_ptr<Engine>> open(EngineOptions options, EngineExtras extras);

    // The engine's defaults into a job input: its LoRA adapters when the job names none, lora_mode, the
    // attention and the step cache when the job gives none.
    void fill_defaults(pipeline::JobInput& in) const;
    // fill_defaults, then the builder.
    Result<pipeline::GenerationJob> build(pipeline::JobInput in) const;
    // Re-plans the weights for `job` when the plan is per job and a budget is set, then runs it.
    Result<pipeline::JobReport> run(const pipeline::GenerationJob& job,
                                    const pipeline::JobEvents& events) override;
    // Engine::warm_up on a built job (its outputs are ignored): one job at a time with run().
    Result<pipeline::JobReport> warm_up(const pipeline::GenerationJob& job,
                                        const pipeline::JobEvents& events);
    // The warm-up job of `in`, built like a job: nothing to write (in.outputs cleared); it decodes
    // (outputs.return_media) when `in` asks for media (a media target or return_media).
    Result<pipeline::GenerationJob> build_warm_up(pipeline::JobInput in) const;
    std::map<std::string, uint64_t> component_loads() const override { return store->load_counts(); }

    const runtime::CheckpointInfo& checkpoint() const { return store->info(); }

private:
    Status plan_for_job(const pipeline::GenerationJob& job);
};

// The public report of an internal one.
JobReport public_report(const pipeline::GenerationJob& job, const pipeline::JobReport& report);
// pipeline::JobProgress as the public Progress.
Progress public_progress(const pipeline::JobProgress& p);

} // namespace h3
