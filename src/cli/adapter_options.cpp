#include "cli/adapter_options.h"

#include "pipeline/few_step_presets.h"

#include <cmath>

namespace h3::cli {

void add_adapter_options(CLI::App* sub, AdapterCliOptions& o) {
    CLI::App* g = sub->add_option_group("LoRA", "adapters and few-step schedules (docs/lora.md)");
    g->add_option("--lora", o.lora,
                  "LoRA adapter FILE[:SCALE], repeatable (any published key layout; SCALE default 1)");
    g->add_option("--lora-mode", o.lora_mode,
                  "merged (folded into the weights once) | runtime (added per GEMM)")
        ->check(CLI::IsMember({"merged", "runtime"}))
        ->capture_default_str();
    g->add_flag("--lora-strict", o.lora_strict,
                "fail on adapter keys that name no adapted projection (default: skip them)");
    g->add_option("--lora-qkv-rows", o.qkv_rows, "row order of fused qkv adapters: auto | stacked | per-head")
        ->check(CLI::IsMember({"auto", "stacked", "per-head"}))
        ->capture_default_str();
    g->add_option("--preset", o.preset,
                  "few-step schedule of a Turbo LoRA (sets --steps and the shifts; default none):\n" +
                      pipeline::few_step_presets_help())
        ->check([](const std::string& v) {
            return pipeline::find_few_step_preset(v) ? std::string() : "unknown preset '" + v + "'";
        });
    g->add_option("--video-shift", o.video_shift, "video sigma shift (default: the checkpoint's, 12)")
        ->check(CLI::PositiveNumber);
    g->add_option("--audio-shift", o.audio_shift, "audio sigma shift (default: the checkpoint's, 3)")
        ->check(CLI::PositiveNumber);
}

Result<LoraOption> parse_lora_spec(const std::string& text) {
    LoraOption s;
    s.path = text;
    const size_t colon = text.rfind(':');
    if (colon != std::string::npos && colon + 1 < text.size()) {
        const std::string num = text.substr(colon + 1);
        char* end = nullptr;
        const double v = std::strtod(num.c_str(), &end);
        if (end == num.c_str() + num.size()) {
            if (!std::isfinite(v))
                return invalid_argument("--lora " + text + ": the scale must be a finite number");
            s.path = text.substr(0, colon);
            s.scale = static_cast<float>(v); // the strength a LoraSet holds
        }
    }
    if (s.path.empty()) return invalid_argument("--lora '" + text + "' names no file");
    return s;
}

Status adapter_engine_options(const AdapterCliOptions& o, EngineOptions& options) {
    for (const std::string& text : o.lora) {
        H3_ASSIGN_OR_RETURN(LoraOption l, parse_lora_spec(text));
        options.lora.push_back(std::move(l));
    }
    options.lora_mode = o.lora_mode;
    options.lora_strict = o.lora_strict;
    options.lora_qkv_rows = o.qkv_rows;
    return ok_status();
}

void adapter_job_fields(const CLI::App& sub, const AdapterCliOptions& o, JobRequest& request) {
    if (!o.preset.empty()) request.preset = o.preset;
    if (sub.count("--video-shift")) request.video_shift = o.video_shift;
    if (sub.count("--audio-shift")) request.audio_shift = o.audio_shift;
}

} // namespace h3::cli
