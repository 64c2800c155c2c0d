#include "cli/field_flags.h"

#include <cctype>
#include <map>

namespace h3::cli {

std::string flag_for_field(const std::string& field) {
    // The one table from field names (h3::EngineOptions members, pipeline::JobInput fields) to flags.
    static const std::map<std::string, std::string> flags = {
        // the job (pipeline/job_builder.h)
        {"prompt", "--prompt"},
        {"prompt_embeds", "--prompt-embeds"},
        {"random_prompt_embeds", "--random-prompt-embeds"},
        {"size", "--size"},
        {"aspect", "--aspect"},
        {"seconds", "--seconds"},
        {"frames", "--frames"},
        {"num_inference_steps", "--steps"},
        {"seed", "--seed"},
        {"cache", "--cache"},
        {"quality", "--quality"},
        {"first_frame", "--first-frame"},
        {"last_frame", "--last-frame"},
        {"reference", "--reference"},
        {"lora", "--lora"},
        {"lora_mode", "--lora-mode"},
        {"lora_strict", "--lora-strict"},
        {"preset", "--preset"},
        {"video_shift", "--video-shift"},
        {"audio_shift", "--audio-shift"},
        {"attention", "--attention"},
        {"output", "--output"},
        {"save_latents", "--save-latents"},
        // the engine (include/h3/engine.h EngineOptions)
        {"checkpoint", "--model"},
        {"device", "--device"},
        {"dtype", "--dtype"},
        {"precision", "--precision"},
        {"vae_precision", "--vae-precision"},
        {"residency", "--residency"},
        {"resident_blocks", "--resident-blocks"},
        {"weight_dtype", "--weight-dtype"},
        {"host_pinning", "--host-pinning"},
        {"gpu_memory_budget", "--gpu-memory-budget"},
        {"int8_cache", "--int8-cache"},
        {"sp", "--sp"},
        {"tp", "--tp"},
        {"ring", "--ring"},
        {"gpus", "--gpus"},
        {"lora_dir", "--lora-dir"},
        {"lora_qkv_rows", "--lora-qkv-rows"},
        {"keep_text_encoder", "--text-encoder"},
        {"keep_dit_workspace", "--dit-workspace"},
        {"reference_image_edge", "--reference-image-edge"},
        {"reference_video_edge", "--reference-video-edge"},
        {"warmup_request", "--warmup-request"},
        // the device group's fields as the layers below name them (pipeline/generate_group.h)
        {"parallel.sp", "--sp"},
        {"parallel.tp", "--tp"},
        {"parallel.ring", "--ring"},
        {"parallel.gpus", "--gpus"}};
    auto it = flags.find(field);
    return it == flags.end() ? std::string() : it->second;
}

Status with_flag(const Status& s, const std::string& field) {
    const std::string flag = flag_for_field(field);
    if (s.ok() || flag.empty()) return s;
    const std::string& m = s.message();
    bool leads = m.rfind(field, 0) == 0;
    if (leads && m.size() > field.size()) {
        const unsigned char next = static_cast<unsigned char>(m[field.size()]);
        if (std::isalnum(next) || next == '_')
            leads = false; // "references: ..." is not the field "reference"
    }
    const std::string text = leads ? flag + m.substr(field.size()) : flag + ": " + m;
    return Status(s.code(), text); // flagged: printed as it is
}

Status with_flag(const Status& s) {
    return with_flag(s, s.field());
}

} // namespace h3::cli
