// Media reader: demux with libavformat, decode with libavcodec, RGB24 through libswscale, planar float
// audio through libswresample.
#include "io/media_reader.h"

#ifdef H3_WITH_FFMPEG
extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
#include <libavutil/channel_layout.h>
#include <libavutil/display.h>
#include <libavutil/pixdesc.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

#include "io/ffmpeg_handles.h"
#endif

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

namespace h3::io {

#ifdef H3_WITH_FFMPEG

namespace {

// The counterclockwise rotation the stream's display matrix asks for (phone videos), 0 without one.
double display_rotation(const AVStream* st) {
    const uint8_t* sd = nullptr;
#if LIBAVFORMAT_VERSION_MAJOR >= 61
    const AVPacketSideData* p = av_packet_side_data_get(
        st->codecpar->coded_side_data, st->codecpar->nb_coded_side_data, AV_PKT_DATA_DISPLAYMATRIX);
    if (p && p->size >= 9 * 4) sd = p->data;
#else
    size_t size = 0;
    sd = av_stream_get_side_data(st, AV_PKT_DATA_DISPLAYMATRIX, &size);
    if (size < 9 * 4) sd = nullptr;
#endif
    if (!sd) return 0.0;
    const double r = av_display_rotation_get(reinterpret_cast<const int32_t*>(sd));
    return std::isnan(r) ? 0.0 : r;
}

} // namespace

namespace {

using namespace ffmpeg;

struct InputDel {
    void operator()(AVFormatContext* f) const { avformat_close_input(&f); }
};

// sws coefficient table for the stream's declared YUV matrix (BT.601 when unspecified, as FFmpeg does).
int sws_colorspace(AVColorSpace cs) {
    switch (cs) {
    case AVCOL_SPC_BT709:
        return SWS_CS_ITU709;
    case AVCOL_SPC_FCC:
        return SWS_CS_FCC;
    case AVCOL_SPC_SMPTE240M:
        return SWS_CS_SMPTE240M;
    case AVCOL_SPC_BT2020_NCL:
    case AVCOL_SPC_BT2020_CL:
        return SWS_CS_BT2020;
    default:
        return SWS_CS_ITU601;
    }
}

bool full_range(const AVFrame* f) {
    const auto fmt = static_cast<AVPixelFormat>(f->format);
    return f->color_range == AVCOL_RANGE_JPEG || fmt == AV_PIX_FMT_YUVJ420P || fmt == AV_PIX_FMT_YUVJ422P ||
           fmt == AV_PIX_FMT_YUVJ444P || fmt == AV_PIX_FMT_YUVJ440P || fmt == AV_PIX_FMT_YUVJ411P;
}

Result<CodecPtr> open_decoder(const std::string& path, const AVStream* st, const char* kind,
                              int64_t max_pixels) {
    const AVCodec* dec = avcodec_find_decoder(st->codecpar->codec_id);
    if (!dec)
        return bad_input("read_media: '" + path + "': no decoder for its " + kind + " codec '" +
                         avcodec_get_name(st->codecpar->codec_id) + "' in this FFmpeg");
    CodecPtr c(avcodec_alloc_context3(dec));
    if (!c) return out_of_memory("read_media: allocating a decoder");
    int e = avcodec_parameters_to_context(c.get(), st->codecpar);
    if (e >= 0) {
        c->thread_count = 0; // FFmpeg picks; frames still come out in presentation order
        c->pkt_timebase = st->time_base;
        if (max_pixels > 0) c->max_pixels = max_pixels; // libavcodec refuses larger frames itself
        e = avcodec_open2(c.get(), dec, nullptr);
    }
    if (e < 0)
        return bad_input("read_media: '" + path + "': cannot open the " + kind + " decoder '" + dec->name +
                         "': " + av_err(e));
    return c;
}

class Reader {
public:
    Reader(const std::string& path, const MediaReadOptions& opt)
        : path_(path), name_(opt.name.empty() ? path : opt.name), opt_(opt) {}

    Result<MediaData> run() {
        std::error_code ec;
        if (!std::filesystem::exists(path_, ec))
            return not_found("read_media: '" + name_ + "' does not exist");
        if (std::filesystem::is_directory(path_, ec))
            return invalid_argument("read_media: '" + name_ + "' is a directory, not a media file");
        ffmpeg::apply_limits(); // allocation cap, log level
        AVFormatContext* raw = nullptr;
        int e = avformat_open_input(&raw, path_.c_str(), nullptr, nullptr);
        if (e < 0)
            return bad_input("read_media: '" + name_ + "' is not a media file FFmpeg can open: " + av_err(e));
        fmt_.reset(raw);
        e = avformat_find_stream_info(fmt_.get(), nullptr);
        if (e < 0) return bad_input("read_media: '" + name_ + "': cannot read its stream info: " + av_err(e));

        const int vi = av_find_best_stream(fmt_.get(), AVMEDIA_TYPE_VIDEO, -1, -1, nullptr, 0);
        const int ai = av_find_best_stream(fmt_.get(), AVMEDIA_TYPE_AUDIO, -1, -1, nullptr, 0);
        if (opt_.video && vi < 0) return bad_input("read_media: '" + name_ + "' has no video stream");
        for (unsigned i = 0; i < fmt_->nb_streams; ++i) fmt_->streams[i]->discard = AVDISCARD_ALL;
        if (opt_.video) {
            vst_ = fmt_->streams[vi];
            vst_->discard = AVDISCARD_DEFAULT;
            const AVCodecParameters* par = vst_->codecpar;
            if (opt_.max_frame_pixels > 0 &&
                static_cast<int64_t>(par->width) * par->height > opt_.max_frame_pixels)
                return bad_input("read_media: '" + name_ + "': its video is " + std::to_string(par->width) +
                                 "x" + std::to_string(par->height) + ", more than " +
                                 std::to_string(opt_.max_frame_pixels) + " pixels per frame");
            H3_ASSIGN_OR_RETURN(vdec_, open_decoder(name_, vst_, "video", opt_.max_frame_pixels));
            AVRational r = vst_->avg_frame_rate;
            if (r.num <= 0 || r.den <= 0) r = vst_->r_frame_rate;
            if (r.num > 0 && r.den > 0) {
                out_.fps_num = r.num;
                out_.fps_den = r.den;
                out_.fps = av_q2d(r);
            }
            out_.video_codec = vdec_->codec->name;
            if (opt_.max_seconds >= 0 && out_.fps > 0)
                time_cap_frames_ = static_cast<int64_t>(std::ceil(opt_.max_seconds * out_.fps)) + 1;
            out_.rotation_degrees = display_rotation(vst_);
            // nothing is reserved from the container's declared frame count: frames are stored as they decode
        }
        if (opt_.audio && ai >= 0) {
            ast_ = fmt_->streams[ai];
            ast_->discard = AVDISCARD_DEFAULT;
            H3_ASSIGN_OR_RETURN(adec_, open_decoder(name_, ast_, "audio", 0));
            out_.audio_codec = adec_->codec->name;
        }

        PacketPtr pkt(av_packet_alloc());
        frame_.reset(av_frame_alloc());
        if (!pkt || !frame_) return out_of_memory("read_media: allocating packets");
        while (!video_full() && !(audio_full_ && !vst_)) {
            e = av_read_frame(fmt_.get(), pkt.get());
            if (e == AVERROR_EOF) break;
            if (e < 0) return bad_input("read_media: '" + name_ + "': demuxing failed: " + av_err(e));
            Status s = ok_status();
            if (vst_ && pkt->stream_index == vst_->index)
                s = feed(vdec_.get(), pkt.get(), true);
            else if (ast_ && pkt->stream_index == ast_->index)
                s = feed(adec_.get(), pkt.get(), false);
            av_packet_unref(pkt.get());
            H3_TRY(s);
        }
        if (vst_) H3_TRY(feed(vdec_.get(), nullptr, true));
        if (ast_) {
            H3_TRY(feed(adec_.get(), nullptr, false));
            H3_TRY(flush_resampler());
        }
        return finish();
    }

private:
    bool video_full() const {
        return vst_ && ((opt_.max_frames >= 0 && frames_ >= opt_.max_frames) ||
                        (time_cap_frames_ >= 0 && frames_ >= time_cap_frames_));
    }

    Status decode_error(bool video, int e) const {
        const AVCodecContext* c = video ? vdec_.get() : adec_.get();
        return bad_input("read_media: '" + name_ + "': the " + (video ? "video" : "audio") + " stream (" +
                         c->codec->name + ") does not decode: " + av_err(e));
    }

    // Sends `pkt` (nullptr drains) and converts every frame the decoder returns.
    Status feed(AVCodecContext* c, const AVPacket* pkt, bool video) {
        int e = avcodec_send_packet(c, pkt);
        if (e < 0 && e != AVERROR_EOF) return decode_error(video, e);
        while (true) {
            e = avcodec_receive_frame(c, frame_.get());
            if (e == AVERROR(EAGAIN) || e == AVERROR_EOF) return ok_status();
            if (e < 0) return decode_error(video, e);
            Status s = video ? (video_full() ? ok_status() : add_video()) : add_audio();
            av_frame_unref(frame_.get());
            H3_TRY(s);
        }
    }

    Status add_video() {
        const AVFrame* f = frame_.get();
        if (!sws_) {
            width_ = f->width;
            height_ = f->height;
            src_fmt_ = f->format;
            sws_.reset(sws_getContext(width_, height_, static_cast<AVPixelFormat>(src_fmt_), width_, height_,
                                      AV_PIX_FMT_RGB24, SWS_BICUBIC | SWS_ACCURATE_RND | SWS_FULL_CHR_H_INT,
                                      nullptr, nullptr, nullptr));
            if (!sws_)
                return bad_input("read_media: '" + name_ + "': cannot convert pixel format '" +
                                 av_get_pix_fmt_name(static_cast<AVPixelFormat>(src_fmt_)) + "' to RGB");
            const int* in = sws_getCoefficients(sws_colorspace(f->colorspace));
            // Returns −1 for RGB sources, where the matrix does not apply.
            sws_setColorspaceDetails(sws_.get(), in, full_range(f) ? 1 : 0,
                                     sws_getCoefficients(SWS_CS_DEFAULT), 1, 0, 1 << 16, 1 << 16);
        } else if (f->width != width_ || f->height != height_ || f->format != src_fmt_) {
            return bad_input("read_media: '" + name_ + "': the video changes size or pixel format at frame " +
                             std::to_string(frames_) + " (" + std::to_string(width_) + "x" +
                             std::to_string(height_) + " -> " + std::to_string(f->width) + "x" +
                             std::to_string(f->height) + ")");
        }
        if (opt_.max_frame_pixels > 0 && static_cast<int64_t>(width_) * height_ > opt_.max_frame_pixels)
            return bad_input("read_media: '" + name_ + "': its frames are " + std::to_string(width_) + "x" +
                             std::to_string(height_) + ", more than " +
                             std::to_string(opt_.max_frame_pixels) + " pixels");
        const size_t bytes = static_cast<size_t>(width_) * height_ * 3;
        const size_t at = video_.size();
        if (opt_.max_video_bytes >= 0 && static_cast<int64_t>(at + bytes) > opt_.max_video_bytes)
            return bad_input("read_media: '" + name_ + "': its " + std::to_string(width_) + "x" +
                             std::to_string(height_) + " frames pass " +
                             std::to_string(opt_.max_video_bytes >> 20) + " MiB decoded after " +
                             std::to_string(frames_) + " frames; use a shorter or smaller video");
        if (video_.capacity() < at + bytes) { // grow geometrically, never past the cap
            size_t want = std::max(at + bytes, 2 * video_.capacity());
            if (opt_.max_video_bytes >= 0) want = std::min(want, static_cast<size_t>(opt_.max_video_bytes));
            video_.reserve(std::max(want, at + bytes));
        }
        video_.resize(at + bytes);
        uint8_t* dst[1] = {video_.data() + at};
        const int stride[1] = {3 * width_};
        if (sws_scale(sws_.get(), f->data, f->linesize, 0, height_, dst, stride) != height_)
            return internal_error("read_media: sws_scale converted a partial frame");
        ++frames_;
        return ok_status();
    }

    Status add_audio() {
        AVFrame* f = frame_.get(); // swr_alloc_set_opts2 takes non-const layouts in FFmpeg 5
        if (!swr_) {
            channels_ = f->ch_layout.nb_channels;
            rate_ = f->sample_rate;
            in_fmt_ = f->format;
            if (channels_ < 1 || rate_ <= 0)
                return bad_input("read_media: '" + name_ + "': audio frame without channels or sample rate");
            SwrContext* s = nullptr;
            int e = swr_alloc_set_opts2(&s, &f->ch_layout, AV_SAMPLE_FMT_FLTP, rate_, &f->ch_layout,
                                        static_cast<AVSampleFormat>(in_fmt_), rate_, 0, nullptr);
            swr_.reset(s);
            if (e >= 0) e = swr_init(swr_.get());
            if (e < 0)
                return bad_input("read_media: '" + name_ + "': cannot convert its audio: " + av_err(e));
            pcm_.assign(static_cast<size_t>(channels_), {});
        } else if (f->ch_layout.nb_channels != channels_ || f->sample_rate != rate_ || f->format != in_fmt_) {
            return bad_input("read_media: '" + name_ +
                             "': the audio changes channels, rate or format mid-stream");
        }
        return convert_audio(const_cast<const uint8_t**>(f->extended_data), f->nb_samples);
    }

    Status convert_audio(const uint8_t** in, int n) {
        const int cap = swr_get_out_samples(swr_.get(), n);
        if (cap <= 0) return ok_status();
        std::vector<std::vector<float>> tmp(static_cast<size_t>(channels_), std::vector<float>(cap));
        std::vector<uint8_t*> out(static_cast<size_t>(channels_));
        for (int c = 0; c < channels_; ++c) out[c] = reinterpret_cast<uint8_t*>(tmp[c].data());
        const int got = swr_convert(swr_.get(), out.data(), cap, in, n);
        if (got < 0) return bad_input("read_media: '" + name_ + "': audio conversion failed: " + av_err(got));
        if (audio_full_) return ok_status();
        if (opt_.max_audio_bytes >= 0 &&
            static_cast<int64_t>((pcm_[0].size() + static_cast<size_t>(got)) * sizeof(float)) * channels_ >
                opt_.max_audio_bytes)
            return bad_input("read_media: '" + name_ + "': its audio (" + std::to_string(channels_) +
                             " channels at " + std::to_string(rate_) + " Hz) passes " +
                             std::to_string(opt_.max_audio_bytes >> 20) +
                             " MiB decoded; use a shorter clip or fewer channels");
        for (int c = 0; c < channels_; ++c)
            pcm_[c].insert(pcm_[c].end(), tmp[c].begin(), tmp[c].begin() + got);
        if (opt_.max_seconds >= 0) {
            const auto cap = static_cast<size_t>(opt_.max_seconds * rate_) + 1;
            if (pcm_[0].size() > cap) {
                for (auto& ch : pcm_) ch.resize(cap);
                audio_full_ = true;
                out_.truncated = true;
            }
        }
        return ok_status();
    }

    Status flush_resampler() {
        if (!swr_) return ok_status();
        return convert_audio(nullptr, 0);
    }

    Result<MediaData> finish() {
        if (time_cap_frames_ >= 0 && frames_ >= time_cap_frames_) out_.truncated = true;
        if (vst_) {
            if (frames_ == 0)
                return bad_input("read_media: '" + name_ + "': the video stream (" + out_.video_codec +
                                 ") decoded to no frames");
            out_.frames = Tensor::host(Shape{frames_, height_, width_, 3}, DType::kU8);
            std::memcpy(out_.frames.data(), video_.data(), video_.size());
            video_ = {};
        }
        if (swr_) {
            const int64_t n = static_cast<int64_t>(pcm_[0].size());
            out_.audio = Tensor::host(Shape{channels_, n}, DType::kF32);
            for (int c = 0; c < channels_; ++c)
                std::memcpy(out_.audio.data_as<float>() + c * n, pcm_[c].data(), n * sizeof(float));
            out_.sample_rate = rate_;
        } else if (ast_) {
            out_.sample_rate = ast_->codecpar->sample_rate;
            out_.audio =
                Tensor::host(Shape{std::max(1, ast_->codecpar->ch_layout.nb_channels), 0}, DType::kF32);
        }
        return std::move(out_);
    }

    std::string path_;
    std::string name_; // how errors name the input
    MediaReadOptions opt_;
    std::unique_ptr<AVFormatContext, InputDel> fmt_;
    AVStream* vst_ = nullptr;
    AVStream* ast_ = nullptr;
    CodecPtr vdec_, adec_;
    FramePtr frame_;
    SwsPtr sws_;
    SwrPtr swr_;
    int64_t time_cap_frames_ = -1; // from max_seconds once the frame rate is known
    bool audio_full_ = false;
    int width_ = 0, height_ = 0, src_fmt_ = -1;
    int64_t frames_ = 0;
    std::vector<uint8_t> video_;
    int channels_ = 0, rate_ = 0, in_fmt_ = -1;
    std::vector<std::vector<float>> pcm_;
    MediaData out_;
};

} // namespace

Result<MediaData> read_media(const std::string& path, const MediaReadOptions& options) {
    return Reader(path, options).run();
}

#else

Result<MediaData> read_media(const std::string& path, const MediaReadOptions&) {
    return unimplemented("read_media: cannot read '" + path +
                         "': this build has no FFmpeg (install libavformat-dev, libavcodec-dev, "
                         "libswscale-dev, libswresample-dev and reconfigure)");
}

#endif

} // namespace h3::io
