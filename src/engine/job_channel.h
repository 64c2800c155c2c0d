// The job channel between a server's front and the rank 0 of one of its replicas (issue #46): a stream
// socket (a socketpair the replica's rank 0 inherits) carrying frames — a 4-byte tag "H3JC", the frame type,
// the payload's length (8 bytes), the payload. The front sends kJob (the job's id and its input as bytes,
// pipeline/job_input_bytes.h), kCancel and kStop; rank 0 answers kReady once its engine and its group are
// up, kProgress (JSON) while a job runs and one kResult (JSON: the metrics, or the error) per job. Either end
// closing is the other's end of file: a rank that dies is noticed at once, not after a timeout.
#pragma once

#include "core/status.h"

#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace h3 {

enum class FrameType : uint32_t { kReady = 1, kJob = 2, kCancel = 3, kStop = 4, kProgress = 5, kResult = 6 };

struct Frame {
    FrameType type = FrameType::kReady;
    std::vector<uint8_t> payload;
    std::string text() const { return std::string(payload.begin(), payload.end()); }
};

class JobChannel {
public:
    explicit JobChannel(int fd) : fd_(fd) {} // takes ownership
    ~JobChannel();
    JobChannel(const JobChannel&) = delete;
    JobChannel& operator=(const JobChannel&) = delete;

    // Thread-safe (one frame at a time). An error when the other end is gone.
    Status send(FrameType type, const void* data, size_t size);
    Status send(FrameType type, const std::string& text) { return send(type, text.data(), text.size()); }
    // The next frame, or nullopt when none arrives within `timeout`; an error on end of file (the other
    // end closed or died) or a malformed frame. One reader at a time.
    Result<std::optional<Frame>> receive(std::chrono::milliseconds timeout);
    int fd() const { return fd_; }

private:
    int fd_ = -1;
    std::mutex send_mu_;
    std::vector<uint8_t> buffer_; // bytes received, not yet a whole frame
};

} // namespace h3
