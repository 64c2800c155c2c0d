// Reads an MP4 back with libavformat/libavcodec for tests: the streams' codecs and shapes and the number
// of video frames a player decodes. Needs H3_WITH_FFMPEG.
#pragma once

#ifdef H3_WITH_FFMPEG

extern "C" {
#include <libavcodec/avcodec.h>
#include <libavformat/avformat.h>
}

#include <string>

namespace h3::test {

struct MediaProbe {
    bool opened = false;
    std::string error;
    unsigned streams = 0;
    AVCodecID video_codec = AV_CODEC_ID_NONE, audio_codec = AV_CODEC_ID_NONE;
    int width = 0, height = 0;
    double fps = 0;
    int sample_rate = 0, channels = 0;
    int decoded_frames = 0; // video frames decoded from every packet
};

inline MediaProbe probe_media(const std::string& path) {
    MediaProbe p;
    AVFormatContext* fmt = nullptr;
    if (avformat_open_input(&fmt, path.c_str(), nullptr, nullptr) != 0) {
        p.error = "avformat_open_input failed";
        return p;
    }
    if (avformat_find_stream_info(fmt, nullptr) < 0) {
        p.error = "avformat_find_stream_info failed";
        avformat_close_input(&fmt);
        return p;
    }
    p.opened = true;
    p.streams = fmt->nb_streams;
    const AVStream* vs = nullptr;
    for (unsigned i = 0; i < fmt->nb_streams; ++i) {
        const AVCodecParameters* cp = fmt->streams[i]->codecpar;
        if (cp->codec_type == AVMEDIA_TYPE_VIDEO && !vs) {
            vs = fmt->streams[i];
            p.video_codec = cp->codec_id;
            p.width = cp->width;
            p.height = cp->height;
            p.fps = av_q2d(vs->avg_frame_rate);
        }
        if (cp->codec_type == AVMEDIA_TYPE_AUDIO) {
            p.audio_codec = cp->codec_id;
            p.sample_rate = cp->sample_rate;
            p.channels = cp->ch_layout.nb_channels;
        }
    }
    if (vs) {
        const AVCodec* dec = avcodec_find_decoder(vs->codecpar->codec_id);
        AVCodecContext* dc = dec ? avcodec_alloc_context3(dec) : nullptr;
        if (dc && avcodec_parameters_to_context(dc, vs->codecpar) >= 0 &&
            avcodec_open2(dc, dec, nullptr) >= 0) {
            AVPacket* pkt = av_packet_alloc();
            AVFrame* fr = av_frame_alloc();
            while (av_read_frame(fmt, pkt) >= 0) {
                if (pkt->stream_index == vs->index) {
                    avcodec_send_packet(dc, pkt);
                    while (avcodec_receive_frame(dc, fr) == 0) ++p.decoded_frames;
                }
                av_packet_unref(pkt);
            }
            avcodec_send_packet(dc, nullptr);
            while (avcodec_receive_frame(dc, fr) == 0) ++p.decoded_frames;
            av_frame_free(&fr);
            av_packet_free(&pkt);
        } else {
            p.error = "cannot open the video decoder";
        }
        avcodec_free_context(&dc);
    }
    avformat_close_input(&fmt);
    return p;
}

} // namespace h3::test

#endif // H3_WITH_FFMPEG
