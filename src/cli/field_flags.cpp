#include "cli/field_flags.h"

#include <cctype>
#include <map>

namespace h3::cli {

std::string flag_for_field(const std::string& field) {
    static const std::map<std::string, std::string> flags = {
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
        {"output", "--output"},
        {"save_latents", "--save-latents"},
        // LoRA and few-step schedules (cli/adapter_options.h)
        {"lora", "--lora"},
        {"lora_mode", "--lora-mode"},
        {"lora_strict", "--lora-strict"},
        {"preset", "--preset"},
        {"video_shift", "--video-shift"},
        {"audio_shift", "--audio-shift"},
        // FastH3 (cli/vsa_flags.h)
        {"attention", "--attention"},
        // the device group (cli/parallel_flags.h)
        {"parallel.sp", "--sp"},
        {"parallel.tp", "--tp"},
        {"parallel.ring", "--ring"},
        {"parallel.gpus", "--gpus"}};
    auto it = flags.find(field);
    return it == flags.end() ? std::string() : it->second;
}

Status with_flag(const Status& s, const std::string& field) {
    const std::string flag = flag_for_field(field);
    const std::string& m = s.message();
    if (s.ok() || flag.empty() || m.rfind(field, 0) != 0) return s;
    if (m.size() > field.size()) {
        const unsigned char next = static_cast<unsigned char>(m[field.size()]);
        if (std::isalnum(next) || next == '_') return s; // "references: ..." is not the field "reference"
    }
    return Status(s.code(), flag + m.substr(field.size()));
}

} // namespace h3::cli
