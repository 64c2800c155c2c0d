#include "model/text/text_stack.h"

#include "io/checkpoint.h"
#include "io/json_file.h"

#include <filesystem>

namespace fs = std::filesystem;

namespace h3::model {

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

bool has_text_stack(const std::string& checkpoint) {
    if (!find_tokenizer_dir(checkpoint).ok()) return false;
    auto ckpt = io::discover_checkpoint(checkpoint);
    if (!ckpt.ok()) return false;
    const io::Component* c = ckpt->find("text_encoder");
    return c && c->has_weights;
}

bool has_vision_tower(const TextCheckpoint& ckpt) {
    auto cfg = io::read_json_file((fs::path(ckpt.dir) / "config.json").string());
    return cfg.ok() && VisionConfig::present(*cfg) &&
           ckpt.tensors.contains(std::string(kVisionPrefix) + "pos_embed.weight");
}

Result<std::unique_ptr<TextStack>> load_text_stack(const std::string& checkpoint,
                                                   const TextLoadOptions& options, const ops::Context& ctx) {
    H3_ASSIGN_OR_RETURN(std::string tok_dir, find_tokenizer_dir(checkpoint));
    H3_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load(tok_dir));
    H3_ASSIGN_OR_RETURN(auto ckpt, open_text_checkpoint(checkpoint));
    if (tok.size() > ckpt.config.vocab_size)
        return bad_input("tokenizer " + tok_dir + " has " + std::to_string(tok.size()) +
                         " ids but the text encoder's vocab_size is " +
                         std::to_string(ckpt.config.vocab_size));
    auto stack = std::make_unique<TextStack>();
    stack->tokenizer = std::move(tok);
    stack->dir = ckpt.dir;
    H3_ASSIGN_OR_RETURN(stack->model, TextModel::load(ckpt, options, ctx));
    return stack;
}

Result<std::unique_ptr<VisionModel>>
load_vision_tower(const std::string& checkpoint, const VisionLoadOptions& options, const ops::Context& ctx) {
    H3_ASSIGN_OR_RETURN(auto ckpt, open_text_checkpoint(checkpoint));
    if (!has_vision_tower(ckpt))
        return not_found("text encoder " + ckpt.dir +
                         " has no Qwen3-VL vision tower (no vision_config / model.visual.* weights)");
    return VisionModel::load(ckpt, options, ctx);
}

} // namespace h3::model
