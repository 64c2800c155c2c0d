#include "cli/adapter_options.h"

#include "pipeline/few_step_presets.h"

#include <cmath>
#include <cstdio>

namespace h3::cli {

void add_adapter_options(CLI::App* sub, AdapterCliOptions& o) {
    sub->add_option(
        "--lora", o.lora,
        "LoRA adapter FILE[:SCALE] (repeatable; SCALE default 1, 0 = off). Any published key layout: "
        "diffusers/PEFT, kohya/musubi lora_unet_*, original names (ComfyUI, ai-toolkit, larryvrh), "
        "DiffSynth");
    sub->add_option("--lora-mode", o.lora_mode,
                    "merged: fold the adapters into the weights once (fp32 sum, one rounding); runtime: add "
                    "scale*(x*A^T)*B^T after each adapted projection")
        ->check(CLI::IsMember({"merged", "runtime"}))
        ->capture_default_str();
    sub->add_flag("--lora-strict", o.lora_strict,
                  "fail on adapter keys that name no adapted projection (default: skip them with a warning)");
    sub->add_option(
           "--lora-qkv-rows", o.qkv_rows,
           "row order of fused qkv_proj adapters: auto (per-head for DiffSynth files, else stacked) | "
           "stacked | per-head")
        ->check(CLI::IsMember({"auto", "stacked", "per-head"}))
        ->capture_default_str();
    sub->add_option("--preset", o.preset,
                    "few-step schedule of a Turbo LoRA (sets --steps and the shifts; explicit flags win):\n" +
                        pipeline::few_step_presets_help())
        ->check([](const std::string& v) {
            return pipeline::find_few_step_preset(v) ? std::string() : "unknown preset '" + v + "'";
        });
    sub->add_option("--video-shift", o.video_shift,
                    "video sigma shift (default: the checkpoint's scheduler, 12)")
        ->check(CLI::PositiveNumber);
    sub->add_option("--audio-shift", o.audio_shift,
                    "audio sigma shift (default: the checkpoint's audio scheduler, 3)")
        ->check(CLI::PositiveNumber);
}

Result<LoraSpec> parse_lora_spec(const std::string& text) {
    LoraSpec s;
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
            s.strength = static_cast<float>(v);
        }
    }
    if (s.path.empty()) return invalid_argument("--lora '" + text + "' names no file");
    return s;
}

Status adapter_flags_to_input(const CLI::App& sub, const AdapterCliOptions& o, pipeline::LoraJobInput& in) {
    for (const std::string& text : o.lora) {
        H3_ASSIGN_OR_RETURN(LoraSpec spec, parse_lora_spec(text));
        in.lora.push_back({spec.path, static_cast<double>(spec.strength)});
    }
    in.lora_mode = o.lora_mode;
    if (o.lora_strict) in.lora_strict = true;
    if (!o.preset.empty()) in.preset = o.preset;
    if (sub.count("--video-shift")) in.video_shift = o.video_shift;
    if (sub.count("--audio-shift")) in.audio_shift = o.audio_shift;
    return ok_status();
}

model::LoraReadOptions lora_read_options(const AdapterCliOptions& o) {
    model::LoraReadOptions ro{.strict = o.lora_strict};
    ro.qkv_rows = o.qkv_rows == "stacked"    ? model::LoraQkvRows::kStacked
                  : o.qkv_rows == "per-head" ? model::LoraQkvRows::kPerHead
                                             : model::LoraQkvRows::kAuto;
    return ro;
}

Result<std::vector<model::LoraUse>> read_lora_options(const AdapterCliOptions& o,
                                                      const model::DitConfig& config) {
    const model::LoraReadOptions ro = lora_read_options(o);
    std::vector<model::LoraUse> uses;
    for (const std::string& text : o.lora) {
        H3_ASSIGN_OR_RETURN(LoraSpec spec, parse_lora_spec(text));
        auto adapter = model::read_lora_file(spec.path, config, ro);
        if (!adapter.ok()) return adapter.status().with_context("--lora " + text);
        std::fprintf(stderr, "generate: LoRA %s, scale %g, %.1f MiB\n", adapter->summary().c_str(),
                     static_cast<double>(spec.strength),
                     static_cast<double>(adapter->host_bytes()) / (1 << 20));
        uses.push_back(
            {std::make_shared<const model::LoraAdapter>(std::move(adapter).value()), spec.strength});
    }
    return uses;
}

} // namespace h3::cli
