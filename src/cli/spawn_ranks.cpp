#include "cli/spawn_ranks.h"

#include "cli/app.h"
#include "cli/commands.h"
#include "engine/rank_processes.h"

#include <signal.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <thread>

namespace h3::cli {

namespace {

// The children, for the signal handler (async-signal-safe: a fixed array of pids read with kill()).
constexpr int kMaxRanks = 1024;
pid_t g_children[kMaxRanks];
std::atomic<int> g_child_count{0};

std::string join_gpus(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(v[i]);
    }
    return s;
}

void forward_signal(int sig) {
    const int n = g_child_count.load();
    for (int i = 0; i < n; ++i)
        if (g_children[i] > 0) kill(g_children[i], sig);
}

} // namespace

Result<std::vector<std::string>> child_command_line(const std::vector<std::string>& strip) {
    std::ifstream f("/proc/self/cmdline", std::ios::binary);
    if (!f) return io_error("--launch processes: cannot read /proc/self/cmdline");
    const std::string raw((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    std::vector<std::string> all;
    for (size_t i = 0; i < raw.size();) {
        const size_t end = raw.find('\0', i);
        all.push_back(raw.substr(i, end == std::string::npos ? std::string::npos : end - i));
        if (end == std::string::npos) break;
        i = end + 1;
    }
    std::vector<std::string> out;
    for (size_t i = 0; i < all.size(); ++i) {
        bool drop = false;
        for (const std::string& flag : strip) {
            if (all[i] == flag) { // "--x V"
                drop = true;
                ++i;
                break;
            }
            if (all[i].rfind(flag + "=", 0) == 0) { // "--x=V"
                drop = true;
                break;
            }
        }
        if (!drop) out.push_back(all[i]);
    }
    if (out.empty()) return io_error("--launch processes: /proc/self/cmdline is empty");
    return out;
}

int run_ranks_as_processes(const SpawnRanksParams& p) {
    if (p.world < 1 || p.world > kMaxRanks) {
        std::fprintf(stderr, "h3-engine: error: --launch processes: %d ranks (1 to %d)\n", p.world,
                     kMaxRanks);
        return kExitUsage;
    }
    auto args = child_command_line(p.strip_flags);
    if (!args.ok()) return report(args.status());
    RankLaunch launch{.argv = *args, .world = p.world, .gpus = p.gpus};
    if (const char* env = std::getenv("MASTER_PORT"); env && *env) launch.master_port = std::atoi(env);

    struct sigaction sa {
    }, old_int{}, old_term{};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    auto started = RankProcesses::start(launch);
    if (!started.ok()) {
        sigaction(SIGINT, &old_int, nullptr);
        sigaction(SIGTERM, &old_term, nullptr);
        return report(started.status().with_context("--launch processes"));
    }
    RankProcesses& ranks = *started;
    for (size_t r = 0; r < ranks.pids().size(); ++r) g_children[r] = ranks.pids()[r];
    g_child_count.store(static_cast<int>(ranks.pids().size()));
    std::fprintf(stderr, "h3-engine: %d ranks as processes on 127.0.0.1:%d%s\n", p.world, ranks.port(),
                 p.gpus.empty() ? "" : (" (CUDA_VISIBLE_DEVICES=" + join_gpus(p.gpus) + ")").c_str());
    std::fflush(stderr);

    // Wait for every child; the first failure terminates the rest (SIGTERM, then SIGKILL after the grace).
    int result = kExitOk;
    int failed_rank = -1;
    auto kill_deadline = std::chrono::steady_clock::time_point::max();
    while (ranks.running() > 0) {
        if (std::optional<RankExit> done = ranks.reap()) {
            g_children[done->rank] = 0;
            if (done->code != 0 && failed_rank < 0) {
                failed_rank = done->rank;
                result = done->code;
                if (ranks.running() > 0) {
                    std::fprintf(stderr,
                                 "h3-engine: rank %d of %d exited with status %d; stopping the other ranks\n",
                                 done->rank, p.world, done->code);
                    forward_signal(SIGTERM);
                    kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(p.grace_seconds);
                }
            }
            continue;
        }
        if (std::chrono::steady_clock::now() > kill_deadline) {
            forward_signal(SIGKILL);
            kill_deadline = std::chrono::steady_clock::time_point::max();
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    g_child_count.store(0);
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    if (failed_rank >= 0)
        std::fprintf(stderr, "h3-engine: error: rank %d of %d failed (status %d)\n", failed_rank, p.world,
                     result);
    return result;
}

} // namespace h3::cli
