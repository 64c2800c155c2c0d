// h3-engine serve --model DIR [--host 127.0.0.1] [--port 8080] [--device cpu|cuda] [--dtype bf16|fp32]
//   [--max-queue N] [--output-dir DIR] [--ttl SECONDS] [--api-key KEY] [--on-term cancel|finish]
//   [--max-body-bytes N] [--text-encoder resident|per-job] [--reference-image-edge N] [--reference-video-edge
//   N] [--dtype fp16] [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype bf16|int8|auto]
//   [--host-pinning on|off] [--gpu-memory-budget SIZE] [--int8-cache DIR]
// The OpenAI-style video API over HTTP (serve/http_server.h lists the routes): a translator onto
// pipeline::Generator over a runtime::ModelStore that keeps the DiT (one variant at a time) and the decoders
// resident, the text stack as --text-encoder says, the encoders per job.
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/reference_options.h"
#include "cli/serve_command.h"
#include "pipeline/cost_estimate.h"
#include "pipeline/job_builder.h"
#include "runtime/adapter_library.h"
#include "runtime/launcher.h"
#include "runtime/model_store.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

#ifdef H3_WITH_HTTP_SERVER
#include "serve/server.h"
#endif

namespace h3::cli {

void add_serve_options(CLI::App* sub, ServeOptions& o) {
    sub->add_option("--model", o.model, "checkpoint root with text encoder, transformer and VAEs")
        ->required();
    sub->add_option("--host", o.host, "address to bind")->capture_default_str();
    sub->add_option("--port", o.port, "port to bind (0: any free port)")
        ->check(CLI::Range(0, 65535))
        ->capture_default_str();
    sub->add_option("--device", o.device, "cpu | cuda | cuda:N")->capture_default_str();
    sub->add_option("--dtype", o.dtype, "bf16 | fp32 | fp16 (GPUs without bf16)")
        ->check(CLI::IsMember({"bf16", "fp32", "fp16"}))
        ->capture_default_str();
    sub->add_option("--max-queue", o.max_queue, "jobs waiting before submissions get 429")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    sub->add_option("--output-dir", o.output_dir, "job records and outputs (one directory per job)")
        ->capture_default_str();
    sub->add_option("--ttl", o.ttl, "seconds a finished job's outputs are kept (0: forever)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
        ->capture_default_str();
    sub->add_option(
        "--api-key", o.api_key,
        "require Authorization: Bearer KEY on every route but /health (default: $H3_API_KEY, else "
        "none)");
    sub->add_option("--on-term", o.on_term, "on SIGTERM: cancel or finish the running job")
        ->check(CLI::IsMember({"cancel", "finish"}))
        ->capture_default_str();
    sub->add_option("--max-body-bytes", o.max_body, "larger request bodies get 413")
        ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
        ->capture_default_str();
    sub->add_option("--http-threads", o.threads, "event-loop threads of the listener")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    sub->add_option("--max-connections", o.max_connections, "open connections at once (more are refused)")
        ->check(CLI::Range(8, 100000))
        ->capture_default_str();
    sub->add_option("--max-event-streams", o.max_event_streams, "event streams at once (503 over)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    sub->add_option("--max-sync-waiters", o.max_sync_waiters, "sync requests waiting at once (503 over)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    sub->add_option("--idle-timeout", o.idle_timeout, "seconds a connection may stay silent")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    sub->add_option("--body-timeout", o.body_timeout, "seconds a request body may take to arrive")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    sub->add_option("--text-encoder", o.text_encoder,
                    "resident (kept loaded) | per-job (loaded for each job, frees its memory between)")
        ->check(CLI::IsMember({"resident", "per-job"}))
        ->capture_default_str();
    add_reference_size_options(sub, o.reference_image_edge, o.reference_video_edge);
    sub->add_option(
        "--lora-dir", o.lora_dir,
        "folder of LoRA adapters (.safetensors) requests may name in their lora field, relative to "
        "it; each is loaded once and cached (default: none, the lora field is refused)");
    sub->add_flag("--lora-strict", o.lora_strict,
                  "adapter keys that name no adapted projection are an error (default: skipped)");
    sub->add_option("--lora-cache-mib", o.lora_cache_mib, "device MiB of cached adapter sets (LRU)")
        ->capture_default_str();
    add_residency_flags(sub, o.residency);
    add_parallel_flags(sub, o.parallel);
}

int run_serve(ServeOptions o, const RunnerWrapper& wrap) {
#ifndef H3_WITH_HTTP_SERVER
    (void)o;
    (void)wrap;
    return report(unimplemented("serve: this build has no HTTP server (install libmicrohttpd-dev, zlib1g-dev "
                                "and libbrotli-dev)"));
#else
    if (o.api_key.empty())
        if (const char* k = std::getenv("H3_API_KEY")) o.api_key = k;
    auto device = parse_device(o.device);
    if (!device.ok()) return report(device.status().with_context("--device"));
    std::fprintf(stderr, "serve: loading %s on %s\n", o.model.c_str(), device->to_string().c_str());
    auto precision = compute_precision(o.dtype, "");
    if (!precision.ok()) return report(precision.status());
    runtime::PlacementPlan plan = runtime::PlacementPlan::serving(
        *device, *precision,
        o.text_encoder == "resident" ? runtime::Residency::kResident : runtime::Residency::kPerJob);
    {
        // weight placement: as the flags say, or planned for the release shape under the budget (which may
        // make components per job); a budget that cannot be met fails here, before any weight moves
        auto choice =
            resolve_checkpoint_residency(o.residency, o.model, *precision, runtime::Workload{}, false, true);
        if (!choice.ok()) return report(choice.status());
        apply_residency(*choice, plan, true);
        std::fprintf(stderr, "serve: %s\n", choice->describe().c_str());
    }
    if (Status s = apply_parallel_flags(o.parallel, plan); !s.ok()) return report(s);
    if (Status s =
            check_ranks_in_process(plan, "serve runs its ranks as threads of this process; for several "
                                         "GPUs run generate --gpus (one process per GPU)");
        !s.ok())
        return report(s);
    // serve runs its device group in this process (--sp / --tp ranks as threads); processes started by the
    // launcher convention would each open the HTTP port and run jobs on their own, so they are refused
    {
        auto launched = runtime::process_rank_from_env();
        if (!launched.ok()) return report(launched.status());
        if (*launched)
            return report(invalid_argument(
                "serve: RANK/WORLD_SIZE are set, but serve does not follow the launcher convention: its "
                "device group runs in this one process (--sp/--tp ranks as threads, one HTTP front and one "
                "queue); ranks in other processes would need every job's request from rank 0, which is not "
                "built. Unset RANK and WORLD_SIZE and start one `serve --sp N` (or use `generate` under the "
                "launcher)"));
    }
    auto store = runtime::ModelStore::open(o.model, plan);
    if (!store.ok()) return report(store.status());
    if (Status s = check_parallel_flags(plan, (*store)->info().dit ? &*(*store)->info().dit : nullptr);
        !s.ok())
        return report(s);
    using runtime::Component;
    if (Status s = (*store)->require({Component::kTransformer, Component::kTextEncoder,
                                      Component::kVideoDecoder, Component::kAudioDecoder});
        !s.ok())
        return report(s);
    auto generator = pipeline::Generator::create(**store);
    if (!generator.ok()) return report(generator.status());
    std::unique_ptr<pipeline::JobRunner> stand_in = wrap ? wrap(**generator) : nullptr;
    pipeline::JobRunner& runner = stand_in ? *stand_in : **generator;
    // LoRA: names resolved inside --lora-dir only, each file loaded once and shared by the jobs naming it
    std::unique_ptr<runtime::AdapterLibrary> adapters;
    if (!o.lora_dir.empty()) {
        const runtime::CheckpointInfo& ci = (*store)->info();
        auto lib = runtime::AdapterLibrary::open({.dir = o.lora_dir,
                                                  .config = *ci.dit,
                                                  .ctx = (*store)->context(),
                                                  .dtype = ci.dtype == "fp32" ? DType::kF32 : DType::kBF16,
                                                  .budget_bytes = o.lora_cache_mib << 20,
                                                  .read = {.strict = o.lora_strict}});
        if (!lib.ok()) return report(lib.status().with_context("--lora-dir"));
        adapters = std::move(lib).value();
        std::fprintf(stderr, "serve: LoRA adapters from %s\n", adapters->dir().c_str());
    }
    auto rate = pipeline::cpu_flops_rate(**store); // each CPU job's estimate in its video object
    if (!rate.ok()) return report(rate.status());
    const pipeline::JobBuilder builder((*store)->info(), {.max_prompt_bytes = 16 * 1024,
                                                          .reference_image_edge = o.reference_image_edge,
                                                          .reference_video_edge = o.reference_video_edge,
                                                          .lora = {.library = adapters.get()},
                                                          .flops_per_second = *rate});

    serve::ServeParams p;
    p.output_dir = o.output_dir;
    p.max_queue = static_cast<size_t>(o.max_queue);
    p.ttl_seconds = o.ttl;
    p.on_term = o.on_term == "finish" ? serve::OnTerm::kFinish : serve::OnTerm::kCancel;
    p.http.host = o.host;
    p.http.port = o.port;
    p.http.api_key = o.api_key;
    p.http.max_body_bytes = o.max_body;
    p.http.poll_threads = o.threads;
    p.http.max_connections = o.max_connections;
    p.http.max_event_streams = o.max_event_streams;
    p.http.max_sync_waiters = o.max_sync_waiters;
    p.http.idle_timeout_seconds = o.idle_timeout;
    p.http.body_timeout_seconds = o.body_timeout;
    p.http.placement = (*store)->plan().describe();
    p.http.memory_plan = (*store)->plan().memory_plan;
    Status s = serve::run_server(p, runner, builder);
    return s.ok() ? kExitOk : report(s);
#endif
}

Command make_serve_command() {
    auto o = std::make_shared<ServeOptions>();
    auto sub = std::make_shared<CLI::App*>(nullptr);
    Command c;
    c.setup = [o, sub](CLI::App& app) {
        *sub = app.add_subcommand("serve", "Serve the OpenAI-style video API (/v1/videos) over HTTP");
        add_serve_options(*sub, *o);
    };
    c.parsed = [sub] { return *sub && (*sub)->parsed(); };
    c.run = [o]() -> int { return run_serve(*o); };
    return c;
}

} // namespace h3::cli
