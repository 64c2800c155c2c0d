// The jobs of one server process: every known job by id, the bounded queue of those waiting for the
// worker, and every state transition (persisted through the JobStore as it happens). HTTP threads submit,
// look up, list, cancel and delete; a worker (one per replica) takes the next job and reports progress and
// the end; SSE and sync waiters block on a job's version. All state sits behind one mutex.
#pragma once

#include "pipeline/generator.h"
#include "serve/job_store.h"
#include "serve/wire/video_object.h"
#include "serve/wire/video_request.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h3::serve {

// One job. Fields other than `cancel` are guarded by the board's mutex.
struct Job {
    api::VideoRecord record;
    api::VideoRequest request; // empty for jobs recovered from disk, and released once the job is final
    std::atomic<bool> cancel{false};
    std::string cancel_reason; // "" while not cancelled; "user" or "shutdown"
    bool deleted = false;      // removed through the API; the worker deletes the directory at the end
    uint64_t version = 1;      // bumped on every change
    int step = 0, total = 0;   // denoise steps (progress events)
};

// What waiters see: a copy taken under the lock.
struct JobSnapshot {
    api::VideoRecord record;
    uint64_t version = 0;
    int step = 0, total = 0;
};

enum class SubmitOutcome { kAccepted, kQueueFull, kClosed, kStoreError };

struct SubmitResult {
    SubmitOutcome outcome = SubmitOutcome::kAccepted;
    api::VideoRecord record;        // when accepted
    std::shared_ptr<Job> job;       // when accepted
    std::string message;            // otherwise
    double retry_after_seconds = 0; // kQueueFull: an estimate of when a slot frees
};

struct ListPage {
    std::vector<api::VideoRecord> data;
    bool has_more = false;
};

enum class FinalOutcome { kCompleted, kFailed, kCancelled };

class JobBoard {
public:
    JobBoard(const JobStore& store, size_t max_queue, int64_t ttl_seconds);

    // Called (lock held, keep it short) whenever a job reaches a final status: the metrics' counters.
    void set_on_final(std::function<void(api::JobStatus)> on_final) { on_final_ = std::move(on_final); }

    // Takes in the records recovered from disk (all final by then).
    void adopt(std::vector<api::VideoRecord> records);

    // HTTP side
    SubmitResult submit(api::VideoRequest request, int64_t now);
    std::shared_ptr<Job> find(const std::string& id) const;
    std::optional<JobSnapshot> snapshot(const std::string& id) const;
    // Newest first (order "desc") or oldest first ("asc"), starting after the job `after` (when given).
    ListPage list(size_t limit, const std::string& after, bool newest_first) const;
    // Cancels a queued or running job (running ones stop between DiT blocks). False when already final.
    bool cancel(const std::shared_ptr<Job>& job, int64_t now);
    // Cancels when needed, then forgets the job and removes its directory at once (JobStore::remove renames
    // it away first; a running job's worker cleans what is left once it stops). False when unknown.
    bool remove(const std::string& id, int64_t now);
    // Blocks until the job's version exceeds `known` or `timeout` passes; returns the current snapshot.
    JobSnapshot wait(const std::shared_ptr<Job>& job, uint64_t known,
                     std::chrono::milliseconds timeout) const;

    // Worker side
    std::shared_ptr<Job> next(); // blocks; nullptr once closed and nothing is left to run
    void progress(const std::shared_ptr<Job>& job, const pipeline::JobProgress& p);
    // Records the end of a run: the outcome, the error or the metrics. Returns false when the job was
    // deleted meanwhile (its directory is removed here).
    bool finish(const std::shared_ptr<Job>& job, FinalOutcome outcome, std::optional<api::JobError> error,
                nlohmann::json metrics, double run_seconds, int64_t now);

    // Shutdown: stop accepting; queued jobs fail with code "server_shutdown"; `cancel_running` also stops
    // the running job (it then fails with the same code).
    void close(bool cancel_running, int64_t now);
    bool closed() const;

    // TTL: forgets and deletes final jobs whose expires_at has passed. Returns how many.
    int sweep_expired(int64_t now);

    size_t queue_depth() const;
    size_t running() const;
    // "job ID (stage STAGE, P%)" of the running job, "" when none (shutdown messages).
    std::string describe_running() const; // several: joined with "; "
    size_t max_queue() const { return max_queue_; }

private:
    void touch(Job& job);      // version++ and wake the waiters (lock held)
    void save(const Job& job); // persists (lock held); a failure is logged, the state stays in memory
    void finalize(Job& job, api::JobStatus status, std::optional<api::JobError> error, int64_t now);

    const JobStore& store_;
    const size_t max_queue_;
    const int64_t ttl_seconds_;
    mutable std::mutex mu_;
    mutable std::condition_variable changed_; // any job changed (waiters)
    std::condition_variable queued_;          // the worker's wake-up
    std::map<std::string, std::shared_ptr<Job>> jobs_;
    std::deque<std::shared_ptr<Job>> queue_;
    std::vector<std::shared_ptr<Job>> running_; // one per worker (a server's replicas run jobs at once)
    uint64_t next_seq_ = 1;
    bool closed_ = false;
    double mean_run_seconds_ = 0; // moving average of finished runs (Retry-After)
    std::function<void(api::JobStatus)> on_final_;
};

} // namespace h3::serve
