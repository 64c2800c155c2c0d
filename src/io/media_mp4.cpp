// MP4 (H.264 yuv420p + AAC) and PNG frame writers through FFmpeg's libraries.
#include "io/media_writer.h"

#ifdef H3_WITH_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/imgutils.h>
#include <libavutil/opt.h>
#include <libswscale/swscale.h>
}

#include "io/ffmpeg_handles.h"
#endif

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>
#include <vector>

namespace h3::io {

#ifdef H3_WITH_FFMPEG

bool media_available() {
    return true;
}

namespace {

using namespace ffmpeg;

Status check(int e, const std::string& what) {
    if (e >= 0) return ok_status();
    return io_error("FFmpeg: " + what + ": " + av_err(e));
}

struct FormatDel {
    void operator()(AVFormatContext* f) const {
        if (f->pb && !(f->oformat->flags & AVFMT_NOFILE)) avio_closep(&f->pb);
        avformat_free_context(f);
    }
};

Status check_frames(const char* op, const Tensor& frames) {
    if (!frames.defined() || frames.rank() != 4 || frames.dim(3) != 3 || frames.dtype() != DType::kU8 ||
        !frames.device().is_cpu() || !frames.is_contiguous())
        return invalid_argument(std::string(op) +
                                ": frames must be a contiguous host u8 [F, H, W, 3] tensor, got " +
                                (frames.defined() ? frames.describe() : std::string("undefined")));
    if (frames.dim(0) < 1 || frames.dim(1) < 1 || frames.dim(2) < 1)
        return invalid_argument(std::string(op) + ": no frames to write");
    return ok_status();
}

// Sends `frame` (nullptr flushes) and writes every packet the encoder returns.
Status encode(AVFormatContext* fmt, AVCodecContext* enc, AVStream* st, AVFrame* frame, AVPacket* pkt) {
    H3_TRY(check(avcodec_send_frame(enc, frame), "send frame"));
    while (true) {
        const int r = avcodec_receive_packet(enc, pkt);
        if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return ok_status();
        H3_TRY(check(r, "receive packet"));
        av_packet_rescale_ts(pkt, enc->time_base, st->time_base);
        pkt->stream_index = st->index;
        H3_TRY(check(av_interleaved_write_frame(fmt, pkt), "write packet"));
    }
}

} // namespace

Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& opt) {
    H3_TRY(check_frames("write_mp4", frames));
    ffmpeg::apply_limits(); // allocation cap, log level
    const int nf = static_cast<int>(frames.dim(0)), h = static_cast<int>(frames.dim(1)),
              w = static_cast<int>(frames.dim(2));
    if (w % 2 || h % 2) return invalid_argument("write_mp4: yuv420p needs an even width and height");
    if (opt.fps < 1 || opt.crf < 0 || opt.crf > 51)
        return invalid_argument("write_mp4: fps >= 1, crf in [0, 51]");
    const bool has_audio = audio.defined();
    if (has_audio && (audio.rank() != 2 || audio.dtype() != DType::kF32 || !audio.device().is_cpu() ||
                      !audio.is_contiguous() || audio.dim(0) < 1 || audio.dim(0) > 2 || sample_rate <= 0))
        return invalid_argument(
            "write_mp4: audio must be a host f32 [1 or 2, N] tensor with a positive rate");

    AVFormatContext* raw = nullptr;
    H3_TRY(check(avformat_alloc_output_context2(&raw, nullptr, "mp4", path.c_str()), "allocate mp4 muxer"));
    std::unique_ptr<AVFormatContext, FormatDel> fmt(raw);

    // video stream
    const AVCodec* vcodec = avcodec_find_encoder_by_name("libx264");
    if (!vcodec) vcodec = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (!vcodec) return unimplemented("write_mp4: this FFmpeg has no H.264 encoder");
    AVStream* vst = avformat_new_stream(fmt.get(), nullptr);
    CodecPtr venc(avcodec_alloc_context3(vcodec));
    if (!vst || !venc) return out_of_memory("write_mp4: allocating the video stream");
    venc->width = w;
    venc->height = h;
    venc->pix_fmt = AV_PIX_FMT_YUV420P;
    venc->time_base = AVRational{1, opt.fps};
    venc->framerate = AVRational{opt.fps, 1};
    venc->gop_size = opt.fps * 2;
    venc->color_range = AVCOL_RANGE_MPEG;
    venc->colorspace = AVCOL_SPC_BT709;
    venc->color_primaries = AVCOL_PRI_BT709;
    venc->color_trc = AVCOL_TRC_BT709;
    if (fmt->oformat->flags & AVFMT_GLOBALHEADER) venc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
    AVDictionary* vopts = nullptr;
    av_dict_set(&vopts, "crf", std::to_string(opt.crf).c_str(), 0);
    av_dict_set(&vopts, "preset", opt.preset.c_str(), 0);
    const int vr = avcodec_open2(venc.get(), vcodec, &vopts);
    av_dict_free(&vopts);
    H3_TRY(check(vr, "open the H.264 encoder"));
    H3_TRY(check(avcodec_parameters_from_context(vst->codecpar, venc.get()), "video stream parameters"));
    vst->time_base = venc->time_base;
    vst->avg_frame_rate = venc->framerate;

    // audio stream
    CodecPtr aenc;
    AVStream* ast = nullptr;
    if (has_audio) {
        const AVCodec* acodec = avcodec_find_encoder(AV_CODEC_ID_AAC);
        if (!acodec) return unimplemented("write_mp4: this FFmpeg has no AAC encoder");
        ast = avformat_new_stream(fmt.get(), nullptr);
        aenc.reset(avcodec_alloc_context3(acodec));
        if (!ast || !aenc) return out_of_memory("write_mp4: allocating the audio stream");
        aenc->sample_fmt = AV_SAMPLE_FMT_FLTP;
        aenc->sample_rate = sample_rate;
        av_channel_layout_default(&aenc->ch_layout, static_cast<int>(audio.dim(0)));
        aenc->bit_rate = opt.audio_bitrate;
        aenc->time_base = AVRational{1, sample_rate};
        if (fmt->oformat->flags & AVFMT_GLOBALHEADER) aenc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
        H3_TRY(check(avcodec_open2(aenc.get(), acodec, nullptr), "open the AAC encoder"));
        H3_TRY(check(avcodec_parameters_from_context(ast->codecpar, aenc.get()), "audio stream parameters"));
        ast->time_base = aenc->time_base;
    }

    H3_TRY(check(avio_open(&fmt->pb, path.c_str(), AVIO_FLAG_WRITE), "open '" + path + "'"));
    H3_TRY(check(avformat_write_header(fmt.get(), nullptr), "write the mp4 header"));

    PacketPtr pkt(av_packet_alloc());
    if (!pkt) return out_of_memory("write_mp4: allocating a packet");
    // RGB → YUV runs on up to 8 threads, a frame each (a conversion context is not thread-safe, so each has
    // its own; every context converts with the same settings, so the bytes do not depend on the thread);
    // x264 encodes on its own threads meanwhile. A batch of frames is converted, then encoded in order.
    const int workers = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    std::vector<FramePtr> vfs;
    std::vector<SwsPtr> sws;
    for (int t = 0; t < workers; ++t) {
        FramePtr vf(av_frame_alloc());
        if (!vf) return out_of_memory("write_mp4: allocating frames");
        vf->format = AV_PIX_FMT_YUV420P;
        vf->width = w;
        vf->height = h;
        H3_TRY(check(av_frame_get_buffer(vf.get(), 0), "allocate a video frame"));
        vfs.push_back(std::move(vf));
        SwsPtr ctx(sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, AV_PIX_FMT_YUV420P,
                                  SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr,
                                  nullptr));
        if (!ctx) return internal_error("write_mp4: sws_getContext failed");
        // RGB (full range) -> BT.709 limited-range YUV
        const int* coef = sws_getCoefficients(SWS_CS_ITU709);
        sws_setColorspaceDetails(ctx.get(), coef, 1, coef, 0, 0, 1 << 16, 1 << 16);
        sws.push_back(std::move(ctx));
    }
    const int64_t frame_bytes = static_cast<int64_t>(w) * h * 3;
    auto convert = [&](int frame, int slot) {
        const uint8_t* src[1] = {frames.data_as<const uint8_t>() + frame * frame_bytes};
        const int stride[1] = {3 * w};
        sws_scale(sws[slot].get(), src, stride, 0, h, vfs[slot]->data, vfs[slot]->linesize);
    };

    // Interleave audio and video by time so the muxer's queue stays short.
    FramePtr af;
    int64_t a_pos = 0, a_total = 0;
    if (has_audio) {
        af.reset(av_frame_alloc());
        af->format = AV_SAMPLE_FMT_FLTP;
        af->sample_rate = sample_rate;
        H3_TRY(check(av_channel_layout_copy(&af->ch_layout, &aenc->ch_layout), "audio layout"));
        af->nb_samples = aenc->frame_size > 0 ? aenc->frame_size : 1024;
        H3_TRY(check(av_frame_get_buffer(af.get(), 0), "allocate an audio frame"));
        a_total = audio.dim(1);
    }
    auto push_audio_until = [&](double t_sec, bool all) -> Status {
        while (has_audio && a_pos < a_total && (all || static_cast<double>(a_pos) / sample_rate <= t_sec)) {
            H3_TRY(check(av_frame_make_writable(af.get()), "audio frame writable"));
            const int64_t n = std::min<int64_t>(af->nb_samples, a_total - a_pos);
            for (int c = 0; c < static_cast<int>(audio.dim(0)); ++c) {
                float* dst = reinterpret_cast<float*>(af->data[c]);
                const float* src = audio.data_as<const float>() + c * a_total + a_pos;
                for (int64_t i = 0; i < af->nb_samples; ++i) dst[i] = i < n ? src[i] : 0.0f;
            }
            const int full = af->nb_samples;
            af->nb_samples = static_cast<int>(n);
            af->pts = a_pos;
            Status s = encode(fmt.get(), aenc.get(), ast, af.get(), pkt.get());
            af->nb_samples = full;
            H3_TRY(s);
            a_pos += n;
        }
        return ok_status();
    };

    for (int i0 = 0; i0 < nf; i0 += workers) {
        if (opt.cancel && opt.cancel->load()) return cancelled("write_mp4: cancelled while muxing");
        const int batch = std::min(workers, nf - i0);
        // The encoder may still reference a frame it was sent: writable first (a copy if so).
        for (int t = 0; t < batch; ++t)
            H3_TRY(check(av_frame_make_writable(vfs[t].get()), "video frame writable"));
        {
            std::vector<std::jthread> threads;
            for (int t = 1; t < batch; ++t) threads.emplace_back(convert, i0 + t, t);
            convert(i0, 0);
        } // joined
        for (int t = 0; t < batch; ++t) {
            const int i = i0 + t;
            vfs[t]->pts = i;
            H3_TRY(encode(fmt.get(), venc.get(), vst, vfs[t].get(), pkt.get()));
            H3_TRY(push_audio_until(static_cast<double>(i + 1) / opt.fps, false));
        }
    }
    H3_TRY(encode(fmt.get(), venc.get(), vst, nullptr, pkt.get()));
    if (has_audio) {
        H3_TRY(push_audio_until(0.0, true));
        H3_TRY(encode(fmt.get(), aenc.get(), ast, nullptr, pkt.get()));
    }
    H3_TRY(check(av_write_trailer(fmt.get()), "write the mp4 trailer"));
    return ok_status();
}

Status write_png_frames(const std::string& dir, const Tensor& frames) {
    H3_TRY(check_frames("write_png_frames", frames));
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return io_error("write_png_frames: cannot create '" + dir + "': " + ec.message());
    const int nf = static_cast<int>(frames.dim(0)), h = static_cast<int>(frames.dim(1)),
              w = static_cast<int>(frames.dim(2));
    const AVCodec* codec = avcodec_find_encoder(AV_CODEC_ID_PNG);
    if (!codec) return unimplemented("write_png_frames: this FFmpeg has no PNG encoder");
    CodecPtr enc(avcodec_alloc_context3(codec));
    enc->width = w;
    enc->height = h;
    enc->pix_fmt = AV_PIX_FMT_RGB24;
    enc->time_base = AVRational{1, 24};
    H3_TRY(check(avcodec_open2(enc.get(), codec, nullptr), "open the PNG encoder"));
    FramePtr f(av_frame_alloc());
    PacketPtr pkt(av_packet_alloc());
    f->format = AV_PIX_FMT_RGB24;
    f->width = w;
    f->height = h;
    H3_TRY(check(av_frame_get_buffer(f.get(), 0), "allocate a frame"));
    for (int i = 0; i < nf; ++i) {
        H3_TRY(check(av_frame_make_writable(f.get()), "frame writable"));
        const uint8_t* src = frames.data_as<const uint8_t>() + static_cast<int64_t>(i) * w * h * 3;
        for (int y = 0; y < h; ++y) std::memcpy(f->data[0] + y * f->linesize[0], src + y * w * 3, w * 3);
        f->pts = i;
        H3_TRY(check(avcodec_send_frame(enc.get(), f.get()), "send frame"));
        H3_TRY(check(avcodec_receive_packet(enc.get(), pkt.get()), "receive PNG"));
        char name[32];
        std::snprintf(name, sizeof(name), "frame_%05d.png", i);
        const std::string p = (std::filesystem::path(dir) / name).string();
        std::ofstream out(p, std::ios::binary);
        out.write(reinterpret_cast<const char*>(pkt->data), pkt->size);
        av_packet_unref(pkt.get());
        if (!out) return io_error("write_png_frames: write to '" + p + "' failed");
    }
    return ok_status();
}

#else

bool media_available() {
    return false;
}

Status write_mp4(const std::string&, const Tensor&, const Tensor&, int, const Mp4Options&) {
    return unimplemented(
        "write_mp4: this build has no FFmpeg (install libavformat-dev, libavcodec-dev, "
        "libswscale-dev, libswresample-dev and reconfigure); write .wav or PNG frames instead");
}

Status write_png_frames(const std::string&, const Tensor&) {
    return unimplemented("write_png_frames: this build has no FFmpeg (PNG frames use libavcodec's encoder)");
}

#endif

} // namespace h3::io
