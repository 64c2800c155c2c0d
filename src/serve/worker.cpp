#include "serve/worker.h"

#include "core/log.h"

#include <chrono>
#include <ctime>
#include <exception>
#include <filesystem>

namespace h3::serve {

namespace {

int64_t now_seconds() {
    return static_cast<int64_t>(std::time(nullptr));
}

} // namespace

Worker::Worker(JobBoard& board, const JobStore& store, Metrics& metrics, JobRunner runner,
               WorkerParams params)
    : board_(board), store_(store), metrics_(metrics), runner_(std::move(runner)),
      params_(std::move(params)) {}

Worker::~Worker() {
    if (thread_.joinable()) thread_.join();
}

void Worker::start() {
    thread_ = std::thread([this] { loop(); });
}

void Worker::join() {
    if (thread_.joinable()) thread_.join();
}

void Worker::loop() {
    while (std::shared_ptr<Job> job = board_.next()) run_one(job);
}

void Worker::run_one(const std::shared_ptr<Job>& job) {
    const std::string& id = job->record.id;
    const bool mp4 = job->request.output_format == api::OutputFormat::kMp4;
    api::JobOutputs outputs;
    if (mp4) outputs.video_path = store_.partial_path(id, api::kVideoFile);
    outputs.audio_path = store_.partial_path(id, api::kAudioFile);
    api::JobOptions options;
    options.cancel = &job->cancel;
    options.fault_prompt = params_.fault_prompt;
    options.progress = [&](const api::JobProgress& p) { board_.progress(job, p); };

    H3_LOG_INFO("serve: {} started ({} steps, {}, seed {})", id, job->request.generation.steps,
                job->record.size, job->request.generation.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Result<api::JobResult> result = internal_error("the job did not run");
    try {
        result = runner_(job->request, outputs, options);
    } catch (const std::exception& e) {
        result = internal_error(std::string("unexpected exception: ") + e.what());
    } catch (...) {
        result = internal_error("unexpected exception");
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // the keyframe and reference media are not kept past the run (only this thread reads them)
    job->request.keyframes.reset();
    job->request.references.reset();

    Status moved = ok_status();
    if (result.ok()) {
        if (mp4) moved = store_.commit(id, api::kVideoFile);
        if (moved.ok()) moved = store_.commit(id, api::kAudioFile);
    }
    if (!result.ok() || !moved.ok()) {
        std::error_code ec;
        for (const char* f : {api::kVideoFile, api::kAudioFile}) {
            std::filesystem::remove(store_.partial_path(id, f), ec);
            std::filesystem::remove(store_.content_path(id, f), ec);
        }
    }
    if (result.ok() && moved.ok()) {
        metrics_.job_completed(*result);
        board_.finish(job, FinalOutcome::kCompleted, std::nullopt, result->metrics, seconds, now_seconds());
        H3_LOG_INFO("serve: {} completed in {:.2f} s ({})", id, seconds, result->work.summary());
        return;
    }
    const Status& s = !result.ok() ? result.status() : moved;
    if (s.code() == ErrorCode::kCancelled) {
        board_.finish(job, FinalOutcome::kCancelled, std::nullopt, nullptr, seconds, now_seconds());
        H3_LOG_INFO("serve: {} cancelled after {:.2f} s", id, seconds);
        return;
    }
    board_.finish(job, FinalOutcome::kFailed, api::JobError{error_code_name(s.code()), s.message()}, nullptr,
                  seconds, now_seconds());
    H3_LOG_WARN("serve: {} failed after {:.2f} s: {}", id, seconds, s.to_string());
}

} // namespace h3::serve
