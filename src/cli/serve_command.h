// `h3-engine serve`: its options and the run (an h3::Engine with keep_loaded — the serving plan —, whose job
// builder the HTTP layer validates submissions with and whose runner the worker runs), shared with the test
// tool that serves through a stand-in runner (tests/tools/serve_with_faults.cpp).
#pragma once

#include "cli/engine_flags.h"
#include "pipeline/generator.h"
#include "pipeline/job_builder.h"

#include <CLI/CLI.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace h3::cli {

struct ServeOptions {
    ModelFlags model; // --model, --device, --dtype
    std::string host = "127.0.0.1", output_dir = "h3-serve-output", api_key, on_term = "cancel",
                text_encoder = "resident";
    int port = 8080, max_queue = 8, threads = 2, max_connections = 1024, max_event_streams = 64,
        max_sync_waiters = 16, idle_timeout = 30, body_timeout = 120;
    int reference_image_edge = pipeline::JobBuilderOptions{}.reference_image_edge,
        reference_video_edge = EngineOptions{}.reference_video_edge;
    int64_t ttl = 86400;
    size_t max_body = 1 << 20;
    // LoRA: the folder requests name adapters in (--lora-dir; "" refuses the lora field), --lora-strict,
    // the device bytes of cached adapter sets (--lora-cache-mib)
    std::string lora_dir;
    bool lora_strict = false;
    size_t lora_cache_mib = 8192;
    ResidencyFlags residency; // weight placement (the planner sizes the release shape under a budget)
    ParallelFlags parallel;   // the DiT's device group: every job runs on all of its ranks
    // The warm-up before the first job (serve/warm_up.h): auto (on with a CUDA device) | on | off, and its
    // request (the API's JSON fields; the server's defaults fill the rest).
    std::string warmup = "auto";
    std::string warmup_request;
    std::string dit_workspace = "kept"; // kept (EngineOptions::keep_dit_workspace) | per-job
};

void add_serve_options(CLI::App* sub, ServeOptions& options);

// What the server's worker runs: the generator itself, or (tests) a stand-in around it.
using RunnerWrapper = std::function<std::unique_ptr<pipeline::JobRunner>(pipeline::JobRunner& generator)>;

// Serves until SIGTERM / SIGINT; returns the exit code.
int run_serve(ServeOptions options, const RunnerWrapper& wrap = {});

} // namespace h3::cli
