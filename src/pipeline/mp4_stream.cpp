#include "pipeline/mp4_stream.h"

#include <chrono>
#include <filesystem>

namespace h3::pipeline {

namespace {

double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

constexpr auto kPoll = std::chrono::milliseconds(50); // how often a waiting push looks at the cancel flag

} // namespace

Mp4Stream::Mp4Stream(std::string path, io::Mp4Streams audio, Mp4StreamOptions options)
    : path_(std::move(path)), streams_(audio), options_(std::move(options)),
      user_cancel_(options_.mp4.cancel) {
    options_.mp4.cancel = &abort_;
    thread_ = std::thread([this] { run(); });
}

Mp4Stream::~Mp4Stream() {
    {
        std::lock_guard<std::mutex> lk(m_);
        stop_ = true;
    }
    abort_ = true; // the writer stops before its next batch of frames
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
    if (opened_ && !finished_) {
        std::error_code ec;
        if (std::filesystem::is_regular_file(path_, ec)) std::filesystem::remove(path_, ec);
    }
}

void Mp4Stream::run() {
    std::unique_ptr<io::Mp4Writer> writer;
    Status status;
    while (true) {
        Tensor chunk;
        {
            std::unique_lock<std::mutex> lk(m_);
            cv_.wait(lk, [&] { return stop_ || closing_ || !queue_.empty(); });
            if (stop_) break;
            if (!queue_.empty()) chunk = queue_.front(); // stays counted until encoded: the bound holds
        }
        if (cancel_requested()) {
            abort_ = true;
            status = cancelled("write_mp4 '" + path_ + "': cancelled while muxing");
            break;
        }
        const auto t0 = std::chrono::steady_clock::now();
        if (chunk.defined()) {
            if (!writer) {
                io::Mp4Streams s = streams_;
                s.width = static_cast<int>(chunk.dim(2));
                s.height = static_cast<int>(chunk.dim(1));
                auto opened = io::Mp4Writer::open(path_, s, options_.mp4);
                if (!opened.ok()) {
                    status = opened.status();
                    break;
                }
                writer = std::move(*opened);
                std::lock_guard<std::mutex> lk(m_);
                opened_ = true;
            }
            status = writer->write_frames(chunk);
        } else { // closing with an empty queue
            status = writer ? writer->finish(audio_)
                            : invalid_argument("write_mp4 '" + path_ + "': no frames to write");
        }
        const double spent = seconds_since(t0);
        std::lock_guard<std::mutex> lk(m_);
        encode_seconds_ += spent;
        if (chunk.defined()) {
            queued_frames_ -= chunk.dim(0);
            queue_.pop_front();
        } else {
            finished_ = status.ok();
        }
        if (!status.ok() || !chunk.defined()) break;
        cv_.notify_all(); // room in the queue
    }
    // a cancelled writer reports the caller's cancel, not the internal flag
    if (!status.ok() && status.code() == ErrorCode::kCancelled)
        status = cancelled("write_mp4 '" + path_ + "': cancelled while muxing");
    std::lock_guard<std::mutex> lk(m_);
    error_ = status;
    done_ = true;
    cv_.notify_all();
}

Status Mp4Stream::push(Tensor frames) {
    if (!frames.defined() || frames.rank() != 4 || frames.dim(3) != 3 || frames.dtype() != DType::kU8 ||
        !frames.device().is_cpu() || !frames.is_contiguous() || frames.dim(0) < 1)
        return invalid_argument("write_mp4 '" + path_ +
                                "': frames must be a contiguous host u8 [n, H, W, 3] "
                                "tensor, got " +
                                (frames.defined() ? frames.describe() : "undefined"));
    const int64_t n = frames.dim(0);
    std::unique_lock<std::mutex> lk(m_);
    while (true) {
        if (done_)
            return error_.ok() ? internal_error("write_mp4 '" + path_ + "': frames after the end") : error_;
        if (closing_) return internal_error("write_mp4 '" + path_ + "': frames after finish()");
        if (cancel_requested()) {
            abort_ = true; // the encoder stops before its next batch of frames
            return cancelled("write_mp4 '" + path_ + "': cancelled while muxing");
        }
        if (queued_frames_ == 0 || queued_frames_ + n <= options_.queue_frames) break;
        cv_.wait_for(lk, kPoll);
    }
    queue_.push_back(std::move(frames));
    queued_frames_ += n;
    peak_queued_ = std::max(peak_queued_, queued_frames_);
    cv_.notify_all();
    return ok_status();
}

Status Mp4Stream::finish(const Tensor& audio) {
    std::unique_lock<std::mutex> lk(m_);
    if (closing_) return internal_error("write_mp4 '" + path_ + "': finish() twice");
    closing_ = true;
    audio_ = audio;
    cv_.notify_all();
    while (!done_) {
        if (cancel_requested()) abort_ = true; // the writer stops before its next batch of frames
        cv_.wait_for(lk, kPoll);
    }
    return error_;
}

double Mp4Stream::encode_seconds() const {
    std::lock_guard<std::mutex> lk(m_);
    return encode_seconds_;
}

int64_t Mp4Stream::peak_queued_frames() const {
    std::lock_guard<std::mutex> lk(m_);
    return peak_queued_;
}

} // namespace h3::pipeline
