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

Status apply_schedule_options(const CLI::App& sub, const AdapterCliOptions& o, int& steps,
                              double& video_shift, double& audio_shift) {
    if (!o.preset.empty()) {
        const pipeline::FewStepPreset* p = pipeline::find_few_step_preset(o.preset);
        if (!p) return invalid_argument("unknown --preset '" + o.preset + "'");
        if (!sub.count("--steps")) steps = p->steps;
        video_shift = p->video_shift;
        audio_shift = p->audio_shift;
    }
    if (sub.count("--video-shift")) video_shift = o.video_shift;
    if (sub.count("--audio-shift")) audio_shift = o.audio_shift;
    return ok_status();
}

Result<std::vector<model::LoraUse>> read_lora_options(const AdapterCliOptions& o,
                                                      const model::DitConfig& config) {
    model::LoraReadOptions ro{.strict = o.lora_strict};
    ro.qkv_rows = o.qkv_rows == "stacked"    ? model::LoraQkvRows::kStacked
                  : o.qkv_rows == "per-head" ? model::LoraQkvRows::kPerHead
                                             : model::LoraQkvRows::kAuto;
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

Result<std::shared_ptr<const model::LoraSet>> attach_lora_options(const AdapterCliOptions& o,
                                                                  const std::vector<model::LoraUse>& uses,
                                                                  model::DitModel& model) {
    if (uses.empty()) return std::shared_ptr<const model::LoraSet>();
    if (o.lora_mode == "merged") {
        H3_TRY(model.merge_adapters(uses));
        std::fprintf(stderr, "generate: %zu LoRA adapter(s) merged into the weights\n", uses.size());
        return std::shared_ptr<const model::LoraSet>();
    }
    H3_ASSIGN_OR_RETURN(auto set,
                        model::LoraSet::build(uses, model.config(), model.context(), model.act_dtype()));
    std::fprintf(stderr, "generate: %zu LoRA factor(s) applied at run time, rank <= %lld, %.1f MiB on %s\n",
                 set->factor_count(), static_cast<long long>(set->max_rank()),
                 static_cast<double>(set->device_bytes()) / (1 << 20),
                 model.context().device.to_string().c_str());
    return set;
}

} // namespace h3::cli
