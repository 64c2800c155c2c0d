#include "model/latent_spec.h"

#include "model/audio_vae/audio_vae.h"
#include "model/dit/dit_config.h"
#include "model/video_vae/video_vae.h"

#include <cmath>
#include <cstdio>
#include <numeric>
#include <vector>

namespace h3::model {

int LatentSpec::canvas_multiple() const {
    return spatial_compression * std::lcm(patch_h, patch_w);
}

int LatentSpec::align_frames(int frames) const {
    if (frames <= latents_per_chunk) return latents_per_chunk;
    const int chunks = (frames - latents_per_chunk + frames_per_chunk - 1) / frames_per_chunk;
    return chunks * frames_per_chunk + latents_per_chunk;
}

int64_t LatentSpec::align_frames_down(int64_t frames) const {
    const int64_t chunks = std::max<int64_t>(1, (frames - latents_per_chunk) / frames_per_chunk);
    return chunks * frames_per_chunk + latents_per_chunk;
}

int LatentSpec::latent_frames(int aligned_frames) const {
    return (aligned_frames - latents_per_chunk) / frames_per_chunk * latents_per_chunk +
           (latents_per_chunk - token_drop);
}

int LatentSpec::frames_of_latent(int k) const {
    return k % latents_per_chunk == 0 ? frames_per_chunk - (latents_per_chunk - 1) * temporal_compression
                                      : temporal_compression;
}

double LatentSpec::audio_latents_per_second() const {
    return official_audio_latents_per_second;
}

int LatentSpec::audio_latents(int frames) const {
    // frames / fps first, then times the rate (the Python expression's order); Python's round() rounds half
    // to even, as nearbyint does in the default rounding mode.
    return static_cast<int>(
        std::nearbyint(static_cast<double>(frames) / fps * official_audio_latents_per_second));
}

double LatentSpec::rope_units_per_frame() const {
    return audio_latents_per_second() / fps;
}

std::string LatentSpec::describe() const {
    char b[320];
    std::snprintf(b, sizeof b,
                  "video %d ch, x%d spatial, x%d temporal (%dn+%d frames -> %dn+%d latents), patch %dx%dx%d, "
                  "canvas multiple %d; audio %dx%d ch, %d latents/s (the official rate), %d Hz with a hop of "
                  "%d; text %d",
                  latent_channels, spatial_compression, temporal_compression, frames_per_chunk,
                  latents_per_chunk, latents_per_chunk, latents_per_chunk - token_drop, patch_t, patch_h,
                  patch_w, canvas_multiple(), audio_channels, audio_latent_channels,
                  official_audio_latents_per_second, audio_sample_rate, audio_hop, text_dim);
    return b;
}

Status LatentSpec::validate(const std::string& origin) const {
    auto bad = [&](const std::string& m) { return bad_input(origin + ": " + m); };
    if (latent_channels < 1 || audio_latent_channels < 1 || text_dim < 1)
        return bad("latent channels and text_dim must be positive");
    if (spatial_compression < 1 || temporal_compression < 1) return bad("VAE compression must be positive");
    if (patch_t != 1)
        return bad("patch_size [" + std::to_string(patch_t) + ", " + std::to_string(patch_h) + ", " +
                   std::to_string(patch_w) + "]: the packed layout takes latent frames one by one (t = 1)");
    if (patch_h < 1 || patch_w < 1) return bad("patch sizes must be positive");
    if (frames_per_chunk < 2 || latents_per_chunk >= frames_per_chunk || latents_per_chunk <= token_drop ||
        token_drop < 0)
        return bad("clip_length " + std::to_string(frames_per_chunk) + " with token_drop " +
                   std::to_string(token_drop) + " leaves no latent frame per chunk");
    if (frames_of_latent(0) < 1)
        return bad("clip_length " + std::to_string(frames_per_chunk) + " is shorter than its " +
                   std::to_string(latents_per_chunk) + " latents of " + std::to_string(temporal_compression) +
                   " frames");
    if (audio_sample_rate < 1 || audio_hop < 1) return bad("audio sampling_rate and hop must be positive");
    if (official_audio_latents_per_second < 1) return bad("the audio latents per second must be positive");
    if (audio_channels < 1 || fps < 1) return bad("audio channels and fps must be positive");
    return ok_status();
}

namespace {

std::string mismatch(const std::string& file_a, const char* field_a, int a, const std::string& file_b,
                     const char* field_b, int b, const char* why) {
    return file_a + ": " + field_a + " " + std::to_string(a) + " differs from " + file_b + ": " + field_b +
           " " + std::to_string(b) + " (" + why + ")";
}

int product(const std::vector<int>& v) {
    int p = 1;
    for (int f : v) p *= f;
    return p;
}

} // namespace

Result<LatentSpec> derive_latent_spec(const LatentSpecSources& s) {
    LatentSpec spec;
    if (s.dit) {
        const DitConfig& d = *s.dit;
        spec.latent_channels = d.in_channels;
        spec.audio_latent_channels = d.audio_in_channels;
        spec.patch_t = d.patch_t;
        spec.patch_h = d.patch_h;
        spec.patch_w = d.patch_w;
        spec.text_dim = d.text_dim;
    }
    if (s.video_vae) {
        const VideoVaeConfig& v = *s.video_vae;
        if (s.dit && v.latent_channels != s.dit->in_channels)
            return bad_input(mismatch(s.dit_file, "in_channels", s.dit->in_channels, s.video_vae_file,
                                      "latent_channels", v.latent_channels,
                                      "the DiT denoises the video VAE's latents"));
        spec.latent_channels = v.latent_channels;
        spec.spatial_compression = product(v.spatial_downsample_factors);
        spec.temporal_compression = product(v.temporal_downsample_factors);
        spec.frames_per_chunk = v.clip_length;
        spec.latents_per_chunk = (v.clip_length + spec.temporal_compression - 1) / spec.temporal_compression;
        spec.token_drop = v.token_drop;
    }
    if (s.audio_vae) {
        const AudioVaeConfig& a = *s.audio_vae;
        if (s.dit && a.latent_channels != s.dit->audio_in_channels)
            return bad_input(mismatch(s.dit_file, "audio_in_channels", s.dit->audio_in_channels,
                                      s.audio_vae_file, "latent_channels", a.latent_channels,
                                      "the DiT denoises the audio VAE's latents"));
        spec.audio_latent_channels = a.latent_channels;
        spec.audio_sample_rate = a.sampling_rate;
        spec.audio_hop = a.hop_length();
    }
    if (s.text_hidden_size) {
        if (s.dit && *s.text_hidden_size != s.dit->text_dim)
            return bad_input(mismatch(s.dit_file, "text_dim", s.dit->text_dim, s.text_file,
                                      "text_config.hidden_size", *s.text_hidden_size,
                                      "the DiT reads the text encoder's hidden states"));
        spec.text_dim = *s.text_hidden_size;
    }
    if (s.dit && s.dit_ref) {
        const DitConfig& d = *s.dit;
        const DitConfig& r = *s.dit_ref;
        const char* why = "the two DiT variants share the latent spaces and the conditioning";
        if (r.in_channels != d.in_channels)
            return bad_input(mismatch(s.dit_ref_file, "in_channels", r.in_channels, s.dit_file, "in_channels",
                                      d.in_channels, why));
        if (r.audio_in_channels != d.audio_in_channels)
            return bad_input(mismatch(s.dit_ref_file, "audio_in_channels", r.audio_in_channels, s.dit_file,
                                      "audio_in_channels", d.audio_in_channels, why));
        if (r.text_dim != d.text_dim)
            return bad_input(
                mismatch(s.dit_ref_file, "text_dim", r.text_dim, s.dit_file, "text_dim", d.text_dim, why));
        if (r.patch_t != d.patch_t || r.patch_h != d.patch_h || r.patch_w != d.patch_w)
            return bad_input(s.dit_ref_file + ": patch_size differs from " + s.dit_file + ": patch_size (" +
                             why + ")");
    }
    std::string origin = s.dit ? s.dit_file : s.video_vae ? s.video_vae_file : "latent spec";
    H3_TRY(spec.validate(origin));
    return spec;
}

} // namespace h3::model
