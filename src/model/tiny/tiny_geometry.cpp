// The tiny checkpoint's shapes (TinyGeometry's checks and the tiny DiT config), apart from its writers so
// that small programs (the LoRA fuzz target and its seeds) can use them without the rest of the model layer.
#include "model/tiny/tiny_checkpoint.h"

#include <string>

namespace h3::model {

Status TinyGeometry::validate() const {
    if (latent_channels < 1 || latent_channels > 256)
        return invalid_argument("make-tiny: latent channels " + std::to_string(latent_channels) +
                                " must lie in [1, 256]");
    if (vae_stride != 8 && vae_stride != 16)
        return invalid_argument("make-tiny: the VAE stride must be 8 or 16, got " +
                                std::to_string(vae_stride));
    if (audio_latent_channels < 1 || audio_latent_channels > 256)
        return invalid_argument("make-tiny: audio latent channels " + std::to_string(audio_latent_channels) +
                                " must lie in [1, 256]");
    if (text_dim < 8 || text_dim > 1024 || text_dim % 8)
        return invalid_argument("make-tiny: text_dim " + std::to_string(text_dim) +
                                " must be a multiple of 8 in [8, 1024]");
    if (dit_heads < 1 || dit_heads > 64)
        return invalid_argument("make-tiny: dit heads " + std::to_string(dit_heads) + " must lie in [1, 64]");
    if (audio_hop != 800 && audio_hop != 4)
        return invalid_argument("make-tiny: the audio hop must be 800 or 4, got " +
                                std::to_string(audio_hop));
    return ok_status();
}

bool TinyGeometry::is_default() const {
    const TinyGeometry d;
    return latent_channels == d.latent_channels && vae_stride == d.vae_stride &&
           audio_latent_channels == d.audio_latent_channels && text_dim == d.text_dim &&
           dit_heads == d.dit_heads && audio_hop == d.audio_hop;
}

DitConfig tiny_dit_config(const TinyGeometry& g) {
    DitConfig c;
    c.num_attention_heads = g.dit_heads;
    c.attention_head_dim = 32;
    c.hidden_size = 64;
    c.num_layers = 2;
    c.num_refiner_layers = 1;
    c.ffn_dim = 128;
    c.text_dim = 64;
    c.freq_dim = 256;
    c.time_embed_hidden_dim = 64;
    c.time_embed_dim = 32;
    c.rope_freq_dim = 4;
    c.in_channels = g.latent_channels;
    c.audio_in_channels = g.audio_latent_channels;
    c.text_dim = g.text_dim;
    return c;
}

} // namespace h3::model
