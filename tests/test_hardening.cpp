// Issue #22's regressions below the HTTP layer: strict integers, UTF-8 checks, depth-bounded JSON,
// range-checked config integers, output extensions, private temporary files, allocation checks against
// declared image and video sizes, cooperative cancellation inside the VAE decoders/encoders and the muxer,
// the job store's lock, orphan cleanup and deletion order; and the server's pure parts (byte ranges,
// multipart, body decoding).
#include "core/strict_int.h"
#include "core/utf8.h"
#include "io/image_reader.h"
#include "io/json_file.h"
#include "io/media_reader.h"
#include "io/media_writer.h"
#include "io/temp_file.h"
#include "model/audio_vae/audio_vae.h"
#include "model/audio_vae/audio_vae_encoder.h"
#include "model/dit/dit_config.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/video_vae/video_vae.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/context.h"
#include "ops/random.h"
#include "pipeline/decode.h"
#include "pipeline/reference_files.h"
#include "serve/wire/video_request.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>

#ifdef H3_WITH_HTTP_SERVER
#include "serve/body_decoder.h"
#include "serve/byte_range.h"
#include "serve/job_store.h"
#include "serve/multipart.h"

#include <brotli/encode.h>
#include <zlib.h>
#endif

namespace fs = std::filesystem;
using namespace h3;

namespace {

const fs::path kWork = fs::path(H3_BINARY_DIR) / "test_hardening";

bool has(const Status& s, const std::string& needle) {
    return s.message().find(needle) != std::string::npos;
}

TEST(StrictInt, RejectsWhatWouldWrapOrSaturate) {
    EXPECT_EQ(*parse_uint64("0", "x"), 0u);
    EXPECT_EQ(*parse_uint64("18446744073709551615", "x"), UINT64_MAX);
    for (const char* bad : {"-1", "18446744073709551616", "+1", " 1", "1 ", "", "01", "1e3", "0x10", "1.0"}) {
        auto r = parse_uint64(bad, "--seed");
        ASSERT_FALSE(r.ok()) << bad;
        EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
        EXPECT_TRUE(has(r.status(), "--seed")) << r.status().message();
    }
    EXPECT_FALSE(parse_uint64("101", "limit", 100).ok());
    EXPECT_EQ(*parse_int64("-9223372036854775808", "x"), INT64_MIN);
    EXPECT_EQ(*parse_int64("-5", "x", -10, 10), -5);
    for (const char* bad : {"9223372036854775808", "-9223372036854775809", "-0", "--1", "-"})
        EXPECT_FALSE(parse_int64(bad, "x").ok()) << bad;
    EXPECT_FALSE(parse_int64("11", "x", -10, 10).ok());
    EXPECT_TRUE(strict_integer_error<uint64_t>("-1", "--seed").find("--seed") != std::string::npos);
    EXPECT_TRUE(strict_integer_error<int>("4294967298", "--steps").find("--steps") != std::string::npos);
    EXPECT_EQ(strict_integer_error<int>("-3", "--x"), "");
}

TEST(Utf8, ValidatesAndSanitizes) {
    EXPECT_TRUE(is_valid_utf8("plain ascii"));
    EXPECT_TRUE(is_valid_utf8("\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80")); // é € 😀
    for (const char* bad :
         {"\xff", "\xc0\xaf", "\xe0\x80\xaf", "\xed\xa0\x80", "\xf4\x90\x80\x80", "\xc3", "a\x80"})
        EXPECT_FALSE(is_valid_utf8(bad)) << bad;
    EXPECT_EQ(sanitized_utf8("a\xffz\n\xc3\xa9"), "a?z?\xc3\xa9");
}

TEST(Json, NestingIsBoundedBeforeParsing) {
    std::string ok(64, '[');
    ok += std::string(64, ']');
    EXPECT_TRUE(io::parse_json(ok, "body").ok());
    std::string deep(65, '[');
    deep += std::string(65, ']');
    auto r = io::parse_json(deep, "body");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_TRUE(has(r.status(), "body: JSON nests deeper than 64 levels")) << r.status().message();
    // a million levels in an object value: refused at once, no recursion anywhere
    const std::string bomb = "{\"seed\": " + std::string(1000000, '[') + "}";
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(io::parse_json(bomb, "body").ok());
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(2));
    // brackets inside strings do not count
    EXPECT_TRUE(io::parse_json("{\"a\": \"" + std::string(200, '[') + "\"}", "x").ok());
    auto bad = io::parse_json("{nope", "file c.json");
    ASSERT_FALSE(bad.ok());
    EXPECT_TRUE(has(bad.status(), "file c.json: not valid JSON")) << bad.status().message();
}

// Found by fuzz_request_json: an empty key was refused without naming a field (the API's param was null).
TEST(Json, EmptyKeyIsNamed) {
    std::string field;
    auto r = api::read_video_body_text(R"({"prompt": "a fox", "": 7})", &field);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(field, "\"\"");
    EXPECT_TRUE(has(r.status(), "unknown field")) << r.status().message();
}

// The lora field of a multipart form is JSON text: parsed with the same bound (it was the one unbounded parse
// of request data).
TEST(Json, NestedLoraFormFieldIsBounded) {
    std::string field;
    const std::string deep = std::string(100000, '[') + std::string(100000, ']');
    auto r = api::read_video_body(nlohmann::json{{"prompt", "a fox"}, {"lora", deep}}, &field);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(field, "lora");
    EXPECT_TRUE(has(r.status(), "lora: the form part: JSON nests deeper than 64 levels"))
        << r.status().message();
}

TEST(Json, ConfigIntegersAreRangeChecked) {
    nlohmann::json j = {{"num_layers", 4294967298ull}};
    auto dit = model::DitConfig::from_json(j, "transformer/config.json");
    ASSERT_FALSE(dit.ok());
    EXPECT_TRUE(has(dit.status(), "'num_layers' = 4294967298 is outside")) << dit.status().message();
    EXPECT_FALSE(model::DitConfig::from_json({{"num_layers", 2.5}}, "c").ok());
    auto vae = model::VideoVaeConfig::from_json({{"decoder_num_layers", 4294967298ull}}, "vae/config.json");
    ASSERT_FALSE(vae.ok());
    EXPECT_TRUE(has(vae.status(), "decoder_num_layers")) << vae.status().message();
    auto rates =
        model::AudioVaeConfig::from_json({{"decoder_rates", {5, 4294967301ull}}}, "audio_vae/config.json");
    ASSERT_FALSE(rates.ok());
    EXPECT_TRUE(has(rates.status(), "'decoder_rates'[1] = 4294967301 is outside"))
        << rates.status().message();
    int v = 0;
    EXPECT_FALSE(io::json_int(nlohmann::json(-1), "x", v, 0, 10).ok());
    EXPECT_TRUE(io::json_int(nlohmann::json(10), "x", v, 0, 10).ok());
    EXPECT_EQ(v, 10);
}

// Found by fuzz_config (UBSan: 536870912 * 512 overflowed an int): the products a config's factors and widths
// make are bounded before anything multiplies them, and the refusal names the field.
TEST(Json, ConfigProductsCannotOverflow) {
    const std::string vae_file = "vae/config.json";
    auto factors = model::VideoVaeConfig::from_json(
        {{"spatial_downsample_factors", {2, 2, 2, 2, 256, 256, 512, 512, 11, 1}}}, vae_file);
    ASSERT_FALSE(factors.ok());
    EXPECT_TRUE(
        has(factors.status(), "vae/config.json: field 'spatial_downsample_factors': the factors multiply"))
        << factors.status().message();
    auto zero = model::VideoVaeConfig::from_json({{"temporal_downsample_factors", {1, 0}}}, vae_file);
    ASSERT_FALSE(zero.ok());
    EXPECT_TRUE(has(zero.status(), "'temporal_downsample_factors'[1] is 0")) << zero.status().message();
    auto wide = model::VideoVaeConfig::from_json(
        {{"decoder_num_attention_heads", 1 << 20}, {"decoder_attention_head_dim", 1 << 20}}, vae_file);
    ASSERT_FALSE(wide.ok());
    EXPECT_TRUE(has(wide.status(), "decoder widths overflow")) << wide.status().message();
    auto ratio = model::VideoVaeConfig::from_json({{"decoder_rope_dim_ratio", 1e300}}, vae_file);
    ASSERT_FALSE(ratio.ok());
    EXPECT_TRUE(has(ratio.status(), "decoder_rope_dim_ratio")) << ratio.status().message();
    auto hop = model::AudioVaeConfig::from_json(
        {{"decoder_rates", {65536, 65536}}, {"decoder_kernel_sizes", {65536, 65536}}},
        "audio_vae/config.json");
    ASSERT_FALSE(hop.ok());
    EXPECT_TRUE(has(hop.status(), "decoder_rates multiply past")) << hop.status().message();
    EXPECT_TRUE(model::VideoVaeConfig::from_json(model::VideoVaeConfig{}.to_json(), vae_file).ok());
    model::AudioVaeConfig released; // the release's rates and widths (the latents statistics filled in)
    released.latents_mean.assign(static_cast<size_t>(released.latent_channels), 0.0f);
    released.latents_std.assign(static_cast<size_t>(released.latent_channels), 1.0f);
    auto audio_default = model::AudioVaeConfig::from_json(released.to_json(), "a");
    EXPECT_TRUE(audio_default.ok()) << audio_default.status().to_string();
}

TEST(Output, UnknownExtensionsAreRefused) {
    EXPECT_EQ(*pipeline::checked_output_kind("a.mp4"), pipeline::OutputKind::kMp4);
    EXPECT_EQ(*pipeline::checked_output_kind("a.WAV"), pipeline::OutputKind::kWav);
    EXPECT_EQ(*pipeline::checked_output_kind("frames"), pipeline::OutputKind::kPngDir);
    EXPECT_EQ(*pipeline::checked_output_kind("frames.d/"), pipeline::OutputKind::kPngDir);
    auto mkv = pipeline::checked_output_kind("out.mkv");
    ASSERT_FALSE(mkv.ok());
    EXPECT_EQ(mkv.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_TRUE(has(mkv.status(), ".mkv") && has(mkv.status(), ".mp4") && has(mkv.status(), ".wav"))
        << mkv.status().message();
}

TEST(TempFile, FreshPrivateAndRemoved) {
    std::string path;
    {
        auto f = io::TempFile::create("../../etc/passwd");
        ASSERT_TRUE(f.ok()) << f.status().to_string();
        path = f->path();
        EXPECT_EQ(path.find(".."), std::string::npos) << path;
        struct stat st {};
        ASSERT_EQ(lstat(path.c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0600u);
        ASSERT_EQ(lstat(fs::path(path).parent_path().c_str(), &st), 0);
        EXPECT_EQ(st.st_mode & 0777, 0700u);
        ASSERT_TRUE(f->append("abc", 3).ok());
        EXPECT_EQ(f->size(), 3);
        auto g = io::TempFile::create("upload");
        ASSERT_TRUE(g.ok());
        EXPECT_NE(g->path(), path);
    }
    EXPECT_FALSE(fs::exists(path));
}

TEST(References, UploadLabelsNeverMeetTheTemporaryPath) {
    // The label may contain anything, even the temporary directory: errors name it, and return at once.
    auto dir = io::private_temp_dir();
    ASSERT_TRUE(dir.ok());
    const std::string label = "reference 1 (" + *dir + "/reference-XXXXXX " + *dir + ")";
    const auto t0 = std::chrono::steady_clock::now();
    auto r = pipeline::decode_reference("definitely not media", label);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(has(r.status(), label)) << r.status().message();
    size_t left = 0;
    for (const auto& e : fs::directory_iterator(*dir))
        left += e.path().filename().string().rfind("reference", 0) == 0;
    EXPECT_EQ(left, 0u);
}

#ifdef H3_WITH_IMAGE_CODECS
void put32be(std::string& s, size_t at, uint32_t v) {
    for (int i = 0; i < 4; ++i) s[at + i] = static_cast<char>((v >> (24 - 8 * i)) & 0xff);
}

TEST(Images, DeclaredSizesAreCheckedBeforeAllocation) {
    // 53 bytes: PNG signature, IHDR of 10000x10000 RGB, then nothing that could hold the pixels
    std::string png("\x89PNG\r\n\x1a\n", 8);
    png += std::string("\0\0\0\x0dIHDR", 8);
    png += std::string(13, '\0');
    put32be(png, 16, 10000);
    put32be(png, 20, 10000);
    png[24] = 8, png[25] = 2;
    png += std::string(4, '\0');  // CRC (libpng checks it later; the size check comes first)
    png += std::string(12, '\0'); // padding to 53 bytes
    ASSERT_EQ(png.size(), 53u);
    auto r =
        io::decode_image(reinterpret_cast<const uint8_t*>(png.data()), png.size(), "upload 'first_frame'");
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kBadInput);
    EXPECT_TRUE(has(r.status(), "declares 10000x10000")) << r.status().message();

    // a JPEG header declaring 9000x9000 in 600 bytes
    std::string jpg = {'\xff', '\xd8', '\xff', '\xc0', 0, 17, 8};
    jpg += {static_cast<char>(9000 >> 8), static_cast<char>(9000 & 255), static_cast<char>(9000 >> 8),
            static_cast<char>(9000 & 255), 3};
    for (int c = 1; c <= 3; ++c) jpg += {static_cast<char>(c), 0x11, 0};
    jpg += std::string(600 - jpg.size(), '\0');
    r = io::decode_image(reinterpret_cast<const uint8_t*>(jpg.data()), jpg.size(), "upload");
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(has(r.status(), "upload")) << r.status().message();
}
#endif

#ifdef H3_WITH_FFMPEG
TEST(Media, FramePixelCapComesBeforeDecoding) {
    fs::create_directories(kWork);
    const std::string mp4 = (kWork / "cap.mp4").string();
    Tensor frames = Tensor::host(Shape{4, 32, 64, 3}, DType::kU8);
    std::memset(frames.data(), 90, static_cast<size_t>(frames.nbytes()));
    ASSERT_TRUE(io::write_mp4(mp4, frames, Tensor(), 0).ok());
    io::MediaReadOptions o;
    o.max_frame_pixels = 1000;
    o.name = "reference 1 (clip.mp4)";
    auto r = io::read_media(mp4, o);
    ASSERT_FALSE(r.ok());
    EXPECT_TRUE(has(r.status(), "reference 1 (clip.mp4)") && has(r.status(), "64x32"))
        << r.status().message();
    EXPECT_FALSE(has(r.status(), mp4)) << r.status().message();
    o.max_frame_pixels = 64 * 32;
    EXPECT_TRUE(io::read_media(mp4, o).ok());
}

TEST(Cancel, MuxStopsBetweenFrames) {
    std::atomic<bool> cancel{true};
    Tensor frames = Tensor::host(Shape{3, 32, 32, 3}, DType::kU8);
    std::memset(frames.data(), 0, static_cast<size_t>(frames.nbytes()));
    io::Mp4Options o;
    o.cancel = &cancel;
    fs::create_directories(kWork);
    const Status s = io::write_mp4((kWork / "cancel.mp4").string(), frames, Tensor(), 0, o);
    EXPECT_EQ(s.code(), ErrorCode::kCancelled) << s.to_string();
}
#endif

// Cancellation is checked inside the long stages: a flag raised as a stage starts stops it from within.
TEST(Cancel, DecodersAndEncodersStopFromInside) {
    const fs::path tiny = kWork / "tiny";
    if (!fs::exists(tiny / "model_index.json")) {
        ASSERT_TRUE(model::write_tiny_checkpoint({.dir = tiny.string(), .seed = 3}).ok());
    }
    const ops::Context cpu = ops::Context::cpu();
    std::atomic<bool> cancel{false};

    auto vae = model::load_video_vae((tiny / "vae").string(), Device::cpu());
    ASSERT_TRUE(vae.ok()) << vae.status().to_string();
    Tensor lat = Tensor::host(Shape{1, 24, 7, 4, 6}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(cpu, {.seed = 1, .bound = 1.0f}, lat).ok());
    model::VideoDecodeOptions vo;
    vo.cancel = &cancel;
    EXPECT_TRUE(model::decode_video_sample(cpu, *vae, lat, vo).ok());
    cancel = true;
    EXPECT_EQ(model::decode_video_sample(cpu, *vae, lat, vo).status().code(), ErrorCode::kCancelled);

    auto avae = model::load_audio_vae((tiny / "audio_vae").string(), Device::cpu());
    ASSERT_TRUE(avae.ok());
    Tensor alat = Tensor::host(Shape{2, 32, 3}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(cpu, {.seed = 2, .bound = 1.0f}, alat).ok());
    EXPECT_EQ(model::decode_audio(cpu, *avae, alat, {.cancel = &cancel}).status().code(),
              ErrorCode::kCancelled);

    auto enc = model::load_video_vae_encoder((tiny / "vae").string(), Device::cpu());
    ASSERT_TRUE(enc.ok()) << enc.status().to_string();
    Tensor rgb = Tensor::host(Shape{5, 32, 32, 3}, DType::kU8);
    std::memset(rgb.data(), 128, static_cast<size_t>(rgb.nbytes()));
    model::VideoEncodeOptions eo;
    eo.cancel = &cancel;
    EXPECT_EQ(model::encode_video(cpu, *enc, rgb, eo).status().code(), ErrorCode::kCancelled);
    // one encoder call (a whole clip or tile batch: many seconds on a loaded CPU) reads the flag between its
    // blocks, so a cancel never waits for the call to end
    Tensor px = Tensor::host(Shape{1, 3, 5, 32, 32}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(cpu, {.seed = 4, .bound = 1.0f}, px).ok());
    cancel = false;
    EXPECT_TRUE(model::encode_moments(cpu, *enc, px, &cancel).ok());
    cancel = true;
    auto m = model::encode_moments(cpu, *enc, px, &cancel);
    EXPECT_EQ(m.status().code(), ErrorCode::kCancelled);
    // the first of its ops to read the flag says so (ops/cancel.h), before the block check would
    EXPECT_TRUE(has(m.status(), "cancelled")) << m.status().message();

    auto aenc = model::load_audio_vae_encoder((tiny / "audio_vae").string(), Device::cpu());
    ASSERT_TRUE(aenc.ok()) << aenc.status().to_string();
    Tensor wave = Tensor::host(Shape{2, 1600}, DType::kF32);
    ASSERT_TRUE(ops::fill_uniform(cpu, {.seed = 3, .bound = 0.5f}, wave).ok());
    EXPECT_EQ(model::encode_reference_audio_rows(cpu, *aenc, aenc->config, wave, {.cancel = &cancel})
                  .status()
                  .code(),
              ErrorCode::kCancelled);

    // decode_to_file: raised when the video stage starts, the video decoder itself stops
    cancel = false;
    pipeline::DecodeOptions d;
    d.cancel = &cancel;
    d.on_stage = [&](pipeline::DecodeStage s) {
        if (s == pipeline::DecodeStage::kVideo) cancel = true;
    };
    auto r = pipeline::decode_to_file(cpu, {.video = &*vae, .audio = &*avae}, lat, alat,
                                      (kWork / "cancelled.mp4").string(), d);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kCancelled);
    EXPECT_TRUE(has(r.status(), "video decode cancelled")) << r.status().message();
}

#ifdef H3_WITH_HTTP_SERVER
TEST(ByteRange, SingleRangesOnly) {
    using serve::ByteRange;
    using K = ByteRange::Kind;
    auto r = serve::resolve_byte_range("bytes=0-9", 100);
    EXPECT_EQ(r.kind, K::kPartial);
    EXPECT_EQ(r.offset, 0u);
    EXPECT_EQ(r.length, 10u);
    EXPECT_EQ(serve::content_range_value(r, 100), "bytes 0-9/100");
    r = serve::resolve_byte_range("bytes=90-", 100);
    EXPECT_EQ(r.length, 10u);
    r = serve::resolve_byte_range("bytes=-30", 100);
    EXPECT_EQ(r.offset, 70u);
    r = serve::resolve_byte_range("bytes=50-1000", 100);
    EXPECT_EQ(r.length, 50u);
    EXPECT_EQ(serve::resolve_byte_range("bytes=100-", 100).kind, K::kUnsatisfiable);
    EXPECT_EQ(serve::content_range_value(serve::resolve_byte_range("bytes=100-", 100), 100), "bytes */100");
    EXPECT_EQ(serve::resolve_byte_range("bytes=-0", 100).kind, K::kUnsatisfiable);
    for (const char* ignored :
         {"", "bytes=0-1,5-6", "items=0-1", "bytes=5-2", "bytes=abc", "bytes=18446744073709551616-"})
        EXPECT_EQ(serve::resolve_byte_range(ignored, 100).kind, K::kWhole) << ignored;
}

TEST(Multipart, PartsAndLimits) {
    const std::string body =
        "preamble\r\n--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\nhi\r\n"
        "--b\r\nContent-Disposition: form-data; name=\"first_frame\"; filename=\"a \\\"x\\\".png\"\r\n"
        "Content-Type: image/png\r\n\r\n\x89PNG\r\n--b--\r\n";
    auto parts = serve::parse_multipart(body, "b");
    ASSERT_TRUE(parts.ok()) << parts.status().to_string();
    ASSERT_EQ(parts->size(), 2u);
    EXPECT_EQ((*parts)[0].name, "prompt");
    EXPECT_EQ((*parts)[0].data, "hi");
    EXPECT_TRUE((*parts)[1].has_filename);
    EXPECT_EQ((*parts)[1].filename, "a \"x\".png");
    EXPECT_EQ((*parts)[1].data, "\x89PNG");
    EXPECT_FALSE(
        serve::parse_multipart("--b\r\nContent-Disposition: form-data; name=\"a\"\r\n\r\nno end", "b").ok());
    std::string many;
    for (int i = 0; i < 70; ++i) many += "--b\r\nContent-Disposition: form-data; name=\"f\"\r\n\r\nx\r\n";
    many += "--b--";
    auto over = serve::parse_multipart(many, "b");
    ASSERT_FALSE(over.ok());
    EXPECT_TRUE(has(over.status(), "more than 64")) << over.status().message();
    EXPECT_EQ(*serve::multipart_boundary("multipart/form-data; boundary=\"x y\""), "x y");
    EXPECT_FALSE(serve::multipart_boundary("multipart/form-data").ok());
}

std::string gzip(const std::string& in) {
    z_stream z{};
    deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 9, Z_DEFAULT_STRATEGY);
    std::string out(deflateBound(&z, in.size()), '\0');
    z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    z.avail_in = static_cast<uInt>(in.size());
    z.next_out = reinterpret_cast<Bytef*>(out.data());
    z.avail_out = static_cast<uInt>(out.size());
    deflate(&z, Z_FINISH);
    out.resize(z.total_out);
    deflateEnd(&z);
    return out;
}

TEST(BodyDecoder, LimitCountsDecodedBytes) {
    const std::string bomb = gzip(std::string(64 << 20, '\0')); // 64 MiB of zeros in ~64 KiB
    ASSERT_LT(bomb.size(), 100000u);
    auto d = serve::BodyDecoder::create("gzip", 1 << 20);
    ASSERT_TRUE(d.ok());
    Status s = ok_status();
    for (size_t at = 0; at < bomb.size() && s.ok(); at += 4096)
        s = (*d)->feed(std::string_view(bomb).substr(at, 4096));
    EXPECT_EQ(s.code(), ErrorCode::kOutOfMemory) << s.to_string();
    EXPECT_LE((*d)->body().size(), size_t{1} << 20);

    const std::string small = gzip("{\"prompt\": \"x\"}");
    auto g = serve::BodyDecoder::create("GZIP", 1 << 20);
    ASSERT_TRUE((*g)->feed(small).ok());
    ASSERT_TRUE((*g)->finish().ok());
    EXPECT_EQ((*g)->body(), "{\"prompt\": \"x\"}");
    auto cut = serve::BodyDecoder::create("gzip", 1 << 20);
    ASSERT_TRUE((*cut)->feed(small.substr(0, small.size() / 2)).ok());
    EXPECT_EQ((*cut)->finish().code(), ErrorCode::kBadInput);

    std::string zeros(32 << 20, '\0');
    std::string br(BrotliEncoderMaxCompressedSize(zeros.size()), '\0');
    size_t n = br.size();
    ASSERT_TRUE(BrotliEncoderCompress(9, 22, BROTLI_MODE_GENERIC, zeros.size(),
                                      reinterpret_cast<const uint8_t*>(zeros.data()), &n,
                                      reinterpret_cast<uint8_t*>(br.data())));
    br.resize(n);
    auto b = serve::BodyDecoder::create("br", 1 << 20);
    EXPECT_EQ((*b)->feed(br).code(), ErrorCode::kOutOfMemory);
    EXPECT_LE((*b)->body().size(), size_t{1} << 20);

    auto id = serve::BodyDecoder::create("", 10);
    EXPECT_TRUE((*id)->feed("0123456789").ok());
    EXPECT_EQ((*id)->feed("x").code(), ErrorCode::kOutOfMemory);
    EXPECT_EQ(serve::BodyDecoder::create("compress", 10).status().code(), ErrorCode::kUnimplemented);
    EXPECT_EQ(serve::BodyDecoder::create("gzip, br", 10).status().code(), ErrorCode::kUnimplemented);
}

TEST(JobStore, LockOrphansAndDeletionOrder) {
    const fs::path dir = kWork / "store";
    fs::remove_all(dir);
    {
        auto a = serve::JobStore::open(dir.string());
        ASSERT_TRUE(a.ok()) << a.status().to_string();
        auto b = serve::JobStore::open(dir.string());
        ASSERT_FALSE(b.ok());
        EXPECT_TRUE(has(b.status(), "in use by another h3-engine serve (pid " + std::to_string(getpid())))
            << b.status().message();
    }
    // an orphan (only job.json.tmp), a stray tmp beside a record, a half-done deletion
    const std::string orphan = serve::new_job_id(), kept = serve::new_job_id();
    fs::create_directories(dir / orphan);
    std::ofstream(dir / orphan / "job.json.tmp") << "{";
    fs::create_directories(dir / ".deleted-video_x-1");
    std::ofstream(dir / ".deleted-video_x-1" / "job.json") << "{}";
    auto store = serve::JobStore::open(dir.string());
    ASSERT_TRUE(store.ok());
    api::VideoRecord rec;
    rec.id = kept;
    rec.status = api::JobStatus::kCompleted;
    ASSERT_TRUE(store->save(rec).ok());
    std::ofstream(dir / kept / "job.json.tmp") << "{";
    auto r = store->recover(0);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->orphans_removed, 1);
    EXPECT_FALSE(fs::exists(dir / orphan));
    EXPECT_FALSE(fs::exists(dir / ".deleted-video_x-1"));
    EXPECT_FALSE(fs::exists(dir / kept / "job.json.tmp"));
    ASSERT_EQ(r->records.size(), 1u);
    // removal renames first: no directory under the job's name is left at any point after it
    ASSERT_TRUE(store->remove(kept).ok());
    EXPECT_FALSE(fs::exists(dir / kept));
    size_t entries = 0;
    for (const auto& e : fs::directory_iterator(dir)) entries += e.path().filename() != ".lock";
    EXPECT_EQ(entries, 0u);
}
#endif

} // namespace
