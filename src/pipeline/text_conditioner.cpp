#include "pipeline/text_conditioner.h"

#include "io/checkpoint.h"

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
    return std::unique_ptr<TextConditioner>(new TextConditioner(std::move(tok), std::move(m), ckpt.dir));
}

std::string TextConditioner::name() const {
    return "qwen3-vl text encoder (" + std::to_string(model_->layers()) + " layers, " +
           (model_->act_dtype() == DType::kF32 ? "fp32" : "bf16") + ", " + dir_ + ")";
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

Result<Conditioning> TextConditioner::encode(const ConditionerRequest& request,
                                             const ConditionerOptions& options) {
    if (!request.images.empty())
        return unimplemented(
            "image " + std::to_string(0) +
            ": keyframe images need the Qwen3-VL vision tower, which this build does not have yet");
    if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
    if (options.progress) options.progress({"tokenize", 0, 1});
    H3_ASSIGN_OR_RETURN(auto ids, tokenize(request.prompt));
    if (options.progress) options.progress({"tokenize", 1, 1});
    Conditioning c;
    H3_ASSIGN_OR_RETURN(c.embeddings, embed(ids, options));
    c.tags.assign(ids.size(), kTagText);
    return c;
}

} // namespace h3::pipeline
