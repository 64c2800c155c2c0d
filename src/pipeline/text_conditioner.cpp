#include "pipeline/text_conditioner.h"

#include "io/checkpoint.h"
#include "io/json_file.h"

#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::pipeline {

Result<std::string> find_tokenizer_dir(const std::string& path) {
    std::error_code ec;
    if (fs::exists(fs::path(path) / "vocab.json", ec)) return path;
    if (fs::exists(fs::path(path) / "tokenizer" / "vocab.json", ec))
        return (fs::path(path) / "tokenizer").string();
    auto ckpt = io::discover_checkpoint(path);
    if (ckpt.ok()) {
        const io::Component* c = ckpt->find("tokenizer");
        if (c && fs::exists(fs::path(c->dir) / "vocab.json", ec)) return c->dir;
    }
    return not_found(
        path + " holds no tokenizer: expected vocab.json + merges.txt there or in its tokenizer/ folder");
}

bool has_text_conditioner(const std::string& checkpoint_dir) {
    if (!find_tokenizer_dir(checkpoint_dir).ok()) return false;
    auto ckpt = io::discover_checkpoint(checkpoint_dir);
    if (!ckpt.ok()) return false;
    const io::Component* c = ckpt->find("text_encoder");
    return c && c->has_weights;
}

Result<std::unique_ptr<TextConditioner>> TextConditioner::open(const PromptConditionerParams& p) {
    H3_ASSIGN_OR_RETURN(std::string tok_dir, find_tokenizer_dir(p.checkpoint_dir));
    H3_ASSIGN_OR_RETURN(auto tok, model::tokenizer::Tokenizer::load(tok_dir));
    H3_ASSIGN_OR_RETURN(auto ckpt, model::open_text_checkpoint(p.checkpoint_dir));
    if (tok.size() > ckpt.config.vocab_size)
        return bad_input("tokenizer " + tok_dir + " has " + std::to_string(tok.size()) +
                         " ids but the text encoder's vocab_size is " +
                         std::to_string(ckpt.config.vocab_size));
    const auto prec = p.fp32 ? model::TextPrecision::kFp32 : model::TextPrecision::kBf16;
    H3_ASSIGN_OR_RETURN(auto m,
                        model::TextModel::load(ckpt, {.device = p.ctx.device, .precision = prec}, p.ctx));
    std::unique_ptr<TextConditioner> tc(new TextConditioner(std::move(tok), std::move(m), ckpt.dir));
    H3_ASSIGN_OR_RETURN(nlohmann::json cfg,
                        io::read_json_file((fs::path(ckpt.dir) / "config.json").string()));
    if (model::VisionConfig::present(cfg) &&
        ckpt.tensors.contains(std::string(model::kVisionPrefix) + "pos_embed.weight")) {
        H3_ASSIGN_OR_RETURN(
            tc->vision_, model::VisionModel::load(ckpt, {.device = p.ctx.device, .precision = prec}, p.ctx));
        // The image processor: the checkpoint's processor component when it has one, else the official
        // values.
        std::string proc;
        std::error_code ec;
        for (const fs::path& cand : {fs::path(p.checkpoint_dir) / "processor" / "preprocessor_config.json",
                                     fs::path(p.checkpoint_dir) / "preprocessor_config.json"})
            if (fs::exists(cand, ec)) {
                proc = cand.string();
                break;
            }
        if (proc.empty()) {
            auto dc = io::discover_checkpoint(p.checkpoint_dir);
            const io::Component* c = dc.ok() ? dc->find("processor") : nullptr;
            if (c && fs::exists(fs::path(c->dir) / "preprocessor_config.json", ec))
                proc = (fs::path(c->dir) / "preprocessor_config.json").string();
        }
        if (!proc.empty()) {
            H3_ASSIGN_OR_RETURN(tc->processor_, load_vision_processor_config(proc));
        }
        const model::VisionConfig& vc = tc->vision_->config();
        if (tc->processor_.patch_size != vc.patch_size ||
            tc->processor_.temporal_patch_size != vc.temporal_patch_size ||
            tc->processor_.merge_size != vc.spatial_merge_size)
            return bad_input("image processor (" + (proc.empty() ? std::string("defaults") : proc) +
                             ") patch/temporal/merge sizes " + std::to_string(tc->processor_.patch_size) +
                             "/" + std::to_string(tc->processor_.temporal_patch_size) + "/" +
                             std::to_string(tc->processor_.merge_size) + " differ from the vision tower's " +
                             std::to_string(vc.patch_size) + "/" + std::to_string(vc.temporal_patch_size) +
                             "/" + std::to_string(vc.spatial_merge_size));
        for (int id : {vc.image_token_id, vc.vision_start_token_id, vc.vision_end_token_id})
            if (id >= ckpt.config.vocab_size)
                return bad_input("text encoder " + ckpt.dir + ": vision token id " + std::to_string(id) +
                                 " is outside the vocabulary (" + std::to_string(ckpt.config.vocab_size) +
                                 ")");
    }
    return tc;
}

std::string TextConditioner::name() const {
    return "qwen3-vl text encoder (" + std::to_string(model_->layers()) + " layers, " +
           (vision_ ? "vision tower, " : "") + (model_->act_dtype() == DType::kF32 ? "fp32" : "bf16") + ", " +
           dir_ + ")";
}

Result<std::vector<int32_t>> TextConditioner::tokenize(const std::string& prompt) const {
    auto ids = tokenizer_.encode(prompt);
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
    auto out = model_->forward(ids, fo);
    if (!out.ok()) {
        if (out.status().code() == ErrorCode::kCancelled) return cancelled("conditioning cancelled");
        return out.status();
    }
    if (out->device().is_cpu()) return out;
    H3_ASSIGN_OR_RETURN(Tensor host, out->to(Device::cpu(), model_->context().stream()));
    return host;
}

Result<TextConditioner::Presentation> TextConditioner::present(const ConditionerRequest& request) const {
    Presentation p;
    if (!request.images.empty() && !vision_)
        return unimplemented(
            "image 0: keyframe images need the Qwen3-VL vision tower, and the text encoder " + dir_ +
            " has none (no vision_config / model.visual.* weights)");
    std::vector<Tensor> rows;
    int64_t total = 0;
    for (size_t i = 0; i < request.images.size(); ++i) {
        const ConditionerImage& im = request.images[i];
        const std::string field = "image " + std::to_string(i);
        if (im.width <= 0 || im.height <= 0 || im.rgb.size() != static_cast<size_t>(im.width) * im.height * 3)
            return invalid_argument(field + ": expected " + std::to_string(im.width) + "x" +
                                    std::to_string(im.height) + " RGB8 pixels, got " +
                                    std::to_string(im.rgb.size()) + " bytes");
        io::RgbImage rgb(im.width, im.height);
        std::memcpy(rgb.pixels.data(), im.rgb.data(), im.rgb.size());
        auto patches = preprocess_image(rgb, processor_);
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
        total += patches->pixel_values.dim(0);
        rows.push_back(std::move(patches->pixel_values));
    }
    H3_ASSIGN_OR_RETURN(auto prompt, tokenize(request.prompt));
    p.ids.insert(p.ids.end(), prompt.begin(), prompt.end());
    p.tags.insert(p.tags.end(), prompt.size(), kTagText);
    if (!rows.empty()) {
        const int64_t cols = rows[0].dim(1);
        p.pixel_values = Tensor::host({total, cols}, DType::kF32);
        int64_t r = 0;
        for (const Tensor& t : rows) {
            std::memcpy(p.pixel_values.data_as<float>() + r * cols, t.data(), t.nbytes());
            r += t.dim(0);
        }
    }
    return p;
}

Result<Conditioning> TextConditioner::encode(const ConditionerRequest& request,
                                             const ConditionerOptions& options) {
    if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
    if (options.progress) options.progress({"tokenize", 0, 1});
    H3_ASSIGN_OR_RETURN(Presentation p, present(request));
    if (options.progress) options.progress({"tokenize", 1, 1});
    Conditioning c;
    if (p.grids.empty()) {
        H3_ASSIGN_OR_RETURN(c.embeddings, embed(p.ids, options));
        c.tags = std::move(p.tags);
        return c;
    }
    if (options.progress) options.progress({"vision", 0, 1});
    H3_ASSIGN_OR_RETURN(model::VisionOutput vo, vision_->forward(p.pixel_values, p.grids));
    if (options.progress) options.progress({"vision", 1, 1});
    if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
    model::TextVisionInputs vis;
    for (size_t i = 0; i < p.ids.size(); ++i)
        if (p.ids[i] == vision_->config().image_token_id) vis.rows.push_back(static_cast<int64_t>(i));
    vis.embeds = vo.embeds;
    vis.deepstack = vo.deepstack;
    H3_ASSIGN_OR_RETURN(vis.positions,
                        model::mrope_positions(p.ids, vision_->config().image_token_id, p.llm_grids));
    model::TextForwardOptions fo;
    fo.cancel = options.cancel;
    if (options.progress)
        fo.progress = [&](int done, int total) { options.progress({"layer", done, total}); };
    auto out = model_->forward(p.ids, &vis, fo);
    if (!out.ok()) {
        if (out.status().code() == ErrorCode::kCancelled) return cancelled("conditioning cancelled");
        return out.status();
    }
    if (out->device().is_cpu()) {
        c.embeddings = *out;
    } else {
        H3_ASSIGN_OR_RETURN(c.embeddings, out->to(Device::cpu(), model_->context().stream()));
    }
    c.tags = std::move(p.tags);
    return c;
}

} // namespace h3::pipeline
