// Image input (io/image_reader), PIL-exact resampling, fl2va keyframe preparation and the Qwen-VL image
// processor, against goldens from tools/reference/make_image_goldens.py (PIL 9.4) and
// tools/reference/make_vision_processor_goldens.py (transformers 5.17 / torch 2.11 / torchvision 0.26).
#include "io/image_reader.h"
#include "io/safetensors.h"
#include "pipeline/image_resample.h"
#include "pipeline/keyframe_image.h"
#include "pipeline/vision_processor.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>

using namespace h3;
using h3::io::RgbImage;

namespace {

const std::string kDir = std::string(H3_SOURCE_DIR) + "/tests/data/images/";

nlohmann::json load_json(const std::string& name) {
    std::ifstream f(kDir + name);
    return nlohmann::json::parse(f);
}

const io::SafetensorsFile& goldens() {
    static io::SafetensorsFile f = [] {
        auto r = io::SafetensorsFile::open(kDir + "goldens.safetensors");
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        return std::move(r).value();
    }();
    return f;
}

const io::SafetensorsFile& processor_goldens() {
    static io::SafetensorsFile f = [] {
        auto r = io::SafetensorsFile::open(kDir + "processor_goldens.safetensors");
        EXPECT_TRUE(r.ok()) << r.status().to_string();
        return std::move(r).value();
    }();
    return f;
}

// The formula image of the golden scripts.
RgbImage pattern(int w, int h) {
    RgbImage im(w, h);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int c = 0; c < 3; ++c)
                im.row(y)[3 * x + c] =
                    static_cast<uint8_t>(((x * 37 + y * 91 + c * 53) ^ ((x * y * 7) >> 2) ^ (c * 11)) & 255);
    return im;
}

RgbImage golden_image(const io::SafetensorsFile& f, const std::string& name) {
    auto t = f.tensor(name);
    EXPECT_TRUE(t.ok()) << name << ": " << t.status().to_string();
    if (!t.ok()) return {};
    EXPECT_EQ(t->dtype(), DType::kU8) << name;
    EXPECT_EQ(t->rank(), 3) << name;
    RgbImage im(static_cast<int>(t->shape()[1]), static_cast<int>(t->shape()[0]));
    std::memcpy(im.pixels.data(), t->data(), im.pixels.size());
    return im;
}

// Max |Δ| over the pixels; 256 when the sizes differ.
int max_diff(const RgbImage& a, const RgbImage& b) {
    if (a.width != b.width || a.height != b.height) return 256;
    int d = 0;
    for (size_t i = 0; i < a.pixels.size(); ++i)
        d = std::max(d, std::abs(int(a.pixels[i]) - int(b.pixels[i])));
    return d;
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return std::vector<uint8_t>(std::istreambuf_iterator<char>(f), {});
}

std::string fnv1a64(const std::vector<uint8_t>& bytes) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (uint8_t b : bytes) {
        h ^= b;
        h *= 0x100000001b3ull;
    }
    char buf[17];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return buf;
}

// Whether this build decodes the golden file (WebP is optional where libwebp-dev is missing).
bool have(const std::string& file) {
    if (file.size() > 5 && file.substr(file.size() - 5) == ".webp")
        return io::image_format_available(io::ImageFormat::kWebp);
    return io::image_format_available(io::ImageFormat::kPng);
}

pipeline::ResampleFilter filter_named(const std::string& s) {
    using pipeline::ResampleFilter;
    if (s == "box") return ResampleFilter::kBox;
    if (s == "bilinear") return ResampleFilter::kBilinear;
    if (s == "hamming") return ResampleFilter::kHamming;
    if (s == "bicubic") return ResampleFilter::kBicubic;
    return ResampleFilter::kLanczos;
}

} // namespace

// ---- decoding
// ------------------------------------------------------------------------------------------------

TEST(ImageReader, CodecsBuiltIn) {
    // The CI build configures with -DH3_REQUIRE_IMAGE_CODECS=ON; elsewhere a missing codec is reported.
    if (!io::image_codecs_available()) {
        for (const char* f : {"png_rgb.png", "jpeg_420.jpg", "webp_lossless.webp"}) {
            if (have(f)) continue;
            auto r = io::read_image(kDir + f);
            ASSERT_FALSE(r.ok());
            EXPECT_EQ(r.status().code(), ErrorCode::kUnimplemented) << r.status().to_string();
            EXPECT_NE(r.status().message().find("this build has no"), std::string::npos);
        }
        GTEST_SKIP() << "this build lacks some image codecs; their cases are skipped";
    }
}

TEST(ImageReader, EveryFileMatchesPil) {
    if (!have("x.png")) GTEST_SKIP() << "no PNG/JPEG decoders in this build";
    const auto doc = load_json("goldens.json");
    ASSERT_GE(doc["decode"].size(), 25u);
    for (const auto& e : doc["decode"]) {
        const std::string name = e["file"];
        SCOPED_TRACE(name);
        if (!have(name)) continue;
        auto r = io::read_image(kDir + name);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        const RgbImage want = golden_image(goldens(), "decode/" + name);
        EXPECT_EQ(r->image.width, e["width"].get<int>());
        EXPECT_EQ(r->image.height, e["height"].get<int>());
        EXPECT_EQ(max_diff(r->image, want), 0);
        EXPECT_EQ(r->source_mode, e["mode"].get<std::string>());
        // The same bytes from memory give the same pixels.
        auto m = io::decode_image(read_bytes(kDir + name), "upload");
        ASSERT_TRUE(m.ok()) << m.status().to_string();
        EXPECT_EQ(m->image.pixels, r->image.pixels);
    }
}

TEST(ImageReader, ExifOrientations) {
    if (!have("x.png")) GTEST_SKIP() << "no PNG/JPEG decoders in this build";
    for (int o = 1; o <= 8; ++o) {
        auto r = io::read_image(kDir + "png_exif" + std::to_string(o) + ".png");
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->orientation, o);
        EXPECT_EQ(r->stored_width, 7);
        EXPECT_EQ(r->stored_height, 4);
        EXPECT_EQ(r->image.width, o >= 5 ? 4 : 7) << o;
    }
    for (auto [file, o] : std::vector<std::pair<std::string, int>>{
             {"jpeg_exif6.jpg", 6}, {"jpeg_exif3.jpg", 3}, {"webp_exif5.webp", 5}, {"png_xmp8.png", 8}}) {
        if (!have(file)) continue;
        auto r = io::read_image(kDir + file);
        ASSERT_TRUE(r.ok()) << file << ": " << r.status().to_string();
        EXPECT_EQ(r->orientation, o) << file;
    }
    // Rotation 6 is 90° clockwise: the output's top-left pixel is the input's bottom-left one.
    const RgbImage src = pattern(5, 3);
    const RgbImage rot = io::apply_orientation(src, 6);
    ASSERT_EQ(rot.width, 3);
    ASSERT_EQ(rot.height, 5);
    EXPECT_EQ(0, std::memcmp(rot.row(0), src.row(2), 3));
    EXPECT_EQ(0, std::memcmp(rot.row(0) + 6, src.row(0), 3)); // top-right = input top-left
}

TEST(ImageReader, ExifParser) {
    // Little-endian with the tag second, big-endian, prefix-less TIFF, missing tag, bad values, short data.
    const uint8_t le[] = {'I', 'I', 42, 0,    8,    0, 0, 0, 2, 0, 0x0f, 0x01, 2, 0, 4, 0, 0, 0, 'H',
                          '3', 0,   0,  0x12, 0x01, 3, 0, 1, 0, 0, 0,    6,    0, 0, 0, 0, 0, 0, 0};
    EXPECT_EQ(io::exif_orientation(le, sizeof le), 6);
    const uint8_t be[] = {'E',  'x',  'i', 'f', 0, 0, 'M', 'M', 0, 42, 0, 0, 0, 8, 0, 1,
                          0x01, 0x12, 0,   3,   0, 0, 0,   1,   0, 3,  0, 0, 0, 0, 0, 0};
    EXPECT_EQ(io::exif_orientation(be, sizeof be), 3);
    uint8_t nine[sizeof be];
    std::memcpy(nine, be, sizeof be);
    nine[25] = 9;
    EXPECT_EQ(io::exif_orientation(nine, sizeof nine), 0);
    uint8_t other_tag[sizeof le];
    std::memcpy(other_tag, le, sizeof le);
    other_tag[22] = 0x13;
    EXPECT_EQ(io::exif_orientation(other_tag, sizeof other_tag), 0);
    EXPECT_EQ(io::exif_orientation(le, 20), 0); // IFD cut short
    const uint8_t junk[] = {'X', 'X', 42, 0, 8, 0, 0, 0};
    EXPECT_EQ(io::exif_orientation(junk, sizeof junk), 0);
}

TEST(ImageReader, FormatFromMagicBytesNotName) {
    if (!have("x.png")) GTEST_SKIP() << "no PNG/JPEG decoders in this build";
    const auto dir = std::filesystem::path(H3_BINARY_DIR) / "test_image_tmp";
    std::filesystem::create_directories(dir);
    const auto fake = dir / "really_a_png.jpg";
    std::filesystem::copy_file(kDir + "png_rgb.png", fake, std::filesystem::copy_options::overwrite_existing);
    auto r = io::read_image(fake.string());
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->format, io::ImageFormat::kPng);
    EXPECT_EQ(max_diff(r->image, golden_image(goldens(), "decode/png_rgb.png")), 0);
}

namespace {
void expect_error(const Result<io::DecodedImage>& r, ErrorCode code, const std::string& needle) {
    ASSERT_FALSE(r.ok()) << "expected an error containing '" << needle << "'";
    EXPECT_EQ(r.status().code(), code) << r.status().to_string();
    EXPECT_NE(r.status().message().find(needle), std::string::npos) << r.status().to_string();
}
} // namespace

TEST(ImageReader, BadInputGivesClearErrors) {
    if (!have("x.png")) GTEST_SKIP() << "no PNG/JPEG decoders in this build";
    expect_error(io::decode_image(nullptr, 0, "upload"), ErrorCode::kBadInput, "upload: empty");
    const std::vector<uint8_t> garbage = {'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd', '!', '!'};
    expect_error(io::decode_image(garbage, "g.png"), ErrorCode::kBadInput, "g.png: unsupported image format");
    const std::vector<uint8_t> gif = {'G', 'I', 'F', '8', '9', 'a', 1, 0, 1, 0, 0, 0, 0};
    expect_error(io::decode_image(gif, "a.gif"), ErrorCode::kBadInput, "GIF");
    expect_error(io::read_image(kDir + "does_not_exist.png"), ErrorCode::kNotFound, "does_not_exist.png");

    for (const char* name :
         {"png_rgb.png", "jpeg_420.jpg", "jpeg_progressive.jpg", "webp_lossless.webp", "webp_lossy.webp"}) {
        if (!have(name)) continue;
        auto bytes = read_bytes(kDir + name);
        for (double frac : {0.3, 0.6, 0.9}) {
            std::vector<uint8_t> cut(bytes.begin(), bytes.begin() + static_cast<long>(bytes.size() * frac));
            SCOPED_TRACE(std::string(name) + " cut at " + std::to_string(frac));
            expect_error(io::decode_image(cut, name), ErrorCode::kBadInput, "truncated");
        }
    }
    // A PNG header that declares 20000 x 10 (rejected before any pixel is decoded).
    auto png = read_bytes(kDir + "png_rgb.png");
    png[16] = 0, png[17] = 0, png[18] = 0x4e, png[19] = 0x20;
    expect_error(io::decode_image(png, "big.png"), ErrorCode::kInvalidArgument, "20000x17");
    // A JPEG whose SOF0 says 20000 x 20000.
    auto jpg = read_bytes(kDir + "jpeg_420.jpg");
    size_t sof = 0;
    for (size_t i = 2; i + 9 < jpg.size(); ++i)
        if (jpg[i] == 0xFF && jpg[i + 1] == 0xC0) {
            sof = i;
            break;
        }
    ASSERT_GT(sof, 0u);
    jpg[sof + 5] = 0x4e, jpg[sof + 6] = 0x20, jpg[sof + 7] = 0x4e, jpg[sof + 8] = 0x20;
    expect_error(io::decode_image(jpg, "big.jpg"), ErrorCode::kInvalidArgument, "larger than the limit");
    // Limits are parameters: a 23x17 WebP against 16 px per side, a 37x29 JPEG against 1000 pixels.
    io::ImageLimits small;
    small.max_side = 16;
    if (have("webp_lossless.webp"))
        expect_error(io::decode_image(read_bytes(kDir + "webp_lossless.webp"), "w.webp", small),
                     ErrorCode::kInvalidArgument, "23x17");
    expect_error(io::decode_image(read_bytes(kDir + "png_rgb.png"), "p.png", small),
                 ErrorCode::kInvalidArgument, "23x17");
    io::ImageLimits few;
    few.max_pixels = 1000;
    expect_error(io::decode_image(read_bytes(kDir + "jpeg_444.jpg"), "j.jpg", few),
                 ErrorCode::kInvalidArgument, "1000 pixels");
    // A corrupted PNG data stream (bytes inside IDAT flipped) fails inside libpng with its message.
    auto bad = read_bytes(kDir + "png_rgb.png");
    for (size_t i = 60; i < 80; ++i) bad[i] ^= 0xFF;
    auto r = io::decode_image(bad, "bad.png");
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("bad.png"), std::string::npos) << r.status().to_string();
}

// ---- resampling
// -------------------------------------------------------------------------------------------------

TEST(ImageResample, PilResizeIsExact) {
    const auto doc = load_json("goldens.json");
    ASSERT_GE(doc["resize"].size(), 10u);
    for (const auto& c : doc["resize"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name);
        const RgbImage src = pattern(c["src_width"], c["src_height"]);
        const RgbImage got = pipeline::pil_resize(src, c["width"], c["height"], filter_named(c["filter"]));
        EXPECT_EQ(max_diff(got, golden_image(goldens(), "resize/" + name)), 0);
    }
    // Same size is a copy.
    const RgbImage p = pattern(9, 7);
    EXPECT_EQ(pipeline::pil_resize(p, 9, 7, pipeline::ResampleFilter::kLanczos).pixels, p.pixels);
}

TEST(ImageResample, TorchUint8AntialiasIsExact) {
    const auto doc = load_json("processor_goldens.json");
    ASSERT_GE(doc["torch_resize"].size(), 4u);
    for (const auto& c : doc["torch_resize"]) {
        const int sw = c["src_width"], sh = c["src_height"], w = c["width"], h = c["height"];
        const std::string name = "torch_resize/" + std::to_string(sw) + "x" + std::to_string(sh) + "_" +
                                 std::to_string(w) + "x" + std::to_string(h);
        SCOPED_TRACE(name);
        EXPECT_TRUE(c["torchvision_equal"].get<bool>());
        const RgbImage got =
            pipeline::torch_resize_aa_u8(pattern(sw, sh), w, h, pipeline::ResampleFilter::kBicubic);
        EXPECT_EQ(max_diff(got, golden_image(processor_goldens(), name)), 0);
    }
}

// ---- keyframes
// --------------------------------------------------------------------------------------------------

TEST(Keyframes, StretchAndCoverMatchReference) {
    const auto doc = load_json("goldens.json");
    for (const auto& c : doc["keyframes"]) {
        const std::string name = c["name"];
        SCOPED_TRACE(name);
        RgbImage first, last;
        pipeline::KeyframeRequest req;
        if (!c["first"].is_null()) {
            first = pattern(c["first"][0], c["first"][1]);
            req.first = &first;
        }
        if (!c["last"].is_null()) {
            last = pattern(c["last"][0], c["last"][1]);
            req.last = &last;
        }
        const pipeline::Canvas canvas{c["width"].get<int>(), c["height"].get<int>()};
        req.canvas = canvas;
        auto r = pipeline::prepare_keyframes(req);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        ASSERT_EQ(r->images.size(), (req.first ? 1u : 0u) + (req.last ? 1u : 0u));
        for (size_t i = 0; i < r->images.size(); ++i)
            EXPECT_EQ(
                max_diff(r->images[i], golden_image(goldens(), "keyframe/" + name + "/" + std::to_string(i))),
                0)
                << "keyframe " << i;
        EXPECT_EQ(r->anchors.back(),
                  req.last ? pipeline::KeyframeAnchor::kLast : pipeline::KeyframeAnchor::kFirst);
        // The cover arithmetic for every source.
        size_t k = 0;
        for (const RgbImage* im : {req.first, req.last}) {
            if (!im) continue;
            const auto p = pipeline::cover_plan(im->width, im->height, canvas);
            const auto& want = c["cover"][k++];
            EXPECT_EQ(p.resized_width, want[0].get<int>());
            EXPECT_EQ(p.resized_height, want[1].get<int>());
            EXPECT_EQ(p.left, want[2].get<int>());
            EXPECT_EQ(p.top, want[3].get<int>());
        }
    }
}

TEST(Keyframes, DefaultCanvasFromFirstKeyframe) {
    const auto doc = load_json("goldens.json");
    for (const auto& c : doc["default_canvas"]) {
        SCOPED_TRACE(c.dump().substr(0, 60));
        RgbImage first = pattern(c["first"][0], c["first"][1]), last;
        pipeline::KeyframeRequest req;
        req.canvas_multiple = 32; // the released checkpoint's (VAE x16, patch 2)
        req.first = &first;
        if (!c["last"].is_null()) {
            last = pattern(c["last"][0], c["last"][1]);
            req.last = &last;
        }
        auto r = pipeline::prepare_keyframes(req);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->canvas.width, c["width"].get<int>());
        EXPECT_EQ(r->canvas.height, c["height"].get<int>());
        ASSERT_EQ(r->images.size(), c["images"].size());
        for (size_t i = 0; i < r->images.size(); ++i) {
            const auto& want = c["images"][i];
            EXPECT_EQ(fnv1a64(r->images[i].pixels), want["fnv1a64"].get<std::string>()) << "keyframe " << i;
            for (const auto& p : want["probes"]) {
                const uint8_t* px = r->images[i].row(p[0].get<int>()) + 3 * p[1].get<int>();
                for (int ch = 0; ch < 3; ++ch) EXPECT_EQ(int(px[ch]), p[2][ch].get<int>());
            }
        }
    }
}

TEST(Keyframes, CanvasRuleAndErrors) {
    const auto doc = load_json("goldens.json");
    for (const auto& c : doc["canvas_for_keyframe"]) {
        auto r = pipeline::canvas_for_keyframe(c["width"], c["height"], 32);
        if (c["canvas"].is_null()) {
            ASSERT_FALSE(r.ok()) << c.dump();
            EXPECT_NE(r.status().message().find("aspect"), std::string::npos) << r.status().to_string();
        } else {
            ASSERT_TRUE(r.ok()) << c.dump() << ": " << r.status().to_string();
            EXPECT_EQ(r->width, c["canvas"]["width"].get<int>()) << c.dump();
            EXPECT_EQ(r->height, c["canvas"]["height"].get<int>()) << c.dump();
        }
    }
    EXPECT_FALSE(pipeline::prepare_keyframes({}).ok());
    RgbImage empty;
    pipeline::KeyframeRequest req;
    req.canvas_multiple = 32;
    req.first = &empty;
    EXPECT_FALSE(pipeline::prepare_keyframes(req).ok());
    // A keyframe already at the canvas size is passed through untouched.
    RgbImage exact = pattern(64, 32);
    req.first = &exact;
    req.canvas = pipeline::Canvas{64, 32};
    auto r = pipeline::prepare_keyframes(req);
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->images[0].pixels, exact.pixels);
}

// ---- the Qwen-VL image processor
// -------------------------------------------------------------------------------

TEST(VisionProcessor, SmartResizeTable) {
    const auto doc = load_json("goldens.json");
    for (const auto& c : doc["smart_resize"]) {
        auto r = pipeline::smart_resize(c["height"], c["width"], 32, 65536, 16777216);
        if (c["resized"].is_null()) {
            EXPECT_FALSE(r.ok()) << c.dump();
            continue;
        }
        ASSERT_TRUE(r.ok()) << c.dump();
        EXPECT_EQ(r->height, c["resized"][0].get<int>()) << c.dump();
        EXPECT_EQ(r->width, c["resized"][1].get<int>()) << c.dump();
    }
}

TEST(VisionProcessor, OfficialConfigFile) {
    const std::string path = "/work/shared/h3-official/processor/preprocessor_config.json";
    if (!std::filesystem::exists(path)) GTEST_SKIP() << path << " not present";
    auto c = pipeline::load_vision_processor_config(path);
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_EQ(c->patch_size, 16);
    EXPECT_EQ(c->temporal_patch_size, 2);
    EXPECT_EQ(c->merge_size, 2);
    EXPECT_EQ(c->min_pixels, 65536);
    EXPECT_EQ(c->max_pixels, 16777216);
    EXPECT_EQ(c->image_mean[1], 0.5);
    EXPECT_EQ(c->image_std[2], 0.5);
}

namespace {
// Bit-exact comparison of rows [row0, row0 + n) of `got` with a [n, cols] golden.
void expect_rows(const Tensor& got, int64_t row0, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.shape()[1], want.shape()[1]) << what;
    const int64_t cols = want.shape()[1], n = want.shape()[0];
    const float* g = got.data_as<float>() + row0 * cols;
    const float* w = want.data_as<float>();
    int64_t bad = 0;
    float worst = 0;
    for (int64_t i = 0; i < n * cols; ++i)
        if (g[i] != w[i]) {
            ++bad;
            worst = std::max(worst, std::fabs(g[i] - w[i]));
        }
    EXPECT_EQ(bad, 0) << what << ": " << bad << " values differ, max |diff| " << worst;
}
} // namespace

TEST(VisionProcessor, MatchesTransformersSmallConfig) {
    const auto doc = load_json("processor_goldens.json");
    EXPECT_EQ(doc["official_class"].get<std::string>(), "Qwen2VLImageProcessor");
    pipeline::VisionProcessorConfig cfg;
    cfg.patch_size = doc["small_config"]["patch_size"];
    cfg.min_pixels = doc["small_config"]["min_pixels"];
    cfg.max_pixels = doc["small_config"]["max_pixels"];
    for (const auto& c : doc["small"]) {
        const int w = c["width"], h = c["height"];
        const std::string name = "small/" + std::to_string(w) + "x" + std::to_string(h);
        SCOPED_TRACE(name);
        auto r = pipeline::preprocess_image(pattern(w, h), cfg);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->grid_t, c["grid_thw"][0].get<int>());
        EXPECT_EQ(r->grid_h, c["grid_thw"][1].get<int>());
        EXPECT_EQ(r->grid_w, c["grid_thw"][2].get<int>());
        auto want = processor_goldens().tensor(name);
        ASSERT_TRUE(want.ok());
        ASSERT_EQ(r->pixel_values.shape()[0], want->shape()[0]);
        expect_rows(r->pixel_values, 0, *want, name);
    }
}

TEST(VisionProcessor, MatchesTransformersOfficialConfig) {
    const auto doc = load_json("processor_goldens.json");
    for (const auto& c : doc["official"]) {
        const int w = c["width"], h = c["height"];
        const std::string name = "official/" + std::to_string(w) + "x" + std::to_string(h);
        SCOPED_TRACE(name);
        auto r = pipeline::preprocess_image(pattern(w, h));
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->grid_h, c["grid_thw"][1].get<int>());
        EXPECT_EQ(r->grid_w, c["grid_thw"][2].get<int>());
        ASSERT_EQ(r->pixel_values.shape()[0], c["rows"].get<int64_t>());
        ASSERT_EQ(r->pixel_values.shape()[1], c["cols"].get<int64_t>());
        expect_rows(r->pixel_values, 0, *processor_goldens().tensor(name + "/head"), name + " head");
        expect_rows(r->pixel_values, c["rows"].get<int64_t>() - 2,
                    *processor_goldens().tensor(name + "/tail"), name + " tail");
        std::vector<uint8_t> bytes(r->pixel_values.nbytes());
        std::memcpy(bytes.data(), r->pixel_values.data(), bytes.size());
        EXPECT_EQ(fnv1a64(bytes), c["fnv1a64"].get<std::string>());
        EXPECT_EQ(r->num_tokens(2), int64_t(c["grid_thw"][1].get<int>()) * c["grid_thw"][2].get<int>() / 4);
    }
    // A canvas-sized keyframe keeps its size: 768x1344 → 1008 image tokens (spec §8.2).
    auto r = pipeline::preprocess_image(pattern(1344, 768));
    ASSERT_TRUE(r.ok());
    EXPECT_EQ(r->resized_width, 1344);
    EXPECT_EQ(r->resized_height, 768);
    EXPECT_EQ(r->num_tokens(2), 1008);
}
