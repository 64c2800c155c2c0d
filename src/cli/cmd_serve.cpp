// h3-engine serve --model DIR [--host 127.0.0.1] [--port 8080] [--device cpu|cuda] [--dtype bf16|fp32]
//   [--vae-precision auto|exact|bf16|fp8]
//   [--max-queue N] [--output-dir DIR] [--ttl SECONDS] [--api-key KEY] [--on-term cancel|finish]
//   [--max-body-bytes N] [--text-encoder resident|per-job] [--reference-image-edge N] [--reference-video-edge
//   N] [--dtype fp16] [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype bf16|int8|auto]
//   [--host-pinning on|off] [--gpu-memory-budget SIZE] [--int8-cache DIR] [--gpus LIST] [--sp N] [--tp M]
//   [--ring R] [--warmup auto|on|off] [--warmup-request JSON]
// The OpenAI-style video API over HTTP (serve/http_server.h lists the routes): a translator onto h3::Engine
// with keep_loaded (the DiT, one variant at a time, and the decoders stay loaded; the text stack as
// --text-encoder says; the encoders per job); the HTTP layer builds submissions with the engine's job
// builder and the worker runs them on the engine. Three more shapes (issue #46, engine/replica.h,
// engine/group_serving.h): --gpus LIST makes this process the front of replicas of rank processes it
// starts (this command line again, without --gpus, under the launcher convention); a process with
// RANK/WORLD_SIZE is one rank of a serving group (rank 0 serves HTTP, the others follow); a process with
// H3_JOB_CHANNEL_FD is a replica's rank 0, fed by its front through that descriptor. The one-process server
// warms up before its first job (--warmup; serve/warm_up.h, Engine::warm_up): the default job's conditioning
// and first DiT forwards run once, so the first job's first forward costs what its others do.
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/parallel_flags.h"
#include "cli/reference_options.h"
#include "cli/serve_command.h"
#include "cli/spawn_ranks.h"
#include "engine/engine_impl.h"
#include "engine/group_serving.h"
#include "engine/replica.h"
#include "runtime/launcher.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <thread>
#include <vector>

#ifdef H3_WITH_HTTP_SERVER
#include "serve/server.h"
#include "serve/wire/video_request.h"
#endif

namespace h3::cli {

void add_serve_options(CLI::App* sub, ServeOptions& o) {
    add_model_flags(sub, o.model,
                    {.model_help = "checkpoint root with text encoder, transformer and VAEs",
                     .model_required = true,
                     .precision = false});
    CLI::App* g = sub->add_option_group("Server", "the HTTP listener, its queue and its records");
    g->add_option("--host", o.host, "address to bind")->capture_default_str();
    g->add_option("--port", o.port, "port to bind (0: any free port)")
        ->check(CLI::Range(0, 65535))
        ->capture_default_str();
    g->add_option("--max-queue", o.max_queue, "jobs waiting before submissions get 429")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    g->add_option("--output-dir", o.output_dir, "job records and outputs (one directory per job)")
        ->capture_default_str();
    g->add_option("--ttl", o.ttl, "seconds a finished job's outputs are kept (0: forever)")
        ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
        ->capture_default_str();
    g->add_option("--api-key", o.api_key,
                  "require Authorization: Bearer KEY (default: $H3_API_KEY, else none)");
    g->add_option("--on-term", o.on_term, "on SIGTERM: cancel or finish the running job")
        ->check(CLI::IsMember({"cancel", "finish"}))
        ->capture_default_str();
    g->add_option("--max-body-bytes", o.max_body, "larger request bodies get 413")
        ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
        ->capture_default_str();
    g->add_option("--http-threads", o.threads, "event-loop threads of the listener")
        ->check(CLI::Range(1, 64))
        ->capture_default_str();
    g->add_option("--max-connections", o.max_connections, "open connections at once (more are refused)")
        ->check(CLI::Range(8, 100000))
        ->capture_default_str();
    g->add_option("--max-event-streams", o.max_event_streams, "event streams at once (503 over)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    g->add_option("--max-sync-waiters", o.max_sync_waiters, "sync requests waiting at once (503 over)")
        ->check(CLI::Range(1, 100000))
        ->capture_default_str();
    g->add_option("--idle-timeout", o.idle_timeout, "seconds a connection may stay silent")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    g->add_option("--body-timeout", o.body_timeout, "seconds a request body may take to arrive")
        ->check(CLI::Range(1, 3600))
        ->capture_default_str();
    g->add_option("--warmup", o.warmup,
                  "run the engine's warm-up for the default job before the first job: auto (on with a "
                  "CUDA device) | on | off")
        ->check(CLI::IsMember({"auto", "on", "off"}))
        ->capture_default_str();
    g->add_option("--warmup-request", o.warmup_request,
                  "the warm-up's request as the API's JSON fields (default: a short prompt at the "
                  "server's default size, length, steps and attention); give your jobs' typical "
                  "prompt length, size and attention")
        ->capture_default_str();
    CLI::App* mem = sub->add_option_group("Memory");
    mem->add_option("--text-encoder", o.text_encoder, "resident (kept loaded) | per-job (freed between jobs)")
        ->check(CLI::IsMember({"resident", "per-job"}))
        ->capture_default_str();
    mem->add_option(
           "--dit-workspace", o.dit_workspace,
           "kept (the DiT's activation buffers stay between jobs: a job of the last one's shape "
           "allocates nothing) | per-job (freed after each job's denoise: more memory for the decode)")
        ->check(CLI::IsMember({"kept", "per-job"}))
        ->capture_default_str();
    add_reference_size_options(sub, o.reference_image_edge, o.reference_video_edge);
    CLI::App* lora = sub->add_option_group("LoRA");
    lora->add_option("--lora-dir", o.lora_dir,
                     "folder of adapters requests may name, relative to it (default none: lora refused)");
    lora->add_flag("--lora-strict", o.lora_strict,
                   "adapter keys that name no adapted projection are an error (default: skipped)");
    lora->add_option("--lora-cache-mib", o.lora_cache_mib, "device MiB of cached adapter sets (LRU)")
        ->capture_default_str();
    add_residency_flags(sub, o.residency);
    add_parallel_flags(sub, o.parallel);
}

#ifdef H3_WITH_HTTP_SERVER
namespace {

serve::ServeParams server_params(const ServeOptions& o, const Engine::Impl& e) {
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
    p.http.placement = e.store->plan().describe();
    p.http.memory_plan = e.store->plan().memory_plan;
    return p;
}

constexpr const char* kWarmUpPrompt =
    "A quiet harbour at dawn: fishing boats rock on the water, gulls call overhead and waves lap against "
    "the stone pier while the sky turns from grey to gold.";

// The warm-up of a one-process server (null when off): Engine::warm_up's work for `request` (the API's JSON
// fields, read here so a bad one stops the command before the server starts; a job that fails to build or
// run is the warm-up's failure, logged while the server serves on).
Result<serve::WarmUp::Fn> warm_up_for(const ServeOptions& o, Engine::Impl& e) {
    const bool on = o.warmup == "on" || (o.warmup == "auto" && e.store->context().device.is_cuda());
    if (!on) return serve::WarmUp::Fn{};
    std::string bad_field;
    auto wire = api::read_video_body_text(
        o.warmup_request.empty() ? nlohmann::json{{"prompt", kWarmUpPrompt}}.dump() : o.warmup_request,
        &bad_field);
    if (!wire.ok()) return invalid_field("warmup_request", "warmup_request: " + wire.status().message());
    pipeline::JobInput input = std::move(wire->input);
    // an MP4 / WAV job decodes: the warm-up decodes too (the decoders' GEMMs are timed on first use)
    input.outputs.return_media = wire->output_format != api::OutputFormat::kLatents;
    return serve::WarmUp::Fn([&e, input](const std::atomic<bool>* cancel) -> Status {
        H3_ASSIGN_OR_RETURN(pipeline::GenerationJob job, e.build_warm_up(input));
        H3_ASSIGN_OR_RETURN(pipeline::JobReport r, e.warm_up(job, {.cancel = cancel}));
        std::fprintf(stderr, "serve: warm-up: %s, %zu forward(s) of %s\n", job.geometry.describe().c_str(),
                     r.step_seconds.size(), r.work.summary().c_str());
        return ok_status();
    });
}

using runtime::Component;
const std::vector<Component> kServeComponents = {Component::kTransformer, Component::kTextEncoder,
                                                 Component::kVideoDecoder, Component::kAudioDecoder};

// A process of a serving group: under an external launcher (RANK / WORLD_SIZE: rank 0 serves HTTP and feeds
// the group, the others run what it sends), or one rank of a replica this command started (`--gpus`: rank 0
// reads its jobs from the job channel H3_JOB_CHANNEL_FD names).
int run_group_rank(const ServeOptions& o, EngineOptions eo, const runtime::ProcessRank* launched,
                   const char* channel_fd) {
    if (!eo.gpus.empty())
        return report(invalid_field("gpus", "gpus: under the launcher convention (RANK/WORLD_SIZE) each "
                                            "process is one rank on the GPU LOCAL_RANK names; start one "
                                            "process per GPU without --gpus"));
    const int rank = launched ? launched->rank : 0;
    std::fprintf(stderr, "serve: rank %d of %d: loading %s on %s\n", rank, launched ? launched->world : 1,
                 o.model.model.c_str(), o.model.device.c_str());
    auto engine = Engine::Impl::open(eo, {.require = kServeComponents, .keep_job_source = true});
    if (!engine.ok()) return report(engine.status());
    Engine::Impl& e = (*engine)->impl();
    std::unique_ptr<ops::Communicator> control;
    if (launched && launched->world > 1) {
        auto c = connect_group_control(*launched);
        if (!c.ok()) return report(c.status());
        control = std::move(*c);
    }
    if (rank > 0) {
        Status s = run_group_follower(e, *control);
        return s.ok() ? kExitOk : report(s);
    }
    GroupLeader leader(e, std::move(control));
    Status s = ok_status();
    if (channel_fd) {
        s = serve_job_channel(leader, e, std::atoi(channel_fd));
    } else {
        std::fprintf(stderr, "serve: %s\n", e.weights_text.c_str());
        s = serve::run_server(server_params(o, e), leader, *e.builder);
    }
    leader.stop();
    return s.ok() ? kExitOk : report(s);
}

// `serve --gpus LIST`: this process is the HTTP front (its engine builds and checks the submissions; it
// loads no weights); the replicas are groups of rank processes it starts (engine/replica.h).
int run_replicas(const ServeOptions& o, EngineOptions eo) {
    const std::vector<int> slots = eo.gpus;
    auto argv = child_command_line({"--gpus"});
    if (!argv.ok()) return report(argv.status());
    auto device = parse_device(eo.device);
    if (!device.ok()) return report(device.status());
    auto specs = plan_replicas(slots, eo.sp, eo.ring, eo.tp, device->is_cuda(), *argv);
    if (!specs.ok()) return report(specs.status());
    eo.gpus.clear();        // the front runs no rank
    eo.keep_loaded = false; // and loads no weights
    eo.keep_text_encoder = false;
    auto engine = Engine::Impl::open(eo, {.require = kServeComponents, .keep_job_source = true});
    if (!engine.ok()) return report(engine.status());
    Engine::Impl& e = (*engine)->impl();
    std::fprintf(stderr, "serve: %zu replica(s) of %d rank process(es) over %s %s\n", specs->size(),
                 (*specs)[0].world, device->is_cuda() ? "GPUs" : "slots", o.parallel.gpus.c_str());
    std::vector<std::unique_ptr<Replica>> replicas;
    for (ReplicaSpec& spec : *specs) replicas.push_back(std::make_unique<Replica>(std::move(spec)));
    std::vector<Status> started(replicas.size());
    {
        std::vector<std::thread> starters;
        for (size_t i = 0; i < replicas.size(); ++i)
            starters.emplace_back([&, i] { started[i] = replicas[i]->start(); });
        for (auto& t : starters) t.join();
    }
    for (const Status& s : started)
        if (!s.ok()) return report(s);
    std::vector<pipeline::JobRunner*> runners;
    for (auto& r : replicas) runners.push_back(r.get());
    serve::ServeParams p = server_params(o, e);
    p.http.placement = "replicas: " + std::to_string(replicas.size()) + " x " +
                       (replicas[0]->spec().world > 1 ? "dit group " + e.store->plan().parallel.describe()
                                                      : std::string("1 rank"));
    Status s = serve::run_server(p, runners, *e.builder);
    std::vector<std::thread> stoppers;
    for (auto& r : replicas) stoppers.emplace_back([&r] { r->stop(); });
    for (auto& t : stoppers) t.join();
    return s.ok() ? kExitOk : report(s);
}

} // namespace
#endif

int run_serve(ServeOptions o, const RunnerWrapper& wrap) {
#ifndef H3_WITH_HTTP_SERVER
    (void)o;
    (void)wrap;
    return report(unimplemented("serve: this build has no HTTP server (install libmicrohttpd-dev, zlib1g-dev "
                                "and libbrotli-dev)"));
#else
    if (o.api_key.empty())
        if (const char* k = std::getenv("H3_API_KEY")) o.api_key = k;
    auto launched = runtime::process_rank_from_env();
    if (!launched.ok()) return report(launched.status());
    auto eo = engine_options(o.model, &o.residency, &o.parallel, nullptr);
    if (!eo.ok()) return report(eo.status());
    eo->keep_loaded = true;
    eo->keep_text_encoder = o.text_encoder == "resident";
    eo->keep_dit_workspace = o.dit_workspace == "kept";
    eo->lora_dir = o.lora_dir;
    eo->lora_strict = o.lora_strict;
    eo->lora_cache_bytes = uint64_t{o.lora_cache_mib} << 20;
    eo->max_prompt_bytes = 16 * 1024;
    eo->reference_image_edge = o.reference_image_edge;
    eo->reference_video_edge = o.reference_video_edge;
    // a rank of a serving group (the launcher convention, or a replica this command started), or the front
    // of replicas (--gpus), else one process with its ranks as threads
    const char* channel = std::getenv("H3_JOB_CHANNEL_FD");
    if (!wrap && (*launched || (channel && *channel)))
        return run_group_rank(o, *eo, *launched ? &**launched : nullptr,
                              channel && *channel ? channel : nullptr);
    if (!wrap && !eo->gpus.empty()) return run_replicas(o, *eo);
    std::fprintf(stderr, "serve: loading %s on %s\n", o.model.model.c_str(), o.model.device.c_str());
    auto engine = Engine::Impl::open(*eo, {.require = kServeComponents});
    if (!engine.ok()) return report(engine.status());
    Engine::Impl& e = (*engine)->impl();
    if (Status s =
            check_ranks_in_process(e.plan, "serve runs these ranks as threads of this process; for several "
                                           "GPUs give --gpus (one process per GPU, as replicas)");
        !s.ok())
        return report(s);
    std::fprintf(stderr, "serve: %s\n", e.weights_text.c_str());
    if (e.adapters) std::fprintf(stderr, "serve: LoRA adapters from %s\n", e.adapters->dir().c_str());
    std::unique_ptr<pipeline::JobRunner> stand_in = wrap ? wrap(e) : nullptr;
    pipeline::JobRunner& runner = stand_in ? *stand_in : static_cast<pipeline::JobRunner&>(e);
    serve::ServeParams params = server_params(o, e);
    auto warm_up = warm_up_for(o, e);
    if (!warm_up.ok()) return report(warm_up.status());
    params.warm_up = std::move(*warm_up);
    Status s = serve::run_server(params, runner, *e.builder);
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
