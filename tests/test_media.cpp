// Media writers: the MP4 is decoded back with libavformat/libavcodec and its streams checked (count, codecs,
// fps, frame count, sample rate, channels, duration); WAV PCM16 and float round-trip exactly; PNG frames
// carry the right signature and size.
#include "io/media_writer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#ifdef H3_WITH_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}
#endif

namespace h3::io {
namespace {

namespace fs = std::filesystem;

fs::path out_dir() {
    fs::path p = fs::path(H3_BINARY_DIR) / "test_media";
    fs::create_directories(p);
    return p;
}

Tensor test_frames(int f, int h, int w) {
    Tensor t = Tensor::host(Shape{f, h, w, 3}, DType::kU8);
    uint8_t* p = t.data_as<uint8_t>();
    for (int i = 0; i < f; ++i)
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x)
                for (int c = 0; c < 3; ++c)
                    p[((i * h + y) * w + x) * 3 + c] =
                        static_cast<uint8_t>((x * 4 + y * 2 + i * 8 + c * 80) & 255);
    return t;
}

Tensor test_audio(int ch, int64_t n, int rate) {
    Tensor a = Tensor::host(Shape{ch, n}, DType::kF32);
    for (int c = 0; c < ch; ++c)
        for (int64_t i = 0; i < n; ++i)
            a.data_as<float>()[c * n + i] =
                0.5f * std::sin(2.0f * static_cast<float>(M_PI) * (440.0f + 220.0f * c) * i / rate);
    return a;
}

TEST(MediaWav, Pcm16AndFloatRoundTrip) {
    Tensor a = test_audio(2, 3001, 32000);
    a.data_as<float>()[5] = 1.5f; // clamps to 32767
    a.data_as<float>()[6] = -1.0f;
    const std::string p16 = (out_dir() / "a16.wav").string(), pf = (out_dir() / "af.wav").string();
    ASSERT_TRUE(write_wav(p16, a, 32000, WavFormat::kPcm16).ok());
    ASSERT_TRUE(write_wav(pf, a, 32000, WavFormat::kFloat32).ok());
    EXPECT_EQ(fs::file_size(p16), 44u + 3001u * 2 * 2);
    auto r16 = read_wav(p16);
    ASSERT_TRUE(r16.ok()) << r16.status().to_string();
    EXPECT_EQ(r16->sample_rate, 32000);
    ASSERT_EQ(r16->pcm16.shape(), (Shape{2, 3001}));
    for (int64_t i = 0; i < 2 * 3001; ++i) {
        const float want = std::lround(std::clamp(a.data_as<float>()[i], -1.0f, 1.0f) * 32767.0f);
        ASSERT_EQ(r16->pcm16.data_as<float>()[i], want) << i;
    }
    EXPECT_EQ(r16->pcm16.data_as<float>()[5], 32767.0f);
    EXPECT_EQ(r16->pcm16.data_as<float>()[6], -32767.0f);
    // Writing what was read back reproduces the file byte for byte.
    ASSERT_TRUE(write_wav((out_dir() / "a16b.wav").string(), r16->samples, 32000).ok());
    auto again = read_wav((out_dir() / "a16b.wav").string());
    ASSERT_TRUE(again.ok());
    for (int64_t i = 0; i < 2 * 3001; ++i)
        ASSERT_EQ(again->pcm16.data_as<float>()[i], r16->pcm16.data_as<float>()[i]);
    auto rf = read_wav(pf);
    ASSERT_TRUE(rf.ok());
    EXPECT_EQ(rf->format, WavFormat::kFloat32);
    for (int64_t i = 0; i < 2 * 3001; ++i) ASSERT_EQ(rf->samples.data_as<float>()[i], a.data_as<float>()[i]);
    EXPECT_FALSE(write_wav(p16, Tensor::host(Shape{3001}, DType::kF32), 32000).ok());
    EXPECT_FALSE(read_wav((out_dir() / "missing.wav").string()).ok());
}

#ifdef H3_WITH_FFMPEG
TEST(MediaMp4, StreamsDecodeBack) {
    const int nf = 39, h = 64, w = 96, rate = 32000;
    const int64_t samples = 40 * 800; // 40 audio latents at 40/s = 1.0 s
    const std::string path = (out_dir() / "out.mp4").string();
    Status s = write_mp4(path, test_frames(nf, h, w), test_audio(2, samples, rate), rate);
    ASSERT_TRUE(s.ok()) << s.to_string();

    AVFormatContext* fmt = nullptr;
    ASSERT_EQ(avformat_open_input(&fmt, path.c_str(), nullptr, nullptr), 0);
    ASSERT_GE(avformat_find_stream_info(fmt, nullptr), 0);
    ASSERT_EQ(fmt->nb_streams, 2u);
    const AVStream* vs = nullptr;
    const AVStream* as = nullptr;
    for (unsigned i = 0; i < fmt->nb_streams; ++i) {
        if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_VIDEO) vs = fmt->streams[i];
        if (fmt->streams[i]->codecpar->codec_type == AVMEDIA_TYPE_AUDIO) as = fmt->streams[i];
    }
    ASSERT_TRUE(vs && as);
    EXPECT_EQ(vs->codecpar->codec_id, AV_CODEC_ID_H264);
    EXPECT_EQ(vs->codecpar->format, AV_PIX_FMT_YUV420P);
    EXPECT_EQ(vs->codecpar->width, w);
    EXPECT_EQ(vs->codecpar->height, h);
    EXPECT_EQ(av_q2d(vs->avg_frame_rate), 24.0);
    EXPECT_EQ(vs->nb_frames, nf);
    EXPECT_EQ(as->codecpar->codec_id, AV_CODEC_ID_AAC);
    EXPECT_EQ(as->codecpar->sample_rate, rate);
    EXPECT_EQ(as->codecpar->ch_layout.nb_channels, 2);
    const double vdur = vs->duration * av_q2d(vs->time_base);
    EXPECT_NEAR(vdur, nf / 24.0, 1e-6);
    const double adur = as->duration * av_q2d(as->time_base);
    EXPECT_NEAR(adur, 1.0, 0.05) << "AAC priming/padding stays within a couple of frames";
    EXPECT_NEAR(fmt->duration / static_cast<double>(AV_TIME_BASE), std::max(vdur, adur), 0.05);

    // Decode every video packet: the frame count is what a player shows.
    const AVCodec* dec = avcodec_find_decoder(AV_CODEC_ID_H264);
    ASSERT_TRUE(dec);
    AVCodecContext* dc = avcodec_alloc_context3(dec);
    ASSERT_GE(avcodec_parameters_to_context(dc, vs->codecpar), 0);
    ASSERT_GE(avcodec_open2(dc, dec, nullptr), 0);
    AVPacket* pkt = av_packet_alloc();
    AVFrame* fr = av_frame_alloc();
    int decoded = 0;
    double first_luma_err = -1.0;
    while (av_read_frame(fmt, pkt) >= 0) {
        if (pkt->stream_index == vs->index) {
            avcodec_send_packet(dc, pkt);
            while (avcodec_receive_frame(dc, fr) == 0) {
                if (decoded == 0) {
                    // BT.709 limited-range luma of the first frame's pixel (10, 10) vs the source RGB.
                    const double r = (10 * 4 + 20) & 255, g = (10 * 4 + 20 + 80) & 255,
                                 b = (10 * 4 + 20 + 160) & 255;
                    const double y = 16.0 + (0.2126 * r + 0.7152 * g + 0.0722 * b) * 219.0 / 255.0;
                    first_luma_err = std::fabs(fr->data[0][10 * fr->linesize[0] + 10] - y);
                }
                ++decoded;
            }
        }
        av_packet_unref(pkt);
    }
    avcodec_send_packet(dc, nullptr);
    while (avcodec_receive_frame(dc, fr) == 0) ++decoded;
    EXPECT_EQ(decoded, nf);
    EXPECT_GE(first_luma_err, 0.0);
    EXPECT_LT(first_luma_err, 6.0) << "the default CRF should be near-lossless";
    av_frame_free(&fr);
    av_packet_free(&pkt);
    avcodec_free_context(&dc);
    avformat_close_input(&fmt);
}

TEST(MediaMp4, VideoOnlyAndErrors) {
    const std::string path = (out_dir() / "silent.mp4").string();
    ASSERT_TRUE(write_mp4(path, test_frames(5, 32, 32), Tensor(), 32000).ok());
    AVFormatContext* fmt = nullptr;
    ASSERT_EQ(avformat_open_input(&fmt, path.c_str(), nullptr, nullptr), 0);
    ASSERT_GE(avformat_find_stream_info(fmt, nullptr), 0);
    EXPECT_EQ(fmt->nb_streams, 1u);
    avformat_close_input(&fmt);
    EXPECT_FALSE(write_mp4(path, test_frames(2, 33, 32), Tensor(), 32000).ok()) << "odd height";
    EXPECT_FALSE(write_mp4(path, Tensor::host(Shape{2, 32, 32, 3}, DType::kF32), Tensor(), 32000).ok());
}

TEST(MediaPng, FrameSequence) {
    const fs::path dir = out_dir() / "frames";
    fs::remove_all(dir);
    ASSERT_TRUE(write_png_frames(dir.string(), test_frames(3, 20, 30)).ok());
    for (int i = 0; i < 3; ++i) {
        char name[32];
        std::snprintf(name, sizeof(name), "frame_%05d.png", i);
        std::ifstream in(dir / name, std::ios::binary);
        ASSERT_TRUE(in.good()) << name;
        unsigned char hdr[24];
        in.read(reinterpret_cast<char*>(hdr), 24);
        EXPECT_EQ(hdr[1], 'P');
        EXPECT_EQ(hdr[2], 'N');
        EXPECT_EQ(hdr[3], 'G');
        EXPECT_EQ((hdr[16] << 24) | (hdr[17] << 16) | (hdr[18] << 8) | hdr[19], 30); // IHDR width
        EXPECT_EQ((hdr[20] << 24) | (hdr[21] << 16) | (hdr[22] << 8) | hdr[23], 20); // IHDR height
    }
    EXPECT_FALSE(fs::exists(dir / "frame_00003.png"));
}
#else
TEST(MediaMp4, UnavailableWithoutFfmpeg) {
    EXPECT_FALSE(media_available());
    EXPECT_FALSE(write_mp4("x.mp4", Tensor::host(Shape{1, 2, 2, 3}, DType::kU8), Tensor(), 32000).ok());
}
#endif

} // namespace
} // namespace h3::io
