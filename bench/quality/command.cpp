// h3-bench quality [--model DIR | --tiny-variant base|fasth3] [--work DIR] [--device cpu|cuda]
//                  [--dtype fp32|bf16|fp16] [--size WxH] [--frames F] [--steps N]
//                  [--settings all|NAME,...] [--cases all|NAME,...] [--json] [--output FILE]
// The quality cost of every acceleration setting the engine offers for a request: the fixed prompt set
// (bench/quality/settings.h: two captions for t2va, one caption with a keyframe made in code for fl2va) runs
// once lossless (no step cache, dense attention, native weights, --dtype) and then once per setting, each
// one knob away from it (a step cache or quality preset, int8 weights, a precision, a VSA sparsity); every
// run is a whole request through h3::Engine (the one engine `generate` uses) with the
// decoded frames and waveform returned to the harness. Per setting: video PSNR / SSIM and audio SNR /
// cosine against the lossless run, DiT block evaluations (the work counters) and the speedup in work and
// wall time (bench/quality/table.h). A setting the job builder refuses for this checkpoint (a DBCache that
// leaves no middle block of a 2-block DiT, bf16 when the reference is bf16) is "not applicable", one the
// device cannot run (unimplemented) "unsupported": both listed with the engine's reason. Any other failure
// is a "failed" row and exit code 4. Without --model the random tiny checkpoint of `make-tiny` is written
// into --work (its numbers exercise the harness only).
#include "bench/commands.h"
#include "bench/quality/settings.h"
#include "bench/quality/table.h"
#include "engine/engine_impl.h"
#include "model/tiny/tiny_checkpoint.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <unistd.h>

namespace fs = std::filesystem;

namespace h3::bench {

namespace {

constexpr int kDefaultGridPoints = 10; // 9 forwards: enough for the SCM presets (>= 8 forwards)

struct SweepOptions {
    std::string root, device = "cpu", dtype = "fp32", size = "64x64";
    int frames = 107, steps = 0; // steps 0: kDefaultGridPoints, or a FastH3 checkpoint's rungs
};

struct SettingOutcome {
    RowStatus status = RowStatus::kMeasured;
    Status why; // when not measured
    std::vector<CaseRun> runs;
    std::string geometry, schedule, device, dtype; // of the first case's job
};

std::string schedule_text(const pipeline::GenerationJob& job) {
    if (!job.rungs.empty()) {
        std::string r;
        for (int v : job.rungs) r += (r.empty() ? "" : "/") + std::to_string(v);
        return "rungs " + r + " (" + std::to_string(job.rungs.size()) + " forwards)";
    }
    return std::to_string(job.steps) + " grid points (" + std::to_string(job.steps - 1) + " forwards)";
}

SettingOutcome not_run(RowStatus status, const Status& why) {
    SettingOutcome o;
    o.status = status;
    o.why = why;
    return o;
}

// Every case of `cases` as one request through the Generator, with `setting` applied.
SettingOutcome run_setting(const SweepOptions& so, const QualitySetting& setting,
                           const std::vector<QualityCase>& cases) {
    const std::string dtype = setting.dtype.empty() ? so.dtype : setting.dtype;
    if (setting.group == "precision" && setting.precision.empty() && dtype == so.dtype)
        return not_run(RowStatus::kNotApplicable,
                       invalid_argument("the reference already runs in " + dtype + " (--dtype)"));
    EngineOptions eo;
    eo.checkpoint = so.root;
    eo.device = so.device;
    eo.dtype = dtype;
    eo.precision = setting.precision;
    eo.weight_dtype = setting.weight_dtype;
    eo.max_steps = 1 << 20;
    auto engine = Engine::Impl::open(eo, {});
    if (!engine.ok()) {
        // an option this setting names that the engine refuses (fp8 with fp32, ...) does not apply
        const std::string& f = engine.status().field();
        const bool knob = f == "dtype" || f == "precision" || f == "weight_dtype";
        return not_run(knob ? RowStatus::kNotApplicable : RowStatus::kFailed, engine.status());
    }
    Engine::Impl& e = (*engine)->impl();
    const runtime::CheckpointInfo& info = e.checkpoint();
    int width = 0, height = 0;
    if (Status s = pipeline::parse_size(so.size, width, height); !s.ok())
        return not_run(RowStatus::kFailed, s.with_context("--size"));

    SettingOutcome out;
    std::fprintf(stderr, "bench quality: %s: %s %s, %s\n", setting.name.c_str(), info.device.c_str(),
                 info.dtype.c_str(), e.weights_text.c_str());
    out.device = info.device;
    out.dtype = info.dtype;
    for (const QualityCase& c : cases) {
        pipeline::JobInput in;
        in.task = c.task;
        in.prompt = c.prompt;
        in.size = so.size;
        in.frames = so.frames;
        in.seed = c.seed;
        if (so.steps > 0)
            in.num_inference_steps = so.steps;
        else if (!info.fasth3)
            in.num_inference_steps = kDefaultGridPoints; // a FastH3 checkpoint: its rung schedule
        if (!setting.cache.empty()) in.cache = nlohmann::json(setting.cache);
        if (!setting.quality.empty()) in.quality = setting.quality;
        in.attention = setting.attention.empty() ? "dense" : setting.attention;
        if (c.task == "fl2va") in.first_frame = quality_keyframe(width, height);
        in.outputs.return_media = true;
        auto job = e.build(std::move(in));
        if (!job.ok()) {
            const RowStatus st = job.status().code() == ErrorCode::kInvalidArgument
                                     ? RowStatus::kNotApplicable
                                     : RowStatus::kFailed;
            return not_run(st, job.status());
        }
        if (out.geometry.empty()) {
            out.geometry = job->geometry.describe();
            out.schedule = schedule_text(*job);
        }
        const auto t0 = std::chrono::steady_clock::now();
        auto r = e.run(*job, {});
        if (!r.ok()) {
            const RowStatus st =
                r.status().code() == ErrorCode::kUnimplemented ? RowStatus::kUnsupported : RowStatus::kFailed;
            return not_run(st, r.status().with_context("case " + c.name));
        }
        CaseRun run;
        run.name = c.name;
        run.frames = std::move(r->decoded_frames);
        run.audio = std::move(r->decoded_audio);
        run.blocks = r->work.blocks_executed();
        run.dit_calls = r->work.dit_calls();
        run.cache_hits = r->work.cache_hits();
        for (double t : r->step_seconds) run.step_seconds += t;
        run.total_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::fprintf(stderr, "bench quality: %s / %s: %s, %lld blocks, %.3f s\n", setting.name.c_str(),
                     c.name.c_str(), r->work.summary().c_str(), static_cast<long long>(run.blocks),
                     run.total_seconds);
        out.runs.push_back(std::move(run));
    }
    return out;
}

// Removes the folder it holds when it made it (the default work folder).
struct TempDir {
    fs::path path;
    bool owned = false;
    ~TempDir() {
        if (!owned) return;
        std::error_code ec;
        fs::remove_all(path, ec);
    }
};

} // namespace

Command quality_command() {
    struct Options {
        SweepOptions sweep;
        std::string model, work, settings = "all", cases = "all", tiny_variant = "base", output;
        bool json = false;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& bench) {
        o->sub = bench.add_subcommand(
            "quality", "Quality (PSNR/SSIM, audio SNR/cosine) and work of every acceleration setting against "
                       "the lossless run, on a fixed prompt set");
        auto* model = o->sub->add_option(
            "--model", o->model, "checkpoint (default: the random tiny one of make-tiny, written to --work)");
        o->sub
            ->add_option("--tiny-variant", o->tiny_variant,
                         "the default model: base | fasth3 (a FastH3 student with its sidecar)")
            ->check(CLI::IsMember({"base", "fasth3"}))
            ->capture_default_str()
            ->excludes(model);
        o->sub->add_option("--work", o->work, "folder for the default model (default: a temp dir, removed)");
        o->sub->add_option("--device", o->sweep.device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub->add_option("--dtype", o->sweep.dtype, "the reference's dtype: fp32 | bf16 | fp16")
            ->check(CLI::IsMember({"fp32", "bf16", "fp16"}))
            ->capture_default_str();
        o->sub->add_option("--size", o->sweep.size, "canvas WxH")->capture_default_str();
        o->sub->add_option("--frames", o->sweep.frames, "pixel frames (17n+5, 4 s at least)")
            ->capture_default_str();
        o->sub->add_option("--steps", o->sweep.steps,
                           "sigma grid points (default 10, or a FastH3 checkpoint's rung schedule)");
        o->sub->add_option("--settings", o->settings, "all, or a comma-separated list of setting names")
            ->capture_default_str();
        o->sub->add_option("--cases", o->cases, "all, or a comma-separated list of ball, square, keyframe")
            ->capture_default_str();
        o->sub->add_flag("--json", o->json, "JSON output instead of the markdown table");
        o->sub->add_option("--output", o->output, "also write the JSON document to FILE");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        auto settings = select_quality_settings(o->settings);
        if (!settings.ok()) return report(settings.status());
        auto cases = select_quality_cases(o->cases);
        if (!cases.ok()) return report(cases.status());
        if (cases->empty() || settings->empty())
            return report(invalid_argument("--settings and --cases must each name at least one"));
        TempDir work;
        SweepOptions so = o->sweep;
        const bool tiny = o->model.empty();
        if (tiny) {
            work.owned = o->work.empty();
            work.path = work.owned
                            ? fs::temp_directory_path() / ("h3-bench-quality-" + std::to_string(::getpid()))
                            : fs::path(o->work);
            so.root = (work.path / "tiny").string();
            model::TinyCheckpointParams p{.dir = so.root,
                                          .variant = o->tiny_variant == "fasth3" ? model::TinyVariant::kFastH3
                                                                                 : model::TinyVariant::kBase};
            if (Status s = model::write_tiny_checkpoint(p); !s.ok()) return report(s);
        } else {
            so.root = o->model;
        }
        if (so.device != "cpu") {
            const char* tune = std::getenv("H3_GEMM_AUTOTUNE");
            if (!tune || std::string(tune) != "0")
                std::fprintf(stderr,
                             "bench quality: GEMM autotuning is on: each setting's store times its own "
                             "cuBLASLt choices, so even the lossless row may differ in rounding; set "
                             "H3_GEMM_AUTOTUNE=0 for an exact one\n");
        }

        // ---- the lossless reference
        const QualitySetting reference{.name = "reference", .group = "reference"};
        SettingOutcome ref = run_setting(so, reference, *cases);
        if (ref.status != RowStatus::kMeasured)
            return report(ref.why.with_context("bench quality: the lossless reference"));
        QualityHeader header;
        header.model = so.root;
        header.tiny = tiny;
        header.device = ref.device;
        header.dtype = ref.dtype;
        header.geometry = ref.geometry;
        header.schedule = ref.schedule;
        for (const QualityCase& qc : *cases)
            header.cases.push_back(qc.name + " (" + qc.task + ", seed " + std::to_string(qc.seed) +
                                   "): " + qc.prompt);
        for (const CaseRun& r : ref.runs) {
            header.reference_blocks += r.blocks;
            header.reference_step_seconds += r.step_seconds;
            header.reference_total_seconds += r.total_seconds;
        }

        // ---- every setting against it
        std::vector<QualityRow> rows;
        bool failed = false;
        for (const QualitySetting& s : *settings) {
            SettingOutcome out = run_setting(so, s, *cases);
            if (out.status != RowStatus::kMeasured) {
                QualityRow row{.name = s.name,
                               .group = s.group,
                               .flags = s.flags,
                               .status = out.status,
                               .reason = out.why.message()};
                std::fprintf(stderr, "bench quality: %s %s: %s\n", s.name.c_str(),
                             row_status_name(out.status), row.reason.c_str());
                failed = failed || out.status == RowStatus::kFailed;
                rows.push_back(std::move(row));
                continue;
            }
            std::vector<CaseComparison> comparisons;
            for (size_t i = 0; i < out.runs.size(); ++i) {
                auto cmp = compare_case(ref.runs[i], out.runs[i]);
                if (!cmp.ok()) return report(cmp.status().with_context("setting " + s.name));
                comparisons.push_back(std::move(cmp).value());
            }
            rows.push_back(measured_row(s.name, s.group, s.flags, std::move(comparisons),
                                        header.reference_blocks, header.reference_step_seconds));
        }
        const std::string json = quality_json(header, rows).dump(2);
        if (!o->output.empty()) {
            std::ofstream out(o->output);
            out << json << "\n";
            if (!out) return report(io_error("bench quality: cannot write '" + o->output + "' (--output)"));
        }
        if (o->json)
            std::printf("%s\n", json.c_str());
        else
            std::printf("%s", quality_markdown(header, rows).c_str());
        return failed ? kExitRuntime : kExitOk;
    };
    return c;
}

} // namespace h3::bench
