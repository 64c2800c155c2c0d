#include "engine/rank_processes.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <thread>

extern char** environ;

namespace h3 {

namespace {

std::string join_ints(const std::vector<int>& v) {
    std::string s;
    for (size_t i = 0; i < v.size(); ++i) {
        if (i) s += ',';
        s += std::to_string(v[i]);
    }
    return s;
}

// This process's environment without the launcher's variables, then `set`.
std::vector<std::string> child_environment(const std::vector<std::pair<std::string, std::string>>& set) {
    std::vector<std::string> env;
    for (char** e = environ; e && *e; ++e) {
        const std::string kv(*e);
        const std::string name = kv.substr(0, kv.find('='));
        bool replaced = false;
        for (const auto& [k, v] : set) replaced = replaced || k == name;
        if (!replaced) env.push_back(kv);
    }
    for (const auto& [k, v] : set) env.push_back(k + "=" + v);
    return env;
}

int status_code(int status, int* sig) {
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) {
        *sig = WTERMSIG(status);
        return 128 + *sig;
    }
    return 4;
}

} // namespace

Result<int> free_tcp_ports(int count) {
    for (int attempt = 0; attempt < 64; ++attempt) {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0) return io_error("socket() failed while picking a free port");
        sockaddr_in a{};
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof(a);
        const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
                        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
        ::close(fd);
        if (!ok) return io_error("cannot bind 127.0.0.1 to pick a free port; set MASTER_PORT");
        const int first = ntohs(a.sin_port);
        bool all = first + count - 1 <= 65535;
        for (int i = 1; all && i < count; ++i) { // the ports after it must be free too
            const int f2 = ::socket(AF_INET, SOCK_STREAM, 0);
            sockaddr_in b = a;
            b.sin_port = htons(static_cast<uint16_t>(first + i));
            all = f2 >= 0 && ::bind(f2, reinterpret_cast<sockaddr*>(&b), sizeof(b)) == 0;
            if (f2 >= 0) ::close(f2);
        }
        if (all) return first;
    }
    return io_error("found no " + std::to_string(count) + " consecutive free ports on 127.0.0.1");
}

std::string RankExit::describe() const {
    return "rank " + std::to_string(rank) + " (pid " + std::to_string(pid) + ") " +
           (signal ? "was killed by signal " + std::to_string(signal)
                   : "exited with status " + std::to_string(code));
}

Result<RankProcesses> RankProcesses::start(const RankLaunch& p) {
    if (p.world < 1 || p.world > 1024)
        return invalid_argument("a rank group of " + std::to_string(p.world) + " processes (1 to 1024)");
    if (p.argv.empty()) return invalid_argument("a rank group needs a command line");
    RankProcesses g;
    g.port_ = p.master_port;
    if (g.port_ == 0) {
        H3_ASSIGN_OR_RETURN(g.port_, free_tcp_ports(2)); // the group's port and the job channel's after it
    }
    std::vector<std::string> argv_s = p.argv;
    std::vector<char*> argv;
    for (std::string& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    // every rank's environment, before any fork
    std::vector<std::vector<std::string>> envs;
    for (int r = 0; r < p.world; ++r) {
        std::vector<std::pair<std::string, std::string>> set;
        if (p.set_rank_env) {
            set = {{"RANK", std::to_string(r)},
                   {"LOCAL_RANK", std::to_string(r)},
                   {"WORLD_SIZE", std::to_string(p.world)},
                   {"MASTER_ADDR", "127.0.0.1"},
                   {"MASTER_PORT", std::to_string(g.port_)}};
        }
        if (!p.gpus.empty()) set.push_back({"CUDA_VISIBLE_DEVICES", join_ints(p.gpus)});
        for (const auto& kv : p.env) set.push_back(kv);
        if (r == 0)
            for (const auto& kv : p.rank0_env) set.push_back(kv);
        envs.push_back(child_environment(set));
    }
    std::vector<std::vector<char*>> envps(envs.size());
    for (size_t r = 0; r < envs.size(); ++r) {
        for (std::string& e : envs[r]) envps[r].push_back(e.data());
        envps[r].push_back(nullptr);
    }
    std::fflush(stdout);
    std::fflush(stderr);
    for (int r = 0; r < p.world; ++r) {
        const pid_t pid = fork();
        if (pid < 0) {
            g.stop(std::chrono::seconds(1));
            return io_error("fork() failed for rank " + std::to_string(r) + ": " + std::strerror(errno));
        }
        if (pid == 0) { // the child: async-signal-safe calls only, then exec
            signal(SIGINT, SIG_DFL);
            signal(SIGTERM, SIG_DFL);
            sigset_t none;
            sigemptyset(&none);
            sigprocmask(SIG_SETMASK, &none, nullptr);
            if (p.own_process_group) setpgid(0, 0);
            if (r == 0 && p.rank0_fd >= 0) fcntl(p.rank0_fd, F_SETFD, 0); // kept across exec
            if (r > 0 && p.quiet_others) {
                const int devnull = open("/dev/null", O_WRONLY);
                if (devnull >= 0) dup2(devnull, STDOUT_FILENO);
            }
            execve("/proc/self/exe", argv.data(), envps[static_cast<size_t>(r)].data());
            static const char msg[] = "h3-engine: error: exec /proc/self/exe failed for a rank\n";
            (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
            _exit(4);
        }
        g.pids_.push_back(pid);
    }
    return g;
}

RankProcesses::RankProcesses(RankProcesses&& o) noexcept : pids_(std::move(o.pids_)), port_(o.port_) {
    o.pids_.clear();
}

RankProcesses& RankProcesses::operator=(RankProcesses&& o) noexcept {
    if (this != &o) {
        stop(std::chrono::seconds(1));
        pids_ = std::move(o.pids_);
        port_ = o.port_;
        o.pids_.clear();
    }
    return *this;
}

RankProcesses::~RankProcesses() {
    stop(std::chrono::seconds(2));
}

int RankProcesses::running() const {
    int n = 0;
    for (pid_t p : pids_) n += p > 0;
    return n;
}

std::optional<RankExit> RankProcesses::reap() {
    for (size_t r = 0; r < pids_.size(); ++r) {
        if (pids_[r] <= 0) continue;
        int status = 0;
        if (waitpid(pids_[r], &status, WNOHANG) != pids_[r]) continue;
        RankExit e;
        e.rank = static_cast<int>(r);
        e.pid = pids_[r];
        e.code = status_code(status, &e.signal);
        pids_[r] = 0;
        return e;
    }
    return std::nullopt;
}

void RankProcesses::signal_all(int sig) const {
    for (pid_t p : pids_)
        if (p > 0) kill(p, sig);
}

void RankProcesses::stop(std::chrono::milliseconds grace) {
    if (running() == 0) return;
    signal_all(SIGTERM);
    const auto deadline = std::chrono::steady_clock::now() + grace;
    while (running() > 0) {
        while (reap()) {
        }
        if (running() == 0) break;
        if (std::chrono::steady_clock::now() > deadline) {
            signal_all(SIGKILL);
            for (pid_t& p : pids_)
                if (p > 0) {
                    waitpid(p, nullptr, 0);
                    p = 0;
                }
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
}

} // namespace h3
