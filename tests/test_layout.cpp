// Packed layout (spec §5) against the reference script: positions bit-exact (float64), tags, indices and
// row timesteps for t2va and fl2va with first, last and both keyframes.
#include "io/safetensors.h"
#include "pipeline/conditioner.h"
#include "pipeline/layout.h"
#include "pipeline/schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

using namespace h3;
using namespace h3::pipeline;

namespace {

std::vector<double> f64(const io::SafetensorsFile& f, const std::string& n) {
    auto t = f.tensor(n);
    EXPECT_TRUE(t.ok()) << n;
    std::vector<double> v(static_cast<size_t>(t->numel()));
    for (size_t i = 0; i < v.size(); ++i) v[i] = load_as_f64(t->data(), t->dtype(), i);
    return v;
}
template <typename T> std::vector<T> as(const std::vector<double>& v) {
    return std::vector<T>(v.begin(), v.end());
}

void check_case(const std::string& name) {
    SCOPED_TRACE(name);
    auto f = io::SafetensorsFile::open(std::string(H3_SOURCE_DIR) + "/tests/data/pipeline/layout_" + name +
                                       ".safetensors");
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    const auto& md = f->metadata();
    auto geo = resolve_geometry({.width = std::stoi(md.at("width")),
                                 .height = std::stoi(md.at("height")),
                                 .frames = std::stoi(md.at("frames"))},
                                h3::model::LatentSpec{});
    ASSERT_TRUE(geo.ok());
    EXPECT_EQ(geo->latent_frames, std::stoi(md.at("T")));
    EXPECT_EQ(geo->audio_latents, std::stoi(md.at("A")));
    LayoutParams p;
    p.geometry = *geo;
    p.text_tags = as<int32_t>(f64(*f, "text_tags"));
    const std::string anchors = md.at("anchors");
    if (anchors.find("first") != std::string::npos) p.keyframes.push_back(KeyframeAnchor::kFirst);
    if (anchors.find("last") != std::string::npos) p.keyframes.push_back(KeyframeAnchor::kLast);
    int64_t ref_video = 0, ref_audio = 0;
    if (md.count("references")) { // "kind,T,h,w,A;..."
        std::stringstream all(md.at("references"));
        std::string one;
        while (std::getline(all, one, ';')) {
            std::stringstream f1(one);
            std::string kind, v;
            std::getline(f1, kind, ',');
            int x[4];
            for (int& xi : x) {
                std::getline(f1, v, ',');
                xi = std::stoi(v);
            }
            ReferenceBlock b;
            b.kind = kind == "image"   ? ReferenceKind::kImage
                     : kind == "video" ? ReferenceKind::kVideo
                                       : ReferenceKind::kAudio;
            b.latent_frames = x[0];
            b.latent_h = x[1];
            b.latent_w = x[2];
            b.audio_latents = x[3];
            if (b.kind != ReferenceKind::kAudio) ref_video += int64_t(x[0]) * (x[1] / 2) * (x[2] / 2);
            ref_audio += 2 * x[3];
            p.references.push_back(b);
        }
    }
    const PackedLayout L = build_layout(p);

    const auto pos = f64(*f, "position_ids");
    ASSERT_EQ(L.positions.size(), pos.size());
    int64_t mismatch = 0;
    for (size_t i = 0; i < pos.size(); ++i) mismatch += L.positions[i] != pos[i]; // exact, f64
    EXPECT_EQ(mismatch, 0);
    EXPECT_EQ(L.tags, as<int32_t>(f64(*f, "token_tags")));
    EXPECT_EQ(L.video_indices, as<int32_t>(f64(*f, "video_indices")));
    EXPECT_EQ(L.audio_indices, as<int32_t>(f64(*f, "audio_indices")));
    EXPECT_EQ(L.text_indices, as<int32_t>(f64(*f, "text_indices")));
    EXPECT_EQ(L.condition_rows, static_cast<int64_t>(p.keyframes.size()) * geo->rows_per_frame() + ref_video);
    EXPECT_EQ(L.condition_audio_rows, ref_audio);

    auto d = make_dual_schedule(5);
    for (int step : {0, 2}) {
        const auto rt = row_timesteps(L, d->video.timesteps[step], d->audio.timesteps[step]);
        const auto ts = f64(*f, "step" + std::to_string(step) + "_timesteps");
        ASSERT_EQ(rt.timesteps.size(), ts.size()) << "step " << step;
        for (size_t i = 0; i < ts.size(); ++i) EXPECT_EQ(rt.timesteps[i], static_cast<float>(ts[i]));
        EXPECT_EQ(rt.indices, as<int32_t>(f64(*f, "step" + std::to_string(step) + "_timestep_indices")));
    }
}

} // namespace

TEST(Layout, T2va) {
    check_case("t2va");
}
TEST(Layout, Fl2vaFirst) {
    check_case("fl2va_first");
}
TEST(Layout, Fl2vaLast) {
    check_case("fl2va_last");
}
TEST(Layout, Fl2vaBoth) {
    check_case("fl2va_both");
}

TEST(Layout, Ref2vaMixed) {
    // image, video + soundtrack, audio, silent video, video whose soundtrack outlasts its frames, image
    check_case("ref2va_mixed");
}

TEST(Layout, Ref2vaClock) {
    // One image then one audio clip: the image takes one slot, the clip its latent count, and the target
    // starts after both; the audio rows are pinned to the target's width-grid extremes.
    auto geo = resolve_geometry({.width = 64, .height = 64, .frames = 124}, h3::model::LatentSpec{});
    ASSERT_TRUE(geo.ok());
    LayoutParams p;
    p.geometry = *geo;
    p.text_tags = {1, 1, 1};
    p.references = {{ReferenceKind::kImage, 1, 4, 4, 0}, {ReferenceKind::kAudio, 0, 0, 0, 5}};
    const PackedLayout L = build_layout(p);
    EXPECT_EQ(L.condition_rows, 4);
    EXPECT_EQ(L.condition_audio_rows, 10);
    EXPECT_EQ(L.positions[3 * 3 + 0], 3.0); // first image row: τ = L
    EXPECT_EQ(L.positions[7 * 3 + 0], 4.0); // first audio row: τ = L + 1
    const int64_t target_audio = L.audio_indices[10];
    EXPECT_EQ(L.positions[static_cast<size_t>(target_audio) * 3], 9.0); // L + 1 + 5
    const int64_t target_video = L.video_indices[4];
    EXPECT_EQ(L.positions[static_cast<size_t>(target_video) * 3], 9.0);
    const auto rt = row_timesteps(L, 0.25f, 0.5f);
    ASSERT_EQ(rt.timesteps, (std::vector<float>{0.25f, 0.5f, 0.999f, 1.0f}));
    EXPECT_EQ(rt.indices[static_cast<size_t>(L.audio_indices[0])], 3); // reference audio: clean
    EXPECT_EQ(rt.indices[static_cast<size_t>(target_audio)], 1);       // generated audio: t_audio
    EXPECT_EQ(rt.indices[static_cast<size_t>(L.video_indices[0])], 2); // reference image: 0.999
}

TEST(Layout, SpecExampleGrid) {
    // 48×84 latents: h-grid 3.905, 4.913, …, 27.087; w-grid −5.166, −4.158, …, 36.158 (spec §5.3).
    const double s = std::sqrt(48.0 * 84.0);
    const auto h = spatial_grid(48, 2, s), w = spatial_grid(84, 2, s);
    ASSERT_EQ(h.size(), 24u);
    ASSERT_EQ(w.size(), 42u);
    EXPECT_NEAR(h[0], 3.905, 1e-3);
    EXPECT_NEAR(h[1], 4.913, 1e-3);
    EXPECT_NEAR(h.back(), 27.087, 1e-3);
    EXPECT_NEAR(w[0], -5.166, 1e-3);
    EXPECT_NEAR(w.back(), 36.158, 1e-3);
    const auto sq = spatial_grid(16, 2, 16.0);
    EXPECT_EQ(sq[0], 0.0);
    EXPECT_LT(sq.back(), 32.0);
}

TEST(Layout, RowOrderAndTimesteps) {
    auto geo = resolve_geometry({.width = 64, .height = 32, .frames = 124}, h3::model::LatentSpec{});
    LayoutParams p{.geometry = *geo, .text_tags = {1, 0, 1}, .keyframes = {KeyframeAnchor::kLast}};
    const PackedLayout L = build_layout(p);
    // [text 3 | keyframe 2 | audio 2·207 | video 37·2]
    EXPECT_EQ(L.rows, 3 + 2 + 414 + 74);
    EXPECT_EQ(L.tags[1], kTagVideo); // vision row inside the conditioner
    EXPECT_EQ(L.tags[3], kTagVideo);
    EXPECT_EQ(L.tags[5], kTagAudio);
    EXPECT_EQ(L.video_indices.front(), 3);
    EXPECT_EQ(L.video_indices[2], 5 + 414);
    // The keyframe "last" sits on the last pixel frame: L + (5/3)(F − 1) = 3 + 205.
    EXPECT_NEAR(L.positions[3 * 3], 3 + 5.0 / 3.0 * 123, 1e-9);
    // Audio R rows are pinned to the last w-grid value, L rows to the first.
    const auto wg = spatial_grid(4, 2, std::sqrt(8.0));
    EXPECT_EQ(L.positions[5 * 3 + 2], wg.front());
    EXPECT_EQ(L.positions[(5 + 207) * 3 + 2], wg.back());
    EXPECT_EQ(L.positions[(5 + 207) * 3 + 0], 3.0); // R channel restarts the clock at L
    const auto rt = row_timesteps(L, 0.25f, 0.6f);
    ASSERT_EQ(rt.timesteps, (std::vector<float>{0.25f, 0.6f, 0.999f}));
    EXPECT_EQ(rt.indices[0], 0); // text at t_v
    EXPECT_EQ(rt.indices[3], 2); // keyframe at max(t_v, 0.999)
    EXPECT_EQ(rt.indices[5], 1); // audio at t_a
    EXPECT_EQ(rt.indices.back(), 0);
}
