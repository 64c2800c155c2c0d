// A job's input as bytes (pipeline/job_input_bytes.h, issue #46: what a server sends a replica's rank 0 and
// rank 0 broadcasts to its ranks): every field survives the round trip, so the receiving process builds the
// same GenerationJob; a damaged payload is refused naming what is wrong; JobBuilderOptions::keep_source keeps
// the input with the drawn seed resolved. The job channel (engine/job_channel.h) carries frames that arrive
// in pieces, times out without one, and reports the other end's close.
#include "engine/job_channel.h"
#include "model/tiny/tiny_checkpoint.h"
#include "pipeline/job_builder.h"
#include "pipeline/job_input_bytes.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <thread>

namespace h3 {
namespace {

namespace fs = std::filesystem;

io::RgbImage image(int w, int h, uint8_t seed) {
    io::RgbImage im(w, h);
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>(i * 7 + seed);
    return im;
}

Tensor ramp(Shape s, DType dt) {
    Tensor t = Tensor::host(s, dt);
    auto* b = static_cast<uint8_t*>(t.data());
    for (size_t i = 0; i < t.nbytes(); ++i) b[i] = static_cast<uint8_t>(i * 13 + 1);
    return t;
}

pipeline::JobInput full_input() {
    pipeline::JobInput in;
    in.task = "ref2va";
    in.prompt = "a red fox \xC3\xA9";
    in.prompt_embeds = pipeline::Conditioning{ramp(Shape{3, 4}, DType::kF32), {0, 1, 0}};
    in.prompt_embeds_source = "upload";
    in.random_prompt_embeds = 5;
    in.size = "64x32";
    in.aspect = "2:1";
    in.seconds = 4.5;
    in.frames = 107;
    in.num_inference_steps = 7;
    in.seed = (uint64_t{1} << 53) - 3;
    in.cache = nlohmann::json{{"dbcache", {{"Fn", 1}}}};
    in.quality = "high";
    in.attention = "vsa:sparsity=0.9";
    io::DecodedImage kf;
    kf.image = image(5, 3, 1);
    kf.format = io::ImageFormat::kPng;
    kf.source_mode = "RGBA";
    kf.stored_width = 3;
    kf.stored_height = 5;
    kf.orientation = 6;
    in.first_frame = kf;
    kf.image = image(4, 4, 2);
    in.last_frame = kf;
    pipeline::ReferenceMedia img;
    img.source = "reference 1";
    img.image = image(6, 2, 3);
    pipeline::ReferenceMedia vid;
    vid.kind = pipeline::ReferenceKind::kVideo;
    vid.source = "reference 2";
    vid.frames = ramp(Shape{2, 3, 4, 3}, DType::kU8);
    vid.fps = 25;
    vid.audio = ramp(Shape{2, 9}, DType::kF32);
    vid.sample_rate = 44100;
    vid.truncated = true;
    in.references = {img, vid};
    in.outputs.latents = "/tmp/x/latents.safetensors";
    in.outputs.media.mp4 = "/tmp/x/video.mp4";
    in.outputs.media.wav = "/tmp/x/audio.wav";
    in.adapters.lora = {{"a.safetensors", 0.5}, {"b", 1.25}};
    in.adapters.lora_mode = "runtime";
    in.adapters.lora_strict = true;
    in.adapters.preset = "turbo";
    in.adapters.video_shift = 3.5;
    return in;
}

bool same(const Tensor& a, const Tensor& b) {
    if (a.defined() != b.defined()) return false;
    if (!a.defined()) return true;
    return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
           std::memcmp(a.data(), b.data(), a.nbytes()) == 0;
}

TEST(JobInputBytes, EveryFieldSurvivesTheRoundTrip) {
    const pipeline::JobInput in = full_input();
    auto back = pipeline::unpack_job_input(pipeline::pack_job_input(in));
    ASSERT_TRUE(back.ok()) << back.status().to_string();
    const pipeline::JobInput& b = *back;
    EXPECT_EQ(b.task, in.task);
    EXPECT_EQ(b.prompt, in.prompt);
    ASSERT_TRUE(b.prompt_embeds);
    EXPECT_TRUE(same(b.prompt_embeds->embeddings, in.prompt_embeds->embeddings));
    EXPECT_EQ(b.prompt_embeds->tags, in.prompt_embeds->tags);
    EXPECT_EQ(b.prompt_embeds_source, "upload");
    EXPECT_EQ(b.random_prompt_embeds, 5);
    EXPECT_EQ(b.size, in.size);
    EXPECT_EQ(b.aspect, in.aspect);
    EXPECT_EQ(b.seconds, 4.5);
    EXPECT_EQ(b.frames, 107);
    EXPECT_EQ(b.num_inference_steps, 7);
    EXPECT_EQ(b.seed, in.seed);
    EXPECT_EQ(b.cache, in.cache);
    EXPECT_EQ(b.quality, "high");
    EXPECT_EQ(b.attention, in.attention);
    for (auto [got, want] : {std::pair{&b.first_frame, &in.first_frame}, {&b.last_frame, &in.last_frame}}) {
        ASSERT_TRUE(*got);
        EXPECT_EQ((*got)->image.width, (*want)->image.width);
        EXPECT_EQ((*got)->image.height, (*want)->image.height);
        EXPECT_EQ((*got)->image.pixels, (*want)->image.pixels);
        EXPECT_EQ((*got)->format, io::ImageFormat::kPng);
        EXPECT_EQ((*got)->source_mode, "RGBA");
        EXPECT_EQ((*got)->stored_width, 3);
        EXPECT_EQ((*got)->orientation, 6);
    }
    ASSERT_EQ(b.references.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        const auto &g = b.references[i], &w = in.references[i];
        EXPECT_EQ(g.kind, w.kind);
        EXPECT_EQ(g.source, w.source);
        EXPECT_EQ(g.image.pixels, w.image.pixels);
        EXPECT_EQ(g.image.width, w.image.width);
        EXPECT_TRUE(same(g.frames, w.frames));
        EXPECT_TRUE(same(g.audio, w.audio));
        EXPECT_EQ(g.fps, w.fps);
        EXPECT_EQ(g.sample_rate, w.sample_rate);
        EXPECT_EQ(g.truncated, w.truncated);
    }
    EXPECT_EQ(b.outputs.latents, in.outputs.latents);
    EXPECT_EQ(b.outputs.media.mp4, in.outputs.media.mp4);
    EXPECT_EQ(b.outputs.media.wav, in.outputs.media.wav);
    EXPECT_EQ(b.outputs.media.png_dir, "");
    ASSERT_EQ(b.adapters.lora.size(), 2u);
    EXPECT_EQ(b.adapters.lora[1].path, "b");
    EXPECT_EQ(b.adapters.lora[1].scale, 1.25);
    EXPECT_EQ(b.adapters.lora_mode, "runtime");
    EXPECT_EQ(b.adapters.lora_strict, true);
    EXPECT_EQ(b.adapters.preset, "turbo");
    EXPECT_EQ(b.adapters.video_shift, 3.5);
    EXPECT_FALSE(b.adapters.audio_shift);

    // an empty input stays empty (absent stays absent)
    auto empty = pipeline::unpack_job_input(pipeline::pack_job_input({}));
    ASSERT_TRUE(empty.ok()) << empty.status().to_string();
    EXPECT_FALSE(empty->prompt);
    EXPECT_FALSE(empty->seed);
    EXPECT_FALSE(empty->first_frame);
    EXPECT_FALSE(empty->prompt_embeds);
    EXPECT_TRUE(empty->references.empty());
}

TEST(JobInputBytes, DamagedPayloadsAreRefused) {
    const std::vector<uint8_t> bytes = pipeline::pack_job_input(full_input());
    for (size_t cut : {size_t{0}, size_t{3}, size_t{40}, bytes.size() / 2, bytes.size() - 1}) {
        auto r = pipeline::unpack_job_input(std::vector<uint8_t>(bytes.begin(), bytes.begin() + cut));
        ASSERT_FALSE(r.ok()) << cut;
        EXPECT_NE(r.status().message().find("job input"), std::string::npos) << r.status().to_string();
    }
    std::vector<uint8_t> longer = bytes;
    longer.push_back(0);
    auto r = pipeline::unpack_job_input(longer);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("left over"), std::string::npos) << r.status().to_string();
    std::vector<uint8_t> tag = bytes;
    tag[0] ^= 1;
    EXPECT_FALSE(pipeline::unpack_job_input(tag).ok());
}

TEST(JobInputBytes, KeepSourceResolvesTheSeedAndRebuildsTheSameJob) {
    const fs::path d = fs::path(H3_BINARY_DIR) / "test_job_input_bytes" / "tiny";
    if (!fs::exists(d / "model_index.json")) {
        Status s = model::write_tiny_checkpoint({.dir = d.string(), .seed = 3});
        ASSERT_TRUE(s.ok()) << s.to_string();
    }
    auto store = runtime::ModelStore::open(d.string(), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    const pipeline::JobBuilder keeping((*store)->info(), {.keep_source = true});
    const pipeline::JobBuilder plain((*store)->info());
    pipeline::JobInput in;
    in.prompt = "a ball";
    in.size = "64x32";
    in.frames = 107;
    in.num_inference_steps = 4;
    in.outputs.latents = (d.parent_path() / "l.safetensors").string();
    auto without = plain.build(in);
    ASSERT_TRUE(without.ok()) << without.status().to_string();
    EXPECT_FALSE(without->source);
    auto job = keeping.build(in); // no seed: the builder draws one, and the kept input carries it
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_TRUE(job->source);
    ASSERT_TRUE(job->source->seed);
    EXPECT_EQ(*job->source->seed, job->seed);
    auto again = plain.build(*pipeline::unpack_job_input(pipeline::pack_job_input(*job->source)));
    ASSERT_TRUE(again.ok()) << again.status().to_string();
    EXPECT_EQ(again->seed, job->seed);
    EXPECT_EQ(again->steps, job->steps);
    EXPECT_EQ(again->prompt, job->prompt);
    EXPECT_EQ(again->geometry.width, job->geometry.width);
    EXPECT_EQ(again->geometry.latent_frames, job->geometry.latent_frames);
}

TEST(JobChannel, FramesInPiecesTimeoutsAndTheOtherEndClosing) {
    int sv[2];
    ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    JobChannel a(sv[0]);
    // nothing sent: nullopt after the timeout
    JobChannel b(sv[1]);
    auto none = b.receive(std::chrono::milliseconds(20));
    ASSERT_TRUE(none.ok()) << none.status().to_string();
    EXPECT_FALSE(*none);
    // a big frame and a small one, read back whole and in order
    std::vector<uint8_t> big(300000);
    for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<uint8_t>(i * 31);
    std::thread writer([&] {
        ASSERT_TRUE(a.send(FrameType::kJob, big.data(), big.size()).ok());
        ASSERT_TRUE(a.send(FrameType::kCancel, std::string("7")).ok());
    });
    auto f1 = b.receive(std::chrono::seconds(10));
    ASSERT_TRUE(f1.ok() && *f1) << f1.status().to_string();
    EXPECT_EQ((*f1)->type, FrameType::kJob);
    EXPECT_EQ((*f1)->payload, big);
    auto f2 = b.receive(std::chrono::seconds(10));
    ASSERT_TRUE(f2.ok() && *f2);
    EXPECT_EQ((*f2)->type, FrameType::kCancel);
    EXPECT_EQ((*f2)->text(), "7");
    writer.join();
    // a header cut short, then the other end gone: an error, not a hang
    const uint8_t partial[5] = {'H', '3', 'J', 'C', 2};
    ASSERT_EQ(::write(sv[0], partial, sizeof partial), 5);
    ::shutdown(sv[0], SHUT_RDWR);
    auto gone = b.receive(std::chrono::seconds(10));
    ASSERT_FALSE(gone.ok());
    EXPECT_NE(gone.status().message().find("closed"), std::string::npos) << gone.status().to_string();
    EXPECT_FALSE(b.send(FrameType::kResult, std::string("{}")).ok());
}

} // namespace
} // namespace h3
