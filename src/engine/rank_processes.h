// A device group's ranks as child processes of this one (issue #17, #46): the same program started once per
// rank with the launcher convention (runtime/launcher.h) in its environment — RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR=127.0.0.1, MASTER_PORT and, with GPUs, CUDA_VISIBLE_DEVICES set to the group's devices (rank i
// runs on the i-th). `generate` runs one job's ranks this way (cli/spawn_ranks); the server starts each
// replica's ranks this way (engine/replica.h). The environment of every child is made before fork(), so the
// child calls nothing but async-signal-safe functions before exec (this process may have threads). Rank 0
// may be handed one file descriptor (the replica's job channel), the others' stdout goes to /dev/null.
// Destroying the object stops the children that are still running (SIGTERM, SIGKILL after the grace).
#pragma once

#include "core/status.h"

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace h3 {

struct RankLaunch {
    std::vector<std::string> argv = {}; // the program and its arguments (argv[0] is run as /proc/self/exe)
    int world = 1;                      // ranks
    std::vector<int> gpus = {};         // CUDA_VISIBLE_DEVICES for every rank (empty: not set)
    int master_port = 0;                // MASTER_PORT (0: a free one, see free_tcp_ports)
    bool set_rank_env = true;           // false for a group of one: no RANK / WORLD_SIZE
    std::vector<std::pair<std::string, std::string>> env = {}; // every rank's extra environment
    // Rank 0's extra environment and the descriptor it inherits (-1: none).
    std::vector<std::pair<std::string, std::string>> rank0_env = {};
    int rank0_fd = -1;
    bool quiet_others = true; // ranks > 0 write no stdout (rank 0 reports)
    // The ranks in a process group of their own: a terminal's Ctrl-C reaches this process only, which
    // stops them itself (a server's replicas: the server drains first).
    bool own_process_group = false;
};

// `count` consecutive TCP ports on 127.0.0.1 that were free a moment ago; returns the first.
Result<int> free_tcp_ports(int count = 1);

struct RankExit {
    int rank = 0;
    pid_t pid = 0;
    int code = 0; // the exit status, or 128 + the signal
    int signal = 0;
    std::string describe() const; // "rank 1 (pid 123) was killed by signal 9" / "... exited with status 4"
};

class RankProcesses {
public:
    static Result<RankProcesses> start(const RankLaunch& launch);
    RankProcesses() = default;
    RankProcesses(RankProcesses&& o) noexcept;
    RankProcesses& operator=(RankProcesses&& o) noexcept;
    ~RankProcesses();

    int port() const { return port_; }
    const std::vector<pid_t>& pids() const { return pids_; } // 0 once reaped
    int running() const;
    // The next rank that ended (reaped without blocking); nullopt while all run.
    std::optional<RankExit> reap();
    void signal_all(int sig) const;
    // SIGTERM, up to `grace` for them to end, then SIGKILL; reaps all of them.
    void stop(std::chrono::milliseconds grace = std::chrono::seconds(10));

private:
    std::vector<pid_t> pids_;
    int port_ = 0;
};

} // namespace h3
