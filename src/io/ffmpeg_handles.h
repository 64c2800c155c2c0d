// RAII owners of FFmpeg objects and FFmpeg's error text, shared by the media writer (media_mp4.cpp) and the
// media reader (media_reader.cpp). Internal to io; include only under H3_WITH_FFMPEG.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
#include <libavutil/log.h>
#include <libavutil/mem.h>
#include <libswresample/swresample.h>
#include <libswscale/swscale.h>
}

#include <memory>
#include <string>

namespace h3::io::ffmpeg {

inline std::string av_err(int e) {
    char buf[AV_ERROR_MAX_STRING_SIZE] = {0};
    av_strerror(e, buf, sizeof(buf));
    return buf;
}

// FFmpeg's largest single allocation (av_max_alloc, process-wide). Demuxers size some tables from counts the
// container declares: fuzz_media found an 8.6 KB MP4 for which avformat_open_input asked av_malloc for 1.4
// GB. No frame, packet, index or encoder buffer of media the engine reads or writes comes near this; past it
// FFmpeg returns ENOMEM and the reader refuses the file.
inline constexpr size_t kMaxFfmpegAllocation = size_t{256} << 20;

// Applied before every read and write (idempotent): the allocation cap and FFmpeg's log level.
inline void apply_limits() {
    static const bool applied = [] {
        av_max_alloc(kMaxFfmpegAllocation);
        return true;
    }();
    (void)applied;
    av_log_set_level(AV_LOG_ERROR);
}

struct CodecDel {
    void operator()(AVCodecContext* c) const { avcodec_free_context(&c); }
};
struct FrameDel {
    void operator()(AVFrame* f) const { av_frame_free(&f); }
};
struct PacketDel {
    void operator()(AVPacket* p) const { av_packet_free(&p); }
};
struct SwsDel {
    void operator()(SwsContext* s) const { sws_freeContext(s); }
};
struct SwrDel {
    void operator()(SwrContext* s) const { swr_free(&s); }
};
using CodecPtr = std::unique_ptr<AVCodecContext, CodecDel>;
using FramePtr = std::unique_ptr<AVFrame, FrameDel>;
using PacketPtr = std::unique_ptr<AVPacket, PacketDel>;
using SwsPtr = std::unique_ptr<SwsContext, SwsDel>;
using SwrPtr = std::unique_ptr<SwrContext, SwrDel>;

} // namespace h3::io::ffmpeg
