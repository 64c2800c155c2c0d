#include "serve/server.h"

#include "core/log.h"
#include "serve/ttl_sweeper.h"

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <map>
#include <memory>
#include <thread>

namespace h3::serve {

namespace {

std::atomic<int> g_signal{0};

void on_signal(int sig) {
    g_signal.store(sig);
}

// Routes SIGTERM and SIGINT to a flag for the scope's lifetime; restores the previous handlers after.
class SignalScope {
public:
    SignalScope() {
        g_signal = 0;
        struct sigaction sa {};
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART; // the other threads' system calls carry on
        sigemptyset(&sa.sa_mask);
        sigaction(SIGTERM, &sa, &old_term_);
        sigaction(SIGINT, &sa, &old_int_);
    }
    ~SignalScope() {
        sigaction(SIGTERM, &old_term_, nullptr);
        sigaction(SIGINT, &old_int_, nullptr);
    }

private:
    struct sigaction old_term_ {
    }, old_int_{};
};

int64_t now_seconds() {
    return static_cast<int64_t>(std::time(nullptr));
}

} // namespace

Status run_server(const ServeParams& params, pipeline::JobRunner& runner,
                  const pipeline::JobBuilder& builder) {
    return run_server(params, std::vector<pipeline::JobRunner*>{&runner}, builder);
}

Status run_server(const ServeParams& params, const std::vector<pipeline::JobRunner*>& runners,
                  const pipeline::JobBuilder& builder) {
    if (runners.empty()) return invalid_argument("a server needs at least one job runner");
    if (params.max_queue < 1) return invalid_argument("--max-queue must be at least 1");
    if (params.ttl_seconds < 0) return invalid_argument("--ttl must not be negative");
    H3_ASSIGN_OR_RETURN(JobStore store, JobStore::open(params.output_dir));
    H3_ASSIGN_OR_RETURN(Recovery rec, store.recover(now_seconds()));
    for (const auto& s : rec.skipped) H3_LOG_WARN("serve: skipped job directory {}", s);

    Metrics metrics;
    metrics.set_component_loads([&runners] {
        std::map<std::string, uint64_t> sum;
        for (const pipeline::JobRunner* r : runners)
            for (const auto& [c, n] : r->component_loads()) sum[c] += n;
        return sum;
    });
    JobBoard board(store, params.max_queue, params.ttl_seconds);
    board.set_on_final([&metrics](api::JobStatus s) { metrics.job_final(s); });
    const size_t recovered = rec.records.size();
    board.adopt(std::move(rec.records));
    std::fprintf(stderr,
                 "serve: %s: %zu job(s) on record, %d interrupted one(s) marked failed, %d orphan record(s) "
                 "removed\n",
                 store.root().c_str(), recovered, rec.interrupted, rec.orphans_removed);

    WarmUp warm_up(params.warm_up);
    std::vector<std::unique_ptr<Worker>> workers;
    for (pipeline::JobRunner* r : runners)
        workers.push_back(
            std::make_unique<Worker>(board, store, metrics, *r, workers.empty() ? &warm_up : nullptr));
    HttpOptions http_options = params.http;
    if (warm_up.enabled()) http_options.warm_up = &warm_up;
    if (!runners[0]->status().is_null())
        http_options.replicas = [&workers] {
            nlohmann::json all = nlohmann::json::array();
            for (const auto& w : workers) all.push_back(w->status());
            return all;
        };
    HttpServer http(board, store, metrics, builder, http_options);
    H3_ASSIGN_OR_RETURN(int port, http.bind());

    SignalScope signals;
    for (auto& w : workers) w->start();
    TtlSweeper sweeper(board, sweep_interval_for(params.ttl_seconds));
    if (params.ttl_seconds > 0) sweeper.start();

    std::atomic<bool> done{false};
    std::thread watcher([&] {
        while (!done.load() && g_signal.load() == 0)
            std::this_thread::sleep_for(std::chrono::milliseconds(100));
        if (done.load()) return;
        const bool cancel = params.on_term == OnTerm::kCancel;
        std::fprintf(stderr, "serve: %s received: no new jobs; %s the running job\n",
                     g_signal.load() == SIGINT ? "SIGINT" : "SIGTERM", cancel ? "cancelling" : "finishing");
        warm_up.cancel(); // a warm-up still running stops at its next check
        board.close(cancel, now_seconds());
        if (cancel) { // a backstop: every stage reads the flag within a fraction of a second
            const auto deadline = std::chrono::steady_clock::now() + params.term_grace;
            while (board.running() > 0 && std::chrono::steady_clock::now() < deadline)
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            if (const std::string what = board.describe_running(); !what.empty()) {
                std::fprintf(stderr,
                             "serve: %s did not stop within %lld ms of the signal; exiting without it (its "
                             "record reads \"interrupted\" after a restart)\n",
                             what.c_str(), static_cast<long long>(params.term_grace.count()));
                std::fflush(stderr);
                std::_Exit(4);
            }
        }
        for (auto& w : workers) w->join();
        http.stop();
    });

    std::printf("serve: listening on http://%s:%d\n", params.http.host.c_str(), port);
    std::fflush(stdout);
    http.listen(); // returns once stopped
    done.store(true);
    watcher.join();
    // the listener can only end early on an error: then stop the rest here
    warm_up.cancel();
    board.close(true, now_seconds());
    for (auto& w : workers) w->join();
    sweeper.stop();
    std::fprintf(stderr, "serve: stopped\n");
    return ok_status();
}

} // namespace h3::serve
