// The ref2va conditioner (spec §8.2): Python's "{:.1f}" timestamp formatting, the Qwen3-VL video processor,
// the reference presentation and the conditioner output against goldens from tools/reference/h3_vision.py
// (make_vision_goldens.py → tests/data/vision/ref2va.safetensors, video_resize.safetensors): the tiny tower
// of tests/data/vision on the language stack of tests/data/text/A, a request [image, video with a soundtrack
// (5 frames → 3 blocks), audio, video (4 frames → 2 blocks)] + prompt, fp32.
#include "cli/device_setup.h"
#include "core/cuda_api.h"
#include "core/python_format.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/text/text_model.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tiny/tiny_text.h"
#include "model/tokenizer/tokenizer.h"
#include "model/vision/vision_config.h"
#include "pipeline/image_resample.h"
#include "pipeline/reference_presentation.h"
#include "pipeline/text_conditioner.h"
#include "pipeline/vision_processor.h"

#include "golden_compare.h"
#include "vision_test_data.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>

namespace fs = std::filesystem;
using namespace h3;
using testing_support::compare;
using testing_support::Diff;

namespace {

const std::string kData = std::string(H3_SOURCE_DIR) + "/tests/data/vision";
const std::string kPrompt = "a cat walks on the beach at sunset";

std::string checkpoint() {
    static const std::string dir = testing_support::vision_test_checkpoint("test_ref_conditioner");
    return dir;
}

io::SafetensorsFile golden(const std::string& name) {
    return testing_support::vision_golden(name);
}

std::vector<int64_t> ints(const io::SafetensorsFile& f, const std::string& name) {
    return testing_support::golden_ints(f, name);
}

// make_vision_goldens.py's image(i, h, w) and frame(k, h, w).
pipeline::ConditionerImage formula(int h, int w, int a, int b, int c3, int k, int mod) {
    pipeline::ConditionerImage im;
    im.width = w;
    im.height = h;
    im.rgb.resize(static_cast<size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < 3; ++c)
                im.rgb[(static_cast<size_t>(y) * w + x) * 3 + c] =
                    static_cast<uint8_t>((y * a + x * b + c * c3 + k + (x * y) % mod) % 256);
    return im;
}
pipeline::ConditionerImage image(int i, int h, int w) {
    return formula(h, w, 7, 13, 71, i * 29, 17);
}
pipeline::ConditionerImage frame(int k, int h, int w) {
    return formula(h, w, 5, 11, 67, k * 37, 13);
}

io::RgbImage to_rgb(const pipeline::ConditionerImage& im) {
    io::RgbImage r(im.width, im.height);
    std::memcpy(r.pixels.data(), im.rgb.data(), im.rgb.size());
    return r;
}

std::vector<pipeline::ConditionerImage> video_frames(int ref, int frames, int h, int w) {
    std::vector<pipeline::ConditionerImage> v;
    for (int k = 0; k < frames; ++k) v.push_back(frame(10 * ref + k, h, w));
    return v;
}

// diffusers sample_reference_video_frames' block labels for n 2 fps frames (pairs, the last repeated when
// odd).
std::vector<double> block_timestamps(int n) {
    std::vector<double> ts;
    for (int i = 0; i < n; ++i) ts.push_back(i / 2.0);
    if (n % 2) ts.push_back(ts.back());
    std::vector<double> out;
    for (size_t i = 0; i < ts.size(); i += 2) out.push_back((ts[i] + ts[i + 1]) / 2);
    return out;
}

pipeline::ConditionerReference image_ref(pipeline::ConditionerImage im) {
    pipeline::ConditionerReference r;
    r.kind = pipeline::ReferenceKind::kImage;
    r.image = std::move(im);
    return r;
}
pipeline::ConditionerReference video_ref(std::vector<pipeline::ConditionerImage> frames,
                                         std::vector<double> ts, bool has_audio) {
    pipeline::ConditionerReference r;
    r.kind = pipeline::ReferenceKind::kVideo;
    r.has_audio = has_audio;
    r.frames = std::move(frames);
    r.block_timestamps = std::move(ts);
    return r;
}
pipeline::ConditionerReference audio_ref() {
    pipeline::ConditionerReference r;
    r.kind = pipeline::ReferenceKind::kAudio;
    r.has_audio = true;
    return r;
}

// The golden request (make_vision_goldens.py REFS).
pipeline::ConditionerRequest golden_request() {
    pipeline::ConditionerRequest req;
    req.prompt = kPrompt;
    req.references = {image_ref(image(10, 256, 256)),
                      video_ref(video_frames(1, 5, 32, 64), block_timestamps(5), true), audio_ref(),
                      video_ref(video_frames(3, 4, 64, 32), block_timestamps(4), false)};
    return req;
}

std::unique_ptr<pipeline::TextConditioner> open_conditioner(const ops::Context& ctx, bool fp32 = true) {
    auto tc = pipeline::TextConditioner::open({.checkpoint_dir = checkpoint(), .ctx = ctx, .fp32 = fp32});
    EXPECT_TRUE(tc.ok()) << tc.status().to_string();
    return tc.ok() ? std::move(tc).value() : nullptr;
}

void expect_error(const Status& s, ErrorCode code, const std::vector<std::string>& words) {
    ASSERT_FALSE(s.ok());
    EXPECT_EQ(s.code(), code) << s.to_string();
    for (const std::string& w : words)
        EXPECT_NE(s.message().find(w), std::string::npos) << w << ": " << s.to_string();
}

void check_hidden(const ops::Context& ctx) {
    SCOPED_TRACE(ctx.device.to_string());
    auto tc = open_conditioner(ctx);
    ASSERT_TRUE(tc);
    auto g = golden("ref2va.safetensors");
    auto c = tc->encode(golden_request());
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(std::vector<int64_t>(c->tags.begin(), c->tags.end()), ints(g, "tags"));
    ASSERT_EQ(c->rows(), static_cast<int64_t>(ints(g, "ids").size()));
    Diff d = compare(c->embeddings, *g.tensor("hidden"));
    std::printf("[diff] ref2va hidden max_abs %.3e (ref max %.3f) rel_rms %.3e\n", d.max_abs, d.ref_max,
                d.rel_rms);
    EXPECT_LT(d.rel_rms, 1e-5);
    EXPECT_LE(d.max_abs, 1e-4 * d.ref_max);
}

} // namespace

// ---- Python's "{:.Nf}"
// ------------------------------------------------------------------------------------------

TEST(PythonFormat, TimestampsRoundHalfToEven) {
    // Exact binary ties go to the even digit; other values round on their exact expansion.
    const std::pair<double, const char*> cases[] = {
        {0.25, "0.2"},    {0.75, "0.8"},  {1.25, "1.2"},   {2.75, "2.8"},   {0.5, "0.5"},
        {1.0, "1.0"},     {7.25, "7.2"},  {7.75, "7.8"},   {0.0, "0.0"},    {0.35, "0.3"},
        {0.45, "0.5"},    {0.05, "0.1"},  {0.15, "0.1"},   {9.95, "9.9"},   {9.96, "10.0"},
        {99.95, "100.0"}, {-0.0, "-0.0"}, {-0.04, "-0.0"}, {-1.25, "-1.2"}, {14.75, "14.8"}};
    for (const auto& [v, want] : cases) EXPECT_EQ(python_format_fixed(v, 1), want) << v;
    EXPECT_EQ(python_format_fixed(2.5, 0), "2");
    EXPECT_EQ(python_format_fixed(3.5, 0), "4");
    EXPECT_EQ(python_format_fixed(0.125, 2), "0.12");
    EXPECT_EQ(python_format_fixed(1e22, 1), "10000000000000000000000.0");
    EXPECT_EQ(python_format_fixed(5e-324, 3), "0.000");
    EXPECT_EQ(python_format_fixed(std::nan(""), 1), "nan");
    EXPECT_EQ(python_format_fixed(-INFINITY, 1), "-inf");
    EXPECT_EQ(pipeline::timestamp_label(0.25), "<0.2 seconds>");
    EXPECT_EQ(pipeline::timestamp_label(1.25), "<1.2 seconds>");
    EXPECT_EQ(pipeline::timestamp_label(2.0), "<2.0 seconds>");
}

TEST(PythonFormat, MatchesCorrectlyRoundedPrintf) {
    // glibc's printf also rounds the exact value half to even (default rounding mode): an independent check
    // over random doubles of every magnitude, quarter-second ticks and their ties.
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> mant(-1.0, 1.0);
    std::uniform_int_distribution<int> ex(-30, 60), dig(0, 8);
    char buf[512];
    for (int i = 0; i < 20000; ++i) {
        const double v = i < 400 ? (i - 200) * 0.125 : std::ldexp(mant(rng), ex(rng));
        const int d = i < 400 ? 1 : dig(rng);
        std::snprintf(buf, sizeof buf, "%.*f", d, v);
        ASSERT_EQ(python_format_fixed(v, d), buf) << v << " digits " << d;
    }
}

// ---- the video processor
// -----------------------------------------------------------------------------------------

TEST(VideoProcessor, SmartResizeMatchesReference) {
    auto g = golden("video_resize.safetensors");
    const auto cases = ints(g, "cases"), sizes = ints(g, "sizes");
    ASSERT_EQ(cases.size() / 5, sizes.size() / 2);
    for (size_t i = 0; i < sizes.size() / 2; ++i) {
        const int T = int(cases[5 * i]), h = int(cases[5 * i + 1]), w = int(cases[5 * i + 2]);
        SCOPED_TRACE(std::to_string(T) + " frames " + std::to_string(h) + "x" + std::to_string(w));
        auto r = pipeline::video_smart_resize(T, h, w, 2, 32, cases[5 * i + 3], cases[5 * i + 4]);
        if (sizes[2 * i] < 0) {
            EXPECT_FALSE(r.ok());
            continue;
        }
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->height, sizes[2 * i]);
        EXPECT_EQ(r->width, sizes[2 * i + 1]);
    }
    // cap_pixels_per_frame through preprocess_video (resized frames of the formula).
    const auto cap = ints(g, "cap_cases"), cap_sizes = ints(g, "cap_sizes");
    pipeline::VisionProcessorConfig cfg = pipeline::video_processor_defaults();
    cfg.cap_pixels_per_frame = true;
    for (size_t i = 0; i < cap_sizes.size() / 2; ++i) {
        std::vector<io::RgbImage> frames;
        for (int k = 0; k < cap[3 * i]; ++k)
            frames.push_back(to_rgb(frame(k, int(cap[3 * i + 1]), int(cap[3 * i + 2]))));
        auto r = pipeline::preprocess_video(frames, cfg);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->resized_height, cap_sizes[2 * i]);
        EXPECT_EQ(r->resized_width, cap_sizes[2 * i + 1]);
    }
}

TEST(VideoProcessor, PatchesMatchReference) {
    auto g = golden("ref2va.safetensors");
    const auto grids = ints(g, "video_grids");
    ASSERT_EQ(grids.size(), 6u);
    auto want = g.tensor("pixel_values_videos");
    ASSERT_TRUE(want.ok());
    const int64_t cols = want->dim(1);
    const float* w = want->data_as<float>();
    int64_t row = 0;
    const int refs[2][4] = {{1, 5, 32, 64}, {3, 4, 64, 32}}; // (reference index, frames, h, w)
    for (int v = 0; v < 2; ++v) {
        SCOPED_TRACE("video " + std::to_string(v));
        std::vector<io::RgbImage> frames;
        for (const auto& f : video_frames(refs[v][0], refs[v][1], refs[v][2], refs[v][3]))
            frames.push_back(to_rgb(f));
        auto r = pipeline::preprocess_video(frames);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->grid_t, grids[3 * v]);
        EXPECT_EQ(r->grid_h, grids[3 * v + 1]);
        EXPECT_EQ(r->grid_w, grids[3 * v + 2]);
        ASSERT_EQ(r->pixel_values.dim(1), cols);
        const int64_t n = r->pixel_values.dim(0);
        ASSERT_LE(row + n, want->dim(0));
        EXPECT_EQ(std::memcmp(r->pixel_values.data(), w + row * cols, static_cast<size_t>(n * cols) * 4), 0);
        row += n;
    }
    EXPECT_EQ(row, want->dim(0));
}

TEST(VideoProcessor, ResizedFramesArePatchedLikeImages) {
    // 3 frames of 50×70: smart_resize → 64×64 (t̄·h̄·w̄ = 2·64·64 ≥ 4096); every frame is the image path's
    // resize, and the last frame fills the second pair.
    std::vector<io::RgbImage> frames;
    for (int k = 0; k < 3; ++k) frames.push_back(to_rgb(frame(k, 50, 70)));
    auto r = pipeline::preprocess_video(frames);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->resized_height, 64);
    ASSERT_EQ(r->resized_width, 64);
    EXPECT_EQ(r->grid_t, 2);
    const int64_t cols = r->pixel_values.dim(1), per_t = int64_t(r->grid_h) * r->grid_w;
    for (int k = 0; k < 4; ++k) {
        // Frame k sits in pair k/2, temporal column k%2: compare with a single image of that frame, whose two
        // temporal columns both hold it.
        const io::RgbImage resized = pipeline::torch_resize_aa_u8(frames[size_t(std::min(k, 2))], 64, 64,
                                                                  pipeline::ResampleFilter::kBicubic);
        pipeline::VisionProcessorConfig big = pipeline::video_processor_defaults();
        auto im = pipeline::preprocess_image(resized, big);
        ASSERT_TRUE(im.ok());
        ASSERT_EQ(im->pixel_values.dim(0), per_t);
        const float* got = r->pixel_values.data_as<float>() + (k / 2) * per_t * cols;
        const float* want = im->pixel_values.data_as<float>();
        const int64_t plane = 16 * 16;
        for (int64_t row = 0; row < per_t; ++row)
            for (int c = 0; c < 3; ++c)
                ASSERT_EQ(std::memcmp(got + row * cols + (c * 2 + k % 2) * plane,
                                      want + row * cols + (c * 2) * plane, plane * 4),
                          0)
                    << "frame " << k << " row " << row << " channel " << c;
    }
}

// make_video_processor_goldens.py's frame(k, w, h).
io::RgbImage pattern_frame(int k, int w, int h) {
    io::RgbImage im(w, h);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < 3; ++c)
                im.pixels[(static_cast<size_t>(y) * w + x) * 3 + c] = static_cast<uint8_t>(
                    ((x * 37 + y * 91 + c * 53 + k * 17) ^ ((x * y * 7) >> 2) ^ (c * 11)) & 255);
    return im;
}

std::string fnv1a64(const void* data, size_t n) {
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < n; ++i) {
        h ^= static_cast<const uint8_t*>(data)[i];
        h *= 0x100000001B3ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

TEST(VideoProcessor, MatchesTransformers) {
    // Goldens from transformers' Qwen3VLVideoProcessor (tools/reference/make_video_processor_goldens.py, run
    // on a machine with transformers): resizing included.
    const std::string json = kData + "/video_processor_goldens.json";
    if (!fs::exists(json))
        GTEST_SKIP()
            << json
            << " is missing: run tools/reference/make_video_processor_goldens.py where transformers is";
    auto doc = io::read_json_file(json);
    ASSERT_TRUE(doc.ok()) << doc.status().to_string();
    EXPECT_EQ((*doc)["official_class"].get<std::string>(), "Qwen3VLVideoProcessor");
    auto g = golden("video_processor_goldens.safetensors");
    int checked = 0;
    for (const char* section : {"official", "official_cap", "small"}) {
        if (!doc->contains(section)) continue;
        const auto& cj = (*doc)[std::string(section) == "small" ? "small_config" : "official_config"];
        pipeline::VisionProcessorConfig cfg;
        cfg.patch_size = cj["patch_size"];
        cfg.temporal_patch_size = cj["temporal_patch_size"];
        cfg.merge_size = cj["merge_size"];
        cfg.min_pixels = cj["min_pixels"];
        cfg.max_pixels = cj["max_pixels"];
        cfg.cap_pixels_per_frame = std::string(section) == "official_cap";
        for (const auto& c : (*doc)[section]) {
            const int t = c["frames"], h = c["height"], w = c["width"];
            const std::string name = std::string(section) + "/" + std::to_string(t) + "x" +
                                     std::to_string(h) + "x" + std::to_string(w);
            SCOPED_TRACE(name);
            std::vector<io::RgbImage> frames;
            for (int k = 0; k < t; ++k) frames.push_back(pattern_frame(k, w, h));
            auto r = pipeline::preprocess_video(frames, cfg);
            ++checked;
            if (c.contains("error")) {
                EXPECT_FALSE(r.ok()) << "transformers rejects it: " << c["error"].get<std::string>();
                continue;
            }
            ASSERT_TRUE(r.ok()) << r.status().to_string();
            EXPECT_EQ(r->grid_t, c["grid_thw"][0].get<int>());
            EXPECT_EQ(r->grid_h, c["grid_thw"][1].get<int>());
            EXPECT_EQ(r->grid_w, c["grid_thw"][2].get<int>());
            ASSERT_EQ(r->pixel_values.dim(0), c["rows"].get<int64_t>());
            ASSERT_EQ(r->pixel_values.dim(1), c["cols"].get<int64_t>());
            EXPECT_EQ(fnv1a64(r->pixel_values.data(), r->pixel_values.nbytes()),
                      c["fnv1a64"].get<std::string>());
            const int64_t cols = r->pixel_values.dim(1), rows = r->pixel_values.dim(0);
            auto rows_equal = [&](const std::string& key, int64_t first) {
                auto want = g.tensor(key);
                ASSERT_TRUE(want.ok()) << key;
                EXPECT_EQ(std::memcmp(r->pixel_values.data_as<float>() + first * cols, want->data(),
                                      want->nbytes()),
                          0)
                    << key;
            };
            if (g.contains(name)) {
                rows_equal(name, 0);
            } else {
                rows_equal(name + "/head", 0);
                rows_equal(name + "/tail", rows - 1);
            }
        }
    }
    EXPECT_GE(checked, 9);
}

TEST(VideoProcessor, RejectsBadVideos) {
    expect_error(pipeline::preprocess_video({}).status(), ErrorCode::kInvalidArgument, {"no frames"});
    expect_error(pipeline::preprocess_video({to_rgb(frame(0, 64, 64))}).status(), ErrorCode::kInvalidArgument,
                 {"1 frame", "temporal_patch_size"});
    expect_error(pipeline::preprocess_video({to_rgb(frame(0, 64, 64)), to_rgb(frame(1, 64, 96))}).status(),
                 ErrorCode::kInvalidArgument, {"frame 1", "96x64"});
}

// ---- presentation and positions
// ----------------------------------------------------------------------------------

TEST(RefConditioner, PresentationMatchesReference) {
    auto tc = open_conditioner(ops::Context::cpu());
    ASSERT_TRUE(tc);
    auto g = golden("ref2va.safetensors");
    auto p = tc->present(golden_request());
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    EXPECT_EQ(std::vector<int64_t>(p->ids.begin(), p->ids.end()), ints(g, "ids"));
    EXPECT_EQ(std::vector<int64_t>(p->tags.begin(), p->tags.end()), ints(g, "tags"));
    std::vector<int64_t> ig, vg;
    for (const auto& x : p->grids) ig.insert(ig.end(), {x.t, x.h, x.w});
    for (const auto& x : p->video_grids) vg.insert(vg.end(), {x.t, x.h, x.w});
    EXPECT_EQ(ig, ints(g, "image_grids"));
    EXPECT_EQ(vg, ints(g, "video_grids"));
    Diff d = compare(p->pixel_values_videos, *g.tensor("pixel_values_videos"));
    EXPECT_EQ(d.max_abs, 0.0);
    auto pos = tc->positions(*p);
    ASSERT_TRUE(pos.ok()) << pos.status().to_string();
    std::vector<int64_t> flat;
    for (const auto& a : *pos) flat.insert(flat.end(), a.begin(), a.end());
    EXPECT_EQ(flat, ints(g, "positions"));
    // The label text as it reads (ids = bytes with the 0-merge tokenizer).
    std::string labels;
    for (size_t i = 0; i < p->ids.size(); ++i)
        if (p->tags[i] == pipeline::kTagText) labels.push_back(static_cast<char>(p->ids[i]));
    EXPECT_EQ(labels, "<Picture 1>: <Audio 1>: <Video 1>: <0.2 seconds><1.2 seconds><2.0 seconds><Audio 2>: "
                      "<Video 2>: <0.2 seconds><1.2 seconds>" +
                          kPrompt);
}

TEST(RefConditioner, HiddenMatchesReference) {
    check_hidden(ops::Context::cpu());
}

TEST(RefConditioner, LabelsAreTokenizedPerSegment) {
    // With the official tokenizer, "<Video 1>: " and "<0.2 seconds>" tokenized apart differ from the joined
    // text
    // (": " + "<" vs ": <"): the presentation must be the concatenation of the per-label encodings.
    const std::string dir = std::string(H3_SOURCE_DIR) + "/../shared/h3-official/tokenizer";
    if (!fs::exists(fs::path(dir) / "vocab.json")) GTEST_SKIP() << "no official tokenizer at " << dir;
    auto tok = model::tokenizer::Tokenizer::load(dir);
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    const std::vector<pipeline::ConditionerReference> refs = {video_ref({}, {0.25, 1.25}, true),
                                                              image_ref({})};
    const pipeline::VisionTokenIds v{151652, 151653, 151655, 151656};
    auto prompt = tok->encode(kPrompt);
    ASSERT_TRUE(prompt.ok());
    auto p = pipeline::build_reference_presentation(*tok, refs, {6}, {4}, *prompt, v);
    ASSERT_TRUE(p.ok()) << p.status().to_string();
    std::vector<int32_t> want, joined_text;
    auto add = [&](const std::string& s) {
        auto ids = tok->encode(s);
        want.insert(want.end(), ids->begin(), ids->end());
    };
    auto blk = [&](int32_t pad, int n) {
        want.push_back(v.vision_start);
        want.insert(want.end(), size_t(n), pad);
        want.push_back(v.vision_end);
    };
    add("<Audio 1>: ");
    add("<Video 1>: ");
    add("<0.2 seconds>");
    blk(v.video_pad, 4);
    add("<1.2 seconds>");
    blk(v.video_pad, 4);
    add("<Picture 1>: ");
    blk(v.image_pad, 6);
    want.insert(want.end(), prompt->begin(), prompt->end());
    EXPECT_EQ(p->ids, want);
    auto a = tok->encode("<Video 1>: "), b = tok->encode("<0.2 seconds>"),
         ab = tok->encode("<Video 1>: <0.2 seconds>");
    std::vector<int32_t> apart = *a;
    apart.insert(apart.end(), b->begin(), b->end());
    EXPECT_NE(apart, *ab) << "the official tokenizer no longer distinguishes the two (test premise)";
    int text = 0;
    for (int32_t t : p->tags) text += t == pipeline::kTagText;
    EXPECT_EQ(text, int(p->ids.size()) - 2 * (4 + 2) - (6 + 2));
}

TEST(RefConditioner, AudioOnlyReferencesAreLabels) {
    // Audio references reach the conditioner as labels only: no vision input, the text-only path.
    auto tc = open_conditioner(ops::Context::cpu());
    ASSERT_TRUE(tc);
    pipeline::ConditionerRequest req;
    req.prompt = kPrompt;
    req.references = {audio_ref(), audio_ref()};
    auto c = tc->encode(req);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    pipeline::ConditionerRequest text;
    text.prompt = "<Audio 1>: <Audio 2>: " + kPrompt;
    auto t = tc->encode(text);
    ASSERT_TRUE(t.ok());
    EXPECT_EQ(c->tags, t->tags);
    EXPECT_EQ(compare(c->embeddings, t->embeddings).max_abs, 0.0);
}

TEST(RefConditioner, RejectsBadRequests) {
    auto tc = open_conditioner(ops::Context::cpu());
    ASSERT_TRUE(tc);
    {
        pipeline::ConditionerRequest req = golden_request();
        req.images.push_back(image(0, 256, 256));
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument, {"images", "references"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[3].frames.clear();
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument, {"reference 3", "no frames"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[1].block_timestamps.pop_back();
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument,
                     {"reference 1", "3 vision blocks", "2 block timestamps"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[1].frames.resize(1);
        req.references[1].block_timestamps = {0.0};
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument,
                     {"reference 1", "temporal_patch_size"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[3].frames[2] = frame(0, 64, 96);
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument, {"reference 3", "frame 2"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[2].has_audio = false;
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument, {"reference 2", "has_audio"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[0].has_audio = true;
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument, {"reference 0", "audio"});
    }
    {
        pipeline::ConditionerRequest req = golden_request();
        req.references[0].image.rgb.pop_back();
        expect_error(tc->encode(req).status(), ErrorCode::kInvalidArgument, {"reference 0", "RGB8"});
    }
}

TEST(RefConditioner, MropePositionsSplitVideosPerBlock) {
    // text 2 | image 1×2×2 | text 1 | video block (1×1×2) | text 2 | video block | text 1, video grid t = 2:
    // every block is its own run at the current position, advancing it by max(h, w) (transformers 5.x).
    const int I = 9, V = 8;
    const std::vector<int32_t> ids = {1, 2, I, I, I, I, 3, V, V, 4, 5, V, V, 6};
    auto pos = model::mrope_positions(ids, {I, V}, {{1, 2, 2}}, {{2, 1, 2}});
    ASSERT_TRUE(pos.ok()) << pos.status().to_string();
    EXPECT_EQ((*pos)[0], (std::vector<int64_t>{0, 1, 2, 2, 2, 2, 4, 5, 5, 7, 8, 9, 9, 11}));
    EXPECT_EQ((*pos)[1], (std::vector<int64_t>{0, 1, 2, 2, 3, 3, 4, 5, 5, 7, 8, 9, 9, 11}));
    EXPECT_EQ((*pos)[2], (std::vector<int64_t>{0, 1, 2, 3, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}));
    EXPECT_FALSE(model::mrope_positions(ids, {I, V}, {{1, 2, 2}}, {{1, 1, 2}}).ok()); // one block short
    EXPECT_FALSE(model::mrope_positions(ids, {I, V}, {{1, 2, 2}}, {{3, 1, 2}}).ok()); // one block left over
    EXPECT_FALSE(model::mrope_positions(ids, {I, V}, {}, {{2, 1, 2}}).ok());          // image run, no grid
    EXPECT_FALSE(model::mrope_positions(ids, {I, V}, {{1, 2, 2}}, {{2, 2, 2}}).ok()); // block size
}

TEST(RefConditioner, VisionConfigReadsVideoTokenId) {
    auto j = nlohmann::json::parse(R"({"image_token_id": 7, "video_token_id": 9, "vision_config": {"depth": 2,
        "hidden_size": 16, "intermediate_size": 8, "num_heads": 2, "patch_size": 16, "out_hidden_size": 8,
        "num_position_embeddings": 64}})");
    auto c = model::VisionConfig::from_json(j, "cfg");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->video_token_id, 9);
    nlohmann::json round;
    c->add_to_json(round);
    EXPECT_EQ(round["video_token_id"], 9);
    j["video_token_id"] = 7;
    expect_error(model::VisionConfig::from_json(j, "cfg").status(), ErrorCode::kBadInput, {"video_token_id"});
    const std::string official =
        std::string(H3_SOURCE_DIR) + "/../shared/h3-official/text_encoder/config.json";
    if (!fs::exists(official)) GTEST_SKIP() << "no official config at " << official;
    auto o = model::VisionConfig::from_file(official);
    ASSERT_TRUE(o.ok()) << o.status().to_string();
    EXPECT_EQ(o->video_token_id, 151656);
    EXPECT_EQ(o->image_token_id, 151655);
    // The official video processor config: min / max pixels over the clip, the tower's patch sizes.
    auto vp = pipeline::load_vision_processor_config(
        std::string(H3_SOURCE_DIR) + "/../shared/h3-official/processor/video_preprocessor_config.json",
        pipeline::video_processor_defaults());
    ASSERT_TRUE(vp.ok()) << vp.status().to_string();
    EXPECT_EQ(vp->min_pixels, 4096);
    EXPECT_EQ(vp->max_pixels, 25165824);
    EXPECT_EQ(vp->patch_size, 16);
    EXPECT_EQ(vp->temporal_patch_size, 2);
    EXPECT_EQ(vp->merge_size, 2);
    EXPECT_FALSE(vp->cap_pixels_per_frame);
}

TEST(RefConditioner, TinyCheckpointRunsVideoReferences) {
    // make-tiny's text_encoder config carries the tokenizer's <|video_pad|> id, and a ref2va request runs end
    // to end on it (bf16, CPU).
    const fs::path d = fs::path(H3_BINARY_DIR) / "test_ref_conditioner" / "tiny";
    fs::remove_all(d);
    // write_tiny_text (make-tiny's text_encoder + tokenizer step) on a model_index.json of its own.
    fs::create_directories(d);
    ASSERT_TRUE(
        io::write_json_file((d / "model_index.json").string(), {{"_class_name", "MiniMaxH3Pipeline"}}).ok());
    model::TinyCheckpointParams params;
    params.dir = d.string();
    params.seed = 3;
    const Status w = model::write_tiny_text(params);
    ASSERT_TRUE(w.ok()) << w.to_string();
    auto tok = model::tokenizer::Tokenizer::load((d / "tokenizer").string());
    ASSERT_TRUE(tok.ok()) << tok.status().to_string();
    auto vc = model::VisionConfig::from_file((d / "text_encoder" / "config.json").string());
    ASSERT_TRUE(vc.ok()) << vc.status().to_string();
    EXPECT_EQ(vc->video_token_id, tok->token_to_id("<|video_pad|>"));
    EXPECT_GE(vc->video_token_id, 0);
    auto tc = pipeline::TextConditioner::open({.checkpoint_dir = d.string(), .ctx = ops::Context::cpu()});
    ASSERT_TRUE(tc.ok()) << tc.status().to_string();
    pipeline::ConditionerRequest req = golden_request();
    auto c = (*tc)->encode(req);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    int64_t video_rows = 0;
    for (int32_t t : c->tags) video_rows += t == pipeline::kTagVideo;
    EXPECT_EQ(video_rows, (64 + 2) + 3 * (2 + 2) + 2 * (2 + 2));
    auto f = to_f32_vector(c->embeddings);
    ASSERT_TRUE(f.ok());
    for (float x : *f) ASSERT_TRUE(std::isfinite(x));
}

TEST(RefConditioner, CudaMatchesReference) {
    if (cuda::device_count() == 0) GTEST_SKIP() << "no CUDA device";
    auto session = h3::cli::DeviceSession::open("cuda:0");
    ASSERT_TRUE(session.ok()) << session.status().to_string();
    check_hidden((*session)->context());
}
