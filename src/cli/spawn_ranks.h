// The ranks of one host as child processes (issue #17; the processes themselves: engine/rank_processes.h):
// `generate --gpus 0,1,2,3 --sp 4` (several GPUs: one process per GPU, since the ranks of one process share
// one DiT) and `generate --launch processes` (any device; the CPU tests use it) re-run this command once per
// rank with the launcher convention that torchrun and Slurm wrappers use — RANK, WORLD_SIZE, LOCAL_RANK,
// MASTER_ADDR=127.0.0.1, MASTER_PORT (the environment's, else a free port) and, on CUDA, CUDA_VISIBLE_DEVICES
// set to the --gpus list, so rank i runs on cuda:i of that list — without --gpus / --launch
// (runtime/launcher.h then makes each one rank of the group). The parent loads nothing: it waits for its
// children, and when one fails (non-zero exit or a signal) it terminates the others (SIGTERM, then SIGKILL
// after a grace period), so a failed rank fails the job on every rank in bounded time. SIGINT / SIGTERM to
// the parent reach every child. Rank 0 writes the outputs; the other ranks' stdout is discarded (their stderr
// is kept: errors name the rank).
#pragma once

#include "core/status.h"

#include <string>
#include <vector>

namespace h3::cli {

struct SpawnRanksParams {
    int world = 1;         // ranks (sp·tp)
    std::vector<int> gpus; // CUDA devices, one per rank; empty: the ranks share the command's --device
    // Flags of this command line the children must not see (each removed with its value).
    std::vector<std::string> strip_flags = {"--gpus", "--launch"};
    int grace_seconds = 10; // after SIGTERM, before SIGKILL
};

// This process's command line (/proc/self/cmdline) without `strip` flags and their values ("--x V" and
// "--x=V"). Exposed for tests.
Result<std::vector<std::string>> child_command_line(const std::vector<std::string>& strip);

// Runs the ranks and returns the command's exit status: 0 when every rank exits 0, else the first failing
// rank's status (128 + signal for a signal), after reporting which rank failed.
int run_ranks_as_processes(const SpawnRanksParams& params);

} // namespace h3::cli
