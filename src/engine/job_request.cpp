#include "engine/job_request.h"

#include "io/image_reader.h"
#include "pipeline/conditioner.h"
#include "pipeline/reference_files.h"

namespace h3 {

pipeline::JobInput job_input_fields(const JobRequest& r) {
    pipeline::JobInput in;
    in.task = r.task;
    in.prompt = r.prompt;
    in.random_prompt_embeds = r.random_prompt_embeds;
    in.size = r.size;
    in.aspect = r.aspect;
    in.seconds = r.seconds;
    in.frames = r.frames;
    in.num_inference_steps = r.num_inference_steps;
    in.seed = r.seed;
    if (r.cache) in.cache = nlohmann::json(*r.cache);
    in.quality = r.quality;
    in.attention = r.attention;
    if (r.lora)
        for (const LoraOption& l : *r.lora) in.adapters.lora.push_back({l.path, l.scale});
    in.adapters.lora_strict = r.lora_strict;
    in.adapters.preset = r.preset;
    in.adapters.video_shift = r.video_shift;
    in.adapters.audio_shift = r.audio_shift;
    if (!r.output.empty()) in.outputs.media = pipeline::media_targets_for(r.output);
    in.outputs.latents = r.save_latents;
    in.outputs.return_media = r.return_media;
    return in;
}

Result<pipeline::JobInput> job_input(const JobRequest& r) {
    pipeline::JobInput in = job_input_fields(r);
    if (in.outputs.empty())
        return invalid_field("output",
                             "output: nothing to produce: give output, save_latents or return_media");
    if (!r.output.empty())
        if (auto k = pipeline::checked_output_kind(r.output); !k.ok()) return k.status().with_field("output");
    if (r.prompt_embeds) {
        // the width is checked against the checkpoint by the builder
        auto embeds = pipeline::make_embeds_conditioner(*r.prompt_embeds, 0);
        if (!embeds.ok()) return embeds.status().with_field("prompt_embeds");
        auto rows = (*embeds)->encode({});
        if (!rows.ok()) return rows.status().with_field("prompt_embeds");
        in.prompt_embeds = std::move(rows).value();
        in.prompt_embeds_source = *r.prompt_embeds;
    }
    for (auto [path, slot, name] : {std::tuple{&r.first_frame, &in.first_frame, "first_frame"},
                                    std::tuple{&r.last_frame, &in.last_frame, "last_frame"}}) {
        if (!*path) continue;
        auto im = io::read_image(**path);
        if (!im.ok()) return im.status().with_context(name).with_field(name);
        *slot = std::move(im).value();
    }
    for (const std::string& spec : r.reference) {
        auto m = pipeline::read_reference(pipeline::parse_reference_spec(spec));
        if (!m.ok()) return m.status().with_context("reference " + spec).with_field("reference");
        in.references.push_back(std::move(m).value());
    }
    return in;
}

} // namespace h3
