#include "model/tiny/tiny_text.h"

#include "io/checkpoint.h"
#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/text/text_model.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"
#include "model/vision/vision_model.h"
#include "ops/ops.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

// Merges are learned from this text (deterministic; any English-ish prompt tokenizes reasonably).
constexpr const char* kCorpus =
    "a cat sits on the windowsill at sunset and the camera slowly pans to the left to reveal the city "
    "the man says hello and the woman smiles while the music plays in the background of the scene "
    "close up shot of a dog running on the beach with waves crashing against the rocks at dawn "
    "wide aerial shot over the mountains in the morning light with birds flying over the trees "
    "the sound of rain on the roof and thunder in the distance as the lights of the street flicker";

const std::vector<std::string> kAdded = {"<|endoftext|>",    "<|im_start|>",   "<|im_end|>",
                                         "<|vision_start|>", "<|vision_end|>", "<|vision_pad|>",
                                         "<|image_pad|>",    "<|video_pad|>"};

Status make_dirs(const fs::path& p) {
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) return io_error("cannot create directory " + p.string() + ": " + ec.message());
    return ok_status();
}

std::string byte_symbol(unsigned char b) {
    std::string s;
    tokenizer::utf8_append(s, tokenizer::byte_to_unicode(b));
    return s;
}

} // namespace

TextConfig tiny_text_config() {
    TextConfig c;
    c.hidden_size = 64;
    c.intermediate_size = 128;
    c.num_hidden_layers = 3;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.head_dim = 16;
    c.vocab_size = 400;
    c.rms_norm_eps = 1e-6;
    c.rope_theta = 5e6;
    c.mrope_section = {4, 2, 2};
    return c;
}

VisionConfig tiny_vision_config() {
    VisionConfig v;
    v.depth = 3;
    v.hidden_size = 16;
    v.intermediate_size = 32;
    v.num_heads = 2;
    v.out_hidden_size = tiny_text_config().hidden_size;
    v.num_position_embeddings = 64;
    v.deepstack_visual_indexes = {0, 1, 2};
    return v;
}

Status write_tiny_tokenizer(const std::string& dir, int n_merges) {
    H3_TRY(make_dirs(dir));
    nlohmann::ordered_json vocab = nlohmann::ordered_json::object();
    int next = 0;
    for (int b = 0; b < 256; ++b) vocab[byte_symbol(static_cast<unsigned char>(b))] = next++; // id = byte
    // Words as symbol sequences: " word" → "Ġ" + "w" … (the byte-level form of a space-prefixed word).
    std::vector<std::vector<std::string>> words;
    std::istringstream in(kCorpus);
    std::string w;
    bool first = true;
    while (in >> w) {
        std::vector<std::string> syms;
        const std::string text = (first ? "" : " ") + w;
        first = false;
        for (unsigned char c : text) syms.push_back(byte_symbol(c));
        words.push_back(std::move(syms));
    }
    std::vector<std::pair<std::string, std::string>> merges;
    for (int m = 0; m < n_merges; ++m) {
        std::map<std::pair<std::string, std::string>, int> counts;
        for (const auto& ws : words)
            for (size_t i = 0; i + 1 < ws.size(); ++i) ++counts[{ws[i], ws[i + 1]}];
        if (counts.empty()) break;
        auto best = counts.begin();
        for (auto it = counts.begin(); it != counts.end(); ++it)
            if (it->second > best->second) best = it; // ties: the first in string order
        if (best->second < 2) break;
        const auto [a, b] = best->first;
        merges.push_back({a, b});
        if (!vocab.contains(a + b)) vocab[a + b] = next++;
        for (auto& ws : words) {
            std::vector<std::string> out;
            for (size_t i = 0; i < ws.size(); ++i) {
                if (i + 1 < ws.size() && ws[i] == a && ws[i + 1] == b) {
                    out.push_back(a + b);
                    ++i;
                } else {
                    out.push_back(ws[i]);
                }
            }
            ws = std::move(out);
        }
    }
    H3_TRY(io::write_json_file((fs::path(dir) / "vocab.json").string(), nlohmann::json(vocab)));
    {
        std::ofstream f(fs::path(dir) / "merges.txt", std::ios::binary);
        f << "#version: 0.2\n";
        for (const auto& [a, b] : merges) f << a << ' ' << b << '\n';
        if (!f) return io_error("cannot write " + (fs::path(dir) / "merges.txt").string());
    }
    nlohmann::json decoder = nlohmann::json::object();
    for (const auto& t : kAdded)
        decoder[std::to_string(next++)] = {{"content", t},    {"lstrip", false},      {"normalized", false},
                                           {"rstrip", false}, {"single_word", false}, {"special", true}};
    nlohmann::json extra = nlohmann::json::array();
    for (const auto& t : kAdded)
        if (t != "<|endoftext|>") extra.push_back(t);
    for (const char* t : tokenizer::kH3ExtraTokens)
        extra.push_back(t); // appended ids, like the official files
    nlohmann::json cfg = {{"add_bos_token", false},
                          {"add_prefix_space", false},
                          {"added_tokens_decoder", decoder},
                          {"additional_special_tokens", extra},
                          {"bos_token", nullptr},
                          {"clean_up_tokenization_spaces", false},
                          {"eos_token", "<|im_end|>"},
                          {"errors", "replace"},
                          {"model_max_length", 262144},
                          {"pad_token", "<|endoftext|>"},
                          {"split_special_tokens", false},
                          {"tokenizer_class", "Qwen2Tokenizer"},
                          {"unk_token", nullptr}};
    return io::write_json_file((fs::path(dir) / "tokenizer_config.json").string(), cfg);
}

Status write_tiny_text_encoder(const std::string& dir, uint64_t seed, const VisionConfig& vision,
                               const TextConfig& c) {
    H3_TRY(make_dirs(dir));
    nlohmann::json cfg = c.to_json();
    vision.add_to_json(cfg);
    H3_TRY(io::write_json_file((fs::path(dir) / "config.json").string(), cfg));
    auto specs = text_tensor_specs(c, c.num_hidden_layers);
    specs.push_back(
        {std::string(kTextPrefix) + "norm.weight", {c.hidden_size}}); // in the official files, unused
    std::vector<io::NamedTensor> tensors;
    uint64_t s = seed * 1000003ull + 17;
    for (const auto& [name, shape] : specs) {
        Tensor t = Tensor::host(Shape(shape), DType::kBF16);
        const bool norm = shape.size() == 1;
        const float bound =
            norm
                ? 0.1f
                : (name.find("embed_tokens") != std::string::npos ? 1.0f : 1.0f / std::sqrt(float(shape[1])));
        H3_TRY(ops::fill_uniform(ops::Context::cpu(),
                                 {.seed = s++, .bound = bound, .offset = norm ? 1.0f : 0.0f}, t));
        tensors.push_back({name, t});
    }
    // The vision tower from its own stream (the language tensors above keep theirs).
    uint64_t sv = seed * 1000003ull + 500009;
    for (const auto& [name, shape] : vision_tensor_specs(vision)) {
        Tensor t = Tensor::host(Shape(shape), DType::kBF16);
        const bool vec = shape.size() == 1;
        const bool norm_w = vec && name.find("norm") != std::string::npos && name.ends_with(".weight");
        int64_t fan_in = 1;
        for (size_t i = 1; i < shape.size(); ++i) fan_in *= shape[i];
        const float bound = name.find("pos_embed") != std::string::npos ? 0.5f
                            : vec                                       ? 0.1f
                                                                        : 1.0f / std::sqrt(float(fan_in));
        H3_TRY(ops::fill_uniform(ops::Context::cpu(),
                                 {.seed = sv++, .bound = bound, .offset = norm_w ? 1.0f : 0.0f}, t));
        tensors.push_back({name, t});
    }
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return io::write_sharded_safetensors(dir, "model", tensors, 2);
}

Status write_tiny_text(const TinyCheckpointParams& p) {
    const bool original = p.layout == TinyLayout::kOriginal;
    const fs::path base = original ? fs::path(p.dir) / "FL2VA" : fs::path(p.dir);
    H3_TRY(write_tiny_tokenizer((base / "tokenizer").string()));
    {
        // The vision token ids are the tiny tokenizer's.
        H3_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load((base / "tokenizer").string()));
        TextConfig text = tiny_text_config();
        text.hidden_size = p.geometry.text_dim;
        VisionConfig v = tiny_vision_config();
        v.out_hidden_size = text.hidden_size;
        v.image_token_id = tok.token_to_id("<|image_pad|>");
        v.vision_start_token_id = tok.token_to_id("<|vision_start|>");
        v.vision_end_token_id = tok.token_to_id("<|vision_end|>");
        v.video_token_id = tok.token_to_id("<|video_pad|>");
        if (v.image_token_id < 0 || v.vision_start_token_id < 0 || v.vision_end_token_id < 0 ||
            v.video_token_id < 0)
            return internal_error("tiny tokenizer lacks the vision tokens");
        H3_TRY(write_tiny_text_encoder((base / "text_encoder").string(), p.seed + 7, v, text));
    }
    const std::string index_path = (base / "model_index.json").string();
    H3_ASSIGN_OR_RETURN(nlohmann::json index, io::read_json_file(index_path));
    if (original) {
        index["text_encoder"] = {"minimax_h3", "MiniMaxH3Qwen3VLHFEncoder"};
        index["tokenizer"] = {"transformers", "Qwen2TokenizerFast"};
    } else {
        auto entry = [](const char* lib, const char* cls, const char* sub) {
            return nlohmann::json::array({lib,
                                          cls,
                                          {{"type_hint", {lib, cls}},
                                           {"pretrained_model_name_or_path", "h3-engine/tiny"},
                                           {"subfolder", sub},
                                           {"variant", nullptr},
                                           {"revision", nullptr}}});
        };
        index["text_encoder"] = entry("transformers", "Qwen3VLForConditionalGeneration", "text_encoder");
        index["tokenizer"] = entry("transformers", "Qwen2TokenizerFast", "tokenizer");
    }
    H3_TRY(io::write_json_file(index_path, index));
    // The tokenizer must fit the embedding table.
    H3_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load((base / "tokenizer").string()));
    if (tok.size() > tiny_text_config().vocab_size)
        return internal_error("tiny tokenizer has " + std::to_string(tok.size()) +
                              " ids, more than the tiny vocab");
    return ok_status();
}

} // namespace h3::model
