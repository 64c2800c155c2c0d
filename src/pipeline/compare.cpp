// Loading and pairing for `compare`: kind detection, media / WAV / safetensors loading, mismatch rules.
#include "pipeline/compare.h"

#include "io/media_reader.h"
#include "io/media_writer.h"
#include "io/safetensors.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>

namespace h3::pipeline {

namespace {

std::string pair_label(const std::string& a, const std::string& b) {
    return "'" + a + "' vs '" + b + "'";
}

std::string fps_str(const io::MediaData& m) {
    return m.fps_den == 1 ? std::to_string(m.fps_num)
                          : std::to_string(m.fps_num) + "/" + std::to_string(m.fps_den);
}

std::string shape_str(const std::vector<int64_t>& s) {
    std::string r = "[";
    for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
    return r + "]";
}

Result<LatentsComparison> compare_latents(const std::string& a, const std::string& b,
                                          std::vector<std::string>* warnings) {
    H3_ASSIGN_OR_RETURN(io::SafetensorsFile fa, io::SafetensorsFile::open(a));
    H3_ASSIGN_OR_RETURN(io::SafetensorsFile fb, io::SafetensorsFile::open(b));
    LatentsComparison out;
    for (const io::TensorInfo& ia : fa.tensors()) {
        const io::TensorInfo* ib = fb.find(ia.name);
        if (!ib) {
            out.only_in_a.push_back(ia.name);
            continue;
        }
        if (!dtype_is_float(ia.dtype) || !dtype_is_float(ib->dtype)) {
            warnings->push_back("tensor '" + ia.name + "' is not floating point (" + dtype_name(ia.dtype) +
                                " vs " + dtype_name(ib->dtype) + "); skipped");
            continue;
        }
        if (ia.shape != ib->shape)
            return invalid_argument("compare " + pair_label(a, b) + ": tensor '" + ia.name + "' has shape " +
                                    shape_str(ia.shape) + " vs " + shape_str(ib->shape));
        H3_ASSIGN_OR_RETURN(Tensor ta, fa.tensor(ia.name));
        H3_ASSIGN_OR_RETURN(Tensor tb, fb.tensor(ia.name));
        H3_ASSIGN_OR_RETURN(Tensor xa, ta.to_dtype(DType::kF32));
        H3_ASSIGN_OR_RETURN(Tensor xb, tb.to_dtype(DType::kF32));
        out.tensors.push_back(
            {ia.name, ia.shape,
             signal_metrics(xa.data_as<const float>(), xb.data_as<const float>(), xa.numel())});
    }
    for (const io::TensorInfo& ib : fb.tensors())
        if (!fa.contains(ib.name)) out.only_in_b.push_back(ib.name);
    auto list = [](const std::vector<std::string>& v) {
        std::string r;
        for (const auto& s : v) r += (r.empty() ? "" : ", ") + s;
        return r;
    };
    if (!out.only_in_a.empty()) warnings->push_back("only in '" + a + "': " + list(out.only_in_a));
    if (!out.only_in_b.empty()) warnings->push_back("only in '" + b + "': " + list(out.only_in_b));
    if (out.tensors.empty())
        return invalid_argument("compare " + pair_label(a, b) + ": the files share no floating-point tensor");
    return out;
}

} // namespace

const char* compare_kind_name(CompareKind kind) {
    switch (kind) {
    case CompareKind::kVideo:
        return "video";
    case CompareKind::kAudio:
        return "audio";
    case CompareKind::kLatents:
        return "latents";
    }
    return "?";
}

Result<CompareKind> detect_compare_kind(const std::string& path) {
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return not_found("compare: '" + path + "' does not exist");
    if (std::filesystem::is_directory(path, ec))
        return bad_input("compare: '" + path +
                         "' is a directory; give an MP4/MKV/…, WAV or safetensors file");
    std::ifstream in(path, std::ios::binary);
    if (!in) return io_error("compare: cannot open '" + path + "'");
    unsigned char h[12] = {0};
    in.read(reinterpret_cast<char*>(h), sizeof(h));
    const std::streamsize got = in.gcount();
    if (got == 0) return bad_input("compare: '" + path + "' is empty");
    if (got >= 12 && !std::memcmp(h, "RIFF", 4) && !std::memcmp(h + 8, "WAVE", 4)) return CompareKind::kAudio;
    if (got >= 9) {
        uint64_t n = 0;
        for (int i = 7; i >= 0; --i) n = (n << 8) | h[i];
        if (n >= 2 && n <= io::kMaxSafetensorsHeaderBytes && h[8] == '{') return CompareKind::kLatents;
    }
    return CompareKind::kVideo;
}

Result<VideoComparison> compare_video(const Tensor& a, const Tensor& b, const std::string& a_name,
                                      const std::string& b_name, std::vector<std::string>* warnings,
                                      int threads) {
    for (const Tensor* t : {&a, &b})
        if (!t->defined() || t->rank() != 4 || t->dim(3) != 3 || t->dtype() != DType::kU8)
            return invalid_argument("compare_video: frames must be u8 [F, H, W, 3] tensors");
    if (a.dim(1) != b.dim(1) || a.dim(2) != b.dim(2))
        return invalid_argument("compare " + pair_label(a_name, b_name) + ": frame sizes differ (" +
                                std::to_string(a.dim(2)) + "x" + std::to_string(a.dim(1)) + " vs " +
                                std::to_string(b.dim(2)) + "x" + std::to_string(b.dim(1)) + ")");
    VideoComparison v;
    v.frames_a = a.dim(0);
    v.frames_b = b.dim(0);
    v.frames = std::min(v.frames_a, v.frames_b);
    v.height = static_cast<int>(a.dim(1));
    v.width = static_cast<int>(a.dim(2));
    if (v.frames < 1)
        return invalid_argument("compare " + pair_label(a_name, b_name) + ": no frames to compare");
    if (v.frames_a != v.frames_b)
        warnings->push_back("frame counts differ (" + std::to_string(v.frames_a) + " vs " +
                            std::to_string(v.frames_b) + "); compared the first " + std::to_string(v.frames));
    H3_ASSIGN_OR_RETURN(Tensor ca, a.contiguous());
    H3_ASSIGN_OR_RETURN(Tensor cb, b.contiguous());
    auto m = frame_metrics(ca.slice(0, 0, v.frames), cb.slice(0, 0, v.frames), threads);
    if (!m.ok()) return m.status().with_context("compare " + pair_label(a_name, b_name));
    v.psnr = std::move(m->psnr);
    v.ssim = std::move(m->ssim);
    double mse_sum = 0.0, psnr_sum = 0.0, ssim_sum = 0.0;
    int64_t finite = 0;
    v.psnr_min = v.psnr[0];
    v.ssim_min = v.ssim[0];
    for (int64_t f = 0; f < v.frames; ++f) {
        mse_sum += m->mse[f];
        ssim_sum += v.ssim[f];
        if (std::isfinite(v.psnr[f])) {
            psnr_sum += v.psnr[f];
            ++finite;
        } else {
            ++v.identical_frames;
        }
        if (v.psnr[f] < v.psnr_min) {
            v.psnr_min = v.psnr[f];
            v.psnr_min_frame = f;
        }
        if (v.ssim[f] < v.ssim_min) {
            v.ssim_min = v.ssim[f];
            v.ssim_min_frame = f;
        }
    }
    v.psnr_mean = finite ? psnr_sum / static_cast<double>(finite) : std::numeric_limits<double>::infinity();
    v.psnr_of_mean_mse = psnr_from_mse(mse_sum / static_cast<double>(v.frames));
    v.ssim_mean = ssim_sum / static_cast<double>(v.frames);
    return v;
}

Result<AudioComparison> compare_audio(const Tensor& a, int rate_a, const Tensor& b, int rate_b,
                                      const std::string& a_name, const std::string& b_name,
                                      std::vector<std::string>* warnings) {
    for (const Tensor* t : {&a, &b})
        if (!t->defined() || t->rank() != 2 || t->dtype() != DType::kF32 || !t->device().is_cpu())
            return invalid_argument("compare_audio: audio must be host f32 [C, N] tensors");
    if (a.dim(0) != b.dim(0))
        return invalid_argument("compare " + pair_label(a_name, b_name) + ": audio channel counts differ (" +
                                std::to_string(a.dim(0)) + " vs " + std::to_string(b.dim(0)) + ")");
    if (rate_a != rate_b)
        return invalid_argument("compare " + pair_label(a_name, b_name) + ": audio sample rates differ (" +
                                std::to_string(rate_a) + " vs " + std::to_string(rate_b) + " Hz)");
    AudioComparison r;
    r.channels = static_cast<int>(a.dim(0));
    r.sample_rate = rate_a;
    r.samples_a = a.dim(1);
    r.samples_b = b.dim(1);
    r.samples = std::min(r.samples_a, r.samples_b);
    if (r.samples < 1)
        return invalid_argument("compare " + pair_label(a_name, b_name) + ": no audio samples");
    if (r.samples_a != r.samples_b)
        warnings->push_back("audio lengths differ (" + std::to_string(r.samples_a) + " vs " +
                            std::to_string(r.samples_b) + " samples per channel); compared the first " +
                            std::to_string(r.samples));
    H3_ASSIGN_OR_RETURN(Tensor ca, a.contiguous());
    H3_ASSIGN_OR_RETURN(Tensor cb, b.contiguous());
    SignalAccumulator all;
    for (int c = 0; c < r.channels; ++c) {
        SignalAccumulator acc;
        acc.add(ca.data_as<const float>() + c * r.samples_a, cb.data_as<const float>() + c * r.samples_b,
                r.samples);
        r.per_channel.push_back(acc.finish());
        all.merge(acc);
    }
    r.overall = all.finish();
    return r;
}

Result<CompareReport> compare_files(const std::string& a, const std::string& b,
                                    const CompareOptions& options) {
    H3_ASSIGN_OR_RETURN(CompareKind ka, detect_compare_kind(a));
    H3_ASSIGN_OR_RETURN(CompareKind kb, detect_compare_kind(b));
    if (ka != kb)
        return invalid_argument("compare " + pair_label(a, b) + ": different kinds (" +
                                compare_kind_name(ka) + " vs " + compare_kind_name(kb) + ")");
    CompareReport rep;
    rep.kind = ka;
    rep.a = a;
    rep.b = b;
    switch (ka) {
    case CompareKind::kAudio: {
        H3_ASSIGN_OR_RETURN(io::WavData wa, io::read_wav(a));
        H3_ASSIGN_OR_RETURN(io::WavData wb, io::read_wav(b));
        H3_ASSIGN_OR_RETURN(rep.audio, compare_audio(wa.samples, wa.sample_rate, wb.samples, wb.sample_rate,
                                                     a, b, &rep.warnings));
        break;
    }
    case CompareKind::kLatents: {
        H3_ASSIGN_OR_RETURN(rep.latents, compare_latents(a, b, &rep.warnings));
        break;
    }
    case CompareKind::kVideo: {
        H3_ASSIGN_OR_RETURN(io::MediaData ma, io::read_media(a));
        H3_ASSIGN_OR_RETURN(io::MediaData mb, io::read_media(b));
        H3_ASSIGN_OR_RETURN(rep.video,
                            compare_video(ma.frames, mb.frames, a, b, &rep.warnings, options.threads));
        rep.video->fps_a = ma.fps;
        rep.video->fps_b = mb.fps;
        if (ma.fps_num != mb.fps_num || ma.fps_den != mb.fps_den)
            rep.warnings.push_back("frame rates differ (" + fps_str(ma) + " vs " + fps_str(mb) + " fps)");
        // Free the frames before the audio is paired.
        ma.frames = Tensor();
        mb.frames = Tensor();
        const bool audio_a = ma.audio.defined() && ma.audio.dim(1) > 0;
        const bool audio_b = mb.audio.defined() && mb.audio.dim(1) > 0;
        if (audio_a && audio_b) {
            H3_ASSIGN_OR_RETURN(rep.audio, compare_audio(ma.audio, ma.sample_rate, mb.audio, mb.sample_rate,
                                                         a, b, &rep.warnings));
        } else if (audio_a != audio_b) {
            rep.warnings.push_back("only '" + (audio_a ? a : b) + "' has audio; audio not compared");
        }
        break;
    }
    }
    return rep;
}

} // namespace h3::pipeline
