#include "model/tiny/tiny_vae.h"

#include "model/audio_vae/audio_vae_encoder.h"

#include "io/json_file.h"
#include "io/safetensors.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/video_vae/video_vae_encoder.h"
#include "ops/random.h"

#include <cmath>
#include <cstring>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

// The official vae/config.json and audio_vae/config.json normalization statistics.
const std::vector<float> kVideoMean = {
    0.858090341091156f,    -0.9606591463088989f, 1.0661640167236328f,   -0.5090325474739075f,
    -0.2727581858634949f,  -1.3675414323806763f, -0.2553254961967468f,  -0.26907554268836975f,
    -0.5376840829849243f,  -0.0464097298681736f, 0.6657370328903198f,   0.19690127670764923f,
    -0.5460608005523682f,  -0.4035342037677765f, -0.23683024942874908f, 0.25928452610969543f,
    -0.30133944749832153f, 0.211341992020607f,   -1.1206848621368408f,  0.3581933379173279f,
    -0.04225143790245056f, 0.2604829967021942f,  0.22864092886447906f,  0.7056031823158264f};
const std::vector<float> kVideoStd = {
    1.2223774194717407f, 1.2767263650894165f, 1.6831774711608887f, 1.7549455165863037f,  1.5636216402053833f,
    2.194143533706665f,  0.9653137922286987f, 1.0569885969161987f, 0.841948926448822f,   0.7729952931404114f,
    1.8955937623977661f, 0.946841835975647f,  0.7996809482574463f, 0.44988900423049927f, 0.7197399735450745f,
    0.6936293244361877f, 2.961095094680786f,  2.7694199085235596f, 3.0496184825897217f,  2.1088054180145264f,
    3.276226282119751f,  3.1627357006073f,    2.2816812992095947f, 2.6127843856811523f};
const std::vector<float> kAudioMean = {
    -0.020211687488382354f, 0.3876466479950502f,   -0.04398279799186767f, -0.28591514936373f,
    0.08179686214561671f,   -0.35782641352446604f, 0.040623809960919084f, -0.01552534501956604f,
    -0.223362481667332f,    0.1821006842509091f,   0.2941778783780663f,   -0.07901167601970885f,
    -0.056815072777201f,    -0.3699028221860095f,  -0.31616315591624855f, 0.5905951377425391f,
    -0.052139568068853864f, 0.013673160263486295f, -0.03691647864630577f, 0.09732660653298163f,
    -0.3394662328788498f,   -0.30685677538541667f, -0.24504598907458763f, -0.034698524462007344f,
    0.02868032184767538f,   -0.21217779266454084f, -0.1678263169941987f,  0.3221287889040614f,
    -0.1223055851554907f,   0.4356604928128464f,   -0.0502599202236253f,  0.3979258376211797f};
const std::vector<float> kAudioStd = {
    1.6895524230479284f, 2.76263727217653f,   1.7945344281264435f, 1.6801681847309828f, 1.6390226546605453f,
    2.7788298348882177f, 1.7659090095747236f, 1.6199757612137327f, 2.6336525640336896f, 1.8539356672817833f,
    2.5056497896915633f, 1.811019237886178f,  1.9579657790720237f, 1.6685498243529284f, 1.4922469314453364f,
    3.298670198067373f,  1.9491804496832168f, 1.8720003270431442f, 1.8334080103291832f, 1.6488070416529093f,
    1.6176957696319716f, 1.9131449234774398f, 1.5695245398428617f, 1.6943659940415912f, 1.8318420762504692f,
    1.5540637421583379f, 1.9344930328968526f, 1.599198216109855f,  1.718045989838149f,  1.6307219190837705f,
    1.8661226051202384f, 1.5613768203168363f};

Status make_dirs(const fs::path& p) {
    std::error_code ec;
    fs::create_directories(p, ec);
    if (ec) return io_error("cannot create directory " + p.string() + ": " + ec.message());
    return ok_status();
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// fp32 host tensor: bound · U[−1, 1) + offset from the counter-based generator (deterministic per seed).
Result<Tensor> random_tensor(const std::vector<int64_t>& shape, uint64_t seed, float bound, float offset) {
    Tensor t = Tensor::host(Shape(shape), DType::kF32);
    H3_TRY(ops::fill_uniform(ops::Context::cpu(), {.seed = seed, .bound = bound, .offset = offset}, t));
    return t;
}

// Fan-in of a Linear [out, in] or a Conv1d weight_v [out, in, k] (ConvTranspose1d: [in, out, k]).
float fan_in_bound(const std::vector<int64_t>& shape) {
    int64_t fan = 1;
    for (size_t i = 1; i < shape.size(); ++i) fan *= shape[i];
    return 1.0f / std::sqrt(static_cast<float>(std::max<int64_t>(fan, 1)));
}

Status write_component(const fs::path& dir, const nlohmann::json& config,
                       std::vector<io::NamedTensor> tensors) {
    H3_TRY(make_dirs(dir));
    H3_TRY(io::write_json_file((dir / "config.json").string(), config));
    std::sort(tensors.begin(), tensors.end(), [](const auto& a, const auto& b) { return a.name < b.name; });
    return io::write_safetensors((dir / "diffusion_pytorch_model.safetensors").string(), tensors,
                                 {{"format", "pt"}});
}

// The first n of the official statistics, cycled when n is larger.
std::vector<float> first_n(const std::vector<float>& v, int n) {
    std::vector<float> out(static_cast<size_t>(n));
    for (int i = 0; i < n; ++i) out[static_cast<size_t>(i)] = v[static_cast<size_t>(i) % v.size()];
    return out;
}

} // namespace

VideoVaeConfig tiny_video_vae_config(const TinyGeometry& g) {
    VideoVaeConfig c;
    c.num_layers = 2;
    c.num_heads = 2;
    c.head_dim = 16;
    c.block_out_channels = {8, 16, 16, 16, 16, 32}; // official levels and factors, tiny widths
    c.norm_num_groups = 4;
    c.latent_channels = g.latent_channels;
    c.latents_mean = first_n(kVideoMean, g.latent_channels);
    c.latents_std = first_n(kVideoStd, g.latent_channels);
    if (g.vae_stride == 8) c.spatial_downsample_factors = {2, 2, 2, 1, 1, 1};
    c.patch = 1;
    for (int f : c.spatial_downsample_factors) c.patch *= f;
    return c;
}

AudioVaeConfig tiny_audio_vae_config(const TinyGeometry& g) {
    AudioVaeConfig c;
    c.latent_dim = 16;
    c.decoder_dim = 16;
    c.decoder_rates = {8, 10, 10};
    c.decoder_kernel_sizes = {16, 20, 20};
    c.encoder_dim = 4; // official rates 2·4·4·5·5 (hop 800): widths 4 → 8 → … → 128, then latent_dim
    c.num_attention_heads = 2;
    c.latent_channels = g.audio_latent_channels;
    c.latents_mean = first_n(kAudioMean, g.audio_latent_channels);
    c.latents_std = first_n(kAudioStd, g.audio_latent_channels);
    if (g.audio_hop == 4) {
        c.decoder_rates = {2, 2};
        c.decoder_kernel_sizes = {4, 4};
        c.encoder_rates = {2, 2};
    }
    return c;
}

Status write_tiny_video_vae(const std::string& dir, uint64_t seed, const VideoVaeConfig& c) {
    H3_TRY(c.validate("tiny video VAE config"));
    std::vector<io::NamedTensor> tensors;
    uint64_t s = seed * 1000003ull;
    for (const auto& [name, shape] : video_vae_decoder_tensors(c)) {
        float bound = 0.02f, offset = 0.0f; // biases
        if (ends_with(name, "norm1.weight") || ends_with(name, "norm2.weight") ||
            name == "decoder.norm_out.weight") {
            bound = 0.1f;
            offset = 1.0f;
        } else if (ends_with(name, "scale1") || ends_with(name, "scale2")) {
            bound = 0.05f; // layer scale: small, as trained ones are
            offset = 0.1f;
        } else if (name == "decoder.register_tokens") {
            bound = 1.0f;
        } else if (ends_with(name, ".weight")) {
            bound = fan_in_bound(shape);
        }
        H3_ASSIGN_OR_RETURN(Tensor t, random_tensor(shape, s++, bound, offset));
        tensors.push_back({name, t});
    }
    // The encoder from its own seed stream, so the decoder tensors stay what they were.
    H3_TRY(c.validate_encoder("tiny video VAE config"));
    uint64_t se = (seed + 0x5eedull) * 1000003ull;
    for (const auto& [name, shape] : video_vae_encoder_tensors(c)) {
        float bound = 0.02f, offset = 0.0f; // biases
        if (shape.size() == 1 && ends_with(name, ".weight")) {
            bound = 0.1f; // GroupNorm gains
            offset = 1.0f;
        } else if (ends_with(name, ".weight")) {
            bound = fan_in_bound(shape);
        }
        H3_ASSIGN_OR_RETURN(Tensor t, random_tensor(shape, se++, bound, offset));
        tensors.push_back({name, t});
    }
    return write_component(dir, c.to_json(), std::move(tensors));
}

Status write_tiny_audio_vae(const std::string& dir, uint64_t seed, const AudioVaeConfig& c) {
    H3_TRY(c.validate("tiny audio VAE config"));
    const std::vector<float> filter = kaiser_sinc_filter(0.25, 0.3, 12);
    std::vector<io::NamedTensor> tensors;
    uint64_t s = seed * 1000003ull;
    for (const auto& [name, shape] : audio_vae_decoder_tensors(c)) {
        if (ends_with(name, ".filter")) { // buffers: the exact Kaiser sinc filter
            Tensor t = Tensor::host(Shape(shape), DType::kF32);
            std::memcpy(t.data_as<float>(), filter.data(), filter.size() * sizeof(float));
            tensors.push_back({name, t});
            continue;
        }
        float bound = 0.02f, offset = 0.0f; // biases
        if (ends_with(name, ".weight_g")) {
            bound = 0.2f;
            offset = 1.0f;
        } else if (ends_with(name, ".alpha") || ends_with(name, ".beta")) {
            bound = 0.2f; // log-space: exp ≈ 1
        } else if (ends_with(name, ".weight_v") || ends_with(name, ".weight")) {
            bound = fan_in_bound(shape);
        }
        H3_ASSIGN_OR_RETURN(Tensor t, random_tensor(shape, s++, bound, offset));
        tensors.push_back({name, t});
    }
    // The encoder from its own seed stream, so the decoder tensors stay what they were.
    H3_TRY(c.validate_encoder("tiny audio VAE config"));
    uint64_t se = (seed + 0x5eedull) * 1000003ull;
    for (const auto& [name, shape] : audio_vae_encoder_tensors(c)) {
        float bound = 0.02f, offset = 0.0f; // biases
        if (ends_with(name, "zero_k_bias")) {
            bound = 0.0f; // a frozen zero buffer
        } else if (ends_with(name, ".weight_g")) {
            // Weight-norm gains in [0.4, 1): the 21 convolutions keep the trunk's activations O(1); gains
            // around 1 grow them to ~100 and make fp32 CPU and CUDA runs differ by ~2e-5 (rel-RMS).
            bound = 0.3f;
            offset = 0.7f;
        } else if (ends_with(name, ".alpha") || (shape.size() == 1 && ends_with(name, ".weight"))) {
            bound = 0.2f; // Snake alphas (linear space) and LayerNorm gains: ≈ 1
            offset = 1.0f;
        } else if (ends_with(name, ".weight_v") || ends_with(name, ".weight")) {
            bound = fan_in_bound(shape);
        }
        H3_ASSIGN_OR_RETURN(Tensor t, random_tensor(shape, se++, bound, offset));
        tensors.push_back({name, t});
    }
    return write_component(dir, c.to_json(), std::move(tensors));
}

Status write_tiny_vaes(const TinyCheckpointParams& p) {
    if (p.layout != TinyLayout::kDiffusers) return ok_status();
    const fs::path root(p.dir);
    H3_TRY(write_tiny_video_vae((root / "vae").string(), p.seed + 11, tiny_video_vae_config(p.geometry)));
    return write_tiny_audio_vae((root / "audio_vae").string(), p.seed + 12,
                                tiny_audio_vae_config(p.geometry));
}

} // namespace h3::model
