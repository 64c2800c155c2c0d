// h3-engine serve --model DIR [--host 127.0.0.1] [--port 8080] [--device cpu|cuda] [--dtype bf16|fp32]
//   [--max-queue N] [--output-dir DIR] [--ttl SECONDS] [--api-key KEY] [--on-term cancel|finish]
//   [--max-body-bytes N] [--text-encoder resident|per-job] [--reference-image-edge N] [--reference-video-edge
//   N]
// The OpenAI-style video API over HTTP (serve/http_server.h lists the routes).
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "cli/reference_options.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>

#ifdef H3_WITH_HTTP_SERVER
#include "api/engine.h"
#include "serve/server.h"
#endif

namespace h3::cli {

Command make_serve_command() {
    struct Options {
        std::string model, host = "127.0.0.1", device = "cpu", dtype = "bf16", output_dir = "h3-serve-output",
                           api_key, on_term = "cancel", text_encoder = "resident", fault_prompt;
        int port = 8080, max_queue = 8, threads = 2, max_connections = 1024, max_event_streams = 64,
            max_sync_waiters = 16, idle_timeout = 30, body_timeout = 120;
        int reference_image_edge = 2048, reference_video_edge = 768;
        int64_t ttl = 86400;
        size_t max_body = 1 << 20;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("serve", "Serve the OpenAI-style video API (/v1/videos) over HTTP");
        o->sub->add_option("--model", o->model, "checkpoint root with text encoder, transformer and VAEs")
            ->required();
        o->sub->add_option("--host", o->host, "address to bind")->capture_default_str();
        o->sub->add_option("--port", o->port, "port to bind (0: any free port)")
            ->check(CLI::Range(0, 65535))
            ->capture_default_str();
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32")
            ->check(CLI::IsMember({"bf16", "fp32"}))
            ->capture_default_str();
        o->sub->add_option("--max-queue", o->max_queue, "jobs waiting before submissions get 429")
            ->check(CLI::Range(1, 100000))
            ->capture_default_str();
        o->sub->add_option("--output-dir", o->output_dir, "job records and outputs (one directory per job)")
            ->capture_default_str();
        o->sub->add_option("--ttl", o->ttl, "seconds a finished job's outputs are kept (0: forever)")
            ->check(CLI::Range(int64_t{0}, int64_t{1} << 40))
            ->capture_default_str();
        o->sub->add_option("--api-key", o->api_key,
                           "require Authorization: Bearer KEY on every route but /health (default: "
                           "$H3_API_KEY, else none)");
        o->sub->add_option("--on-term", o->on_term, "on SIGTERM: cancel or finish the running job")
            ->check(CLI::IsMember({"cancel", "finish"}))
            ->capture_default_str();
        o->sub->add_option("--max-body-bytes", o->max_body, "larger request bodies get 413")
            ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
            ->capture_default_str();
        o->sub->add_option("--http-threads", o->threads, "event-loop threads of the listener")
            ->check(CLI::Range(1, 64))
            ->capture_default_str();
        o->sub
            ->add_option("--max-connections", o->max_connections,
                         "open connections at once (more are refused)")
            ->check(CLI::Range(8, 100000))
            ->capture_default_str();
        o->sub->add_option("--max-event-streams", o->max_event_streams, "event streams at once (503 over)")
            ->check(CLI::Range(1, 100000))
            ->capture_default_str();
        o->sub
            ->add_option("--max-sync-waiters", o->max_sync_waiters,
                         "sync requests waiting at once (503 over)")
            ->check(CLI::Range(1, 100000))
            ->capture_default_str();
        o->sub->add_option("--idle-timeout", o->idle_timeout, "seconds a connection may stay silent")
            ->check(CLI::Range(1, 3600))
            ->capture_default_str();
        o->sub->add_option("--body-timeout", o->body_timeout, "seconds a request body may take to arrive")
            ->check(CLI::Range(1, 3600))
            ->capture_default_str();
        o->sub
            ->add_option("--text-encoder", o->text_encoder,
                         "resident (kept loaded) | per-job (loaded for each job, frees its memory between)")
            ->check(CLI::IsMember({"resident", "per-job"}))
            ->capture_default_str();
        add_reference_size_options(o->sub, o->reference_image_edge, o->reference_video_edge);
        // Testing only: a job with this prompt fails after its first denoise step (an injected OOM).
        o->sub->add_option("--fault-inject-prompt", o->fault_prompt)->group("");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
#ifndef H3_WITH_HTTP_SERVER
        return report(unimplemented("serve: this build has no HTTP server (install libmicrohttpd-dev, "
                                    "zlib1g-dev and libbrotli-dev)"));
#else
        if (o->api_key.empty())
            if (const char* k = std::getenv("H3_API_KEY")) o->api_key = k;
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        std::fprintf(stderr, "serve: loading %s on %s\n", o->model.c_str(),
                     (*session)->context().device.to_string().c_str());
        auto engine = api::Engine::load({.model_dir = o->model,
                                         .ctx = (*session)->context(),
                                         .fp32 = o->dtype == "fp32",
                                         .keep_text_encoder = o->text_encoder == "resident"});
        if (!engine.ok()) return report(engine.status());
        api::Engine& e = **engine;

        serve::ServeParams p;
        p.output_dir = o->output_dir;
        p.max_queue = static_cast<size_t>(o->max_queue);
        p.ttl_seconds = o->ttl;
        p.on_term = o->on_term == "finish" ? serve::OnTerm::kFinish : serve::OnTerm::kCancel;
        p.http.host = o->host;
        p.http.port = o->port;
        p.http.api_key = o->api_key;
        p.http.max_body_bytes = o->max_body;
        p.http.poll_threads = o->threads;
        p.http.max_connections = o->max_connections;
        p.http.max_event_streams = o->max_event_streams;
        p.http.max_sync_waiters = o->max_sync_waiters;
        p.http.idle_timeout_seconds = o->idle_timeout;
        p.http.body_timeout_seconds = o->body_timeout;
        p.http.limits.request.reference_image_edge = o->reference_image_edge;
        p.http.limits.request.reference_video_edge = o->reference_video_edge;
        p.worker.fault_prompt = o->fault_prompt;
        Status s = serve::run_server(
            p,
            [&e](const api::VideoRequest& rq, const api::JobOutputs& out, const api::JobOptions& opt) {
                return e.run(rq, out, opt);
            },
            [&e](const api::VideoRequest& rq) { return e.check(rq); });
        return s.ok() ? kExitOk : report(s);
#endif
    };
    return c;
}

} // namespace h3::cli
