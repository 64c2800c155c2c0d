// h3-engine serve --model DIR [--host 127.0.0.1] [--port 8080] [--device cpu|cuda] [--dtype bf16|fp32]
//   [--max-queue N] [--output-dir DIR] [--ttl SECONDS] [--api-key KEY] [--on-term cancel|finish]
//   [--max-body-bytes N] [--text-encoder resident|per-job] [--reference-image-edge N] [--reference-video-edge
//   N] [--dtype fp16] [--residency resident|layerwise] [--resident-blocks K] [--weight-dtype bf16|int8|auto]
//   [--host-pinning on|off] [--gpu-memory-budget SIZE] [--int8-cache DIR]
// The OpenAI-style video API over HTTP (serve/http_server.h lists the routes): a translator onto h3::Engine
// with keep_loaded (the DiT, one variant at a time, and the decoders stay loaded; the text stack as
// --text-encoder says; the encoders per job); the HTTP layer builds submissions with the engine's job
// builder and the worker runs them on the engine.
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/parallel_flags.h"
#include "cli/reference_options.h"
#include "cli/serve_command.h"
#include "engine/engine_impl.h"
#include "runtime/launcher.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

#ifdef H3_WITH_HTTP_SERVER
#include "serve/server.h"
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
    CLI::App* mem = sub->add_option_group("Memory");
    mem->add_option("--text-encoder", o.text_encoder, "resident (kept loaded) | per-job (freed between jobs)")
        ->check(CLI::IsMember({"resident", "per-job"}))
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

int run_serve(ServeOptions o, const RunnerWrapper& wrap) {
#ifndef H3_WITH_HTTP_SERVER
    (void)o;
    (void)wrap;
    return report(unimplemented("serve: this build has no HTTP server (install libmicrohttpd-dev, zlib1g-dev "
                                "and libbrotli-dev)"));
#else
    if (o.api_key.empty())
        if (const char* k = std::getenv("H3_API_KEY")) o.api_key = k;
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
    auto eo = engine_options(o.model, &o.residency, &o.parallel, nullptr);
    if (!eo.ok()) return report(eo.status());
    eo->keep_loaded = true;
    eo->keep_text_encoder = o.text_encoder == "resident";
    eo->lora_dir = o.lora_dir;
    eo->lora_strict = o.lora_strict;
    eo->lora_cache_bytes = uint64_t{o.lora_cache_mib} << 20;
    eo->max_prompt_bytes = 16 * 1024;
    eo->reference_image_edge = o.reference_image_edge;
    eo->reference_video_edge = o.reference_video_edge;
    std::fprintf(stderr, "serve: loading %s on %s\n", o.model.model.c_str(), o.model.device.c_str());
    using runtime::Component;
    auto engine = Engine::Impl::open(*eo, {.require = {Component::kTransformer, Component::kTextEncoder,
                                                       Component::kVideoDecoder, Component::kAudioDecoder}});
    if (!engine.ok()) return report(engine.status());
    Engine::Impl& e = (*engine)->impl();
    if (Status s =
            check_ranks_in_process(e.plan, "serve runs its ranks as threads of this process; for several "
                                           "GPUs run generate --gpus (one process per GPU)");
        !s.ok())
        return report(s);
    std::fprintf(stderr, "serve: %s\n", e.weights_text.c_str());
    if (e.adapters) std::fprintf(stderr, "serve: LoRA adapters from %s\n", e.adapters->dir().c_str());
    std::unique_ptr<pipeline::JobRunner> stand_in = wrap ? wrap(e) : nullptr;
    pipeline::JobRunner& runner = stand_in ? *stand_in : static_cast<pipeline::JobRunner&>(e);

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
    Status s = serve::run_server(p, runner, *e.builder);
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
