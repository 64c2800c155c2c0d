#include "serve/worker.h"

#include "core/log.h"

#include <chrono>
#include <cstdio>
#include <ctime>
#include <exception>
#include <filesystem>
#include <thread>
#include <vector>

namespace h3::serve {

namespace {

int64_t now_seconds() {
    return static_cast<int64_t>(std::time(nullptr));
}

// The content files a job of `format` writes.
std::vector<const char*> content_files(api::OutputFormat format) {
    switch (format) {
    case api::OutputFormat::kMp4:
        return {api::kVideoFile, api::kAudioFile};
    case api::OutputFormat::kWav:
        return {api::kAudioFile};
    case api::OutputFormat::kLatents:
        return {api::kLatentsFile};
    }
    return {};
}

} // namespace

Worker::Worker(JobBoard& board, const JobStore& store, Metrics& metrics, pipeline::JobRunner& runner,
               WarmUp* warm_up)
    : board_(board), store_(store), metrics_(metrics), runner_(runner), warm_up_(warm_up) {}

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
    if (warm_up_ && !board_.closed()) warm_up_->run(); // once, before the first job
    while (true) {
        if (Status s = runner_.prepare([this] { return board_.closed(); });
            !s.ok()) { // a replica that cannot start: try again shortly
            H3_LOG_ERROR("serve: {}", s.to_string());
            std::fprintf(stderr, "serve: %s\n", s.to_string().c_str());
            for (int i = 0; i < 20 && !board_.closed(); ++i)
                std::this_thread::sleep_for(std::chrono::milliseconds(100));
            if (board_.closed()) return;
            continue;
        }
        std::shared_ptr<Job> job = board_.next();
        if (!job) return;
        {
            std::lock_guard<std::mutex> lock(mu_);
            current_ = job->record.id;
        }
        run_one(job);
        std::lock_guard<std::mutex> lock(mu_);
        current_.clear();
    }
}

nlohmann::json Worker::status() const {
    nlohmann::json j = runner_.status();
    if (j.is_null()) j = nlohmann::json::object();
    std::lock_guard<std::mutex> lock(mu_);
    j["job"] = current_.empty() ? nlohmann::json(nullptr) : nlohmann::json(current_);
    j["jobs_done"] = done_;
    j["failures"] = failed_;
    j["cancelled"] = cancelled_;
    return j;
}

void Worker::run_one(const std::shared_ptr<Job>& job) {
    const std::string& id = job->record.id;
    pipeline::GenerationJob& gj = job->request.job;
    const api::OutputFormat format = job->request.output_format;
    gj.outputs = {};
    switch (format) {
    case api::OutputFormat::kMp4:
        gj.outputs.media.mp4 = store_.partial_path(id, api::kVideoFile);
        gj.outputs.media.wav = store_.partial_path(id, api::kAudioFile);
        break;
    case api::OutputFormat::kWav:
        gj.outputs.media.wav = store_.partial_path(id, api::kAudioFile);
        break;
    case api::OutputFormat::kLatents:
        gj.outputs.latents = store_.partial_path(id, api::kLatentsFile);
        break;
    }
    pipeline::JobEvents events;
    events.cancel = &job->cancel;
    events.progress = [&](const pipeline::JobProgress& p) { board_.progress(job, p); };

    H3_LOG_INFO("serve: {} started ({}, {} steps, {}, seed {})", id, pipeline::task_name(gj.task), gj.steps,
                job->record.size, gj.seed);
    const auto t0 = std::chrono::steady_clock::now();
    Result<pipeline::JobReport> result = internal_error("the job did not run");
    try {
        result = runner_.run(gj, events);
    } catch (const std::exception& e) {
        result = internal_error(std::string("unexpected exception: ") + e.what());
    } catch (...) {
        result = internal_error("unexpected exception");
    }
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    // the keyframe and reference media are not kept past the run (only this thread reads them)
    gj.keyframes.reset();
    gj.references.reset();

    Status moved = ok_status();
    if (result.ok())
        for (const char* f : content_files(format))
            if (moved.ok()) moved = store_.commit(id, f);
    if (!result.ok() || !moved.ok()) {
        std::error_code ec;
        for (const char* f : api::kContentFiles) {
            std::filesystem::remove(store_.partial_path(id, f), ec);
            std::filesystem::remove(store_.content_path(id, f), ec);
        }
    }
    if (result.ok() && moved.ok()) {
        metrics_.job_completed(*result);
        {
            std::lock_guard<std::mutex> lock(mu_);
            ++done_;
        }
        board_.finish(job, FinalOutcome::kCompleted, std::nullopt, result->metrics(gj.task), seconds,
                      now_seconds());
        H3_LOG_INFO("serve: {} completed in {:.2f} s ({})", id, seconds, result->work.summary());
        return;
    }
    const Status& s = !result.ok() ? result.status() : moved;
    {
        std::lock_guard<std::mutex> lock(mu_);
        ++(s.code() == ErrorCode::kCancelled ? cancelled_ : failed_);
    }
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
