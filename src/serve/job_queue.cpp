#include "serve/job_queue.h"

#include "core/log.h"

#include <algorithm>
#include <cmath>
#include <ctime>

namespace h3::serve {

JobBoard::JobBoard(const JobStore& store, size_t max_queue, int64_t ttl_seconds)
    : store_(store), max_queue_(max_queue), ttl_seconds_(ttl_seconds) {}

void JobBoard::touch(Job& job) {
    ++job.version;
    changed_.notify_all();
}

void JobBoard::save(const Job& job) {
    if (job.deleted) return;
    if (Status s = store_.save(job.record); !s.ok())
        H3_LOG_ERROR("serve: job {}: cannot persist its record: {}", job.record.id, s.to_string());
}

void JobBoard::finalize(Job& job, api::JobStatus status, std::optional<api::JobError> error, int64_t now) {
    // What the job ran on is not needed past its end and must not stay for as long as the record does
    // (forever with --ttl 0): decoded keyframes and references (a job cancelled before it started still held
    // them), prompt rows, the LoRA set (which kept a set the library had dropped alive). Only the worker
    // reads the request, and it calls this for its own job after the run.
    job.request = api::VideoRequest{};
    job.record.status = status;
    job.record.stage = "done";
    job.record.error = std::move(error);
    job.record.completed_at = now;
    if (ttl_seconds_ > 0) job.record.expires_at = now + ttl_seconds_;
    if (status == api::JobStatus::kCompleted) job.record.progress = 100;
    save(job);
    touch(job);
    if (on_final_) on_final_(status);
}

void JobBoard::adopt(std::vector<api::VideoRecord> records) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& r : records) {
        next_seq_ = std::max(next_seq_, r.seq + 1);
        auto job = std::make_shared<Job>();
        if (ttl_seconds_ > 0 && r.expires_at == 0 && r.completed_at > 0) {
            r.expires_at = r.completed_at + ttl_seconds_;
        }
        job->record = std::move(r);
        jobs_[job->record.id] = job;
    }
}

SubmitResult JobBoard::submit(api::VideoRequest request, int64_t now) {
    SubmitResult res;
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) {
        res.outcome = SubmitOutcome::kClosed;
        res.message = "the server is shutting down and accepts no new jobs";
        return res;
    }
    if (queue_.size() >= max_queue_) {
        res.outcome = SubmitOutcome::kQueueFull;
        res.message = "the queue is full (" + std::to_string(max_queue_) + " jobs waiting); retry later";
        const double per_job = mean_run_seconds_ > 0 ? mean_run_seconds_ : 10.0;
        res.retry_after_seconds = std::clamp(per_job, 1.0, 3600.0);
        return res;
    }
    std::string id;
    do id = new_job_id();
    while (jobs_.count(id));
    auto job = std::make_shared<Job>();
    job->record = api::make_record(id, next_seq_, now, request);
    job->request = std::move(request);
    if (Status s = store_.save(job->record); !s.ok()) {
        res.outcome = SubmitOutcome::kStoreError;
        res.message = "cannot persist the job: " + s.message();
        return res;
    }
    ++next_seq_;
    jobs_[id] = job;
    queue_.push_back(job);
    queued_.notify_one();
    res.record = job->record;
    res.job = job;
    return res;
}

std::shared_ptr<Job> JobBoard::find(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    return it == jobs_.end() ? nullptr : it->second;
}

std::optional<JobSnapshot> JobBoard::snapshot(const std::string& id) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = jobs_.find(id);
    if (it == jobs_.end()) return std::nullopt;
    const Job& j = *it->second;
    return JobSnapshot{j.record, j.version, j.step, j.total};
}

ListPage JobBoard::list(size_t limit, const std::string& after, bool newest_first) const {
    std::lock_guard<std::mutex> lock(mu_);
    std::vector<const Job*> all;
    all.reserve(jobs_.size());
    for (const auto& [id, job] : jobs_) all.push_back(job.get());
    std::sort(all.begin(), all.end(), [&](const Job* a, const Job* b) {
        return newest_first ? a->record.seq > b->record.seq : a->record.seq < b->record.seq;
    });
    size_t start = 0;
    if (!after.empty()) {
        auto it = jobs_.find(after);
        if (it != jobs_.end()) {
            const uint64_t seq = it->second->record.seq;
            while (start < all.size() &&
                   (newest_first ? all[start]->record.seq >= seq : all[start]->record.seq <= seq))
                ++start;
        }
    }
    ListPage page;
    for (size_t i = start; i < all.size() && page.data.size() < limit; ++i)
        page.data.push_back(all[i]->record);
    page.has_more = start + page.data.size() < all.size();
    return page;
}

bool JobBoard::cancel(const std::shared_ptr<Job>& job, int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    if (api::is_final(job->record.status) || !job->cancel_reason.empty()) return false;
    job->cancel_reason = "user";
    job->cancel.store(true);
    auto q = std::find(queue_.begin(), queue_.end(), job);
    if (q != queue_.end()) { // never started: final now
        queue_.erase(q);
        finalize(*job, api::JobStatus::kCancelled, api::JobError{"cancelled", "cancelled before it started"},
                 now);
    }
    // a running job becomes final when the worker sees the flag (between DiT blocks)
    return true;
}

bool JobBoard::remove(const std::string& id, int64_t now) {
    std::shared_ptr<Job> job;
    {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = jobs_.find(id);
        if (it == jobs_.end()) return false;
        job = it->second;
    }
    cancel(job, now);
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.erase(id);
    job->deleted = true;
    touch(*job);
    // now, even for a running job (its directory is renamed away; the worker's partial outputs go with it and
    // it removes whatever is left once it stops): a crash after this answer cannot bring the record back
    if (Status s = store_.remove(id); !s.ok()) H3_LOG_ERROR("serve: {}", s.to_string());
    return true;
}

JobSnapshot JobBoard::wait(const std::shared_ptr<Job>& job, uint64_t known,
                           std::chrono::milliseconds timeout) const {
    std::unique_lock<std::mutex> lock(mu_);
    changed_.wait_for(lock, timeout, [&] { return job->version > known; });
    return JobSnapshot{job->record, job->version, job->step, job->total};
}

std::shared_ptr<Job> JobBoard::next() {
    std::unique_lock<std::mutex> lock(mu_);
    queued_.wait(lock, [&] { return closed_ || !queue_.empty(); });
    if (queue_.empty()) return nullptr;
    std::shared_ptr<Job> job = queue_.front();
    queue_.pop_front();
    running_.push_back(job);
    Job& j = *job;
    j.record.status = api::JobStatus::kInProgress;
    j.record.stage = "encode";
    j.record.started_at = static_cast<int64_t>(std::time(nullptr));
    save(j);
    touch(j);
    return job;
}

void JobBoard::progress(const std::shared_ptr<Job>& job, const pipeline::JobProgress& p) {
    std::lock_guard<std::mutex> lock(mu_);
    job->record.progress = std::max(job->record.progress, p.percent);
    job->record.stage = pipeline::stage_name(p.stage);
    if (p.stage == pipeline::Stage::kDenoise) {
        job->step = p.step;
        job->total = p.total;
    }
    touch(*job);
}

bool JobBoard::finish(const std::shared_ptr<Job>& job, FinalOutcome outcome,
                      std::optional<api::JobError> error, nlohmann::json metrics, double run_seconds,
                      int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase(running_, job);
    mean_run_seconds_ = mean_run_seconds_ > 0 ? 0.7 * mean_run_seconds_ + 0.3 * run_seconds : run_seconds;
    api::JobStatus status = outcome == FinalOutcome::kCompleted ? api::JobStatus::kCompleted
                            : outcome == FinalOutcome::kFailed  ? api::JobStatus::kFailed
                                                                : api::JobStatus::kCancelled;
    if (outcome == FinalOutcome::kCancelled) {
        if (job->cancel_reason == "shutdown") {
            status = api::JobStatus::kFailed;
            error = api::JobError{"server_shutdown",
                                  "the server was stopped while this job ran; submit it again"};
        } else {
            error = api::JobError{"cancelled", "cancelled while it ran"};
        }
    }
    job->record.metrics = std::move(metrics);
    finalize(*job, status, std::move(error), now);
    if (job->deleted) {
        if (Status s = store_.remove(job->record.id); !s.ok()) H3_LOG_ERROR("serve: {}", s.to_string());
        return false;
    }
    return true;
}

void JobBoard::close(bool cancel_running, int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    closed_ = true;
    for (auto& job : queue_)
        finalize(
            *job, api::JobStatus::kFailed,
            api::JobError{"server_shutdown", "the server was stopped before this job ran; submit it again"},
            now);
    queue_.clear();
    if (cancel_running)
        for (auto& r : running_)
            if (r->cancel_reason.empty()) {
                r->cancel_reason = "shutdown";
                r->cancel.store(true);
            }
    queued_.notify_all();
    changed_.notify_all();
}

bool JobBoard::closed() const {
    std::lock_guard<std::mutex> lock(mu_);
    return closed_;
}

int JobBoard::sweep_expired(int64_t now) {
    std::lock_guard<std::mutex> lock(mu_);
    int n = 0;
    for (auto it = jobs_.begin(); it != jobs_.end();) {
        Job& j = *it->second;
        if (api::is_final(j.record.status) && j.record.expires_at > 0 && j.record.expires_at <= now) {
            if (Status s = store_.remove(j.record.id); !s.ok()) H3_LOG_ERROR("serve: {}", s.to_string());
            j.deleted = true;
            touch(j);
            it = jobs_.erase(it);
            ++n;
        } else {
            ++it;
        }
    }
    return n;
}

size_t JobBoard::queue_depth() const {
    std::lock_guard<std::mutex> lock(mu_);
    return queue_.size();
}

size_t JobBoard::running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return running_.size();
}

std::string JobBoard::describe_running() const {
    std::lock_guard<std::mutex> lock(mu_);
    std::string out;
    for (const auto& job : running_) {
        const api::VideoRecord& r = job->record;
        out += (out.empty() ? "" : "; ") + std::string("job ") + r.id + " (stage " +
               (r.stage.empty() ? std::string("?") : r.stage) + ", " +
               std::to_string(static_cast<int>(r.progress)) + "%)";
    }
    return out;
}

} // namespace h3::serve
