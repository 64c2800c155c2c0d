#include "pipeline/reference_presentation.h"

#include "core/python_format.h"

namespace h3::pipeline {

std::string timestamp_label(double seconds) {
    std::string s = "<";
    s += python_format_fixed(seconds, 1);
    s += " seconds>";
    return s;
}

Result<PresentationTokens> build_reference_presentation(const model::tokenizer::Tokenizer& tokenizer,
                                                        const std::vector<ConditionerReference>& references,
                                                        const std::vector<int64_t>& image_tokens,
                                                        const std::vector<int64_t>& video_block_tokens,
                                                        const std::vector<int32_t>& prompt_ids,
                                                        const VisionTokenIds& vision) {
    PresentationTokens p;
    auto text = [&](const std::string& value) -> Status {
        auto ids = tokenizer.encode(value);
        if (!ids.ok()) return ids.status().with_context("label '" + value + "'");
        p.ids.insert(p.ids.end(), ids->begin(), ids->end());
        p.tags.insert(p.tags.end(), ids->size(), kTagText);
        return ok_status();
    };
    auto block = [&](int32_t pad, int64_t n) {
        p.ids.push_back(vision.vision_start);
        p.ids.insert(p.ids.end(), static_cast<size_t>(n), pad);
        p.ids.push_back(vision.vision_end);
        p.tags.insert(p.tags.end(), static_cast<size_t>(n) + 2, kTagVideo);
    };
    size_t images = 0, videos = 0, audios = 0;
    for (size_t i = 0; i < references.size(); ++i) {
        const ConditionerReference& r = references[i];
        const std::string field = "reference " + std::to_string(i);
        if (r.has_audio) H3_TRY(text("<Audio " + std::to_string(++audios) + ">: "));
        if (r.kind == ReferenceKind::kImage) {
            if (images >= image_tokens.size())
                return invalid_argument(field + ": image " + std::to_string(images + 1) + " but only " +
                                        std::to_string(image_tokens.size()) + " image token counts");
            H3_TRY(text("<Picture " + std::to_string(images + 1) + ">: "));
            block(vision.image_pad, image_tokens[images++]);
        } else if (r.kind == ReferenceKind::kVideo) {
            if (videos >= video_block_tokens.size())
                return invalid_argument(field + ": video " + std::to_string(videos + 1) + " but only " +
                                        std::to_string(video_block_tokens.size()) + " video token counts");
            if (r.block_timestamps.empty())
                return invalid_argument(field + ": a video needs block timestamps");
            H3_TRY(text("<Video " + std::to_string(videos + 1) + ">: "));
            for (double ts : r.block_timestamps) {
                H3_TRY(text(timestamp_label(ts)));
                block(vision.video_pad, video_block_tokens[videos]);
            }
            ++videos;
        }
    }
    if (images != image_tokens.size() || videos != video_block_tokens.size())
        return invalid_argument("reference presentation: " + std::to_string(images) + " images and " +
                                std::to_string(videos) + " videos, but token counts for " +
                                std::to_string(image_tokens.size()) + " and " +
                                std::to_string(video_block_tokens.size()));
    p.ids.insert(p.ids.end(), prompt_ids.begin(), prompt_ids.end());
    p.tags.insert(p.tags.end(), prompt_ids.size(), kTagText);
    return p;
}

} // namespace h3::pipeline
