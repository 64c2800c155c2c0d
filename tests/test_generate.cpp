// End to end on the DiT golden model A (tests/data/dit/A, fp32): generate_latents vs the PyTorch reference
// loop (make_pipeline_goldens.py), t2va and fl2va; progress callbacks; cancellation.
#include "io/safetensors.h"
#include "model/dit/dit_model.h"
#include "model/latent_spec.h"
#include "pipeline/generate.h"

#include "generate_setup.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace h3;
using namespace h3::pipeline;

namespace {

Geometry geometry_for(const model::DitModel& m) {
    return test::geometry_64x32(m);
}

std::string data(const std::string& f) {
    return std::string(H3_SOURCE_DIR) + "/tests/data/" + f;
}

std::unique_ptr<model::DitModel> load_model() {
    auto ck = model::open_dit_checkpoint(data("dit/A/diffusers"));
    EXPECT_TRUE(ck.ok()) << ck.status().to_string();
    auto m = model::DitModel::load(*ck, {.device = Device::cpu(), .precision = model::DitPrecision::kFp32},
                                   ops::Context::cpu());
    EXPECT_TRUE(m.ok()) << m.status().to_string();
    return std::move(m).value();
}

Tensor golden(const io::SafetensorsFile& f, const std::string& n) {
    auto t = f.tensor(n);
    EXPECT_TRUE(t.ok()) << n;
    return *t->to(Device::cpu());
}

using test::rel_err;

Conditioning conditioning(const io::SafetensorsFile& f) {
    Conditioning c;
    c.embeddings = golden(f, "prompt_embeds");
    c.tags.assign(static_cast<size_t>(c.embeddings.dim(0)), kTagText);
    if (f.contains("prompt_tags")) {
        auto t = golden(f, "prompt_tags");
        for (int64_t i = 0; i < t.numel(); ++i) c.tags[static_cast<size_t>(i)] = t.data_as<int32_t>()[i];
    }
    return c;
}

} // namespace

TEST(Generate, T2vaMatchesReferenceLoop) {
    auto m = load_model();
    auto f = io::SafetensorsFile::open(data("pipeline/e2e_t2va.safetensors"));
    ASSERT_TRUE(f.ok());
    GenerationRequest rq;
    rq.geometry = geometry_for(*m);
    rq.steps = 4;
    rq.seed = 2024;
    std::vector<StepProgress> seen;
    DenoiseOptions o;
    o.progress = [&](const StepProgress& p) { seen.push_back(p); };
    auto out = generate_latents(*m, conditioning(*f), rq, o);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    // The noise is torch's, bit for bit.
    EXPECT_EQ(rel_err(out->video_noise, golden(*f, "video_noise")), 0.0);
    EXPECT_EQ(rel_err(out->audio_noise, golden(*f, "audio_noise")), 0.0);
    EXPECT_LE(rel_err(out->video_latents, golden(*f, "video_latents")), 1e-4);
    EXPECT_LE(rel_err(out->audio_latents, golden(*f, "audio_latents")), 1e-4);
    EXPECT_GT(rel_err(out->video_latents, out->video_noise), 0.05); // the loop did move the latents
    ASSERT_EQ(seen.size(), 3u);
    EXPECT_EQ(seen[2].step, 3);
    EXPECT_EQ(seen[2].total, 3);
    EXPECT_EQ(seen[2].eta_seconds, 0.0);
    EXPECT_EQ(out->step_seconds.size(), 3u);
}

TEST(Generate, Fl2vaBothKeyframesMatchesReferenceLoop) {
    auto m = load_model();
    auto f = io::SafetensorsFile::open(data("pipeline/e2e_fl2va.safetensors"));
    ASSERT_TRUE(f.ok());
    GenerationRequest rq;
    rq.geometry = geometry_for(*m);
    rq.steps = 5;
    rq.seed = 99;
    rq.keyframes = {{KeyframeAnchor::kFirst, golden(*f, "keyframe_first")},
                    {KeyframeAnchor::kLast, golden(*f, "keyframe_last")}};
    auto out = generate_latents(*m, conditioning(*f), rq);
    ASSERT_TRUE(out.ok()) << out.status().to_string();
    EXPECT_LE(rel_err(out->video_latents, golden(*f, "video_latents")), 1e-4);
    EXPECT_LE(rel_err(out->audio_latents, golden(*f, "audio_latents")), 1e-4);
    // Without the keyframes the result is different: the condition rows took part.
    rq.keyframes.clear();
    auto t2va = generate_latents(*m, conditioning(*f), rq);
    ASSERT_TRUE(t2va.ok());
    EXPECT_GT(rel_err(t2va->video_latents, golden(*f, "video_latents")), 1e-3);
}

TEST(Generate, CancellationStopsAndReleases) {
    auto m = load_model();
    auto f = io::SafetensorsFile::open(data("pipeline/e2e_t2va.safetensors"));
    ASSERT_TRUE(f.ok());
    GenerationRequest rq;
    rq.geometry = geometry_for(*m);
    rq.steps = 9;
    std::atomic<bool> cancel{false};
    int steps_done = 0;
    DenoiseOptions o;
    o.cancel = &cancel;
    Conditioning c = conditioning(*f);
    const long text_uses = c.embeddings.storage().use_count();
    o.progress = [&](const StepProgress& p) {
        steps_done = p.step;
        if (p.step == 2) cancel = true;
    };
    auto out = generate_latents(*m, c, rq, o);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), ErrorCode::kCancelled);
    EXPECT_EQ(steps_done, 2);
    EXPECT_NE(out.status().message().find("2 of 8"), std::string::npos) << out.status().message();
    // Nothing the request made still refers to the caller's conditioning.
    EXPECT_EQ(c.embeddings.storage().use_count(), text_uses);
    // Cancelled before starting: no step runs.
    steps_done = 0;
    auto again = generate_latents(*m, c, rq, o);
    EXPECT_EQ(again.status().code(), ErrorCode::kCancelled);
    EXPECT_EQ(steps_done, 0);
    // The model is reusable after a cancelled request.
    cancel = false;
    rq.steps = 3;
    o.progress = nullptr;
    EXPECT_TRUE(generate_latents(*m, c, rq, o).ok());
}

TEST(Generate, RejectsBadRequests) {
    auto m = load_model();
    Conditioning c;
    c.embeddings = Tensor::host(Shape{4, 48}, DType::kF32);
    c.tags.assign(4, kTagText);
    GenerationRequest rq;
    rq.geometry = geometry_for(*m);
    rq.steps = 1;
    auto e = generate_latents(*m, c, rq);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message().find("steps"), std::string::npos);
    rq.steps = 3;
    Conditioning wrong = c;
    wrong.embeddings = Tensor::host(Shape{4, 32}, DType::kF32);
    e = generate_latents(*m, wrong, rq);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message().find("48"), std::string::npos);
    rq.keyframes = {{KeyframeAnchor::kFirst, Tensor::host(Shape{1, 24, 1, 4, 4}, DType::kF32)}};
    e = generate_latents(*m, c, rq);
    ASSERT_FALSE(e.ok());
    EXPECT_NE(e.status().message().find("keyframe 0"), std::string::npos) << e.status().message();
}
