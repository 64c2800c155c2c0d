// pipeline::Mp4Stream (issue #45: the mux off the decode's critical path): frames pushed in uneven chunks
// through the encoder thread and its bounded queue, the audio at the end, decode back to exactly the frames
// (and audio) of write_mp4 on the whole clip; the queue never holds more than its bound; an encoder error
// (a full disk, a folder that does not exist) fails with the path named; a cancel stops the stream and
// leaves no file.
#include "pipeline/mp4_stream.h"

#include "io/media_reader.h"
#include "pipeline/quality_metrics.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace h3::pipeline {
namespace {

namespace fs = std::filesystem;

fs::path out_dir() {
    fs::path p = fs::path(H3_BINARY_DIR) / "test_mp4_stream";
    fs::create_directories(p);
    return p;
}

// A moving pattern with smooth and sharp parts (x264's work differs by region), [f, h, w, 3] u8.
Tensor test_frames(int f, int h, int w) {
    Tensor t = Tensor::host(Shape{f, h, w, 3}, DType::kU8);
    uint8_t* p = t.data_as<uint8_t>();
    for (int i = 0; i < f; ++i)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const bool square = std::abs(x - 10 - 2 * i) < 8 && std::abs(y - h / 2) < 8;
                for (int c = 0; c < 3; ++c)
                    p[((i * h + y) * w + x) * 3 + c] =
                        square ? static_cast<uint8_t>(230 - 60 * c)
                               : static_cast<uint8_t>((x * 2 + y * 3 + i * 5 + c * 70) & 255);
            }
    return t;
}

Tensor test_audio(int64_t n, int rate) {
    Tensor a = Tensor::host(Shape{2, n}, DType::kF32);
    for (int c = 0; c < 2; ++c)
        for (int64_t i = 0; i < n; ++i)
            a.data_as<float>()[c * n + i] =
                0.4f * std::sin(2.0f * static_cast<float>(M_PI) * (330.0f + 110.0f * c) * i / rate);
    return a;
}

Tensor frames_range(const Tensor& all, int64_t a, int64_t b) {
    Tensor part = Tensor::host(Shape{b - a, all.dim(1), all.dim(2), 3}, DType::kU8);
    std::memcpy(part.data(), all.slice(0, a, b).data(), part.nbytes());
    return part;
}

#ifdef H3_WITH_FFMPEG

TEST(Mp4Stream, ChunkedThroughTheEncoderThreadEqualsTheWholeFile) {
    const int nf = 40, h = 48, w = 80, rate = 32000;
    const Tensor frames = test_frames(nf, h, w), audio = test_audio(rate * 5 / 3, rate);
    const std::string whole = (out_dir() / "whole.mp4").string(),
                      streamed = (out_dir() / "streamed.mp4").string();
    ASSERT_TRUE(io::write_mp4(whole, frames, audio, rate).ok());
    {
        Mp4StreamOptions o;
        o.queue_frames = 16;
        Mp4Stream mux(streamed, {.audio_channels = 2, .sample_rate = rate}, o);
        int64_t at = 0;
        for (int64_t n : {7, 13, 1, 19}) { // uneven chunks, the last larger than the queue's bound
            ASSERT_TRUE(mux.push(frames_range(frames, at, at + n)).ok());
            at += n;
        }
        ASSERT_EQ(at, nf);
        const Status s = mux.finish(audio);
        ASSERT_TRUE(s.ok()) << s.to_string();
        EXPECT_LE(mux.peak_queued_frames(), 19) << "bounded: a chunk past the bound goes alone";
        EXPECT_GT(mux.encode_seconds(), 0.0);
    }
    auto a = io::read_mp4(whole);
    auto b = io::read_mp4(streamed);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
    ASSERT_EQ(a->frames.shape(), (Shape{nf, h, w, 3}));
    ASSERT_EQ(b->frames.shape(), a->frames.shape());
    // x264 is deterministic for the same settings and input: the decoded frames are the same bytes
    EXPECT_EQ(std::memcmp(a->frames.data(), b->frames.data(), a->frames.nbytes()), 0);
    ASSERT_TRUE(a->audio.defined() && b->audio.defined());
    ASSERT_EQ(a->audio.shape(), b->audio.shape());
    EXPECT_EQ(std::memcmp(a->audio.data(), b->audio.data(), a->audio.nbytes()), 0);
    EXPECT_EQ(b->sample_rate, rate);
    // and the source's (the sawtooth's hard colour edges lose to 4:2:0 chroma: ~25 dB, not a coding loss)
    auto m = frame_metrics(frames, b->frames);
    ASSERT_TRUE(m.ok());
    for (double p : m->psnr) EXPECT_GT(p, 22.0);
}

TEST(Mp4Stream, QueueBoundHoldsWhileTheEncoderIsBehind) {
    Mp4StreamOptions o;
    o.queue_frames = 8;
    const std::string path = (out_dir() / "bounded.mp4").string();
    Mp4Stream mux(path, {}, o); // no audio stream
    const Tensor frames = test_frames(48, 64, 96);
    for (int64_t at = 0; at < 48; at += 4) ASSERT_TRUE(mux.push(frames_range(frames, at, at + 4)).ok());
    ASSERT_TRUE(mux.finish(Tensor()).ok());
    EXPECT_LE(mux.peak_queued_frames(), 8);
    auto back = io::read_mp4(path);
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    EXPECT_EQ(back->frames.dim(0), 48);
    EXPECT_FALSE(back->audio.defined());
}

TEST(Mp4Stream, EncoderErrorsNameThePath) {
    const Tensor frames = test_frames(24, 64, 96);
    const Tensor audio = test_audio(32000, 32000);
    for (const std::string& path : {std::string("/dev/full"), (out_dir() / "missing" / "x.mp4").string()}) {
        SCOPED_TRACE(path);
        if (path == "/dev/full" && !fs::exists(path)) continue;
        Mp4Stream mux(path, {.audio_channels = 2, .sample_rate = 32000});
        Status s;
        for (int64_t at = 0; at < 24 && s.ok(); at += 8) s = mux.push(frames_range(frames, at, at + 8));
        if (s.ok()) s = mux.finish(audio);
        ASSERT_FALSE(s.ok());
        EXPECT_NE(s.to_string().find(path), std::string::npos) << s.to_string();
        EXPECT_FALSE(mux.push(frames_range(frames, 0, 1)).ok()) << "an error sticks";
    }
    // audio that is not the declared stream's
    const std::string path = (out_dir() / "mono.mp4").string();
    Mp4Stream mux(path, {.audio_channels = 2, .sample_rate = 32000});
    ASSERT_TRUE(mux.push(frames_range(frames, 0, 4)).ok());
    const Status s = mux.finish(Tensor::host(Shape{1, 1000}, DType::kF32));
    ASSERT_FALSE(s.ok());
    EXPECT_NE(s.to_string().find(path), std::string::npos) << s.to_string();
}

TEST(Mp4Stream, CancelStopsTheStreamAndRemovesTheFile) {
    std::atomic<bool> cancel{false};
    Mp4StreamOptions o;
    o.mp4.cancel = &cancel;
    const std::string path = (out_dir() / "cancelled.mp4").string();
    const Tensor frames = test_frames(32, 64, 96);
    {
        Mp4Stream mux(path, {.audio_channels = 2, .sample_rate = 32000}, o);
        ASSERT_TRUE(mux.push(frames_range(frames, 0, 16)).ok());
        cancel = true;
        const Status p = mux.push(frames_range(frames, 16, 32));
        EXPECT_EQ(p.code(), ErrorCode::kCancelled) << p.to_string();
        const Status s = mux.finish(test_audio(32000, 32000));
        EXPECT_EQ(s.code(), ErrorCode::kCancelled) << s.to_string();
    }
    EXPECT_FALSE(fs::exists(path)) << "a cancelled stream leaves no half-written file";
    // an abandoned stream (its producer failed elsewhere) stops and removes its file too
    {
        Mp4Stream mux(path, {.audio_channels = 2, .sample_rate = 32000});
        ASSERT_TRUE(mux.push(frames_range(frames, 0, 16)).ok());
    }
    EXPECT_FALSE(fs::exists(path));
}

#endif

} // namespace
} // namespace h3::pipeline

#ifdef H3_WITH_FFMPEG
namespace h3::pipeline {
namespace {

// H3_MUX_PRESETS=1: the x264 presets at the default crf on a synthetic 1344x768 clip (moving soft shapes over
// gradients with a little grain, 48 frames) and, with H3_MUX_PRESETS_CLIP=file, a decoded clip: encode
// seconds, bytes and mean PSNR against the source (a measurement, not a check; docs/benchmarks.md).
TEST(Mp4Stream, PresetTable) {
    if (!std::getenv("H3_MUX_PRESETS")) GTEST_SKIP() << "set H3_MUX_PRESETS=1 to measure";
    const int f = 48, h = 768, w = 1344;
    Tensor synth = Tensor::host(Shape{f, h, w, 3}, DType::kU8);
    uint32_t lcg = 1;
    for (int i = 0; i < f; ++i)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const double cx = 300 + 12.0 * i, cy = 380 + 80 * std::sin(i / 8.0);
                const double d2 = ((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (2 * 120.0 * 120.0);
                const double blob = 150 * std::exp(-d2);
                for (int c = 0; c < 3; ++c) {
                    lcg = lcg * 1664525u + 1013904223u;
                    const double grain = static_cast<double>(lcg >> 29) - 3.5; // ±3.5
                    const double base =
                        40 + 90.0 * x / w + 50.0 * y / h + 30 * c + blob * (c == 0 ? 1.0 : 0.4);
                    synth.data_as<uint8_t>()[((static_cast<int64_t>(i) * h + y) * w + x) * 3 + c] =
                        static_cast<uint8_t>(std::clamp(base + grain, 0.0, 255.0));
                }
            }
    std::vector<std::pair<std::string, Tensor>> clips = {{"synthetic 1344x768x48", synth}};
    if (const char* clip = std::getenv("H3_MUX_PRESETS_CLIP")) {
        auto m = io::read_mp4(clip);
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        clips.emplace_back(clip, m->frames);
    }
    for (const auto& [name, frames] : clips) {
        std::printf("%s (%lld frames %lldx%lld):\n", name.c_str(), static_cast<long long>(frames.dim(0)),
                    static_cast<long long>(frames.dim(2)), static_cast<long long>(frames.dim(1)));
        for (const char* preset : {"medium", "fast", "faster", "veryfast", "superfast", "ultrafast"}) {
            const std::string path = (out_dir() / (std::string("preset_") + preset + ".mp4")).string();
            io::Mp4Options o;
            o.preset = preset;
            const auto t0 = std::chrono::steady_clock::now();
            ASSERT_TRUE(io::write_mp4(path, frames, Tensor(), 0, o).ok());
            const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
            auto back = io::read_mp4(path);
            ASSERT_TRUE(back.ok());
            auto m = frame_metrics(frames, back->frames);
            ASSERT_TRUE(m.ok());
            double psnr = 0;
            for (double p : m->psnr) psnr += p / static_cast<double>(m->psnr.size());
            std::printf("  %-10s crf %d: %7.3f s  %9lld bytes  PSNR %.2f dB\n", preset, o.crf, s,
                        static_cast<long long>(fs::file_size(path)), psnr);
        }
    }
}

} // namespace
} // namespace h3::pipeline
#endif
