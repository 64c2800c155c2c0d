// h3-engine compare A B [--json] [--output FILE] [--threads N]
#include "cli/app.h"
#include "cli/commands.h"
#include "pipeline/compare.h"
#include "pipeline/compare_report.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <fstream>
#include <memory>

namespace h3::cli {

Command make_compare_command() {
    struct Options {
        std::string a, b, output;
        bool json = false;
        int threads = 0;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand(
            "compare",
            "Quality metrics of B against the reference A: video PSNR/SSIM per frame, audio cosine/SNR/"
            "RMSE/RMS ratio, latents cosine/rel-RMS/max abs/SNR");
        o->sub->add_option("a", o->a, "reference: video (MP4, MKV, …), WAV, or latents safetensors")
            ->required();
        o->sub->add_option("b", o->b, "candidate, of the same kind")->required();
        o->sub->add_flag("--json", o->json, "print the JSON report instead of the summary");
        o->sub->add_option("--output", o->output, "also write the JSON report to FILE");
        o->sub->add_option("--threads", o->threads, "SSIM threads (0: every core)")
            ->check(CLI::Range(0, 1024))
            ->capture_default_str();
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        auto r = pipeline::compare_files(o->a, o->b, {.threads = o->threads});
        if (!r.ok()) return report(r.status());
        const std::string json = pipeline::compare_report_json(*r).dump(2);
        if (!o->output.empty()) {
            std::ofstream out(o->output);
            out << json << "\n";
            if (!out) return report(io_error("compare: cannot write '" + o->output + "'"));
        }
        if (o->json) {
            std::printf("%s\n", json.c_str());
            for (const std::string& w : r->warnings)
                std::fprintf(stderr, "h3-engine: warning: %s\n", w.c_str());
        } else {
            std::printf("%s", pipeline::compare_report_text(*r).c_str());
        }
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
