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

} // namespace

struct Mp4Writer::Impl {
    std::string path;
    Mp4Options opt;
    Mp4Streams streams;
    std::unique_ptr<AVFormatContext, FormatDel> fmt;
    CodecPtr venc, aenc;
    AVStream* vst = nullptr;
    AVStream* ast = nullptr;
    PacketPtr pkt;
    // RGB → YUV runs on up to 8 threads, a frame each (a conversion context is not thread-safe, so each has
    // its own; every context converts with the same settings, so the bytes do not depend on the thread);
    // x264 encodes on its own threads meanwhile. A batch of frames is converted, then encoded in order.
    std::vector<FramePtr> vfs;
    std::vector<SwsPtr> sws;
    int64_t next_pts = 0;
    bool finished = false;

    std::string where() const { return "write_mp4 '" + path + "': "; }
    Status check(int e, const std::string& what) const {
        if (e >= 0) return ok_status();
        return io_error(where() + "FFmpeg: " + what + ": " + av_err(e));
    }
    // Sends `frame` (nullptr flushes) and writes every packet the encoder returns.
    Status encode(AVCodecContext* enc, AVStream* st, AVFrame* frame) {
        H3_TRY(check(avcodec_send_frame(enc, frame), "send frame"));
        while (true) {
            const int r = avcodec_receive_packet(enc, pkt.get());
            if (r == AVERROR(EAGAIN) || r == AVERROR_EOF) return ok_status();
            H3_TRY(check(r, "receive packet"));
            av_packet_rescale_ts(pkt.get(), enc->time_base, st->time_base);
            pkt->stream_index = st->index;
            H3_TRY(check(av_interleaved_write_frame(fmt.get(), pkt.get()), "write packet"));
        }
    }
    Status open();
    Status write_frames(const Tensor& frames);
    Status finish(const Tensor& audio);
};

Status Mp4Writer::Impl::open() {
    ffmpeg::apply_limits(); // allocation cap, log level
    const int w = streams.width, h = streams.height;
    if (w < 1 || h < 1 || w % 2 || h % 2)
        return invalid_argument(where() + "yuv420p needs an even width and height, got " + std::to_string(w) +
                                "x" + std::to_string(h));
    if (opt.fps < 1 || opt.crf < 0 || opt.crf > 51)
        return invalid_argument(where() + "fps >= 1, crf in [0, 51]");
    const bool has_audio = streams.audio_channels != 0;
    if (has_audio && (streams.audio_channels < 1 || streams.audio_channels > 2 || streams.sample_rate <= 0))
        return invalid_argument(where() + "audio must have 1 or 2 channels at a positive rate");

    AVFormatContext* raw = nullptr;
    H3_TRY(check(avformat_alloc_output_context2(&raw, nullptr, "mp4", path.c_str()), "allocate mp4 muxer"));
    fmt.reset(raw);

    // video stream
    const AVCodec* vcodec = avcodec_find_encoder_by_name("libx264");
    if (!vcodec) vcodec = avcodec_find_encoder(AV_CODEC_ID_H264);
    if (!vcodec) return unimplemented(where() + "this FFmpeg has no H.264 encoder");
    vst = avformat_new_stream(fmt.get(), nullptr);
    venc.reset(avcodec_alloc_context3(vcodec));
    if (!vst || !venc) return out_of_memory(where() + "allocating the video stream");
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
    H3_TRY(check(vr, "open the H.264 encoder (preset '" + opt.preset + "')"));
    H3_TRY(check(avcodec_parameters_from_context(vst->codecpar, venc.get()), "video stream parameters"));
    vst->time_base = venc->time_base;
    vst->avg_frame_rate = venc->framerate;

    // audio stream
    if (has_audio) {
        const AVCodec* acodec = avcodec_find_encoder(AV_CODEC_ID_AAC);
        if (!acodec) return unimplemented(where() + "this FFmpeg has no AAC encoder");
        ast = avformat_new_stream(fmt.get(), nullptr);
        aenc.reset(avcodec_alloc_context3(acodec));
        if (!ast || !aenc) return out_of_memory(where() + "allocating the audio stream");
        aenc->sample_fmt = AV_SAMPLE_FMT_FLTP;
        aenc->sample_rate = streams.sample_rate;
        av_channel_layout_default(&aenc->ch_layout, streams.audio_channels);
        aenc->bit_rate = opt.audio_bitrate;
        aenc->time_base = AVRational{1, streams.sample_rate};
        if (fmt->oformat->flags & AVFMT_GLOBALHEADER) aenc->flags |= AV_CODEC_FLAG_GLOBAL_HEADER;
        H3_TRY(check(avcodec_open2(aenc.get(), acodec, nullptr), "open the AAC encoder"));
        H3_TRY(check(avcodec_parameters_from_context(ast->codecpar, aenc.get()), "audio stream parameters"));
        ast->time_base = aenc->time_base;
    }

    H3_TRY(check(avio_open(&fmt->pb, path.c_str(), AVIO_FLAG_WRITE), "open the file"));
    H3_TRY(check(avformat_write_header(fmt.get(), nullptr), "write the mp4 header"));

    pkt.reset(av_packet_alloc());
    if (!pkt) return out_of_memory(where() + "allocating a packet");
    const int workers = static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 8u));
    for (int t = 0; t < workers; ++t) {
        FramePtr vf(av_frame_alloc());
        if (!vf) return out_of_memory(where() + "allocating frames");
        vf->format = AV_PIX_FMT_YUV420P;
        vf->width = w;
        vf->height = h;
        H3_TRY(check(av_frame_get_buffer(vf.get(), 0), "allocate a video frame"));
        vfs.push_back(std::move(vf));
        SwsPtr ctx(sws_getContext(w, h, AV_PIX_FMT_RGB24, w, h, AV_PIX_FMT_YUV420P,
                                  SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT, nullptr, nullptr,
                                  nullptr));
        if (!ctx) return internal_error(where() + "sws_getContext failed");
        // RGB (full range) -> BT.709 limited-range YUV
        const int* coef = sws_getCoefficients(SWS_CS_ITU709);
        sws_setColorspaceDetails(ctx.get(), coef, 1, coef, 0, 0, 1 << 16, 1 << 16);
        sws.push_back(std::move(ctx));
    }
    return ok_status();
}

Status Mp4Writer::Impl::write_frames(const Tensor& frames) {
    H3_TRY(check_frames("write_mp4", frames));
    if (finished) return internal_error(where() + "frames after finish()");
    const int nf = static_cast<int>(frames.dim(0)), h = streams.height, w = streams.width;
    if (frames.dim(1) != h || frames.dim(2) != w)
        return invalid_argument(where() + "frames of " + std::to_string(frames.dim(2)) + "x" +
                                std::to_string(frames.dim(1)) + " in a " + std::to_string(w) + "x" +
                                std::to_string(h) + " video");
    const int64_t frame_bytes = static_cast<int64_t>(w) * h * 3;
    auto convert = [&](int frame, int slot) {
        const uint8_t* src[1] = {frames.data_as<const uint8_t>() + frame * frame_bytes};
        const int stride[1] = {3 * w};
        sws_scale(sws[static_cast<size_t>(slot)].get(), src, stride, 0, h,
                  vfs[static_cast<size_t>(slot)]->data, vfs[static_cast<size_t>(slot)]->linesize);
    };
    const int workers = static_cast<int>(vfs.size());
    for (int i0 = 0; i0 < nf; i0 += workers) {
        if (opt.cancel && opt.cancel->load()) return cancelled(where() + "cancelled while muxing");
        const int batch = std::min(workers, nf - i0);
        // The encoder may still reference a frame it was sent: writable first (a copy if so).
        for (int t = 0; t < batch; ++t)
            H3_TRY(check(av_frame_make_writable(vfs[static_cast<size_t>(t)].get()), "video frame writable"));
        {
            std::vector<std::jthread> threads;
            for (int t = 1; t < batch; ++t) threads.emplace_back(convert, i0 + t, t);
            convert(i0, 0);
        } // joined
        for (int t = 0; t < batch; ++t) {
            vfs[static_cast<size_t>(t)]->pts = next_pts++;
            H3_TRY(encode(venc.get(), vst, vfs[static_cast<size_t>(t)].get()));
        }
    }
    return ok_status();
}

Status Mp4Writer::Impl::finish(const Tensor& audio) {
    if (finished) return internal_error(where() + "finish() twice");
    const bool has_audio = streams.audio_channels != 0;
    if (has_audio != audio.defined())
        return invalid_argument(where() + (has_audio ? "the audio stream declared at open got no audio"
                                                     : "audio given but no audio stream was declared"));
    if (has_audio && (audio.rank() != 2 || audio.dtype() != DType::kF32 || !audio.device().is_cpu() ||
                      !audio.is_contiguous() || audio.dim(0) != streams.audio_channels))
        return invalid_argument(where() + "audio must be a host f32 [" +
                                std::to_string(streams.audio_channels) + ", N] tensor, got " +
                                audio.describe());
    if (next_pts == 0) return invalid_argument(where() + "no frames to write");
    H3_TRY(encode(venc.get(), vst, nullptr)); // flush the video encoder
    if (has_audio) {
        // The muxer interleaves by time: the video packets wait in its queue (compressed, up to its 10 s
        // interleave window) for the audio ones.
        FramePtr af(av_frame_alloc());
        if (!af) return out_of_memory(where() + "allocating an audio frame");
        af->format = AV_SAMPLE_FMT_FLTP;
        af->sample_rate = streams.sample_rate;
        H3_TRY(check(av_channel_layout_copy(&af->ch_layout, &aenc->ch_layout), "audio layout"));
        af->nb_samples = aenc->frame_size > 0 ? aenc->frame_size : 1024;
        H3_TRY(check(av_frame_get_buffer(af.get(), 0), "allocate an audio frame"));
        const int64_t total = audio.dim(1);
        for (int64_t pos = 0; pos < total;) {
            if (opt.cancel && opt.cancel->load()) return cancelled(where() + "cancelled while muxing");
            H3_TRY(check(av_frame_make_writable(af.get()), "audio frame writable"));
            const int64_t n = std::min<int64_t>(af->nb_samples, total - pos);
            for (int c = 0; c < streams.audio_channels; ++c) {
                float* dst = reinterpret_cast<float*>(af->data[c]);
                const float* src = audio.data_as<const float>() + c * total + pos;
                for (int64_t i = 0; i < af->nb_samples; ++i) dst[i] = i < n ? src[i] : 0.0f;
            }
            const int full = af->nb_samples;
            af->nb_samples = static_cast<int>(n);
            af->pts = pos;
            Status s = encode(aenc.get(), ast, af.get());
            af->nb_samples = full;
            H3_TRY(s);
            pos += n;
        }
        H3_TRY(encode(aenc.get(), ast, nullptr));
    }
    H3_TRY(check(av_write_trailer(fmt.get()), "write the mp4 trailer"));
    finished = true;
    // close now, so that a failing final write is this call's error, not a silent one in the destructor
    if (fmt->pb) H3_TRY(check(avio_closep(&fmt->pb), "close the file"));
    return ok_status();
}

Mp4Writer::Mp4Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Mp4Writer::~Mp4Writer() = default;

Result<std::unique_ptr<Mp4Writer>> Mp4Writer::open(const std::string& path, const Mp4Streams& streams,
                                                   const Mp4Options& options) {
    auto impl = std::make_unique<Impl>();
    impl->path = path;
    impl->opt = options;
    impl->streams = streams;
    H3_TRY(impl->open());
    return std::unique_ptr<Mp4Writer>(new Mp4Writer(std::move(impl)));
}

Status Mp4Writer::write_frames(const Tensor& frames) {
    return impl_->write_frames(frames);
}
Status Mp4Writer::finish(const Tensor& audio) {
    return impl_->finish(audio);
}
int64_t Mp4Writer::frames_written() const {
    return impl_->next_pts;
}
const std::string& Mp4Writer::path() const {
    return impl_->path;
}

Status write_mp4(const std::string& path, const Tensor& frames, const Tensor& audio, int sample_rate,
                 const Mp4Options& opt) {
    H3_TRY(check_frames("write_mp4", frames));
    const bool has_audio = audio.defined();
    if (has_audio && (audio.rank() != 2 || audio.dtype() != DType::kF32 || !audio.device().is_cpu() ||
                      !audio.is_contiguous() || audio.dim(0) < 1 || audio.dim(0) > 2 || sample_rate <= 0))
        return invalid_argument(
            "write_mp4: audio must be a host f32 [1 or 2, N] tensor with a positive rate");
    const Mp4Streams streams{.width = static_cast<int>(frames.dim(2)),
                             .height = static_cast<int>(frames.dim(1)),
                             .audio_channels = has_audio ? static_cast<int>(audio.dim(0)) : 0,
                             .sample_rate = has_audio ? sample_rate : 0};
    H3_ASSIGN_OR_RETURN(auto writer, Mp4Writer::open(path, streams, opt));
    H3_TRY(writer->write_frames(frames));
    return writer->finish(audio);
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

struct Mp4Writer::Impl {};
Mp4Writer::Mp4Writer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Mp4Writer::~Mp4Writer() = default;
Result<std::unique_ptr<Mp4Writer>> Mp4Writer::open(const std::string&, const Mp4Streams&, const Mp4Options&) {
    return unimplemented("Mp4Writer: this build has no FFmpeg (install libavformat-dev, libavcodec-dev, "
                         "libswscale-dev, libswresample-dev and reconfigure)");
}
Status Mp4Writer::write_frames(const Tensor&) {
    return unimplemented("Mp4Writer: this build has no FFmpeg");
}
Status Mp4Writer::finish(const Tensor&) {
    return unimplemented("Mp4Writer: this build has no FFmpeg");
}
int64_t Mp4Writer::frames_written() const {
    return 0;
}
const std::string& Mp4Writer::path() const {
    static const std::string none;
    return none;
}

Status write_png_frames(const std::string&, const Tensor&) {
    return unimplemented("write_png_frames: this build has no FFmpeg (PNG frames use libavcodec's encoder)");
}

#endif

} // namespace h3::io
