// h3-engine make-tiny DIR [--seed N] [--layout diffusers|original] [--latent-channels N] [--vae-stride 8|16]
//   [--audio-latent-channels N] [--text-dim N]
#include "cli/app.h"
#include "cli/commands.h"
#include "model/tiny/tiny_checkpoint.h"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <memory>

namespace h3::cli {

Command make_make_tiny_command() {
    struct Options {
        std::string dir;
        uint64_t seed = 0;
        std::string layout = "diffusers";
        model::TinyGeometry geometry;
        CLI::App* sub = nullptr;
    };
    auto o = std::make_shared<Options>();
    Command c;
    c.setup = [o](CLI::App& app) {
        o->sub = app.add_subcommand("make-tiny", "Write a tiny random H3 checkpoint in the official layout "
                                                 "(the embedded default model)");
        o->sub->add_option("dir", o->dir, "output directory")->required();
        o->sub->add_option("--seed", o->seed, "random seed (same seed, same model in both layouts)")
            ->capture_default_str();
        o->sub->add_option("--layout", o->layout, "diffusers|original")
            ->check(CLI::IsMember({"diffusers", "original"}))
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
            ->add_option("--text-dim", o->geometry.text_dim,
                         "conditioner width (text encoder hidden size = transformer text_dim)")
            ->capture_default_str();
    };
    c.parsed = [o] { return o->sub && o->sub->parsed(); };
    c.run = [o]() -> int {
        model::TinyCheckpointParams p{.dir = o->dir,
                                      .seed = o->seed,
                                      .layout = o->layout == "original" ? model::TinyLayout::kOriginal
                                                                        : model::TinyLayout::kDiffusers,
                                      .geometry = o->geometry};
        Status s = model::write_tiny_checkpoint(p);
        if (!s.ok()) return report(s);
        std::printf("wrote tiny H3 checkpoint (%s layout, seed %llu) to %s\n", o->layout.c_str(),
                    static_cast<unsigned long long>(o->seed), o->dir.c_str());
        return kExitOk;
    };
    return c;
}

} // namespace h3::cli
