// RAII owners of FFmpeg objects and FFmpeg's error text, shared by the media writer (media_mp4.cpp) and the
// media reader (media_reader.cpp). Internal to io; include only under H3_WITH_FFMPEG.
#pragma once

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavutil/error.h>
#include <libavutil/frame.h>
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
