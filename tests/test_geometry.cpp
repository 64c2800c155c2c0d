// Geometry (spec §4) against the spec's tables and the reference script's geometry.json.
#include "pipeline/geometry.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <fstream>

using namespace h3::pipeline;

namespace {
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
        auto c = canvas_from_aspect(r.aw, r.ah);
        ASSERT_TRUE(c.ok()) << r.aw << ":" << r.ah;
        EXPECT_EQ(c->height, r.h) << r.aw << ":" << r.ah;
        EXPECT_EQ(c->width, r.w) << r.aw << ":" << r.ah;
    }
}

TEST(Geometry, GoldenAspectsAndFrames) {
    auto g = golden();
    for (const auto& a : g["aspects"]) {
        auto c = canvas_from_aspect(a["aw"].get<double>(), a["ah"].get<double>());
        ASSERT_TRUE(c.ok());
        EXPECT_EQ(c->width, a["width"].get<int>()) << a.dump();
        EXPECT_EQ(c->height, a["height"].get<int>()) << a.dump();
    }
    for (const auto& s : g["sizes"]) {
        auto c = canvas_from_size(s["width"], s["height"]);
        ASSERT_TRUE(c.ok()) << s.dump();
    }
    for (const auto& f : g["frames"]) {
        auto r = resolve_geometry({.width = 64, .height = 64, .frames = f["request"].get<int>()});
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
        EXPECT_EQ(align_num_frames(r.f), r.f);
        EXPECT_EQ(latent_frames_for(r.f), r.t);
        if (r.a > 0) {
            EXPECT_EQ(audio_latents_for(r.f), r.a);
        }
    }
    EXPECT_EQ(align_num_frames(108), 124);
    EXPECT_EQ(align_num_frames(96), 107);
    // 1344x768, 124 frames: the official default (h×w = 48×84, 1008 rows per frame).
    auto g = resolve_geometry({.width = 1344, .height = 768, .frames = 124});
    ASSERT_TRUE(g.ok());
    EXPECT_EQ(g->latent_h, 48);
    EXPECT_EQ(g->latent_w, 84);
    EXPECT_EQ(g->rows_per_frame(), 1008);
    EXPECT_EQ(g->latent_frames, 37);
    EXPECT_EQ(g->audio_latents, 207);
    // Default canvas is 16:9 and the default frame count 124; seconds snap up.
    auto d = resolve_geometry({});
    ASSERT_TRUE(d.ok());
    EXPECT_EQ(d->width, 1344);
    EXPECT_EQ(d->height, 768);
    EXPECT_EQ(d->frames, 124);
    auto s = resolve_geometry({.seconds = 5.0});
    ASSERT_TRUE(s.ok());
    EXPECT_EQ(s->frames, 124); // 120 → 124
    auto s4 = resolve_geometry({.seconds = 4.0});
    ASSERT_TRUE(s4.ok());
    EXPECT_EQ(s4->frames, 107);
    auto sq = resolve_geometry({.aspect_w = 1, .aspect_h = 1, .frames = 345});
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
        auto res = resolve_geometry(rq);
        ASSERT_FALSE(res.ok()) << r.dump();
        EXPECT_EQ(res.status().code(), h3::ErrorCode::kInvalidArgument);
        const std::string& m = res.status().message();
        EXPECT_NE(m.find(r["field"].get<std::string>()), std::string::npos) << m;
        EXPECT_TRUE(m.find('[') != std::string::npos || m.find("multiple of 32") != std::string::npos) << m;
    }
    // Exclusive fields.
    EXPECT_FALSE(resolve_geometry({.width = 64, .height = 64, .aspect_w = 1, .aspect_h = 1}).ok());
    EXPECT_FALSE(resolve_geometry({.frames = 124, .seconds = 5}).ok());
    EXPECT_FALSE(resolve_geometry({.width = 64}).ok());
    auto m = resolve_geometry({.frames = 346}).status().message();
    EXPECT_NE(m.find("107 to 345"), std::string::npos) << m;
}
