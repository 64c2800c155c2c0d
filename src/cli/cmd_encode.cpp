// h3-engine encode --model DIR --prompt TEXT --output FILE [--device] [--dtype] [--tokens-only]
// Runs the conditioner (tokenizer + Qwen3-VL layers 0..49) on a prompt. Writes a safetensors file that
// `generate --prompt-embeds` reads: prompt_embeds [L, text_dim], prompt_tags i32 [L], input_ids i32 [L].
// --tokens-only prints the token ids as a JSON array (and writes them to --output if given); it needs only
// the tokenizer (a tokenizer folder or a checkpoint root).
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "io/safetensors.h"
#include "model/tokenizer/tokenizer.h"
#include "pipeline/text_conditioner.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>

namespace h3::cli {

Command make_encode_command() {
    struct Options {
        std::string model, prompt, output, device = "cpu", dtype = "bf16";
        bool tokens_only = false;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("encode", "Tokenize a prompt and run the text encoder (the conditioner)");
        o->sub
            ->add_option("--model", o->model, "checkpoint root (or, with --tokens-only, a tokenizer folder)")
            ->required();
        o->sub->add_option("--prompt", o->prompt, "prompt text, used verbatim")->required();
        o->sub->add_option("--output", o->output, "output .safetensors (a .json of ids with --tokens-only)");
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32")
            ->check(CLI::IsMember({"bf16", "fp32"}))
            ->capture_default_str();
        o->sub->add_flag("--tokens-only", o->tokens_only, "print the token ids as a JSON array (no weights)");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        if (o->tokens_only) {
            auto dir = model::find_tokenizer_dir(o->model);
            if (!dir.ok()) return report(dir.status());
            auto tok = model::tokenizer::Tokenizer::load(*dir);
            if (!tok.ok()) return report(tok.status());
            auto ids = tok->encode(o->prompt);
            if (!ids.ok()) return report(ids.status().with_context("prompt"));
            const std::string text = nlohmann::json(*ids).dump();
            std::printf("%s\n", text.c_str());
            if (!o->output.empty()) {
                std::ofstream f(o->output, std::ios::binary);
                f << text << '\n';
                if (!f) return report(io_error("cannot write " + o->output));
            }
            return kExitOk;
        }
        if (o->output.empty())
            return report(invalid_argument("encode: --output is required (or --tokens-only)"));
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const auto t0 = std::chrono::steady_clock::now();
        auto cond = pipeline::TextConditioner::open(
            {.checkpoint_dir = o->model, .ctx = (*session)->context(), .fp32 = o->dtype == "fp32"});
        if (!cond.ok()) return report(cond.status());
        const auto t1 = std::chrono::steady_clock::now();
        auto ids = (*cond)->tokenize(o->prompt);
        if (!ids.ok()) return report(ids.status());
        auto emb = (*cond)->embed(*ids);
        if (!emb.ok()) return report(emb.status());
        const auto t2 = std::chrono::steady_clock::now();
        const int64_t L = static_cast<int64_t>(ids->size());
        Tensor id_t = Tensor::host({L}, DType::kI32), tags = Tensor::host({L}, DType::kI32);
        std::memcpy(id_t.data(), ids->data(), ids->size() * sizeof(int32_t));
        for (int64_t i = 0; i < L; ++i) tags.data_as<int32_t>()[i] = pipeline::kTagText;
        Status s = io::write_safetensors(
            o->output, {{"prompt_embeds", *emb}, {"prompt_tags", tags}, {"input_ids", id_t}},
            {{"device", o->device}, {"dtype", o->dtype}, {"encoder", (*cond)->name()}});
        if (!s.ok()) return report(s);
        std::printf("encoded %lld tokens -> [%lld, %lld] %s on %s (load %.2f s, encode %.3f s) -> %s\n",
                    static_cast<long long>(L), static_cast<long long>(emb->dim(0)),
                    static_cast<long long>(emb->dim(1)), o->dtype.c_str(), o->device.c_str(),
                    std::chrono::duration<double>(t1 - t0).count(),
                    std::chrono::duration<double>(t2 - t1).count(), o->output.c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
