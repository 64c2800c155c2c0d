#include "cli/progress_printer.h"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace h3::cli {

namespace {

void print_bar(const pipeline::JobProgress& p) {
    const int width = 30, filled = p.total ? width * p.step / p.total : width;
    std::fprintf(stderr, "\r[%.*s%*s] %d/%d", filled, "##############################", width - filled, "",
                 p.step, p.total);
    if (p.stage == pipeline::Stage::kDenoise)
        std::fprintf(stderr, "  %.2f s/step  ETA %.0f s", p.step_seconds, p.eta_seconds);
    else
        std::fprintf(stderr, " clips");
    if (p.step == p.total) std::fprintf(stderr, "\n");
    std::fflush(stderr);
}

nlohmann::json path_or_null(const std::string& p) {
    return p.empty() ? nlohmann::json(nullptr) : nlohmann::json(p);
}

} // namespace

ProgressPrinter::ProgressPrinter(std::string mode) : mode_(std::move(mode)) {}

double ProgressPrinter::wall_seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
}

void ProgressPrinter::operator()(const pipeline::JobProgress& p) {
    if (mode_ == "none") return;
    const bool load = p.stage == pipeline::Stage::kLoad;
    const std::string stage = pipeline::stage_name(p.stage);
    const bool begins = load ? p.component != last_load_ : stage != last_stage_;
    if (begins) {
        if (load)
            last_load_ = p.component;
        else
            last_stage_ = stage;
        const std::string key = load ? stage + " " + p.component : stage;
        if (mode_ == "json") {
            nlohmann::json j = {{"event", "stage"},
                                {"stage", pipeline::stage_name(p.stage)},
                                {"percent", p.percent},
                                {"elapsed", wall_seconds()}};
            if (load) j["component"] = p.component;
            std::printf("%s\n", j.dump().c_str());
            std::fflush(stdout);
        } else {
            if (in_bar_) std::fprintf(stderr, "\n");
            in_bar_ = false;
            std::fprintf(stderr, "generate: [%6.1f s] %s\n", wall_seconds(), key.c_str());
        }
    }
    // the steps of the denoise and the clips of the video decode
    const bool decode_clip = p.stage == pipeline::Stage::kDecode && p.total > 0;
    if ((p.stage != pipeline::Stage::kDenoise && !decode_clip) || p.step == 0) return;
    if (mode_ == "bar") {
        print_bar(p);
        in_bar_ = p.step != p.total;
    } else if (mode_ == "json" && decode_clip) {
        std::printf("{\"event\":\"decode\",\"clip\":%d,\"clips\":%d,\"percent\":%.3f,\"elapsed\":%.6f}\n",
                    p.step, p.total, p.percent, wall_seconds());
        std::fflush(stdout);
    } else if (mode_ == "json") {
        std::printf(
            "{\"event\":\"step\",\"step\":%d,\"total\":%d,\"seconds\":%.6f,\"elapsed\":%.6f,\"eta\":%.6f}\n",
            p.step, p.total, p.step_seconds, p.elapsed_seconds, p.eta_seconds);
        std::fflush(stdout);
    }
}

void ProgressPrinter::interrupted() {
    if (in_bar_) std::fprintf(stderr, "\n");
    in_bar_ = false;
}

void ProgressPrinter::done(const pipeline::JobReport& r, const std::string& media,
                           const std::string& latents) {
    const double wall = wall_seconds();
    if (mode_ == "json") {
        double denoise = 0;
        for (double s : r.step_seconds) denoise += s;
        const nlohmann::json j = {{"event", "done"},
                                  {"steps", r.step_seconds.size()},
                                  {"denoise_seconds", denoise},
                                  {"setup_seconds", r.setup_seconds},
                                  {"decode_seconds", r.decode_seconds},
                                  {"wall_seconds", wall},
                                  {"output", path_or_null(media)},
                                  {"latents", path_or_null(latents)},
                                  {"written", r.written}};
        std::printf("%s\n", j.dump().c_str());
        std::fflush(stdout);
    }
    std::string written;
    for (const std::string& w : r.written) written += (written.empty() ? "" : " and ") + w;
    std::fprintf(stderr, "generate: wrote %s in %.1f s\n", written.empty() ? "nothing" : written.c_str(),
                 wall);
}

} // namespace h3::cli
