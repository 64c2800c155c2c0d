#include "pipeline/conditioner.h"

#include "io/safetensors.h"

#include <filesystem>

namespace h3::pipeline {

namespace {

class EmbedsConditioner final : public Conditioner {
public:
    EmbedsConditioner(std::string path, Conditioning c) : path_(std::move(path)), c_(std::move(c)) {}
    std::string name() const override { return "prompt-embeds " + path_; }
    int text_dim() const override { return static_cast<int>(c_.embeddings.dim(1)); }
    Result<Conditioning> encode(const ConditionerRequest& request,
                                const ConditionerOptions& options) override {
        if (!request.images.empty() || !request.references.empty())
            return invalid_argument("prompt-embeds " + path_ + ": precomputed embeddings cannot take " +
                                    (request.images.empty() ? "references" : "keyframe images") +
                                    " (the presentation is already encoded into the file)");
        if (options.cancel && options.cancel->load()) return cancelled("conditioning cancelled");
        if (options.progress) options.progress({"load", 1, 1});
        return c_;
    }

private:
    std::string path_;
    Conditioning c_;
};

} // namespace

Result<std::unique_ptr<Conditioner>> make_embeds_conditioner(const std::string& path, int expected_text_dim) {
    H3_ASSIGN_OR_RETURN(auto f, io::SafetensorsFile::open(path));
    std::string name = "prompt_embeds";
    if (!f.contains(name)) {
        std::vector<std::string> floats;
        for (const auto& t : f.tensors())
            if (t.name != "prompt_tags") floats.push_back(t.name);
        if (floats.size() != 1)
            return bad_input("prompt-embeds " + path +
                             ": no tensor named 'prompt_embeds' and not exactly one other "
                             "tensor to use instead");
        name = floats[0];
    }
    H3_ASSIGN_OR_RETURN(Tensor view, f.tensor(name));
    H3_ASSIGN_OR_RETURN(Tensor t, view.to(Device::cpu())); // detach from the mapping
    if (t.rank() == 3 && t.dim(0) == 1) t = t.view({t.dim(1), t.dim(2)});
    if (t.rank() != 2 || !dtype_is_float(t.dtype()) || t.dim(0) < 1)
        return bad_input("prompt-embeds " + path + ": tensor '" + name + "' is " + t.describe() +
                         ", expected a float [L, " + std::to_string(expected_text_dim) + "] (or [1, L, " +
                         std::to_string(expected_text_dim) + "]) with L ≥ 1");
    if (expected_text_dim > 0 && t.dim(1) != expected_text_dim)
        return bad_input("prompt-embeds " + path + ": tensor '" + name + "' has " + std::to_string(t.dim(1)) +
                         " columns, the model's conditioner width (text_dim) is " +
                         std::to_string(expected_text_dim));
    Conditioning c;
    c.embeddings = t;
    c.tags.assign(static_cast<size_t>(t.dim(0)), kTagText);
    if (f.contains("prompt_tags")) {
        H3_ASSIGN_OR_RETURN(Tensor tags, f.tensor("prompt_tags"));
        if (tags.numel() != t.dim(0) || (tags.dtype() != DType::kI32 && tags.dtype() != DType::kI64))
            return bad_input("prompt-embeds " + path + ": 'prompt_tags' must be i32/i64 with " +
                             std::to_string(t.dim(0)) + " entries, got " + tags.describe());
        for (int64_t i = 0; i < t.dim(0); ++i) {
            const auto v =
                static_cast<int32_t>(load_as_f64(tags.data(), tags.dtype(), static_cast<size_t>(i)));
            if (v != kTagText && v != kTagVideo)
                return bad_input("prompt-embeds " + path + ": 'prompt_tags' holds " + std::to_string(v) +
                                 "; conditioner rows are 1 (text) or 0 (vision)");
            c.tags[static_cast<size_t>(i)] = v;
        }
    }
    return std::unique_ptr<Conditioner>(new EmbedsConditioner(path, std::move(c)));
}

Status save_conditioning(const std::string& path, const Conditioning& c) {
    std::vector<int32_t> tags = c.tags;
    Tensor t = Tensor::host(Shape{static_cast<int64_t>(tags.size())}, DType::kI32);
    std::copy(tags.begin(), tags.end(), t.data_as<int32_t>());
    return io::write_safetensors(path, {{"prompt_embeds", c.embeddings}, {"prompt_tags", t}});
}

} // namespace h3::pipeline
