// h3-engine dit --model DIR --inputs IN.safetensors --output OUT.safetensors [--device] [--dtype] [--dump
// ...]
#include "cli/app.h"
#include "cli/commands.h"
#include "cli/device_setup.h"
#include "io/safetensors.h"
#include "model/dit/adaln_cache.h"
#include "model/dit/dit_model.h"

#include <CLI/CLI.hpp>

#include <chrono>
#include <cstdio>
#include <memory>

namespace h3::cli {

namespace {

// "all", an exact name, or a prefix ending in '*' ("blocks.3.*").
bool matches(const std::vector<std::string>& patterns, const std::string& name) {
    for (const auto& p : patterns) {
        if (p == "all" || p == name) return true;
        if (!p.empty() && p.back() == '*' && name.rfind(p.substr(0, p.size() - 1), 0) == 0) return true;
    }
    return false;
}

} // namespace

Command make_dit_command() {
    struct Options {
        std::string model, inputs, output, device = "cpu", dtype = "bf16", component = "transformer",
                                           adaln_cache;
        std::vector<std::string> dump;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("dit", "Run one DiT forward on inputs given in a safetensors file");
        o->sub->add_option("--model", o->model, "checkpoint root (either layout) or transformer folder")
            ->required();
        o->sub->add_option("--inputs", o->inputs, "safetensors with the forward's inputs")->required();
        o->sub->add_option("--output", o->output, "safetensors to write sample, audio_sample (+ dumps)")
            ->required();
        o->sub->add_option("--device", o->device, "cpu | cuda | cuda:N")->capture_default_str();
        o->sub->add_option("--dtype", o->dtype, "bf16 | fp32")
            ->check(CLI::IsMember({"bf16", "fp32"}))
            ->capture_default_str();
        o->sub->add_option("--component", o->component, "transformer | transformer_ref")
            ->capture_default_str();
        o->sub->add_option(
            "--adaln-cache", o->adaln_cache,
            "folder for cached AdaLN tables; the AdaLN weights are then streamed block by block "
            "instead of loaded");
        o->sub->add_option(
            "--dump", o->dump,
            "named intermediates to add to the output: all, a name (blocks.3.attn_out) or prefix*");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        auto session = DeviceSession::open(o->device);
        if (!session.ok()) return report(session.status());
        const ops::Context& ctx = (*session)->context();
        auto ckpt = model::open_dit_checkpoint(o->model, o->component);
        if (!ckpt.ok()) return report(ckpt.status());
        auto inputs = model::DitInputs::from_file(o->inputs);
        if (!inputs.ok()) return report(inputs.status());
        auto packed = model::pack_inputs(*inputs, ckpt->config);
        if (!packed.ok()) return report(packed.status().with_context("inputs " + o->inputs));
        model::DitLoadOptions lo{.device = ctx.device,
                                 .precision = o->dtype == "fp32" ? model::DitPrecision::kFp32
                                                                 : model::DitPrecision::kBf16,
                                 .load_adaln = o->adaln_cache.empty()};
        auto m = model::DitModel::load(*ckpt, lo, ctx);
        if (!m.ok()) return report(m.status());
        std::vector<io::NamedTensor> dumped;
        model::DitForwardOptions fo;
        Status hook_status;
        if (!o->dump.empty()) {
            fo.hook.wants = [o](const std::string& n) { return matches(o->dump, n); };
            fo.hook.record = [&](const std::string& n, const Tensor& t) {
                auto host = t.to(Device::cpu(), ctx.stream());
                if (!host.ok()) {
                    hook_status = host.status();
                    return;
                }
                dumped.push_back({n, *host});
            };
        }
        auto t0 = std::chrono::steady_clock::now();
        model::AdalnTables tables;
        bool cache_hit = false;
        if (!o->adaln_cache.empty()) {
            auto cached = model::cached_adaln_tables(**m, *ckpt, packed->timesteps, o->adaln_cache);
            if (!cached.ok()) return report(cached.status());
            tables = std::move(cached->tables);
            cache_hit = cached->hit;
        }
        auto out = (*m)->forward(*packed, o->adaln_cache.empty() ? nullptr : &tables, fo);
        if (!out.ok()) return report(out.status());
        if (!hook_status.ok()) return report(hook_status);
        Status sync = (*session)->synchronize();
        if (!sync.ok()) return report(sync);
        double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::vector<io::NamedTensor> tensors = {{"sample", out->sample}, {"audio_sample", out->audio_sample}};
        for (auto& d : dumped) tensors.push_back(std::move(d));
        Status w = io::write_safetensors(o->output, tensors,
                                         {{"device", ctx.device.to_string()}, {"dtype", o->dtype}});
        if (!w.ok()) return report(w);
        std::fprintf(
            stderr, "dit: %lld rows, %s on %s, %.3f s%s, wrote %s\n", static_cast<long long>(packed->rows),
            o->dtype.c_str(), ctx.device.to_string().c_str(), secs,
            o->adaln_cache.empty() ? "" : (cache_hit ? " (AdaLN cache hit)" : " (AdaLN cache written)"),
            o->output.c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
