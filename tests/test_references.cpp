// ref2va references (pipeline/references, pipeline/reference_files): the request rules, the normalization
// onto 24 fps / the reference canvases / 32 kHz stereo, the conditioner's 2 fps sampling and the reading of
// files and uploads. Expected index lists come from the reference formulas (numpy, Python round), listed in
// the comments.
#include "io/media_writer.h"
#include "pipeline/reference_files.h"
#include "pipeline/references.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

using namespace h3;
using namespace h3::pipeline;

namespace {

ReferenceMedia image_ref(int w, int h) {
    ReferenceMedia r;
    r.kind = ReferenceKind::kImage;
    r.image = io::RgbImage(w, h);
    for (size_t i = 0; i < r.image.pixels.size(); ++i) r.image.pixels[i] = static_cast<uint8_t>(i * 7 % 251);
    return r;
}

ReferenceMedia video_ref(int64_t frames, double fps, int w = 64, int h = 48, int audio_channels = 0,
                         int rate = 44100) {
    ReferenceMedia r;
    r.kind = ReferenceKind::kVideo;
    r.fps = fps;
    r.frames = Tensor::host(Shape{frames, h, w, 3}, DType::kU8);
    uint8_t* p = r.frames.data_as<uint8_t>();
    for (int64_t f = 0; f < frames; ++f)
        for (int64_t i = 0; i < int64_t(h) * w * 3; ++i) p[f * h * w * 3 + i] = static_cast<uint8_t>(f);
    if (audio_channels) {
        const auto n = static_cast<int64_t>(std::llround(static_cast<double>(frames) / fps * rate));
        r.audio = Tensor::host(Shape{audio_channels, n}, DType::kF32);
        for (int64_t i = 0; i < r.audio.numel(); ++i) r.audio.data_as<float>()[i] = std::sin(0.01f * i);
        r.sample_rate = rate;
    }
    return r;
}

ReferenceMedia audio_ref(double seconds, int rate = 32000, int channels = 2) {
    ReferenceMedia r;
    r.kind = ReferenceKind::kAudio;
    r.sample_rate = rate;
    r.audio = Tensor::host(Shape{channels, static_cast<int64_t>(seconds * rate)}, DType::kF32);
    for (int64_t i = 0; i < r.audio.numel(); ++i) r.audio.data_as<float>()[i] = 0.25f * std::sin(0.003f * i);
    return r;
}

std::string message_of(const std::vector<ReferenceMedia>& refs) {
    Status s = validate_references(refs);
    return s.ok() ? std::string() : s.message();
}

} // namespace

TEST(References, RulesAcceptAMixedRequest) {
    EXPECT_TRUE(validate_references({image_ref(8, 8), video_ref(72, 24, 64, 48, 2), audio_ref(4.0)}).ok());
}

TEST(References, RulesRejectEachViolationByName) {
    EXPECT_NE(message_of({}).find("at least one reference"), std::string::npos);
    std::vector<ReferenceMedia> many(10, image_ref(4, 4));
    EXPECT_NE(message_of(many).find("10 image references; at most 9"), std::string::npos);
    std::vector<ReferenceMedia> videos(4, video_ref(48, 24));
    const std::string m = message_of(videos);
    EXPECT_NE(m.find("4 video references; at most 3"), std::string::npos) << m;
    std::vector<ReferenceMedia> audios(4, audio_ref(2.5));
    audios.insert(audios.begin(), image_ref(4, 4));
    EXPECT_NE(message_of(audios).find("4 audio references; at most 3"), std::string::npos);
    EXPECT_NE(message_of({audio_ref(3.0)}).find("cannot be used alone"), std::string::npos);
    std::vector<ReferenceMedia> thirteen(9, image_ref(4, 4));
    for (int i = 0; i < 3; ++i) thirteen.push_back(video_ref(48, 24));
    thirteen.push_back(audio_ref(2.0));
    EXPECT_NE(message_of(thirteen).find("13 references; at most 12 in all"), std::string::npos);
}

TEST(References, ClipLengthsAreNotRules) {
    // diffusers has no duration rule for references: long clips are cut to the generated length when
    // normalized, short ones are used whole; only "nothing left on the 24 fps grid" is refused.
    EXPECT_TRUE(validate_references({image_ref(4, 4), audio_ref(0.5)}).ok());
    EXPECT_TRUE(validate_references({video_ref(1, 24)}).ok());
    EXPECT_TRUE(validate_references({video_ref(16 * 24, 24)}).ok());
    EXPECT_TRUE(validate_references({video_ref(3 * 24, 24), video_ref(10 * 24, 24), audio_ref(14.0)}).ok());
    ReferenceMedia capped = video_ref(48, 24);
    capped.truncated = true; // the reader stopped past the longest generated clip: nothing used is lost
    EXPECT_TRUE(validate_references({capped}).ok());
    // 1 frame at 120 fps: its slot floor(0·0.2 + 0.5) = 0 and the stream's end floor(1·0.2 + 0.5) = 0
    // coincide
    const std::string m = message_of({video_ref(1, 120)});
    EXPECT_NE(m.find("leave no frame at 24 fps"), std::string::npos) << m;
    // a 6-channel soundtrack is refused, not mixed down
    EXPECT_NE(message_of({video_ref(48, 24, 64, 48, 6)}).find("6 audio channels"), std::string::npos);
}

TEST(References, LongClipsAreCutShortOnesKept) {
    // A 16 s video with its soundtrack and a 20 s audio clip against a 107-frame (4.46 s) target: cut to 107
    // frames and int(107/24 · rate) samples. A 0.5 s clip and a 10-frame video are used whole.
    std::vector<ReferenceMedia> refs = {video_ref(16 * 24, 24, 32, 32, 2, 32000), audio_ref(20.0),
                                        video_ref(10, 24, 32, 32), audio_ref(0.5)};
    ASSERT_TRUE(validate_references(refs).ok());
    auto n = normalize_references(refs, {.num_frames = 107, .video_short_edge = 32});
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    EXPECT_EQ((*n)[0].frames.dim(0), 107);
    EXPECT_EQ((*n)[0].frames.data_as<uint8_t>()[106LL * 32 * 32 * 3], 106); // the first 107 frames, in order
    EXPECT_EQ((*n)[0].audio.shape(), (Shape{2, 142666}));                   // int(107/24 · 32000)
    EXPECT_EQ((*n)[1].audio.shape(), (Shape{2, 142666}));
    EXPECT_EQ((*n)[2].frames.dim(0), 10);
    EXPECT_EQ((*n)[3].audio.shape(), (Shape{2, 16000}));
    // the VAE encodes min(F, 17n+5 snapped down, at least 22) frames: a 10-frame clip goes whole
    EXPECT_EQ(std::min<int64_t>(10, h3::model::LatentSpec{}.align_frames_down(10)), 10);
}

TEST(References, ImageSizeIsA2048ShortEdge) {
    // max(32, round(side · 2048/short / 32) · 32), no area cap
    auto a = reference_image_size(640, 360, 2048, 32);
    ASSERT_TRUE(a.ok());
    EXPECT_EQ(a->width, 3648);
    EXPECT_EQ(a->height, 2048);
    auto b = reference_image_size(100, 300, 2048, 32);
    EXPECT_EQ(b->width, 2048);
    EXPECT_EQ(b->height, 6144);
    auto c = reference_image_size(4000, 1000, 2048, 32);
    EXPECT_EQ(c->width, 8192);
    EXPECT_EQ(c->height, 2048);
    auto bad = reference_image_size(4001, 1000, 2048, 32);
    ASSERT_FALSE(bad.ok());
    EXPECT_NE(bad.status().message().find("1:4 and 4:1"), std::string::npos);
}

TEST(References, FrameRateResampleMatchesTheReference) {
    // np.repeat(arange(n), diff(floor(arange(n)·24/fps + 0.5), append=floor(n·24/fps + 0.5)))
    EXPECT_EQ(resample_to_24fps(10, 30), (std::vector<int64_t>{0, 1, 3, 4, 5, 6, 8, 9}));
    EXPECT_EQ(resample_to_24fps(7, 12), (std::vector<int64_t>{0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6}));
    EXPECT_EQ(resample_to_24fps(9, 29.97), (std::vector<int64_t>{0, 1, 3, 4, 5, 6, 8}));
    const auto long_clip = resample_to_24fps(300, 29.97);
    ASSERT_EQ(long_clip.size(), 240u);
    EXPECT_EQ(std::vector<int64_t>(long_clip.end() - 5, long_clip.end()),
              (std::vector<int64_t>{294, 295, 296, 297, 299}));
    EXPECT_EQ(resample_to_24fps(5, 24.0), (std::vector<int64_t>{0, 1, 2, 3, 4}));
}

TEST(References, ConditionerSamplesAt2FpsInPairs) {
    auto a = sample_conditioner_frames(124);
    EXPECT_EQ(a.indices, (std::vector<int64_t>{0, 12, 24, 36, 48, 60, 72, 84, 96, 108, 120}));
    EXPECT_EQ(a.block_timestamps, (std::vector<double>{0.25, 1.25, 2.25, 3.25, 4.25, 5.0}));
    auto b = sample_conditioner_frames(49);
    EXPECT_EQ(b.indices, (std::vector<int64_t>{0, 12, 24, 36, 48}));
    EXPECT_EQ(b.block_timestamps, (std::vector<double>{0.25, 1.25, 2.0}));
    auto c = sample_conditioner_frames(1);
    EXPECT_EQ(c.indices, (std::vector<int64_t>{0}));
    EXPECT_EQ(c.block_timestamps, (std::vector<double>{0.0}));
}

TEST(References, TrimToTheEncoderFrameCount) {
    EXPECT_EQ(h3::model::LatentSpec{}.align_frames_down(124), 124);
    EXPECT_EQ(h3::model::LatentSpec{}.align_frames_down(123), 107);
    EXPECT_EQ(h3::model::LatentSpec{}.align_frames_down(48), 39);
    EXPECT_EQ(h3::model::LatentSpec{}.align_frames_down(10), 22); // max(1, ·): the encoder pads the rest
}

TEST(References, NormalizeVideoImageAndAudio) {
    std::vector<ReferenceMedia> refs = {image_ref(40, 30), video_ref(150, 30.0, 64, 48, 1, 44100),
                                        audio_ref(8.0, 16000, 1)};
    ASSERT_TRUE(validate_references(refs).ok());
    auto n = normalize_references(refs, {.num_frames = 107});
    ASSERT_TRUE(n.ok()) << n.status().to_string();
    ASSERT_EQ(n->size(), 3u);
    const NormalizedReference& im = (*n)[0];
    EXPECT_EQ(im.image.width, 2720); // 40·2048/30 = 2730.7 → 85·32
    EXPECT_EQ(im.image.height, 2048);
    EXPECT_FALSE(im.has_audio());
    const NormalizedReference& v = (*n)[1];
    // 150 frames at 30 fps → 120 at 24 fps, cut to 107; 64×48 (4:3) → the 1024×768 canvas
    ASSERT_EQ(v.frames.shape(), (Shape{107, 768, 1024, 3}));
    // slot 106 holds the last source frame landing on it: 132 and 133 both round to 106 (floor(i·0.8 + 0.5))
    EXPECT_EQ(v.frames.data_as<uint8_t>()[106LL * 768 * 1024 * 3 + 5], 133);
    ASSERT_TRUE(v.has_audio());
    // cut at int(107/24 · 44100) = 196612 samples, mono → stereo, then 44.1 → 32 kHz: ceil(196612·320/441)
    EXPECT_EQ(v.audio.shape(), (Shape{2, (196612LL * 320 + 440) / 441}));
    const NormalizedReference& a = (*n)[2];
    // 8 s at 16 kHz cut at int(107/24 · 16000) = 71333, doubled to 32 kHz
    EXPECT_EQ(a.audio.shape(), (Shape{2, 71333 * 2}));
    for (int64_t i = 0; i < a.audio.dim(1); ++i)
        ASSERT_EQ(a.audio.data_as<float>()[i], a.audio.data_as<float>()[a.audio.dim(1) + i]) << i;
}

TEST(References, SpecParsing) {
    auto a = parse_reference_spec("video:clip.mp4");
    ASSERT_TRUE(a.kind);
    EXPECT_EQ(*a.kind, ReferenceKind::kVideo);
    EXPECT_EQ(a.path, "clip.mp4");
    auto b = parse_reference_spec("C:stuff.png"); // not a kind: part of the path
    EXPECT_FALSE(b.kind);
    EXPECT_EQ(b.path, "C:stuff.png");
    auto c = parse_reference_spec("audio:voice.mp4");
    EXPECT_EQ(*c.kind, ReferenceKind::kAudio);
}

TEST(References, RotationMatchesNumpyRot90) {
    // one 2×3 frame, pixel value = 10·row + col in every channel; np.rot90(m, k=−t) for t = 1, 2, 3
    Tensor f = Tensor::host(Shape{1, 2, 3, 3}, DType::kU8);
    for (int y = 0; y < 2; ++y)
        for (int x = 0; x < 3; ++x)
            for (int c = 0; c < 3; ++c)
                f.data_as<uint8_t>()[(y * 3 + x) * 3 + c] = static_cast<uint8_t>(10 * y + x);
    auto flat = [](const Tensor& t) {
        std::vector<int> v;
        for (int64_t i = 0; i < t.numel(); i += 3) v.push_back(t.data_as<uint8_t>()[i]);
        return v;
    };
    Tensor r1 = rotate_frames_clockwise(f, 1), r2 = rotate_frames_clockwise(f, 2),
           r3 = rotate_frames_clockwise(f, 3);
    EXPECT_EQ(r1.shape(), (Shape{1, 3, 2, 3}));
    EXPECT_EQ(flat(r1), (std::vector<int>{10, 0, 11, 1, 12, 2})); // [[10,0],[11,1],[12,2]]
    EXPECT_EQ(flat(r2), (std::vector<int>{12, 11, 10, 2, 1, 0})); // [[12,11,10],[2,1,0]]
    EXPECT_EQ(flat(r3), (std::vector<int>{2, 12, 1, 11, 0, 10})); // [[2,12],[1,11],[0,10]]
    EXPECT_EQ(flat(rotate_frames_clockwise(f, 4)), flat(f));
}

TEST(References, ReadsFilesAndUploadsByContent) {
    if (!io::media_available()) GTEST_SKIP() << "built without FFmpeg";
    const auto dir = std::filesystem::temp_directory_path() / "h3_test_references";
    std::filesystem::create_directories(dir);
    // a 2.5 s 32×32 clip at 24 fps with a stereo soundtrack, and a WAV
    ReferenceMedia v = video_ref(60, 24, 32, 32, 2, 32000);
    const std::string mp4 = (dir / "clip.mp4").string(), wav = (dir / "voice.wav").string();
    ASSERT_TRUE(io::write_mp4(mp4, v.frames, v.audio, 32000).ok());
    ReferenceMedia a = audio_ref(2.5, 32000, 1);
    ASSERT_TRUE(io::write_wav(wav, a.audio, 32000).ok());

    auto rv = read_reference(parse_reference_spec(mp4));
    ASSERT_TRUE(rv.ok()) << rv.status().to_string();
    EXPECT_EQ(rv->kind, ReferenceKind::kVideo);
    EXPECT_EQ(rv->frames.dim(0), 60);
    EXPECT_NEAR(rv->fps, 24.0, 1e-9);
    ASSERT_TRUE(rv->has_audio());
    EXPECT_EQ(rv->sample_rate, 32000);
    auto ra = read_reference(parse_reference_spec(wav));
    ASSERT_TRUE(ra.ok()) << ra.status().to_string();
    EXPECT_EQ(ra->kind, ReferenceKind::kAudio);
    EXPECT_EQ(ra->audio.shape(), (Shape{1, 80000}));
    auto soundtrack = read_reference(parse_reference_spec("audio:" + mp4));
    ASSERT_TRUE(soundtrack.ok());
    EXPECT_EQ(soundtrack->kind, ReferenceKind::kAudio);
    EXPECT_FALSE(soundtrack->frames.defined());

    // reading stops past max_seconds (marked, and not an error: references are cut to the generated length,
    // which the 15.5 s default covers), and a decode cap refuses
    auto capped = read_reference(parse_reference_spec(mp4), {.max_seconds = 1.0});
    ASSERT_TRUE(capped.ok()) << capped.status().to_string();
    EXPECT_TRUE(capped->truncated);
    EXPECT_EQ(capped->frames.dim(0), 25); // ceil(1.0 · 24) + 1
    EXPECT_LE(capped->audio.dim(1), 32001);
    EXPECT_TRUE(validate_references({*capped}).ok());
    auto wav_capped = read_reference(parse_reference_spec(wav), {.max_seconds = 1.0});
    ASSERT_TRUE(wav_capped.ok());
    EXPECT_TRUE(wav_capped->truncated);
    EXPECT_EQ(wav_capped->audio.dim(1), 32001);
    EXPECT_FALSE(rv->truncated);
    auto too_big = read_reference(parse_reference_spec(mp4), {.max_video_bytes = 32 * 32 * 3 * 10});
    ASSERT_FALSE(too_big.ok());
    EXPECT_NE(too_big.status().message().find("use a shorter or smaller video"), std::string::npos)
        << too_big.status().message();

    // the same bytes as an upload
    std::ifstream f(mp4, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto up = decode_reference(bytes, "reference 1 (clip.mp4)");
    ASSERT_TRUE(up.ok()) << up.status().to_string();
    EXPECT_EQ(up->kind, ReferenceKind::kVideo);
    EXPECT_EQ(up->source, "reference 1 (clip.mp4)");
    auto junk = decode_reference("not a media file at all", "reference 2 (junk.bin)");
    ASSERT_FALSE(junk.ok());
    EXPECT_NE(junk.status().message().find("reference 2 (junk.bin)"), std::string::npos)
        << junk.status().message();
    EXPECT_EQ(junk.status().message().find("h3-reference-"), std::string::npos) << "temp path leaked";
    auto missing = read_reference(parse_reference_spec((dir / "nope.wav").string()));
    ASSERT_FALSE(missing.ok());
    std::filesystem::remove_all(dir);
}
