#include "cli/spawn_ranks.h"

#include "cli/app.h"
#include "cli/commands.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

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

void forward_signal(int sig) {
    const int n = g_child_count.load();
    for (int i = 0; i < n; ++i)
        if (g_children[i] > 0) kill(g_children[i], sig);
}

// A TCP port on 127.0.0.1 that was free a moment ago (the kernel's choice for port 0).
Result<int> free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return io_error("--launch processes: socket() failed while picking MASTER_PORT");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
    ::close(fd);
    if (!ok)
        return io_error("--launch processes: cannot bind 127.0.0.1 to pick MASTER_PORT; set MASTER_PORT");
    return static_cast<int>(ntohs(a.sin_port));
}

std::string join_ints(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + std::to_string(v[i]);
    return s;
}

int exit_code_of(int status) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return kExitRuntime;
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
    int port = 0;
    if (const char* env = std::getenv("MASTER_PORT"); env && *env) {
        port = std::atoi(env);
    } else {
        auto fp = free_port();
        if (!fp.ok()) return report(fp.status());
        port = *fp;
    }
    std::vector<char*> argv;
    for (std::string& a : *args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string world = std::to_string(p.world), port_s = std::to_string(port),
                      visible = join_ints(p.gpus);
    std::fprintf(stderr, "h3-engine: %d ranks as processes on 127.0.0.1:%d%s\n", p.world, port,
                 p.gpus.empty() ? "" : (" (CUDA_VISIBLE_DEVICES=" + visible + ")").c_str());
    std::fflush(stderr);
    std::fflush(stdout);

    struct sigaction sa {
    }, old_int{}, old_term{};
    sa.sa_handler = forward_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    std::vector<pid_t> pids;
    for (int r = 0; r < p.world; ++r) {
        const pid_t pid = fork();
        if (pid < 0) {
            std::fprintf(stderr, "h3-engine: error: fork() failed for rank %d\n", r);
            forward_signal(SIGTERM);
            break;
        }
        if (pid == 0) { // the child: the launcher convention, then this command again
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            const std::string rank = std::to_string(r);
            setenv("RANK", rank.c_str(), 1);
            setenv("LOCAL_RANK", rank.c_str(), 1);
            setenv("WORLD_SIZE", world.c_str(), 1);
            setenv("MASTER_ADDR", "127.0.0.1", 1);
            setenv("MASTER_PORT", port_s.c_str(), 1);
            if (!p.gpus.empty()) setenv("CUDA_VISIBLE_DEVICES", visible.c_str(), 1);
            if (r > 0) { // rank 0 reports; the others' stdout would repeat it
                const int devnull = open("/dev/null", O_WRONLY);
                if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
            }
            execv("/proc/self/exe", argv.data());
            std::fprintf(stderr, "h3-engine: error: rank %d: exec /proc/self/exe failed\n", r);
            _exit(kExitRuntime);
        }
        pids.push_back(pid);
        g_children[r] = pid;
        g_child_count.store(r + 1);
    }

    // Wait for every child; the first failure terminates the rest (SIGTERM, then SIGKILL after the grace).
    int result = pids.size() == static_cast<size_t>(p.world) ? kExitOk : kExitRuntime;
    int failed_rank = -1;
    size_t running = pids.size();
    auto kill_deadline = std::chrono::steady_clock::time_point::max();
    while (running > 0) {
        int status = 0;
        const pid_t done = waitpid(-1, &status, WNOHANG);
        if (done > 0) {
            --running;
            int r = 0;
            while (r < static_cast<int>(pids.size()) && pids[static_cast<size_t>(r)] != done) ++r;
            if (r < static_cast<int>(pids.size())) g_children[r] = 0;
            const int code = exit_code_of(status);
            if (code != 0 && failed_rank < 0) {
                failed_rank = r;
                result = code;
                if (running > 0) {
                    std::fprintf(stderr,
                                 "h3-engine: rank %d of %d exited with status %d; stopping the other ranks\n",
                                 r, p.world, code);
                    forward_signal(SIGTERM);
                    kill_deadline = std::chrono::steady_clock::now() + std::chrono::seconds(p.grace_seconds);
                }
            }
            continue;
        }
        if (done < 0) break; // no children left
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
