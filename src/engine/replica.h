// One replica of a server (issue #46: `serve --gpus LIST --sp N ...`): a device group of rank processes this
// process starts (engine/rank_processes.h, the launcher convention) and feeds through a job channel to its
// rank 0 (engine/job_channel.h; rank 0 broadcasts each job to its ranks, engine/group_serving.h). To the
// server's worker it is a pipeline::JobRunner: run() sends the job's input as bytes, relays the progress
// events, forwards a cancel (the job's id: it stops at rank 0's next check, which aborts the job's
// communicators on every rank) and returns rank 0's result.
//
// Faults: a rank process that ends while a job runs (kill -9, a crash, out of memory) fails that job with an
// error naming the replica, the rank and the signal — the job is not re-queued: its partial outputs are
// removed and the client may submit it again — and the replica is restarted (all its processes stopped and
// started again) before it takes another job; a rank that ends while the replica is idle is noticed and the
// replica restarted before the next job. The other replicas are not touched.
#pragma once

#include "engine/job_channel.h"
#include "engine/rank_processes.h"
#include "pipeline/generator.h"

#include <nlohmann/json.hpp>

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h3 {

struct ReplicaSpec {
    int index = 0;                 // in the server (names it in messages and /health)
    std::vector<std::string> argv; // the program and arguments each rank runs (it reads the launcher env)
    int world = 1;                 // rank processes (sp·ring·tp)
    std::vector<int> gpus;         // CUDA devices of its ranks (empty on the CPU: the ranks are slots)
    std::vector<int> slots;        // what the operator listed for it (GPUs, or slots on the CPU)
    std::chrono::seconds start_timeout{600}; // to load the model and connect the group
    // Every rank's extra environment. plan_replicas on the CPU: OMP_WAIT_POLICY=PASSIVE unless set (the
    // ranks of several replicas share the host's cores; libgomp's spinning wait made a rank process 3 to 5
    // times slower on a loaded 2-core machine).
    std::vector<std::pair<std::string, std::string>> env = {};
};

// `slots` (the listed GPUs; on the CPU, rank slots) split in order into replicas of sp·ring·tp ranks, each
// running `argv` (see ReplicaSpec::env). Errors name the field "gpus" (a list that does not split, a slot
// listed twice).
Result<std::vector<ReplicaSpec>> plan_replicas(const std::vector<int>& slots, int sp, int ring, int tp,
                                               bool cuda, const std::vector<std::string>& argv);

class Replica final : public pipeline::JobRunner {
public:
    explicit Replica(ReplicaSpec spec);
    ~Replica() override;

    // Starts the rank processes and waits until rank 0 reports ready (or fails, naming the rank).
    Status start();
    // Restarts the processes when one has ended (a fault while idle, or after a failed job). Called by the
    // server's worker before it takes a job.
    Status prepare(const std::function<bool()>& stop) override;
    // Runs one job (see above). `job.source` must hold the input (JobBuilderOptions::keep_source).
    Result<pipeline::JobReport> run(const pipeline::GenerationJob& job,
                                    const pipeline::JobEvents& events) override;
    std::map<std::string, uint64_t> component_loads() const override;
    // Tells rank 0 to stop, then stops the processes.
    void stop();

    // /health: index, state (starting, ready, running, restarting, down), slots, pids, restarts.
    nlohmann::json status() const override;
    const ReplicaSpec& spec() const { return spec_; }

private:
    Status launch(const std::function<bool()>& stop); // the worker's thread (or start()'s)
    // A rank that ended, if any: waits up to `grace` for one (a rank's death closes rank 0's link first).
    std::optional<RankExit> dead_rank(std::chrono::milliseconds grace);
    std::string name() const { return "replica " + std::to_string(spec_.index); }
    void set_state(const char* s);

    ReplicaSpec spec_;
    RankProcesses procs_;
    std::unique_ptr<JobChannel> channel_;
    uint64_t jobs_sent_ = 0; // the job frames' ids (a cancel names the job it is for)
    mutable std::mutex mu_;  // guards state_, pids_, restarts_, loads_
    std::string state_ = "down";
    std::vector<int64_t> pids_;
    int restarts_ = 0, starts_ = 0;
    bool needs_restart_ = false;
    std::map<std::string, uint64_t> loads_;
};

} // namespace h3
