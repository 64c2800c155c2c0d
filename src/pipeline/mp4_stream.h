// pipeline::Mp4Stream: the mux off the decode's critical path (issue #45). An encoder thread owns an
// io::Mp4Writer; the decode hands it each clip's frames as they are final (push), through a queue bounded in
// frames, and the audio at the end (finish). The writer opens at the first frames (their size), declaring
// the audio stream given here, so the frames never wait for the audio decode.
//
//   Mp4Stream mux(path, {.audio_channels = 2, .sample_rate = 32000}, options);
//   for each clip: H3_TRY(mux.push(frames));   // blocks while the queue is full
//   H3_TRY(mux.finish(wave));                  // the last frames encoded, the audio muxed, the trailer
//   written
//
// Errors: the encoder's first error (naming the path) is what push and finish return from then on; the
// cancel flag (options.mp4.cancel) stops the encoder before its next batch of frames and a push waiting for
// room within ~50 ms. Without a successful finish the destructor stops the thread and removes the file it
// began (a half-written MP4 is no output).
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "io/media_writer.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace h3::pipeline {

struct Mp4StreamOptions {
    io::Mp4Options mp4;
    // Frames the queue holds before push waits (a chunk larger than this goes through alone): 64 frames
    // of 1344x768 RGB are 198 MB.
    int64_t queue_frames = 64;
};

class Mp4Stream {
public:
    // audio: the stream declared at open (audio_channels 0: none); width / height come from the frames.
    Mp4Stream(std::string path, io::Mp4Streams audio, Mp4StreamOptions options = {});
    ~Mp4Stream();
    Mp4Stream(const Mp4Stream&) = delete;
    Mp4Stream& operator=(const Mp4Stream&) = delete;

    // frames [n, H, W, 3] host u8, contiguous; the tensor is kept (not copied) until encoded.
    Status push(Tensor frames);
    // Waits for the queued frames, then muxes `audio` ([C, N] f32, or undefined when none was declared) and
    // writes the trailer. Once.
    Status finish(const Tensor& audio);

    const std::string& path() const { return path_; }
    // Seconds the encoder thread spent encoding (overlapped with the decode) and the most frames queued.
    double encode_seconds() const;
    int64_t peak_queued_frames() const;

private:
    void run();
    bool cancel_requested() const { return user_cancel_ && user_cancel_->load(); }

    std::string path_;
    io::Mp4Streams streams_;
    Mp4StreamOptions options_;
    const std::atomic<bool>* user_cancel_; // options.mp4.cancel
    // What the writer checks before every batch of frames: set by the destructor, and by the encoder
    // thread when it sees the caller's flag between chunks.
    std::atomic<bool> abort_{false};
    mutable std::mutex m_;
    std::condition_variable cv_; // both directions: room in the queue, work for the encoder
    std::deque<Tensor> queue_;
    int64_t queued_frames_ = 0, peak_queued_ = 0;
    bool closing_ = false, stop_ = false, done_ = false, finished_ = false, opened_ = false;
    Tensor audio_;
    Status error_;
    double encode_seconds_ = 0;
    std::thread thread_;
};

} // namespace h3::pipeline
