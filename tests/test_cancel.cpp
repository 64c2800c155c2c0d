// Cancellation reaches inside every stage (issue #42): a job cancelled while one of its stages runs at the
// release size on the CPU (1344x768, 124 frames; 2048-px reference images) ends with kCancelled within
// kBound — text encode, the fl2va keyframe encoder, the ref2va video and audio encoders, the vision tower,
// denoise (one CPU attention call over ~37k rows), the video and audio decoders, the muxer. Each case starts
// the stage, waits for its progress event (the generator's JobProgress::part, DecodeOptions::on_stage), lets
// it run kSettle and sets the flag; where the stage is long on the tiny checkpoint the case also requires
// that it was still running then (else it would prove nothing). Before ops read the flag (ops/cancel.h) a
// single attention, GEMM or convolution call ran on for seconds to minutes after the flag was set.
#include "io/media_writer.h"
#include "model/tiny/tiny_checkpoint.h"
#include "ops/cancel.h"
#include "ops/communicator.h"
#include "ops/ops.h"
#include "pipeline/decode.h"
#include "pipeline/generator.h"
#include "pipeline/job_builder.h"
#include "pipeline/mp4_stream.h"
#include "pipeline/text_conditioner.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <thread>

namespace fs = std::filesystem;
using namespace h3;
using namespace std::chrono_literals;
using pipeline::Stage;

namespace {

const fs::path kWork = fs::path(H3_BINARY_DIR) / "test_cancel";
constexpr auto kBound = 2s;     // cancel → kCancelled
constexpr auto kSettle = 300ms; // how long a stage runs before the cancel
constexpr auto kReach = 240s;   // how long the stage may take to start (a loaded 2-core machine)

std::string tiny() {
    const fs::path d = kWork / "tiny";
    if (!fs::exists(d / "model_index.json")) {
        fs::remove_all(d);
        Status s = model::write_tiny_checkpoint({.dir = d.string(), .seed = 5});
        EXPECT_TRUE(s.ok()) << s.to_string();
    }
    return d.string();
}

struct Measured {
    Status status;
    double latency_s = -1; // flag set → the call returned
    bool reached = false;  // the stage started
    bool running = false;  // the call had not returned when the flag was set
};

// Runs work(flag, started) on a thread; once it calls started() (or returns), waits `settle` and sets the
// flag.
Measured
cancel_after_start(const std::function<Status(const std::atomic<bool>*, std::function<void()>)>& work,
                   std::chrono::milliseconds settle = kSettle) {
    std::atomic<bool> flag{false}, started{false}, done{false};
    Measured m;
    std::chrono::steady_clock::time_point end;
    std::thread t([&] {
        m.status = work(&flag, [&] { started = true; });
        end = std::chrono::steady_clock::now();
        done = true;
    });
    const auto give_up = std::chrono::steady_clock::now() + kReach;
    while (!started && !done && std::chrono::steady_clock::now() < give_up) std::this_thread::sleep_for(5ms);
    m.reached = started;
    if (started) std::this_thread::sleep_for(settle);
    m.running = !done;
    const auto t0 = std::chrono::steady_clock::now();
    flag = true;
    t.join();
    m.latency_s = std::chrono::duration<double>(end - t0).count();
    return m;
}

void expect_cancelled_in_time(const Measured& m, const std::string& what, bool must_be_running) {
    std::printf("[ cancel ] %-34s latency %.3f s (%s)\n", what.c_str(), m.latency_s,
                m.running ? "cancelled while running" : "had already returned");
    ::testing::Test::RecordProperty(what + " latency_ms", static_cast<int>(std::lround(m.latency_s * 1000)));
    ASSERT_TRUE(m.reached) << what << ": the stage never started";
    if (must_be_running) {
        EXPECT_TRUE(m.running) << what << ": the stage ended before the cancel";
    }
    if (!m.running) return;
    EXPECT_EQ(m.status.code(), ErrorCode::kCancelled) << what << ": " << m.status.to_string();
    EXPECT_LT(m.latency_s, std::chrono::duration<double>(kBound).count()) << what;
}

class CancelStages : public ::testing::Test {
protected:
    static void SetUpTestSuite() {
        auto s = runtime::ModelStore::open(tiny(), runtime::PlacementPlan::per_job(Device::cpu()));
        ASSERT_TRUE(s.ok()) << s.status().to_string();
        store_ = std::move(s).value().release();
        auto g = pipeline::Generator::create(*store_);
        ASSERT_TRUE(g.ok()) << g.status().to_string();
        generator_ = std::move(g).value().release();
    }
    static void TearDownTestSuite() {
        delete generator_;
        delete store_;
    }

    static pipeline::JobInput release_size(const std::string& prompt) {
        pipeline::JobInput in;
        in.prompt = prompt;
        in.size = "1344x768";
        in.frames = 124;
        in.num_inference_steps = 2;
        in.seed = 3;
        in.outputs.latents = (kWork / "unused.safetensors").string();
        return in;
    }

    // Builds `in` and runs it, cancelling kSettle after the generator reports (stage, part).
    static Measured cancel_job_at(pipeline::JobInput in, Stage stage, const std::string& part,
                                  pipeline::JobBuilderOptions options = {},
                                  std::chrono::milliseconds settle = kSettle) {
        const pipeline::JobBuilder builder(store_->info(), options);
        auto job = builder.build(std::move(in));
        EXPECT_TRUE(job.ok()) << job.status().to_string();
        if (!job.ok()) return {};
        return cancel_after_start(
            [&](const std::atomic<bool>* flag, std::function<void()> started) {
                pipeline::JobEvents ev;
                ev.cancel = flag;
                ev.progress = [&](const pipeline::JobProgress& p) {
                    if (p.stage == stage && part == p.part) started();
                };
                return generator_->run(*job, ev).status();
            },
            settle);
    }

    static io::RgbImage pattern(int w, int h) {
        io::RgbImage im(w, h);
        for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>((i * 13) % 251);
        return im;
    }

    static runtime::ModelStore* store_;
    static pipeline::Generator* generator_;
};

runtime::ModelStore* CancelStages::store_ = nullptr;
pipeline::Generator* CancelStages::generator_ = nullptr;

} // namespace

TEST_F(CancelStages, TextEncode) {
    // ~24k prompt tokens: one causal attention call of the language stack takes seconds
    std::string prompt;
    while (prompt.size() < 24000) prompt += "a red ball bounces ";
    expect_cancelled_in_time(cancel_job_at(release_size(prompt), Stage::kEncode, "text"), "text encode",
                             true);
}

TEST_F(CancelStages, KeyframeEncoder) {
    pipeline::JobInput in = release_size("a keyframe");
    io::DecodedImage first;
    first.image = pattern(1344, 768);
    in.first_frame = first;
    expect_cancelled_in_time(cancel_job_at(in, Stage::kEncode, "keyframes"), "fl2va keyframe encoder", true);
}

TEST_F(CancelStages, ReferenceVideoEncoder) {
    pipeline::JobInput in = release_size("a referenced clip");
    pipeline::ReferenceMedia v;
    v.kind = pipeline::ReferenceKind::kVideo;
    v.source = "clip";
    v.frames = Tensor::host(Shape{124, 432, 768, 3}, DType::kU8);
    for (int64_t i = 0; i < v.frames.numel(); ++i)
        v.frames.data_as<uint8_t>()[i] = static_cast<uint8_t>(i % 241);
    in.references = {v};
    expect_cancelled_in_time(cancel_job_at(in, Stage::kEncode, "reference video"), "ref2va video encoder",
                             true);
}

TEST_F(CancelStages, ReferenceAudioEncoder) {
    pipeline::JobInput in = release_size("a referenced sound");
    pipeline::ReferenceMedia image, audio;
    image.kind = pipeline::ReferenceKind::kImage;
    image.source = "image";
    image.image = pattern(96, 64);
    audio.kind = pipeline::ReferenceKind::kAudio;
    audio.source = "sound";
    audio.sample_rate = 32000;
    audio.audio = Tensor::host(Shape{2, 32000 * 6}, DType::kF32);
    for (int64_t i = 0; i < audio.audio.numel(); ++i)
        audio.audio.data_as<float>()[i] = 0.3f * std::sin(0.02f * i);
    in.references = {image, audio};
    pipeline::JobBuilderOptions o;
    o.reference_image_edge = 64; // the image's encodings stay short: the audio encoder is the stage here
    expect_cancelled_in_time(cancel_job_at(in, Stage::kEncode, "reference audio", o), "ref2va audio encoder",
                             false);
}

TEST_F(CancelStages, VisionTower) {
    // a reference image at the release's 2048-px short edge (what normalize_references makes of a larger
    // one): ~29k patches in each attention call of the tower. Through the conditioner the generator uses,
    // without the job's video VAE encoding of the same image before it (minutes on this CPU).
    auto text = store_->text_encoder();
    ASSERT_TRUE(text.ok()) << text.status().to_string();
    auto vision = store_->vision_tower();
    ASSERT_TRUE(vision.ok()) << vision.status().to_string();
    auto processors = pipeline::load_processor_configs(store_->info().root);
    ASSERT_TRUE(processors.ok()) << processors.status().to_string();
    auto conditioner = pipeline::TextConditioner::over(**text, &**vision, *processors);
    ASSERT_TRUE(conditioner.ok()) << conditioner.status().to_string();
    pipeline::ConditionerRequest rq;
    rq.prompt = "a referenced picture";
    pipeline::ConditionerReference ref;
    ref.kind = pipeline::ReferenceKind::kImage;
    const io::RgbImage im = pattern(3640, 2048);
    ref.image = {.width = im.width, .height = im.height, .rgb = im.pixels};
    rq.references = {ref};
    expect_cancelled_in_time(
        cancel_after_start([&](const std::atomic<bool>* flag, std::function<void()> started) {
            pipeline::ConditionerOptions o;
            o.cancel = flag;
            o.progress = [&](const pipeline::ConditionerProgress& p) {
                if (p.stage == "vision") started();
            };
            return (*conditioner)->encode(rq, o).status();
        }),
        "vision tower", true);
}

TEST_F(CancelStages, DenoiseCpuAttention) {
    // 6 s in: past the noise and the request's setup, inside the first forward's attention over ~37k rows
    expect_cancelled_in_time(cancel_job_at(release_size("a red ball"), Stage::kDenoise, "", {}, 6000ms),
                             "denoise", true);
}

// ---- the ops themselves: a flag set while one long CPU call runs stops it within the bound; a flag set
// before a call stops it before any work; without a scope nothing changes.
namespace {

Tensor filled(const Shape& s, float scale) {
    Tensor t = Tensor::host(s, DType::kF32);
    for (int64_t i = 0; i < t.numel(); ++i) t.data_as<float>()[i] = scale * std::sin(0.001f * i + 0.3f);
    return t;
}

// `op` runs on a thread inside a CancelScope of a flag set kSettle after it started.
Measured cancel_op(const std::function<Status()>& op) {
    return cancel_after_start([&](const std::atomic<bool>* flag, std::function<void()> started) {
        const ops::CancelScope scope(flag);
        started();
        return op();
    });
}

} // namespace

TEST(CancelOps, ALongCpuCallStopsWithinTheBound) {
    const ops::Context cpu = ops::Context::cpu();
    { // one attention call over 24k rows, 2 heads of 32 (the release-size denoise's shape on the demo DiT)
        const Tensor q = filled({24000, 2, 32}, 0.5f), k = filled({24000, 2, 32}, 0.4f),
                     v = filled({24000, 2, 32}, 1.0f);
        Tensor o = Tensor::host(q.shape(), DType::kF32);
        expect_cancelled_in_time(cancel_op([&] { return ops::attention(cpu, {}, q, k, v, o); }),
                                 "op attention", true);
    }
    { // one GEMM of 4096 x 4096 x 4096
        const Tensor x = filled({4096, 4096}, 0.1f), w = filled({4096, 4096}, 0.1f);
        Tensor y = Tensor::host(Shape{4096, 4096}, DType::kF32);
        expect_cancelled_in_time(cancel_op([&] { return ops::gemm(cpu, {}, x, w, Tensor(), y); }), "op gemm",
                                 true);
    }
    { // one conv3d of 64 → 64 channels over 5 causal frames of 448x256 (~6e10 multiply-adds)
        const Tensor x = filled({1, 64, 5, 256, 448}, 0.5f), w = filled({64, 64, 3, 3, 3}, 0.05f);
        Tensor y = Tensor::host(Shape{1, 64, 5, 256, 448}, DType::kF32);
        const ops::Conv3dParams p{
            .pad_front = 2, .pad_top = 1, .pad_bottom = 1, .pad_left = 1, .pad_right = 1};
        expect_cancelled_in_time(cancel_op([&] { return ops::conv3d(cpu, p, x, w, Tensor(), y); }),
                                 "op conv3d", true);
    }
}

TEST(CancelOps, AFlagSetBeforehandStopsEveryCpuOpAndNoScopeChangesNothing) {
    const ops::Context cpu = ops::Context::cpu();
    const Tensor x = filled({64, 32}, 1.0f), w = filled({16, 32}, 1.0f);
    Tensor y = Tensor::host(Shape{64, 16}, DType::kF32);
    const Tensor q = filled({40, 2, 16}, 1.0f);
    Tensor o = Tensor::host(q.shape(), DType::kF32);
    std::atomic<bool> flag{true};
    {
        const ops::CancelScope scope(&flag);
        EXPECT_TRUE(ops::cancel_requested());
        const Status g = ops::gemm(cpu, {}, x, w, Tensor(), y);
        EXPECT_EQ(g.code(), ErrorCode::kCancelled);
        EXPECT_NE(g.message().find("gemm: cancelled"), std::string::npos) << g.message();
        EXPECT_EQ(ops::attention(cpu, {}, q, q, q, o).code(), ErrorCode::kCancelled);
        EXPECT_EQ(ops::silu(cpu, y, y).code(), ErrorCode::kCancelled);
        { // a nested scope without a flag keeps the job's
            const ops::CancelScope inner(nullptr);
            EXPECT_EQ(ops::gemm(cpu, {}, x, w, Tensor(), y).code(), ErrorCode::kCancelled);
        }
    }
    EXPECT_FALSE(ops::cancel_requested());
    EXPECT_TRUE(ops::gemm(cpu, {}, x, w, Tensor(), y).ok());
    EXPECT_TRUE(ops::attention(cpu, {}, q, q, q, o).ok());
}

// A rank waiting for a peer that never comes reads the job's flag: the group is aborted and every rank's
// collective returns kCancelled (not the 5-minute timeout).
TEST(CancelOps, ACollectiveWaitEndsOnCancel) {
    auto group = ops::CpuCommGroup::create(2);
    auto r0 = group->communicator(0);
    std::atomic<bool> flag{false};
    Tensor x = filled({16}, 1.0f);
    Status s;
    std::chrono::steady_clock::time_point end;
    std::thread t([&] {
        const ops::CancelScope scope(&flag);
        s = r0->all_reduce_sum(ops::Context::cpu(), x); // rank 1 never arrives
        end = std::chrono::steady_clock::now();
    });
    std::this_thread::sleep_for(200ms);
    const auto t0 = std::chrono::steady_clock::now();
    flag = true;
    t.join();
    EXPECT_EQ(s.code(), ErrorCode::kCancelled) << s.to_string();
    EXPECT_LT(end - t0, 500ms);
    Tensor y = filled({16}, 1.0f);
    EXPECT_EQ(group->communicator(1)->all_reduce_sum(ops::Context::cpu(), y).code(), ErrorCode::kCancelled);
}

// The decoders and the muxer at the release size, on latents / frames made here (a job reaches them only
// after a long denoise).
TEST_F(CancelStages, VideoDecodeAudioDecodeAndMux) {
    auto g = pipeline::resolve_geometry({.width = 1344, .height = 768, .frames = 124}, store_->spec());
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    const ops::Context& ctx = store_->context();
    Tensor video = Tensor::host(
        Shape{1, store_->spec().latent_channels, g->latent_frames, g->latent_h, g->latent_w}, DType::kF32);
    for (int64_t i = 0; i < video.numel(); ++i) video.data_as<float>()[i] = 0.5f * std::sin(0.37f * i);
    {
        auto vae = store_->video_decoder();
        ASSERT_TRUE(vae.ok()) << vae.status().to_string();
        expect_cancelled_in_time(
            cancel_after_start(
                [&](const std::atomic<bool>* flag, std::function<void()> started) {
                    started();
                    return pipeline::decode_video_frames(ctx, **vae, video, {.cancel = flag}).status();
                },
                1500ms), // inside a decoder call by then
            "video decode", true);
    }
    {
        auto vae = store_->audio_decoder();
        ASSERT_TRUE(vae.ok()) << vae.status().to_string();
        Tensor audio =
            Tensor::host(Shape{2, store_->spec().audio_latent_channels, g->audio_latents}, DType::kF32);
        for (int64_t i = 0; i < audio.numel(); ++i) audio.data_as<float>()[i] = 0.5f * std::sin(0.11f * i);
        expect_cancelled_in_time(
            cancel_after_start([&](const std::atomic<bool>* flag, std::function<void()> started) {
                started();
                return pipeline::decode_audio_wave(ctx, **vae, audio, {.cancel = flag}).status();
            }),
            "audio decode", false);
    }
#ifdef H3_WITH_FFMPEG
    Tensor frames = Tensor::host(Shape{g->frames, g->height, g->width, 3}, DType::kU8);
    for (int64_t i = 0; i < frames.numel(); ++i)
        frames.data_as<uint8_t>()[i] = static_cast<uint8_t>((i * 7) % 253);
    Tensor wave = Tensor::host(Shape{2, int64_t{g->frames} * 32000 / 24}, DType::kF32);
    for (int64_t i = 0; i < wave.numel(); ++i) wave.data_as<float>()[i] = 0.2f * std::sin(0.01f * i);
    const std::string mp4 = (kWork / "mux.mp4").string();
    expect_cancelled_in_time(
        cancel_after_start([&](const std::atomic<bool>* flag, std::function<void()> started) {
            pipeline::DecodeOptions o;
            o.cancel = flag;
            started();
            return pipeline::write_media({.mp4 = mp4}, frames, wave, 32000, o);
        }),
        "mux", true);
    // the request's streamed mux (issue #45): clips pushed to the encoder thread, the audio at the end
    const std::string streamed = (kWork / "streamed.mp4").string();
    expect_cancelled_in_time(
        cancel_after_start([&](const std::atomic<bool>* flag, std::function<void()> started) {
            pipeline::Mp4StreamOptions o;
            o.mp4.cancel = flag;
            pipeline::Mp4Stream mux(streamed, {.audio_channels = 2, .sample_rate = 32000}, o);
            started();
            for (int64_t f0 = 0; f0 < frames.dim(0); f0 += 29) {
                const int64_t n = std::min<int64_t>(29, frames.dim(0) - f0);
                Tensor part = Tensor::host(Shape{n, frames.dim(1), frames.dim(2), 3}, DType::kU8);
                std::memcpy(part.data(), frames.slice(0, f0, f0 + n).data(), part.nbytes());
                H3_TRY(mux.push(std::move(part)));
            }
            return mux.finish(wave);
        }),
        "streamed mux", true);
    EXPECT_FALSE(fs::exists(streamed)) << "a cancelled stream leaves no file";
#endif
}
