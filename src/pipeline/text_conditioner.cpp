#include "pipeline/text_conditioner.h"

#include "io/checkpoint.h"
#include "io/json_file.h"
#include "ops/ops.h"
#include "pipeline/reference_presentation.h"

#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::pipeline {

namespace {

// `name` (preprocessor_config.json, video_preprocessor_config.json) in the checkpoint's processor folder or
// root; "" when absent.
std::string find_processor_file(const std::string& checkpoint_dir, const std::string& name) {
    std::error_code ec;
    for (const fs::path& cand :
         {fs::path(checkpoint_dir) / "processor" / name, fs::path(checkpoint_dir) / name})
        if (fs::exists(cand, ec)) return cand.string();
    auto dc = io::discover_checkpoint(checkpoint_dir);
    const io::Component* c = dc.ok() ? dc->find("processor") : nullptr;
    if (c && fs::exists(fs::path(c->dir) / name, ec)) return (fs::path(c->dir) / name).string();
    return "";
}

io::RgbImage to_rgb(const ConditionerImage& im) {
    io::RgbImage rgb(im.width, im.height);
    std::memcpy(rgb.pixels.data(), im.rgb.data(), im.rgb.size());
    return rgb;
}

Status check_image(const ConditionerImage& im, const std::string& field) {
    if (im.width <= 0 || im.height <= 0 || im.rgb.size() != static_cast<size_t>(im.width) * im.height * 3)
        return invalid_argument(field + ": expected " + std::to_string(im.width) + "x" +
                                std::to_string(im.height) + " RGB8 pixels, got " +
                                std::to_string(im.rgb.size()) + " bytes");
    return ok_status();
}

// Rows of a list of [n_i, cols] f32 host tensors stacked.
Tensor stack_rows(const std::vector<Tensor>& rows) {
    int64_t total = 0;
    for (const Tensor& t : rows) total += t.dim(0);
    const int64_t cols = rows[0].dim(1);
    Tensor out = Tensor::host({total, cols}, DType::kF32);
    int64_t r = 0;
    for (const Tensor& t : rows) {
        std::memcpy(out.data_as<float>() + r * cols, t.data(), t.nbytes());
        r += t.dim(0);
    }
    return out;
}

} // namespace

Result<ProcessorConfigs> load_processor_configs(const std::string& checkpoint_dir) {
    ProcessorConfigs p;
    for (auto [file, config] : {std::pair{"preprocessor_config.json", &p.image},
                                std::pair{"video_preprocessor_config.json", &p.video}}) {
        const std::string path = find_processor_file(checkpoint_dir, file);
        if (!path.empty()) {
            H3_ASSIGN_OR_RETURN(*config, load_vision_processor_config(path, *config));
        }
    }
    return p;
}

Result<std::unique_ptr<TextConditioner>> TextConditioner::over(const model::TextStack& text,
                                                               const model::VisionModel* vision,
                                                               const ProcessorConfigs& processors) {
    std::unique_ptr<TextConditioner> tc(new TextConditioner(text, vision, processors));
    if (!vision) return tc;
    const model::VisionConfig& vc = vision->config();
    for (auto [what, pc] : {std::pair{"image", &tc->processor_}, std::pair{"video", &tc->video_processor_}})
        if (pc->patch_size != vc.patch_size || pc->temporal_patch_size != vc.temporal_patch_size ||
            pc->merge_size != vc.spatial_merge_size)
            return bad_input(std::string(what) + " processor patch/temporal/merge sizes " +
                             std::to_string(pc->patch_size) + "/" + std::to_string(pc->temporal_patch_size) +
                             "/" + std::to_string(pc->merge_size) + " differ from the vision tower's " +
                             std::to_string(vc.patch_size) + "/" + std::to_string(vc.temporal_patch_size) +
                             "/" + std::to_string(vc.spatial_merge_size));
    const int vocab = text.model->config().vocab_size;
    for (int id : {vc.image_token_id, vc.vision_start_token_id, vc.vision_end_token_id})
        if (id >= vocab)
            return bad_input("text encoder " + text.dir + ": vision token id " + std::to_string(id) +
                             " is outside the vocabulary (" + std::to_string(vocab) + ")");
    return tc;
}

Result<std::unique_ptr<TextConditioner>> TextConditioner::open(const PromptConditionerParams& p) {
    const auto prec = p.fp32   ? model::TextPrecision::kFp32
                      : p.fp16 ? model::TextPrecision::kFp16
                               : model::TextPrecision::kBf16;
    H3_ASSIGN_OR_RETURN(
        auto text,
        model::load_text_stack(p.checkpoint_dir,
                               {.device = p.ctx.device, .precision = prec, .residency = p.residency}, p.ctx));
    H3_ASSIGN_OR_RETURN(auto ckpt, model::open_text_checkpoint(p.checkpoint_dir));
    std::unique_ptr<model::VisionModel> vision;
    if (model::has_vision_tower(ckpt)) {
        // fp16 mode: the small vision tower keeps fp32 (no overflow to detect)
        const auto vprec = prec == model::TextPrecision::kFp16 ? model::TextPrecision::kFp32 : prec;
        H3_ASSIGN_OR_RETURN(
            vision, model::VisionModel::load(ckpt, {.device = p.ctx.device, .precision = vprec}, p.ctx));
    }
    H3_ASSIGN_OR_RETURN(ProcessorConfigs processors, load_processor_configs(p.checkpoint_dir));
    H3_ASSIGN_OR_RETURN(auto tc, over(*text, vision.get(), processors));
    tc->own_text_ = std::move(text);
    tc->own_vision_ = std::move(vision);
    return tc;
}

std::string TextConditioner::name() const {
    const model::TextModel& m = *text_->model;
    return "qwen3-vl text encoder (" + std::to_string(m.layers()) + " layers, " +
           (vision_ ? "vision tower, " : "") + model::precision_name(m.precision()) + ", " +
           m.residency_describe() + ", " + text_->dir + ")";
}

Result<std::vector<int32_t>> TextConditioner::tokenize(const std::string& prompt) const {
    auto ids = text_->tokenizer.encode(prompt);
    if (!ids.ok()) return ids.status().with_context("prompt");
    if (ids->empty()) return invalid_argument("prompt: the prompt is empty (it gives no tokens)");
    return ids;
}

Result<Tensor> TextConditioner::embed(const std::vector<int32_t>& ids,
                                      const ConditionerOptions& options) const {
    model::TextForwardOptions fo;
    fo.cancel = options.cancel;
    if (options.progress)
        fo.progress = [&](int done, int total) { options.progress({"layer", done, total}); };
    auto out = text_->model->forward(ids, fo);
    if (!out.ok()) {
        if (out.status().code() == ErrorCode::kCancelled) return cancelled("conditioning cancelled");
        return out.status();
    }
    if (out->device().is_cpu()) return out;
    H3_ASSIGN_OR_RETURN(Tensor host, out->to(Device::cpu(), text_->model->context().stream()));
    return host;
}

Result<TextConditioner::Presentation> TextConditioner::present(const ConditionerRequest& request) const {
    Presentation p;
    if (!request.images.empty() && !request.references.empty())
        return invalid_argument("images and references: a request carries fl2va keyframe images or ref2va "
                                "references, not both (" +
                                std::to_string(request.images.size()) + " images, " +
                                std::to_string(request.references.size()) + " references)");
    if (!request.references.empty()) {
        H3_TRY(present_references(request, p));
        return p;
    }
    if (!request.images.empty() && !vision_)
        return unimplemented(
            "image 0: keyframe images need the Qwen3-VL vision tower, and the text encoder " + text_->dir +
            " has none (no vision_config / model.visual.* weights)");
    std::vector<Tensor> rows;
    for (size_t i = 0; i < request.images.size(); ++i) {
        const ConditionerImage& im = request.images[i];
        const std::string field = "image " + std::to_string(i);
        H3_TRY(check_image(im, field));
        auto patches = preprocess_image(to_rgb(im), processor_);
        if (!patches.ok()) return patches.status().with_context(field);
        const int m = processor_.merge_size;
        const int64_t n = patches->num_tokens(m);
        H3_ASSIGN_OR_RETURN(auto label, tokenize("<Picture " + std::to_string(i + 1) + ">: "));
        p.ids.insert(p.ids.end(), label.begin(), label.end());
        p.tags.insert(p.tags.end(), label.size(), kTagText);
        const model::VisionConfig& vc = vision_->config();
        p.ids.push_back(vc.vision_start_token_id);
        p.ids.insert(p.ids.end(), static_cast<size_t>(n), vc.image_token_id);
        p.ids.push_back(vc.vision_end_token_id);
        p.tags.insert(p.tags.end(), static_cast<size_t>(n) + 2, kTagVideo);
        p.grids.push_back({patches->grid_t, patches->grid_h, patches->grid_w});
        p.llm_grids.push_back({patches->grid_t, patches->grid_h / m, patches->grid_w / m});
        rows.push_back(std::move(patches->pixel_values));
    }
    H3_ASSIGN_OR_RETURN(auto prompt, tokenize(request.prompt));
    p.ids.insert(p.ids.end(), prompt.begin(), prompt.end());
    p.tags.insert(p.tags.end(), prompt.size(), kTagText);
    if (!rows.empty()) p.pixel_values = stack_rows(rows);
    return p;
}

Status TextConditioner::present_references(const ConditionerRequest& request, Presentation& p) const {
    bool visual = false;
    for (const ConditionerReference& r : request.references) visual |= r.kind != ReferenceKind::kAudio;
    if (visual && !vision_)
        return unimplemented("references: image and video references need the Qwen3-VL vision tower, and the "
                             "text encoder " +
                             text_->dir + " has none (no vision_config / model.visual.* weights)");
    std::vector<Tensor> image_rows, video_rows;
    std::vector<int64_t> image_tokens, video_block_tokens;
    for (size_t i = 0; i < request.references.size(); ++i) {
        const ConditionerReference& r = request.references[i];
        const std::string field = "reference " + std::to_string(i);
        if (r.kind == ReferenceKind::kAudio) {
            if (!r.has_audio) return invalid_argument(field + ": an audio reference must have has_audio set");
            continue;
        }
        if (r.kind == ReferenceKind::kImage) {
            if (r.has_audio) return invalid_argument(field + ": an image reference cannot carry audio");
            H3_TRY(check_image(r.image, field + " (image)"));
            auto patches = preprocess_image(to_rgb(r.image), processor_);
            if (!patches.ok()) return patches.status().with_context(field + " (image)");
            const int m = processor_.merge_size;
            image_tokens.push_back(patches->num_tokens(m));
            p.grids.push_back({patches->grid_t, patches->grid_h, patches->grid_w});
            p.llm_grids.push_back({patches->grid_t, patches->grid_h / m, patches->grid_w / m});
            image_rows.push_back(std::move(patches->pixel_values));
            continue;
        }
        // Video: the 2 fps frames, pairs merged by the processor; one timestamp per merged pair.
        if (r.frames.empty()) return invalid_argument(field + " (video): the video has no frames");
        std::vector<io::RgbImage> frames;
        frames.reserve(r.frames.size());
        for (size_t f = 0; f < r.frames.size(); ++f) {
            H3_TRY(check_image(r.frames[f], field + " (video) frame " + std::to_string(f)));
            frames.push_back(to_rgb(r.frames[f]));
        }
        auto patches = preprocess_video(frames, video_processor_);
        if (!patches.ok()) return patches.status().with_context(field + " (video)");
        if (static_cast<size_t>(patches->grid_t) != r.block_timestamps.size())
            return invalid_argument(field + " (video): " + std::to_string(r.frames.size()) + " frames make " +
                                    std::to_string(patches->grid_t) + " vision blocks (pairs), but " +
                                    std::to_string(r.block_timestamps.size()) +
                                    " block timestamps are given");
        const int m = video_processor_.merge_size;
        video_block_tokens.push_back(patches->block_tokens(m));
        p.video_grids.push_back({patches->grid_t, patches->grid_h, patches->grid_w});
        p.video_llm_grids.push_back({patches->grid_t, patches->grid_h / m, patches->grid_w / m});
        video_rows.push_back(std::move(patches->pixel_values));
    }
    VisionTokenIds tokens;
    if (vision_) {
        const model::VisionConfig& vc = vision_->config();
        tokens = {vc.vision_start_token_id, vc.vision_end_token_id, vc.image_token_id, vc.video_token_id};
        if (!video_rows.empty() &&
            (vc.video_token_id < 0 || vc.video_token_id >= text_->model->config().vocab_size))
            return bad_input("text encoder " + text_->dir + ": video_token_id " +
                             std::to_string(vc.video_token_id) + " is outside the vocabulary (" +
                             std::to_string(text_->model->config().vocab_size) +
                             "); video references need the <|video_pad|> id in config.json");
    }
    H3_ASSIGN_OR_RETURN(auto prompt, tokenize(request.prompt));
    H3_ASSIGN_OR_RETURN(PresentationTokens pt,
                        build_reference_presentation(text_->tokenizer, request.references, image_tokens,
                                                     video_block_tokens, prompt, tokens));
    p.ids = std::move(pt.ids);
    p.tags = std::move(pt.tags);
    if (!image_rows.empty()) p.pixel_values = stack_rows(image_rows);
    if (!video_rows.empty()) p.pixel_values_videos = stack_rows(video_rows);
    return ok_status();
}

Result<std::array<std::vector<int64_t>, 3>> TextConditioner::positions(const Presentation& p) const {
    if (!vision_) return invalid_argument("mrope positions: the text encoder has no vision tower");
    const model::VisionConfig& vc = vision_->config();
    return model::mrope_positions(p.ids, {vc.image_token_id, p.video_grids.empty() ? -1 : vc.video_token_id},
                                  p.llm_grids, p.video_llm_grids);
}

Result<Conditioning> TextConditioner::encode(const ConditionerRequest& request,
                                             const ConditionerOptions& options) {
    if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
    if (options.progress) options.progress({"tokenize", 0, 1});
    H3_ASSIGN_OR_RETURN(Presentation p, present(request));
    if (options.progress) options.progress({"tokenize", 1, 1});
    Conditioning c;
    if (p.grids.empty() && p.video_grids.empty()) {
        H3_ASSIGN_OR_RETURN(c.embeddings, embed(p.ids, options));
        c.tags = std::move(p.tags);
        return c;
    }
    // The tower once over the images and once over the videos (transformers' get_image_features /
    // get_video_features).
    const int runs = int(!p.grids.empty()) + int(!p.video_grids.empty());
    int ran = 0;
    model::VisionOutput vi, vv;
    if (options.progress) options.progress({"vision", 0, runs});
    if (!p.grids.empty()) {
        H3_ASSIGN_OR_RETURN(vi, vision_->forward(p.pixel_values, p.grids, {}, options.cancel));
        if (options.progress) options.progress({"vision", ++ran, runs});
    }
    if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
    if (!p.video_grids.empty()) {
        H3_ASSIGN_OR_RETURN(vv, vision_->forward(p.pixel_values_videos, p.video_grids, {}, options.cancel));
        if (options.progress) options.progress({"vision", ++ran, runs});
    }
    if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
    const model::VisionConfig& vc = vision_->config();
    model::TextVisionInputs vis;
    std::vector<int64_t> image_pos, video_pos; // indices among the vision rows
    for (size_t i = 0; i < p.ids.size(); ++i) {
        const bool image = p.ids[i] == vc.image_token_id && !p.grids.empty();
        const bool video = p.ids[i] == vc.video_token_id && !p.video_grids.empty();
        if (!image && !video) continue;
        (image ? image_pos : video_pos).push_back(static_cast<int64_t>(vis.rows.size()));
        vis.rows.push_back(static_cast<int64_t>(i));
    }
    const int64_t ni = vi.embeds.defined() ? vi.embeds.dim(0) : 0,
                  nv = vv.embeds.defined() ? vv.embeds.dim(0) : 0;
    if (static_cast<int64_t>(image_pos.size()) != ni || static_cast<int64_t>(video_pos.size()) != nv)
        return internal_error("conditioner: " + std::to_string(image_pos.size()) + " image and " +
                              std::to_string(video_pos.size()) + " video tokens for " + std::to_string(ni) +
                              " image and " + std::to_string(nv) + " video features");
    if (nv == 0) {
        vis.embeds = vi.embeds;
        vis.deepstack = vi.deepstack;
    } else if (ni == 0) {
        vis.embeds = vv.embeds;
        vis.deepstack = vv.deepstack;
    } else {
        // Both: features joined in sequence order (transformers: visual_pos_masks = image | video, the
        // DeepStack features of each modality scattered into their positions among the vision rows).
        const ops::Context& ctx = text_->model->context();
        auto index = [&](const std::vector<int64_t>& v) -> Result<Tensor> {
            Tensor t = Tensor::host({static_cast<int64_t>(v.size())}, DType::kI64);
            std::memcpy(t.data(), v.data(), v.size() * sizeof(int64_t));
            if (ctx.device.is_cpu()) return t;
            return t.to(ctx.device, ctx.stream());
        };
        H3_ASSIGN_OR_RETURN(Tensor ii, index(image_pos));
        H3_ASSIGN_OR_RETURN(Tensor iv, index(video_pos));
        auto join = [&](const Tensor& a, const Tensor& b) -> Result<Tensor> {
            H3_ASSIGN_OR_RETURN(Tensor out, Tensor::empty({ni + nv, a.dim(1)}, a.dtype(), ctx.device));
            H3_TRY(ops::scatter_rows(ctx, a, ii, out));
            H3_TRY(ops::scatter_rows(ctx, b, iv, out));
            return out;
        };
        H3_ASSIGN_OR_RETURN(vis.embeds, join(vi.embeds, vv.embeds));
        for (size_t j = 0; j < vi.deepstack.size(); ++j) {
            H3_ASSIGN_OR_RETURN(Tensor d, join(vi.deepstack[j], vv.deepstack[j]));
            vis.deepstack.push_back(std::move(d));
        }
    }
    H3_ASSIGN_OR_RETURN(vis.positions, positions(p));
    model::TextForwardOptions fo;
    fo.cancel = options.cancel;
    if (options.progress)
        fo.progress = [&](int done, int total) { options.progress({"layer", done, total}); };
    auto out = text_->model->forward(p.ids, &vis, fo);
    if (!out.ok()) {
        if (out.status().code() == ErrorCode::kCancelled) return cancelled("conditioning cancelled");
        return out.status();
    }
    if (out->device().is_cpu()) {
        c.embeddings = *out;
    } else {
        H3_ASSIGN_OR_RETURN(c.embeddings, out->to(Device::cpu(), text_->model->context().stream()));
    }
    c.tags = std::move(p.tags);
    return c;
}

} // namespace h3::pipeline
