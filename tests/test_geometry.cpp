// Geometry (spec §4) against the spec's tables and the reference script's geometry.json, on the released
// checkpoint's LatentSpec; the spec derived from other configs (diffusers' derivation) and the geometry it
// gives.
#include "model/audio_vae/audio_vae.h"
#include "model/dit/dit_config.h"
#include "model/latent_spec.h"
#include "model/video_vae/video_vae.h"
#include "pipeline/geometry.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>

using namespace h3::pipeline;
using h3::model::LatentSpec;

namespace {
const LatentSpec kSpec; // the released checkpoint's
const int kMultiple = kSpec.canvas_multiple();

nlohmann::json golden() {
    std::ifstream f(std::string(H3_SOURCE_DIR) + "/tests/data/pipeline/geometry.json");
    return nlohmann::json::parse(f);
}
} // namespace

TEST(Geometry, SpecCanvasTable) {
    struct Row {
        int aw, ah, h, w;
    } rows[] = {{16, 9, 768, 1344}, {9, 16, 1344, 768}, {1, 1, 768, 768},  {4, 3, 768, 1024},
                {3, 4, 1024, 768},  {21, 9, 672, 1536}, {2, 1, 704, 1440}, {4, 1, 512, 2016}};
    for (const Row& r : rows) {
        auto c = canvas_from_aspect(r.aw, r.ah, kMultiple);
        ASSERT_TRUE(c.ok()) << r.aw << ":" << r.ah;
        EXPECT_EQ(c->height, r.h) << r.aw << ":" << r.ah;
        EXPECT_EQ(c->width, r.w) << r.aw << ":" << r.ah;
    }
}

TEST(Geometry, GoldenAspectsAndFrames) {
    auto g = golden();
    for (const auto& a : g["aspects"]) {
        auto c = canvas_from_aspect(a["aw"].get<double>(), a["ah"].get<double>(), kMultiple);
        ASSERT_TRUE(c.ok());
        EXPECT_EQ(c->width, a["width"].get<int>()) << a.dump();
        EXPECT_EQ(c->height, a["height"].get<int>()) << a.dump();
    }
    for (const auto& s : g["sizes"]) {
        auto c = canvas_from_size(s["width"], s["height"], kMultiple);
        ASSERT_TRUE(c.ok()) << s.dump();
    }
    for (const auto& f : g["frames"]) {
        auto r = resolve_geometry({.width = 64, .height = 64, .frames = f["request"].get<int>()}, kSpec);
        ASSERT_TRUE(r.ok()) << f.dump() << r.status().to_string();
        EXPECT_EQ(r->frames, f["frames"].get<int>());
        EXPECT_EQ(r->latent_frames, f["T"].get<int>());
        EXPECT_EQ(r->audio_latents, f["A"].get<int>());
    }
}

TEST(Geometry, SpecFrameAndAudioTable) {
    struct Row {
        int f, t, a;
    } rows[] = {{107, 32, 178}, {124, 37, 207}, {192, 57, 320},
                {243, 72, 405}, {294, 87, -1},  {345, 102, 575}};
    for (const Row& r : rows) {
        EXPECT_EQ(kSpec.align_frames(r.f), r.f);
        EXPECT_EQ(kSpec.latent_frames(r.f), r.t);
        if (r.a > 0) {
            EXPECT_EQ(kSpec.audio_latents(r.f), r.a);
        }
    }
    EXPECT_EQ(kSpec.align_frames(108), 124);
    EXPECT_EQ(kSpec.align_frames(96), 107);
    EXPECT_EQ(kSpec.align_frames(1), 5);
    // 1344x768, 124 frames: the official default (h×w = 48×84, 1008 rows per frame).
    auto g = resolve_geometry({.width = 1344, .height = 768, .frames = 124}, kSpec);
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->latent_h, 48);
    EXPECT_EQ(g->latent_w, 84);
    EXPECT_EQ(g->rows_per_frame(), 1008);
    EXPECT_EQ(g->latent_frames, 37);
    EXPECT_EQ(g->audio_latents, 207);
    // Default canvas is 16:9 and the default frame count 124; seconds snap up.
    auto d = resolve_geometry({}, kSpec);
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->width, 1344);
    EXPECT_EQ(d->height, 768);
    EXPECT_EQ(d->frames, 124);
    auto s = resolve_geometry({.seconds = 5.0}, kSpec);
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->frames, 124); // 120 → 124
    auto s4 = resolve_geometry({.seconds = 4.0}, kSpec);
    ASSERT_TRUE(s4.ok());
    EXPECT_EQ(s4->frames, 107);
    auto sq = resolve_geometry({.aspect_w = 1, .aspect_h = 1, .frames = 345}, kSpec);
    ASSERT_TRUE(sq.ok());
    EXPECT_EQ(sq->width, 768);
    EXPECT_EQ(sq->latent_frames, 102);
}

TEST(Geometry, RejectsWithFieldNames) {
    auto g = golden();
    for (const auto& r : g["rejects"]) {
        GeometryRequest rq;
        if (r.contains("size")) {
            rq.width = r["size"][0].get<int>();
            rq.height = r["size"][1].get<int>();
        }
        if (r.contains("aspect")) {
            rq.aspect_w = r["aspect"][0].get<double>();
            rq.aspect_h = r["aspect"][1].get<double>();
        }
        if (r.contains("frames")) rq.frames = r["frames"].get<int>();
        if (r.contains("seconds")) rq.seconds = r["seconds"].get<double>();
        std::string field;
        auto res = resolve_geometry(rq, kSpec, &field);
        ASSERT_FALSE(res.ok()) << r.dump();
        EXPECT_EQ(res.status().code(), h3::ErrorCode::kInvalidArgument);
        const std::string& m = res.status().message();
        EXPECT_NE(m.find(r["field"].get<std::string>()), std::string::npos) << m;
        EXPECT_NE(m.find(field), std::string::npos) << field << ": " << m;
        EXPECT_TRUE(m.find('[') != std::string::npos || m.find("multiple of 32") != std::string::npos) << m;
    }
    // Exclusive fields.
    EXPECT_FALSE(resolve_geometry({.width = 64, .height = 64, .aspect_w = 1, .aspect_h = 1}, kSpec).ok());
    EXPECT_FALSE(resolve_geometry({.frames = 124, .seconds = 5}, kSpec).ok());
    EXPECT_FALSE(resolve_geometry({.width = 64}, kSpec).ok());
    auto m = resolve_geometry({.frames = 346}, kSpec).status().message();
    EXPECT_NE(m.find("107 to 345"), std::string::npos) << m;
}

TEST(LatentSpec, ReleasedDefaults) {
    // diffusers' fallbacks when a component is absent: the released VAEs (x16, 17n+5 -> 5n+2, 32 audio
    // channels at 40 latents/s) and the released DiT patch.
    EXPECT_EQ(kSpec.canvas_multiple(), 32);
    EXPECT_EQ(kSpec.latent_frames(124), 37);
    EXPECT_EQ(kSpec.audio_latents_per_second(), 40.0);
    EXPECT_EQ(kSpec.rope_units_per_frame(), 5.0 / 3.0); // the same double as the reference's 5/3
    std::vector<int> spans;
    for (int k = 0; k < 7; ++k) spans.push_back(kSpec.frames_of_latent(k));
    EXPECT_EQ(spans, (std::vector<int>{1, 4, 4, 4, 4, 1, 4}));
    EXPECT_EQ(kSpec.align_frames_down(123), 107);
    EXPECT_EQ(kSpec.align_frames_down(10), 22);
    EXPECT_TRUE(kSpec.validate("released").ok());
}

TEST(LatentSpec, DerivedFromOtherConfigs) {
    // A checkpoint with an 8x video VAE of 8 latent channels and a 16-channel audio VAE (as diffusers writes
    // them): the spec follows the configs, and the geometry follows the spec.
    h3::model::DitConfig dit;
    dit.in_channels = 8;
    dit.audio_in_channels = 16;
    dit.text_dim = 48;
    h3::model::VideoVaeConfig vae;
    vae.latent_channels = 8;
    vae.spatial_downsample_factors = {2, 2, 2, 1, 1, 1};
    h3::model::AudioVaeConfig avae;
    avae.latent_channels = 16;
    auto spec = h3::model::derive_latent_spec({.dit = &dit,
                                               .dit_file = "transformer/config.json",
                                               .video_vae = &vae,
                                               .video_vae_file = "vae/config.json",
                                               .audio_vae = &avae,
                                               .audio_vae_file = "audio_vae/config.json",
                                               .text_hidden_size = 48,
                                               .text_file = "text_encoder/config.json"});
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    EXPECT_EQ(spec->latent_channels, 8);
    EXPECT_EQ(spec->spatial_compression, 8);
    EXPECT_EQ(spec->canvas_multiple(), 16);
    EXPECT_EQ(spec->audio_latent_channels, 16);
    EXPECT_EQ(spec->text_dim, 48);
    EXPECT_EQ(spec->latent_frames(107), 32);
    auto g = resolve_geometry({.width = 48, .height = 32, .frames = 107}, *spec);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->latent_h, 4);
    EXPECT_EQ(g->latent_w, 6);
    EXPECT_EQ(g->rows_per_frame(), 6);
    std::string field;
    auto bad = resolve_geometry({.width = 40, .height = 32, .frames = 107}, *spec, &field);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(field, "size");
    EXPECT_NE(bad.status().message().find("multiple of 16"), std::string::npos) << bad.status().to_string();
    // the 16:9 canvas on multiples of 16
    auto c = canvas_from_aspect(16, 9, spec->canvas_multiple());
    ASSERT_TRUE(c.ok());
    EXPECT_EQ(c->width % 16, 0);
    EXPECT_EQ(c->height, 768);
}

TEST(LatentSpec, AudioLatentsAtTheOfficialRateWhateverTheAudioVae) {
    // An audio VAE with other rates (encoder and decoder rates [2, 2], as diffusers writes a small one): its
    // own rate would be 32000 / 4 = 8000 latents/s (41,333 latents for 124 frames), but the official pipeline
    // counts int(round(F / 24 * 40)) (MINIMAX_H3_AUDIO_LATENTS_PER_SECOND) whatever the VAE: 207.
    h3::model::AudioVaeConfig avae;
    avae.encoder_rates = {2, 2};
    avae.decoder_rates = {2, 2};
    avae.decoder_kernel_sizes = {4, 4};
    auto spec =
        h3::model::derive_latent_spec({.audio_vae = &avae, .audio_vae_file = "audio_vae/config.json"});
    ASSERT_TRUE(spec.ok()) << spec.status().to_string();
    EXPECT_EQ(spec->audio_hop, 4); // the rest stays derived from the config
    EXPECT_EQ(spec->audio_sample_rate, 32000);
    EXPECT_EQ(spec->official_audio_latents_per_second, 40);
    EXPECT_EQ(spec->audio_latents_per_second(), 40.0);
    EXPECT_EQ(spec->audio_latents(124), 207);
    EXPECT_EQ(spec->audio_latents(107), 178);
    EXPECT_EQ(spec->rope_units_per_frame(), 5.0 / 3.0);
    // int(round(F / 24 * 40)) for every frame count up to 16 s (the quotient is a third away from .5 at
    // worst, so the rounding mode never decides; the double expression is Python's)
    for (int f = 1; f <= 384; ++f) {
        const double x = static_cast<double>(f) / 24 * 40;
        EXPECT_EQ(spec->audio_latents(f), static_cast<int>(std::floor(x + 0.5))) << f;
        EXPECT_EQ(spec->audio_latents(f), kSpec.audio_latents(f)) << f;
    }
    auto g = resolve_geometry({.frames = 124}, *spec);
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->audio_latents, 207);
}

TEST(LatentSpec, MismatchesNameBothFilesAndFields) {
    h3::model::DitConfig dit, ref;
    h3::model::VideoVaeConfig vae;
    vae.latent_channels = 8;
    h3::model::AudioVaeConfig avae;
    avae.latent_channels = 16;
    const auto message = [](const h3::Result<LatentSpec>& r) {
        return r.ok() ? std::string() : r.status().message();
    };
    auto v = h3::model::derive_latent_spec(
        {.dit = &dit, .dit_file = "T/config.json", .video_vae = &vae, .video_vae_file = "V/config.json"});
    ASSERT_FALSE(v.ok());
    EXPECT_EQ(v.status().code(), h3::ErrorCode::kBadInput);
    for (const char* needle : {"T/config.json", "in_channels 24", "V/config.json", "latent_channels 8"})
        EXPECT_NE(message(v).find(needle), std::string::npos) << needle << ": " << message(v);
    auto a = h3::model::derive_latent_spec(
        {.dit = &dit, .dit_file = "T/config.json", .audio_vae = &avae, .audio_vae_file = "A/config.json"});
    for (const char* needle :
         {"T/config.json", "audio_in_channels 32", "A/config.json", "latent_channels 16"})
        EXPECT_NE(message(a).find(needle), std::string::npos) << needle << ": " << message(a);
    auto t = h3::model::derive_latent_spec(
        {.dit = &dit, .dit_file = "T/config.json", .text_hidden_size = 4096, .text_file = "E/config.json"});
    for (const char* needle :
         {"T/config.json", "text_dim 5120", "E/config.json", "text_config.hidden_size 4096"})
        EXPECT_NE(message(t).find(needle), std::string::npos) << needle << ": " << message(t);
    ref.in_channels = 16;
    auto r = h3::model::derive_latent_spec(
        {.dit = &dit, .dit_file = "T/config.json", .dit_ref = &ref, .dit_ref_file = "R/config.json"});
    for (const char* needle : {"R/config.json", "in_channels 16", "T/config.json", "in_channels 24"})
        EXPECT_NE(message(r).find(needle), std::string::npos) << needle << ": " << message(r);
}
