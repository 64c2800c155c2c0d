// fl2va wiring on the tiny checkpoint (make-tiny): pipeline::prepare_fl2va (keyframes on the canvas → the
// conditioner's images + VAE-encoded keyframe latents), the conditioner's vision rows, and the packed layout
// and condition rows a two-keyframe request produces.
#include "model/tiny/tiny_checkpoint.h"
#include "model/video_vae/video_vae_encoder.h"
#include "pipeline/conditioner.h"
#include "pipeline/fl2va.h"
#include "pipeline/generate.h"
#include "pipeline/layout.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/vision_processor.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;
using namespace h3;

namespace {

io::RgbImage pattern(int w, int h, int seed) {
    io::RgbImage im(w, h);
    for (size_t i = 0; i < im.pixels.size(); ++i) im.pixels[i] = static_cast<uint8_t>((i * (7 + seed)) % 251);
    return im;
}

const std::string& tiny_dir() {
    static const std::string dir = [] {
        const fs::path d = fs::path(H3_BINARY_DIR) / "test_fl2va" / "tiny";
        fs::remove_all(d);
        EXPECT_TRUE(model::write_tiny_checkpoint({.dir = d.string(), .seed = 1}).ok());
        return d.string();
    }();
    return dir;
}

const model::VideoVaeEncoder& encoder() {
    static const model::VideoVaeEncoder enc = [] {
        auto e = model::load_video_vae_encoder(tiny_dir() + "/vae", Device::cpu());
        EXPECT_TRUE(e.ok()) << e.status().to_string();
        return std::move(e).value();
    }();
    return enc;
}

} // namespace

TEST(Fl2va, PrepareEncodesKeyframesAndPresentsImages) {
    const pipeline::Canvas canvas{64, 32};
    const io::RgbImage first = pattern(64, 32, 0), last = pattern(40, 30, 1);
    auto kf = pipeline::prepare_keyframes(
        {.first = &first, .last = &last, .canvas = canvas, .canvas_multiple = 32});
    ASSERT_TRUE(kf.ok()) << kf.status().to_string();
    const ops::Context ctx = ops::Context::cpu();
    auto in = pipeline::prepare_fl2va(ctx, encoder(), *kf);
    ASSERT_TRUE(in.ok()) << in.status().to_string();

    // conditioning latents [1, 24, 1, H/16, W/16] in packed order, distinct per keyframe, deterministic
    ASSERT_EQ(in->keyframes.size(), 2u);
    EXPECT_EQ(in->keyframes[0].anchor, pipeline::KeyframeAnchor::kFirst);
    EXPECT_EQ(in->keyframes[1].anchor, pipeline::KeyframeAnchor::kLast);
    for (const auto& k : in->keyframes) {
        EXPECT_EQ(k.latents.shape(), (Shape{1, 24, 1, 2, 4}));
        EXPECT_EQ(k.latents.dtype(), DType::kF32);
        EXPECT_TRUE(k.latents.device().is_cpu());
    }
    const float* z0 = in->keyframes[0].latents.data_as<float>();
    const float* z1 = in->keyframes[1].latents.data_as<float>();
    double d01 = 0;
    for (int64_t i = 0; i < in->keyframes[0].latents.numel(); ++i) {
        ASSERT_TRUE(std::isfinite(z0[i]) && std::isfinite(z1[i]));
        d01 += std::fabs(z0[i] - z1[i]);
    }
    EXPECT_GT(d01, 0.0);
    auto again = pipeline::prepare_fl2va(ctx, encoder(), *kf);
    ASSERT_TRUE(again.ok());
    EXPECT_EQ(std::memcmp(again->keyframes[1].latents.data(), in->keyframes[1].latents.data(),
                          in->keyframes[1].latents.nbytes()),
              0);

    // the conditioner's images are the keyframes on the canvas
    ASSERT_EQ(in->images.size(), 2u);
    for (size_t i = 0; i < 2; ++i) {
        EXPECT_EQ(in->images[i].width, 64);
        EXPECT_EQ(in->images[i].height, 32);
        EXPECT_EQ(in->images[i].rgb, kf->images[i].pixels);
    }

    // presented with the prompt: per image its vision block (start + tokens + end) tagged video
    auto tc = pipeline::TextConditioner::open({.checkpoint_dir = tiny_dir(), .ctx = ctx});
    ASSERT_TRUE(tc.ok()) << tc.status().to_string();
    ASSERT_TRUE((*tc)->has_vision());
    pipeline::ConditionerRequest req;
    req.prompt = "a red ball";
    req.images = in->images;
    auto cond = (*tc)->encode(req);
    ASSERT_TRUE(cond.ok()) << cond.status().to_string();
    int64_t expected_vision = 0;
    for (const auto& im : kf->images) {
        auto p = pipeline::preprocess_image(im);
        ASSERT_TRUE(p.ok());
        expected_vision += p->num_tokens(2) + 2;
    }
    int64_t vision = 0;
    for (int32_t t : cond->tags) vision += t == pipeline::kTagVideo;
    EXPECT_EQ(vision, expected_vision);
    EXPECT_EQ(static_cast<int64_t>(cond->tags.size()), cond->rows());

    // the packed layout of the two-keyframe request: [text | 2 condition frames | audio | video], the
    // condition rows at max(t, 0.999) and holding 0.999·z + 0.001·ε of their keyframe, in packed order
    pipeline::GeometryRequest gr;
    gr.width = 64;
    gr.height = 32;
    gr.frames = 107;
    auto g = pipeline::resolve_geometry(gr, model::LatentSpec{});
    ASSERT_TRUE(g.ok());
    const int64_t rpf = g->rows_per_frame();
    pipeline::LayoutParams lp{.geometry = *g, .text_tags = cond->tags, .keyframes = {}};
    for (const auto& k : in->keyframes) lp.keyframes.push_back(k.anchor);
    const pipeline::PackedLayout layout = pipeline::build_layout(lp);
    EXPECT_EQ(layout.text_rows, cond->rows());
    EXPECT_EQ(layout.condition_rows, 2 * rpf);
    for (int64_t r = 0; r < layout.condition_rows; ++r)
        EXPECT_EQ(layout.tags[static_cast<size_t>(layout.video_indices[static_cast<size_t>(r)])],
                  pipeline::kTagVideo);
    const pipeline::RowTimesteps ts = pipeline::row_timesteps(layout, 0.5f, 0.5f);
    for (int64_t r = 0; r < layout.rows; ++r) {
        const float t = ts.timesteps[static_cast<size_t>(ts.indices[static_cast<size_t>(r)])];
        const bool condition =
            std::find(layout.video_indices.begin(), layout.video_indices.begin() + layout.condition_rows,
                      static_cast<int32_t>(r)) != layout.video_indices.begin() + layout.condition_rows;
        EXPECT_FLOAT_EQ(t, condition ? 0.999f : 0.5f) << "row " << r;
    }
    pipeline::NoiseRequest nr;
    nr.seed = 3;
    nr.keyframes = in->keyframes;
    auto init = pipeline::prepare_latents(*g, nr);
    ASSERT_TRUE(init.ok()) << init.status().to_string();
    ASSERT_EQ(init->condition_rows.shape(), (Shape{2 * rpf, 96}));
    for (int k = 0; k < 2; ++k) {
        const Tensor zr = pipeline::patchify_video(in->keyframes[static_cast<size_t>(k)].latents, 2, 2);
        ASSERT_EQ(zr.shape(), (Shape{rpf, 96}));
        const float* c = init->condition_rows.data_as<float>() + k * rpf * 96;
        const float* z = zr.data_as<float>();
        for (int64_t i = 0; i < rpf * 96; ++i)
            ASSERT_NEAR(c[i], 0.999f * z[i], 0.01f) << "keyframe " << k << " value " << i;
    }
}

TEST(Fl2va, PrepareErrors) {
    const ops::Context ctx = ops::Context::cpu();
    pipeline::PreparedKeyframes none;
    EXPECT_FALSE(pipeline::prepare_fl2va(ctx, encoder(), none).ok());
    const io::RgbImage first = pattern(64, 32, 0);
    auto kf =
        pipeline::prepare_keyframes({.first = &first, .last = nullptr, .canvas = pipeline::Canvas{64, 32}});
    ASSERT_TRUE(kf.ok());
    // a checkpoint without vae/ has no encoder to lease
    fs::create_directories(fs::path(H3_BINARY_DIR) / "test_fl2va" / "dit_only");
    fs::copy(tiny_dir() + "/transformer", fs::path(H3_BINARY_DIR) / "test_fl2va" / "dit_only",
             fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    auto store = runtime::ModelStore::open((fs::path(H3_BINARY_DIR) / "test_fl2va" / "dit_only").string(),
                                           runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto missing = (*store)->video_encoder();
    ASSERT_FALSE(missing.ok());
    EXPECT_NE(missing.status().message().find("vae"), std::string::npos) << missing.status().to_string();
    kf->images[0] = pattern(32, 32, 0); // off the canvas
    auto off = pipeline::prepare_fl2va(ctx, encoder(), *kf);
    ASSERT_FALSE(off.ok());
    EXPECT_NE(off.status().message().find("first keyframe"), std::string::npos) << off.status().to_string();
}
