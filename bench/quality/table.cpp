#include "bench/quality/table.h"

#include "pipeline/compare_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>

namespace h3::bench {

namespace {

using Json = nlohmann::ordered_json;
constexpr double kInf = std::numeric_limits<double>::infinity();

// the conventions of `compare --json` (pipeline/compare_report.h)
Json number(double x) {
    return pipeline::report_number(x);
}
std::string fmt(double x, int digits) {
    return pipeline::report_fixed(x, digits);
}

double psnr_of(double sum_sq_err, int64_t values) {
    return values > 0 ? pipeline::psnr_from_mse(sum_sq_err / static_cast<double>(values)) : kInf;
}

double ratio(double reference, double value) {
    return value > 0 ? reference / value : std::numeric_limits<double>::quiet_NaN();
}

} // namespace

const char* row_status_name(RowStatus s) {
    switch (s) {
    case RowStatus::kMeasured:
        return "measured";
    case RowStatus::kNotApplicable:
        return "not_applicable";
    case RowStatus::kUnsupported:
        return "unsupported";
    case RowStatus::kFailed:
        return "failed";
    }
    return "?";
}

Result<CaseComparison> compare_case(const CaseRun& ref, const CaseRun& run, int threads) {
    const std::string what = "bench quality: case '" + ref.name + "'";
    if (!ref.frames.defined() || !run.frames.defined() || ref.frames.shape() != run.frames.shape())
        return internal_error(what + ": the setting's decoded frames differ in shape from the reference's");
    if (!ref.audio.defined() || !run.audio.defined() || ref.audio.shape() != run.audio.shape() ||
        ref.audio.dtype() != DType::kF32 || run.audio.dtype() != DType::kF32)
        return internal_error(what + ": the setting's decoded audio differs in shape from the reference's");
    H3_ASSIGN_OR_RETURN(Tensor fa, ref.frames.contiguous());
    H3_ASSIGN_OR_RETURN(Tensor fb, run.frames.contiguous());
    auto m = pipeline::frame_metrics(fa, fb, threads);
    if (!m.ok()) return m.status().with_context(what);
    CaseComparison c;
    c.name = ref.name;
    c.frames = static_cast<int64_t>(m->psnr.size());
    c.values_per_frame = fa.dim(1) * fa.dim(2) * fa.dim(3);
    c.psnr_min = kInf;
    c.ssim_min = kInf;
    double ssim_sum = 0;
    for (size_t f = 0; f < m->psnr.size(); ++f) {
        c.sum_sq_err += m->mse[f] * static_cast<double>(c.values_per_frame);
        c.ssim_sum += m->ssim[f];
        ssim_sum += m->ssim[f];
        c.psnr_min = std::min(c.psnr_min, m->psnr[f]);
        c.ssim_min = std::min(c.ssim_min, m->ssim[f]);
        if (std::isinf(m->psnr[f])) ++c.identical_frames;
    }
    c.psnr = psnr_of(c.sum_sq_err, c.frames * c.values_per_frame);
    c.ssim_mean = c.frames ? ssim_sum / static_cast<double>(c.frames) : 1.0;
    H3_ASSIGN_OR_RETURN(Tensor aa, ref.audio.contiguous());
    H3_ASSIGN_OR_RETURN(Tensor ab, run.audio.contiguous());
    c.audio_sums.add(aa.data_as<float>(), ab.data_as<float>(), aa.numel());
    c.audio = c.audio_sums.finish();
    c.blocks = run.blocks;
    c.dit_calls = run.dit_calls;
    c.cache_hits = run.cache_hits;
    c.step_seconds = run.step_seconds;
    c.total_seconds = run.total_seconds;
    return c;
}

QualityRow measured_row(std::string name, std::string group, std::string flags,
                        std::vector<CaseComparison> cases, int64_t reference_blocks,
                        double reference_step_seconds) {
    QualityRow r;
    r.name = std::move(name);
    r.group = std::move(group);
    r.flags = std::move(flags);
    r.status = RowStatus::kMeasured;
    r.psnr_min = kInf;
    r.ssim_min = kInf;
    double sum_sq_err = 0, ssim_sum = 0;
    int64_t values = 0;
    pipeline::SignalAccumulator audio;
    for (const CaseComparison& c : cases) {
        r.frames += c.frames;
        r.identical_frames += c.identical_frames;
        sum_sq_err += c.sum_sq_err;
        values += c.frames * c.values_per_frame;
        ssim_sum += c.ssim_sum;
        r.psnr_min = std::min(r.psnr_min, c.psnr_min);
        r.ssim_min = std::min(r.ssim_min, c.ssim_min);
        audio.merge(c.audio_sums);
        r.blocks += c.blocks;
        r.dit_calls += c.dit_calls;
        r.cache_hits += c.cache_hits;
        r.step_seconds += c.step_seconds;
        r.total_seconds += c.total_seconds;
    }
    r.psnr = psnr_of(sum_sq_err, values);
    r.ssim_mean = r.frames ? ssim_sum / static_cast<double>(r.frames) : 1.0;
    r.audio = audio.finish();
    r.work_speedup = ratio(static_cast<double>(reference_blocks), static_cast<double>(r.blocks));
    r.wall_speedup = ratio(reference_step_seconds, r.step_seconds);
    r.cases = std::move(cases);
    return r;
}

std::string quality_markdown(const QualityHeader& h, const std::vector<QualityRow>& rows) {
    std::string s;
    s += "Quality vs the lossless reference: " + h.model + (h.tiny ? " (random tiny checkpoint)" : "") +
         ", " + h.device + ", reference " + h.dtype + ", " + h.geometry + ", " + h.schedule + "\n";
    for (const std::string& c : h.cases) s += "- case " + c + "\n";
    s += "- reference: " + std::to_string(h.reference_blocks) + " DiT block evaluations, steps " +
         fmt(h.reference_step_seconds, 3) + " s, requests " + fmt(h.reference_total_seconds, 3) + " s\n";
    if (h.tiny) s += "- random weights: these numbers exercise the harness; they say nothing about quality\n";
    s +=
        "\n| setting | flags | PSNR dB | min PSNR dB | SSIM | min SSIM | audio SNR dB | audio cos | blocks | "
        "work × | steps s | wall × |\n";
    s += "|---|---|---|---|---|---|---|---|---|---|---|---|\n";
    std::string skipped;
    for (const QualityRow& r : rows) {
        const std::string flags = r.flags.empty() ? "" : "`" + r.flags + "`";
        if (r.status != RowStatus::kMeasured) {
            s += "| " + r.name + " | " + flags + " | — | — | — | — | — | — | — | — | — | — |\n";
            skipped += "- " + r.name + ": " + row_status_name(r.status) + ": " + r.reason + "\n";
            continue;
        }
        s += "| " + r.name + " | " + flags + " | " + fmt(r.psnr, 2) + " | " + fmt(r.psnr_min, 2) + " | " +
             fmt(r.ssim_mean, 4) + " | " + fmt(r.ssim_min, 4) + " | " + fmt(r.audio.snr_db, 2) + " | " +
             fmt(r.audio.cosine, 6) + " | " + std::to_string(r.blocks) + " | " + fmt(r.work_speedup, 3) +
             " | " + fmt(r.step_seconds, 3) + " | " + fmt(r.wall_speedup, 2) + " |\n";
    }
    if (!skipped.empty()) s += "\nNot measured:\n" + skipped;
    return s;
}

Json quality_json(const QualityHeader& h, const std::vector<QualityRow>& rows) {
    Json j;
    j["bench"] = "quality";
    j["model"] = h.model;
    j["tiny"] = h.tiny;
    j["device"] = h.device;
    j["dtype"] = h.dtype;
    j["geometry"] = h.geometry;
    j["schedule"] = h.schedule;
    j["cases"] = h.cases;
    j["reference"] = Json{{"blocks_executed", h.reference_blocks},
                          {"step_seconds", h.reference_step_seconds},
                          {"total_seconds", h.reference_total_seconds}};
    Json settings = Json::array();
    for (const QualityRow& r : rows) {
        Json row{{"name", r.name},
                 {"group", r.group},
                 {"flags", r.flags},
                 {"status", row_status_name(r.status)},
                 {"reason", r.reason}};
        if (r.status == RowStatus::kMeasured) {
            row["video"] = Json{{"frames", r.frames},
                                {"identical_frames", r.identical_frames},
                                {"psnr_db", number(r.psnr)},
                                {"psnr_min_db", number(r.psnr_min)},
                                {"ssim_mean", number(r.ssim_mean)},
                                {"ssim_min", number(r.ssim_min)}};
            row["audio"] = Json{{"samples", r.audio.count},
                                {"snr_db", number(r.audio.snr_db)},
                                {"cosine", number(r.audio.cosine)}};
            row["work"] = Json{{"blocks_executed", r.blocks},
                               {"dit_calls", r.dit_calls},
                               {"cache_hits", r.cache_hits},
                               {"speedup", number(r.work_speedup)}};
            row["seconds"] = Json{{"steps", r.step_seconds},
                                  {"total", r.total_seconds},
                                  {"wall_speedup", number(r.wall_speedup)}};
            Json cases = Json::array();
            for (const CaseComparison& c : r.cases)
                cases.push_back(Json{{"name", c.name},
                                     {"psnr_db", number(c.psnr)},
                                     {"psnr_min_db", number(c.psnr_min)},
                                     {"ssim_mean", number(c.ssim_mean)},
                                     {"ssim_min", number(c.ssim_min)},
                                     {"audio_snr_db", number(c.audio.snr_db)},
                                     {"audio_cosine", number(c.audio.cosine)},
                                     {"blocks_executed", c.blocks},
                                     {"dit_calls", c.dit_calls},
                                     {"cache_hits", c.cache_hits},
                                     {"step_seconds", c.step_seconds},
                                     {"total_seconds", c.total_seconds}});
            row["cases"] = std::move(cases);
        }
        settings.push_back(std::move(row));
    }
    j["settings"] = std::move(settings);
    return j;
}

} // namespace h3::bench
