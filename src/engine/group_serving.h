// A device group of processes that serves jobs (issue #46): the group's rank 0 takes each job (from the HTTP
// front in its own process — `serve` under torchrun / Slurm —, or from the server that started the group as
// a replica, over a job channel, engine/job_channel.h), broadcasts the job's input as bytes
// (pipeline/job_input_bytes.h) over the group's control link, and every rank builds the same job with its own
// builder and runs it (rank 0 encodes, all denoise, rank 0 writes, as `generate` under the launcher).
//
// The control link is a TCP communicator among the group's processes on MASTER_ADDR:(the group's port + 1),
// made once at start; each job's own device group (its communicators, aborted with the job) is made by the
// generator on the group's port as for `generate`. Messages on the link: a job (its sequence number and
// input), a keep-alive (every 10 s while rank 0 is idle, so the others' reads never reach the link's
// timeout), stop. A cancelled or failed job on rank 0 aborts that job's communicators, so the other ranks'
// next collective fails at once and they go back to waiting for the next job.
#pragma once

#include "engine/engine_impl.h"
#include "ops/communicator.h"

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <thread>

namespace h3 {

// The control link of this launched rank (every rank of the group calls it; rank 0 listens).
Result<std::unique_ptr<ops::Communicator>> connect_group_control(const runtime::ProcessRank& process);

// Rank 0's runner: sends each job to the other ranks, then runs it on the engine. Without a control link
// (a group of one process) it is the engine.
class GroupLeader final : public pipeline::JobRunner {
public:
    GroupLeader(Engine::Impl& engine, std::unique_ptr<ops::Communicator> control);
    ~GroupLeader() override;
    Result<pipeline::JobReport> run(const pipeline::GenerationJob& job,
                                    const pipeline::JobEvents& events) override;
    std::map<std::string, uint64_t> component_loads() const override { return engine_.component_loads(); }
    // /health: {"replica": 0, "state": ready | running | broken (a rank is gone), "ranks": the group's size,
    // "error": why broken}; null for a group of one process.
    nlohmann::json status() const override;
    // Tells the other ranks to exit (idempotent).
    void stop();

private:
    Status send(std::vector<uint8_t> message); // mu_ held
    void keep_alive();

    Engine::Impl& engine_;
    std::unique_ptr<ops::Communicator> control_;
    std::mutex mu_;
    std::condition_variable wake_;
    bool stopping_ = false;
    mutable std::mutex state_mu_; // broken_ (written under mu_ too; status() reads it under this alone)
    std::string broken_;          // why the link failed ("" while it works): later jobs fail with it
    uint64_t jobs_ = 0;
    std::atomic<bool> running_{false};
    std::thread pinger_;
};

// A rank > 0: waits for rank 0's jobs and runs each; returns when rank 0 says stop (ok) or the link fails.
Status run_group_follower(Engine::Impl& engine, ops::Communicator& control);

// A replica's rank 0 (started by a server): reads jobs and cancels from the job channel `fd`, runs them on
// `leader`, answers progress and results; returns when the server says stop or closes the channel.
Status serve_job_channel(GroupLeader& leader, Engine::Impl& engine, int fd);

} // namespace h3
