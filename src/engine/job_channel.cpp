#include "engine/job_channel.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace h3 {

namespace {

constexpr uint32_t kTag = 0x434a3348; // "H3JC"
constexpr size_t kHeader = 16;
constexpr uint64_t kMaxPayload = uint64_t{1} << 36;

} // namespace

JobChannel::~JobChannel() {
    if (fd_ >= 0) ::close(fd_);
}

Status JobChannel::send(FrameType type, const void* data, size_t size) {
    uint8_t header[kHeader];
    const uint32_t t = static_cast<uint32_t>(type);
    const uint64_t n = size;
    std::memcpy(header, &kTag, 4);
    std::memcpy(header + 4, &t, 4);
    std::memcpy(header + 8, &n, 8);
    std::lock_guard<std::mutex> lock(send_mu_);
    for (const auto& [p, len] :
         {std::pair<const uint8_t*, size_t>{header, kHeader}, {static_cast<const uint8_t*>(data), size}}) {
        size_t done = 0;
        while (done < len) {
            const ssize_t w = ::send(fd_, p + done, len - done, MSG_NOSIGNAL);
            if (w < 0 && errno == EINTR) continue;
            if (w <= 0)
                return io_error(std::string("job channel: the other end is gone (") + std::strerror(errno) +
                                ")");
            done += static_cast<size_t>(w);
        }
    }
    return ok_status();
}

Result<std::optional<Frame>> JobChannel::receive(std::chrono::milliseconds timeout) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
        if (buffer_.size() >= kHeader) {
            uint32_t tag = 0, type = 0;
            uint64_t n = 0;
            std::memcpy(&tag, buffer_.data(), 4);
            std::memcpy(&type, buffer_.data() + 4, 4);
            std::memcpy(&n, buffer_.data() + 8, 8);
            if (tag != kTag || type < 1 || type > 6 || n > kMaxPayload)
                return io_error("job channel: a malformed frame (type " + std::to_string(type) + ", " +
                                std::to_string(n) + " bytes)");
            if (buffer_.size() >= kHeader + n) {
                Frame f;
                f.type = static_cast<FrameType>(type);
                f.payload.assign(buffer_.begin() + kHeader, buffer_.begin() + static_cast<long>(kHeader + n));
                buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<long>(kHeader + n));
                return std::optional<Frame>(std::move(f));
            }
        }
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
            deadline - std::chrono::steady_clock::now());
        pollfd pfd{fd_, POLLIN, 0};
        const int r = ::poll(&pfd, 1, static_cast<int>(std::max<int64_t>(0, left.count())));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) return io_error(std::string("job channel: poll: ") + std::strerror(errno));
        if (r == 0) return std::optional<Frame>();
        uint8_t chunk[65536];
        const ssize_t got = ::recv(fd_, chunk, sizeof chunk, 0);
        if (got < 0 && errno == EINTR) continue;
        if (got <= 0) return io_error("job channel: the other end closed it");
        buffer_.insert(buffer_.end(), chunk, chunk + got);
    }
}

} // namespace h3
