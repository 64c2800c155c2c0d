// AudioVaeConfig: the audio_vae component's config.json (decoder and encoder fields) read, written and
// checked.
#include "io/json_file.h"
#include "model/audio_vae/audio_vae.h"

#include <functional>

namespace h3::model {

namespace {

template <typename T>
Status read_vec(const nlohmann::json& j, const char* key, std::vector<T>& out, const std::string& origin) {
    if (!j.contains(key)) return ok_status();
    return io::json_get(j.at(key), origin + ": field '" + key + "'", out);
}

Status read_int(const nlohmann::json& j, const char* key, int& out, const std::string& origin) {
    if (!j.contains(key)) return ok_status();
    return io::json_int(j.at(key), origin + ": field '" + key + "'", out);
}

// Rates multiply into the hop (samples per latent): each rate and the product are bounded before they are
// multiplied in int (found with fuzz_config next to the video VAE's downsample factors).
constexpr int64_t kMaxHop = 1 << 20;
Status check_rates(const std::vector<int>& rates, int min_rate, const char* key,
                   const std::function<Status(const std::string&)>& bad) {
    int64_t hop = 1;
    for (size_t i = 0; i < rates.size(); ++i) {
        if (rates[i] < min_rate || rates[i] > kMaxHop)
            return bad(std::string(key) + "[" + std::to_string(i) + "] is " + std::to_string(rates[i]) +
                       "; a rate lies in [" + std::to_string(min_rate) + ", " + std::to_string(kMaxHop) +
                       "]");
        hop *= rates[i];
        if (hop > kMaxHop)
            return bad(std::string(key) + " multiply past " + std::to_string(kMaxHop) +
                       " samples per latent");
    }
    return ok_status();
}

} // namespace

int AudioVaeConfig::hop_length() const {
    int h = 1;
    for (int r : decoder_rates) h *= r;
    return h;
}

int AudioVaeConfig::encoder_hop() const {
    int h = 1;
    for (int r : encoder_rates) h *= r;
    return h;
}

Result<AudioVaeConfig> AudioVaeConfig::from_json(const nlohmann::json& j, const std::string& origin) {
    AudioVaeConfig c;
    if (!j.is_object()) return bad_input(origin + ": expected a JSON object");
    H3_TRY(read_int(j, "encoder_dim", c.encoder_dim, origin));
    H3_TRY(read_vec(j, "encoder_rates", c.encoder_rates, origin));
    H3_TRY(read_int(j, "num_attention_heads", c.num_attention_heads, origin));
    H3_TRY(read_int(j, "latent_channels", c.latent_channels, origin));
    H3_TRY(read_int(j, "latent_dim", c.latent_dim, origin));
    H3_TRY(read_int(j, "decoder_dim", c.decoder_dim, origin));
    H3_TRY(read_int(j, "sampling_rate", c.sampling_rate, origin));
    H3_TRY(read_vec(j, "decoder_rates", c.decoder_rates, origin));
    H3_TRY(read_vec(j, "decoder_kernel_sizes", c.decoder_kernel_sizes, origin));
    H3_TRY(read_vec(j, "resblock_kernel_sizes", c.resblock_kernel_sizes, origin));
    H3_TRY(read_vec(j, "resblock_dilation_sizes", c.resblock_dilation_sizes, origin));
    H3_TRY(read_vec(j, "latents_mean", c.latents_mean, origin));
    H3_TRY(read_vec(j, "latents_std", c.latents_std, origin));
    H3_TRY(c.validate(origin));
    return c;
}

Result<AudioVaeConfig> AudioVaeConfig::from_file(const std::string& path) {
    H3_ASSIGN_OR_RETURN(auto j, io::read_json_file(path));
    return from_json(j, path);
}

nlohmann::json AudioVaeConfig::to_json() const {
    return {{"_class_name", "AutoencoderKLMiniMaxH3Audio"},
            {"encoder_dim", encoder_dim},
            {"encoder_rates", encoder_rates},
            {"latent_dim", latent_dim},
            {"latent_channels", latent_channels},
            {"decoder_dim", decoder_dim},
            {"decoder_rates", decoder_rates},
            {"decoder_kernel_sizes", decoder_kernel_sizes},
            {"num_attention_heads", num_attention_heads},
            {"resblock_kernel_sizes", resblock_kernel_sizes},
            {"resblock_dilation_sizes", resblock_dilation_sizes},
            {"sampling_rate", sampling_rate},
            {"latents_mean", latents_mean},
            {"latents_std", latents_std}};
}

Status AudioVaeConfig::validate(const std::string& origin) const {
    auto bad = [&](const std::string& m) { return bad_input(origin + ": " + m); };
    if (latent_channels < 1 || latent_dim < 1 || decoder_dim < 1) return bad("channel counts must be >= 1");
    if (decoder_rates.empty() || decoder_rates.size() != decoder_kernel_sizes.size())
        return bad("decoder_rates and decoder_kernel_sizes must be non-empty and of equal length");
    H3_TRY(check_rates(decoder_rates, 1, "decoder_rates", bad));
    if (decoder_rates.size() > 30) // one halving of decoder_dim per upsampler, in an int
        return bad("decoder_rates has " + std::to_string(decoder_rates.size()) + " upsamplers (at most 30)");
    for (size_t i = 0; i < decoder_rates.size(); ++i)
        if (decoder_rates[i] < 1 || decoder_kernel_sizes[i] < decoder_rates[i] ||
            (decoder_kernel_sizes[i] - decoder_rates[i]) % 2)
            return bad("upsampler " + std::to_string(i) + ": kernel " +
                       std::to_string(decoder_kernel_sizes[i]) + " must be >= rate " +
                       std::to_string(decoder_rates[i]) + " with an even difference");
    if ((decoder_dim >> decoder_rates.size()) < 1)
        return bad("decoder_dim " + std::to_string(decoder_dim) + " cannot be halved " +
                   std::to_string(decoder_rates.size()) + " times");
    if (resblock_kernel_sizes.empty() || resblock_kernel_sizes.size() != resblock_dilation_sizes.size())
        return bad("resblock_kernel_sizes and resblock_dilation_sizes must be non-empty and of equal length");
    for (int k : resblock_kernel_sizes)
        if (k < 1 || k % 2 == 0) return bad("resblock kernel sizes must be odd");
    if (latents_mean.size() != static_cast<size_t>(latent_channels) ||
        latents_std.size() != static_cast<size_t>(latent_channels))
        return bad("latents_mean/latents_std must hold " + std::to_string(latent_channels) + " values each");
    return ok_status();
}

Status AudioVaeConfig::validate_encoder(const std::string& origin) const {
    auto bad = [&](const std::string& m) { return bad_input(origin + ": " + m); };
    if (encoder_dim < 1) return bad("encoder_dim must be >= 1");
    if (encoder_rates.empty()) return bad("encoder_rates must be non-empty");
    for (int r : encoder_rates)
        if (r < 2) // kernel 2·s, padding ceil(s/2): a stride of 1 would lengthen the signal by one sample
            return bad("encoder_rates must be >= 2, got " + std::to_string(r));
    H3_TRY(check_rates(encoder_rates, 2, "encoder_rates", bad));
    if (encoder_hop() != hop_length())
        return bad("encoder_rates multiply to " + std::to_string(encoder_hop()) + " but decoder_rates to " +
                   std::to_string(hop_length()) + "; the encoder must downsample by the decoder's hop");
    if (num_attention_heads < 1 || latent_dim % num_attention_heads)
        return bad("latent_dim " + std::to_string(latent_dim) +
                   " must be a multiple of num_attention_heads " + std::to_string(num_attention_heads));
    return ok_status();
}

} // namespace h3::model
