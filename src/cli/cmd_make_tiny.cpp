// h3-engine make-tiny DIR [--seed N] [--layout diffusers|original] [--variant base|fasth3]
//   [--latent-channels N] [--vae-stride 8|16] [--audio-latent-channels N] [--text-dim N] [--dit-heads N]
//   [--lora FILE]
#include "cli/app.h"
#include "cli/commands.h"
#include "model/lora/lora_file.h"
#include "model/lora/lora_random.h"
#include "model/tiny/tiny_checkpoint.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::cli {

Command make_make_tiny_command() {
    struct Options {
        std::string dir;
        uint64_t seed = 0;
        std::string layout = "diffusers", variant = "base";
        std::string lora; // also write a tiny adapter for this DiT
        model::TinyGeometry geometry;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("make-tiny",
                                    "Write a tiny random H3 checkpoint in the official layout "
                                    "(the tests' model; generate's default is the trained demo model)");
        o->sub->add_option("dir", o->dir, "output directory")->required();
        o->sub->add_option("--seed", o->seed, "random seed (same seed, same model in both layouts)")
            ->capture_default_str();
        o->sub->add_option("--layout", o->layout, "diffusers|original")
            ->check(CLI::IsMember({"diffusers", "original"}))
            ->capture_default_str();
        o->sub
            ->add_option("--variant", o->variant,
                         "base | fasth3 (a FastH3 student: VSA compression gates + fastvideo_inference.json)")
            ->check(CLI::IsMember({"base", "fasth3"}))
            ->capture_default_str();
        // Non-release geometry (a checkpoint as diffusers writes one for other sizes); the defaults keep the
        // released VAEs' latent spaces.
        o->sub
            ->add_option("--latent-channels", o->geometry.latent_channels,
                         "video latent channels (vae latent_channels = transformer in_channels)")
            ->capture_default_str();
        o->sub
            ->add_option("--vae-stride", o->geometry.vae_stride,
                         "the video VAE's spatial compression: 8 or 16")
            ->check(CLI::IsMember({8, 16}))
            ->capture_default_str();
        o->sub
            ->add_option("--audio-latent-channels", o->geometry.audio_latent_channels,
                         "audio latent channels (audio_vae latent_channels = transformer audio_in_channels)")
            ->capture_default_str();
        o->sub
            ->add_option("--dit-heads", o->geometry.dit_heads,
                         "the DiTs' attention heads (32 dims each; 8 splits over --sp/--tp 2, 4, 8)")
            ->check(CLI::Range(1, 64));
        o->sub
            ->add_option("--text-dim", o->geometry.text_dim,
                         "conditioner width (text encoder hidden size = transformer text_dim)")
            ->capture_default_str();
        o->sub->add_option(
            "--lora", o->lora,
            "also write a tiny random LoRA for this DiT (PEFT layout with .alpha, rank 4 on every "
            "projection incl. refiner and AdaLN) to FILE");
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        model::TinyCheckpointParams p{
            .dir = o->dir,
            .seed = o->seed,
            .layout = o->layout == "original" ? model::TinyLayout::kOriginal : model::TinyLayout::kDiffusers,
            .geometry = o->geometry,
            .variant = o->variant == "fasth3" ? model::TinyVariant::kFastH3 : model::TinyVariant::kBase};
        Status s = model::write_tiny_checkpoint(p);
        if (!s.ok()) return report(s);
        std::printf("wrote tiny H3 checkpoint (%s layout%s, seed %llu) to %s\n", o->layout.c_str(),
                    o->variant == "fasth3" ? ", FastH3 student" : "",
                    static_cast<unsigned long long>(o->seed), o->dir.c_str());
        if (!o->lora.empty()) {
            auto a = model::random_lora_adapter(model::tiny_dit_config(o->geometry), {.rank = 4,
                                                                                      .dtype = DType::kBF16,
                                                                                      .seed = o->seed + 1000,
                                                                                      .refiner = true,
                                                                                      .adaln = true,
                                                                                      .scale = 64.0f});
            if (!a.ok()) return report(a.status());
            if (Status w = model::write_lora_file(o->lora, *a); !w.ok()) return report(w);
            std::printf("wrote tiny LoRA (%zu targets, rank 4) to %s\n", a->factors.size(), o->lora.c_str());
        }
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
