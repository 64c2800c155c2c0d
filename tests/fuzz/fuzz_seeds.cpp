// Writes the seed corpora of the fuzz targets (scripts/fuzz.sh runs it into the build tree): a few valid
// request bodies, multipart submissions with a keyframe and references, tiny PNG/JPEG/WebP images, PCM16 and
// float WAVs, a tiny MP4, component configs (the VAEs' defaults through their own writers, a small
// transformer, text and vision config), a model_index.json and LoRA adapters for the tiny DiT in each key
// layout (diffusers/PEFT with alpha, metadata-scaled, kohya, musubi, original, DiffSynth). Everything is made
// here, small, from the project's own writers and the codec libraries.
#include "core/tensor.h"
#include "io/media_writer.h"
#include "io/safetensors.h"
#include "model/audio_vae/audio_vae.h"
#include "model/dit/dit_tensors.h"
#include "model/lora/lora_file.h"
#include "model/tiny/tiny_checkpoint.h"
#include "model/video_vae/video_vae.h"

#include <jpeglib.h>
#include <webp/encode.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

void put(const fs::path& p, const std::string& bytes) {
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << bytes;
}

std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    return std::string(std::istreambuf_iterator<char>(in), {});
}

std::vector<uint8_t> gradient(int w, int h) {
    std::vector<uint8_t> rgb(static_cast<size_t>(w) * h * 3);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            uint8_t* p = rgb.data() + (static_cast<size_t>(y) * w + x) * 3;
            p[0] = static_cast<uint8_t>(x * 255 / std::max(1, w - 1));
            p[1] = static_cast<uint8_t>(y * 255 / std::max(1, h - 1));
            p[2] = static_cast<uint8_t>((x ^ y) & 255);
        }
    return rgb;
}

std::string jpeg(int w, int h, bool progressive) {
    std::vector<uint8_t> rgb = gradient(w, h);
    jpeg_compress_struct c;
    jpeg_error_mgr err;
    c.err = jpeg_std_error(&err);
    jpeg_create_compress(&c);
    unsigned char* out = nullptr;
    unsigned long n = 0;
    jpeg_mem_dest(&c, &out, &n);
    c.image_width = static_cast<JDIMENSION>(w);
    c.image_height = static_cast<JDIMENSION>(h);
    c.input_components = 3;
    c.in_color_space = JCS_RGB;
    jpeg_set_defaults(&c);
    jpeg_set_quality(&c, 80, TRUE);
    if (progressive) jpeg_simple_progression(&c);
    jpeg_start_compress(&c, TRUE);
    while (c.next_scanline < c.image_height) {
        JSAMPROW row = rgb.data() + static_cast<size_t>(c.next_scanline) * w * 3;
        jpeg_write_scanlines(&c, &row, 1);
    }
    jpeg_finish_compress(&c);
    std::string s(reinterpret_cast<char*>(out), n);
    jpeg_destroy_compress(&c);
    free(out);
    return s;
}

std::string webp(int w, int h, bool lossless) {
    std::vector<uint8_t> rgb = gradient(w, h);
    uint8_t* out = nullptr;
    const size_t n = lossless ? WebPEncodeLosslessRGB(rgb.data(), w, h, w * 3, &out)
                              : WebPEncodeRGB(rgb.data(), w, h, w * 3, 75.0f, &out);
    std::string s(reinterpret_cast<char*>(out), n);
    WebPFree(out);
    return s;
}

h3::Tensor frames(int n, int w, int h) {
    h3::Tensor t = h3::Tensor::host(h3::Shape{n, h, w, 3}, h3::DType::kU8);
    const std::vector<uint8_t> g = gradient(w, h);
    for (int f = 0; f < n; ++f)
        for (size_t i = 0; i < g.size(); ++i)
            t.data_as<uint8_t>()[f * g.size() + i] = static_cast<uint8_t>(g[i] + f * 7);
    return t;
}

h3::Tensor tone(int channels, int samples) {
    h3::Tensor t = h3::Tensor::host(h3::Shape{channels, samples}, h3::DType::kF32);
    for (int c = 0; c < channels; ++c)
        for (int i = 0; i < samples; ++i)
            t.data_as<float>()[c * samples + i] = 0.3f * ((i * (c + 3)) % 64 - 32) / 32.0f;
    return t;
}

std::string multipart(const std::vector<std::tuple<std::string, std::string, std::string>>& parts) {
    std::string b;
    for (const auto& [name, filename, data] : parts) {
        b += "--XyZ\r\nContent-Disposition: form-data; name=\"" + name + "\"";
        if (!filename.empty())
            b += "; filename=\"" + filename + "\"\r\nContent-Type: application/octet-stream";
        b += "\r\n\r\n" + data + "\r\n";
    }
    return b + "--XyZ--\r\n";
}

// A deterministic factor [rows, cols] in `dtype` (small values, no two rows alike).
h3::Tensor factor(int64_t rows, int64_t cols, h3::DType dtype, int salt) {
    std::vector<float> v(static_cast<size_t>(rows * cols));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(((i * 31 + salt * 17) % 29) - 14) / 64.0f;
    return h3::host_tensor_from(v, h3::Shape{rows, cols}, dtype);
}

h3::Tensor scalar(float v) {
    return h3::host_tensor_from({v}, h3::Shape{}, h3::DType::kF32);
}

std::string flat(std::string s) {
    for (char& c : s)
        if (c == '.') c = '_';
    return s;
}

// LoRA seeds for the tiny DiT: rank 1-2 factors on a few projections of each kind, in every key layout.
void lora_seeds(const fs::path& out, const fs::path& scratch) {
    using namespace h3::model;
    const DitConfig c = tiny_dit_config();
    const fs::path dir = out / "lora";
    auto save = [&](const std::string& name, const std::vector<h3::io::NamedTensor>& t,
                    const std::map<std::string, std::string>& md = {}) {
        const fs::path p = scratch / name;
        if (h3::io::write_safetensors(p.string(), t, md).ok()) put(dir / name, slurp(p));
    };
    const LoraTarget q{LoraSite::kBlock, 0, LoraProjection::kToQ},
        out0{LoraSite::kBlock, 1, LoraProjection::kToOut}, ff_in{LoraSite::kBlock, 0, LoraProjection::kFfIn},
        ref_k{LoraSite::kRefiner, 0, LoraProjection::kToK},
        adaln{LoraSite::kFinalLayer, 0, LoraProjection::kAdaln};
    // diffusers/PEFT with an alpha per module (the writer's layout)
    LoraAdapter a;
    int salt = 0;
    for (const LoraTarget& t : {q, out0, ff_in, ref_k, adaln}) {
        const LoraShape s = lora_target_shape(c, t);
        a.factors.push_back(
            {t, factor(2, s.in, h3::DType::kBF16, ++salt), factor(s.out, 2, h3::DType::kBF16, ++salt), 0.5f});
    }
    if (write_lora_file((scratch / "peft.safetensors").string(), a).ok())
        put(dir / "peft.safetensors", slurp(scratch / "peft.safetensors"));
    // diffusers names scaled by lora_adapter_metadata (rank and alpha patterns, rsLoRA), one unknown key
    std::vector<h3::io::NamedTensor> d;
    for (const LoraTarget& t : {q, ff_in}) {
        const LoraShape s = lora_target_shape(c, t);
        const std::string m = "transformer." + lora_target_name(t);
        d.push_back({m + ".lora_A.weight", factor(1, s.in, h3::DType::kF16, ++salt)});
        d.push_back({m + ".lora_B.weight", factor(s.out, 1, h3::DType::kF16, ++salt)});
    }
    d.push_back({"transformer.context_embedder.lora_A.weight", factor(1, 8, h3::DType::kF16, ++salt)});
    save("metadata.safetensors", d,
         {{"lora_adapter_metadata",
           R"({"r": 1, "lora_alpha": 2, "use_rslora": true,)"
           R"( "rank_pattern": {"ff.net.0.proj": 1}, "alpha_pattern": {"to_q": 4}})"}});
    // kohya (flattened diffusers names) and musubi (flattened original names), lora_down / lora_up / alpha
    std::vector<h3::io::NamedTensor> k, mu;
    for (const LoraTarget& t : {q, out0}) {
        const LoraShape s = lora_target_shape(c, t);
        const std::string m = "lora_unet_" + flat(lora_target_name(t));
        k.push_back({m + ".lora_down.weight", factor(2, s.in, h3::DType::kF32, ++salt)});
        k.push_back({m + ".lora_up.weight", factor(s.out, 2, h3::DType::kF32, ++salt)});
        k.push_back({m + ".alpha", scalar(1.0f)});
    }
    save("kohya.safetensors", k);
    // original names: the fused qkv_proj (B rows [q; k; v]) and mlp.fc1 ([gate; value])
    const std::string qkv = *original_name_of(lora_target_name(q) + ".weight");
    const std::string fc1 = *original_name_of(lora_target_name(ff_in) + ".weight");
    const std::string qkv_m = qkv.substr(0, qkv.size() - 7), fc1_m = fc1.substr(0, fc1.size() - 7);
    const LoraShape sq = lora_target_shape(c, q), sf = lora_target_shape(c, ff_in);
    std::vector<h3::io::NamedTensor> o = {
        {"diffusion_model." + qkv_m + ".lora_A.weight", factor(2, sq.in, h3::DType::kBF16, ++salt)},
        {"diffusion_model." + qkv_m + ".lora_B.weight", factor(3 * sq.out, 2, h3::DType::kBF16, ++salt)},
        {"diffusion_model." + fc1_m + ".lora_A.weight", factor(1, sf.in, h3::DType::kBF16, ++salt)},
        {"diffusion_model." + fc1_m + ".lora_B.weight", factor(sf.out, 1, h3::DType::kBF16, ++salt)}};
    save("original.safetensors", o);
    // DiffSynth: original names with PEFT's .default. infix (per-head qkv rows)
    save("diffsynth.safetensors",
         {{qkv_m + ".lora_A.default.weight", factor(1, sq.in, h3::DType::kBF16, ++salt)},
          {qkv_m + ".lora_B.default.weight", factor(3 * sq.out, 1, h3::DType::kBF16, ++salt)}});
    mu.push_back(
        {"lora_unet_" + flat(qkv_m) + ".lora_down.weight", factor(1, sq.in, h3::DType::kF16, ++salt)});
    mu.push_back(
        {"lora_unet_" + flat(qkv_m) + ".lora_up.weight", factor(3 * sq.out, 1, h3::DType::kF16, ++salt)});
    mu.push_back({"lora_unet_" + flat(qkv_m) + ".alpha", scalar(2.0f)});
    save("musubi.safetensors", mu);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: fuzz_seeds OUTDIR\n");
        return 2;
    }
    const fs::path out = argv[1];
    const fs::path scratch = out / "scratch";
    fs::create_directories(scratch);

    // HTTP request targets (serve/request_target.h), among them the ones issue #42 found
    for (const auto& [name, target] : std::vector<std::pair<std::string, std::string>>{
             {"list", "/v1/videos?limit=20&order=desc&after=video_0123456789abcdef0123456789abcdef"},
             {"content", "/v1/videos/video_0123456789abcdef0123456789abcdef/content?variant=audio"},
             {"nul_content", "/v1/videos/video_0123456789abcdef0123456789abcdef%00/content"},
             {"nul_delete", "/v1/videos/video_0123456789abcdef0123456789abcdef%00/anything"},
             {"nul_web", "/web/app.js%00.png"},
             {"escapes", "/a%2Fb/%2e%2E/c%zz?x=a+b%20c&y=%E2%82%AC&&=&z"},
             {"many_params",
              [] {
                  std::string s = "/v1/videos?";
                  for (int i = 0; i < 40; ++i) s += "p" + std::to_string(i) + "=" + std::to_string(i) + "&";
                  return s;
              }()},
             {"root", "/"}})
        put(out / "request_target" / name, target);

    // request bodies
    put(out / "request_json/t2va.json", R"({"prompt": "a fox", "size": "64x32", "seconds": 4, "seed": 7})");
    put(out / "request_json/full.json",
        R"({"prompt": "p", "model": "minimax-h3", "seconds": "5", "size": "1344x768", "seed": 18446744073709551615,)"
        R"( "num_inference_steps": 30, "cache": {"dbcache": {"Fn": 1, "Bn": 0}}, "output_format": "wav"})");
    put(out / "request_json/quality.json", R"({"prompt": "p", "quality": "high", "cache": null})");
    put(out / "request_json/cache_string.json", R"({"prompt": "p", "cache": "teacache:thresh=0.2"})");

    // images
    const std::string jpg = jpeg(24, 16, false);
    put(out / "image/small.jpg", jpg);
    put(out / "image/progressive.jpg", jpeg(40, 24, true));
    put(out / "image/lossy.webp", webp(24, 16, false));
    put(out / "image/lossless.webp", webp(17, 9, true));
    if (h3::io::media_available() &&
        h3::io::write_png_frames((scratch / "png").string(), frames(1, 20, 12)).ok())
        put(out / "image/small.png", slurp(scratch / "png/frame_00000.png"));

    // audio
    for (auto [name, fmt] :
         {std::pair{"pcm16.wav", h3::io::WavFormat::kPcm16}, {"float.wav", h3::io::WavFormat::kFloat32}})
        if (h3::io::write_wav((scratch / name).string(), tone(2, 800), 16000, fmt).ok()) {
            put(out / "wav" / name, slurp(scratch / name));
            put(out / "media" / name, slurp(scratch / name));
        }

    // a tiny MP4 (H.264 + AAC)
    if (h3::io::media_available() &&
        h3::io::write_mp4((scratch / "tiny.mp4").string(), frames(6, 32, 16), tone(2, 8000), 32000).ok())
        put(out / "media/tiny.mp4", slurp(scratch / "tiny.mp4"));

    // multipart submissions
    put(out / "multipart/fields.txt", multipart({{"prompt", "", "a fox"},
                                                 {"seconds", "", "4"},
                                                 {"seed", "", "7"},
                                                 {"size", "", "64x32"},
                                                 {"cache", "", R"({"teacache": {"thresh": 0.2}})"}}));
    put(out / "multipart/keyframe.txt", multipart({{"prompt", "", "a fox"}, {"first_frame", "a.jpg", jpg}}));
    put(out / "multipart/reference.txt", multipart({{"prompt", "", "a fox"},
                                                    {"reference", "r.jpg", jpg},
                                                    {"reference", "a.wav", slurp(out / "wav/pcm16.wav")}}));

    // configs and a model index
    put(out / "config/video_vae.json", h3::model::VideoVaeConfig{}.to_json().dump(1));
    put(out / "config/audio_vae.json", h3::model::AudioVaeConfig{}.to_json().dump(1));
    put(out / "config/transformer.json",
        R"({"_class_name": "MiniMaxH3Transformer3DModel", "num_attention_heads": 2, "attention_head_dim": 32,)"
        R"( "hidden_size": 64, "num_layers": 2, "num_refiner_layers": 1, "ffn_dim": 128, "in_channels": 24,)"
        R"( "audio_in_channels": 32, "text_dim": 64, "freq_dim": 256, "rope_freq_dim": 4, "patch_size": [1, 2, 2],)"
        R"( "rope_theta": 10000.0, "norm_eps": 1e-6})");
    put(out / "config/text_encoder.json",
        R"({"text_config": {"hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,)"
        R"( "num_attention_heads": 2, "num_key_value_heads": 1, "vocab_size": 300, "head_dim": 32,)"
        R"( "rope_scaling": {"rope_type": "default", "mrope_section": [6, 5, 5]}},)"
        R"( "vision_config": {"depth": 2, "hidden_size": 32, "num_heads": 2, "patch_size": 16,)"
        R"( "deepstack_visual_indexes": [0]}})");
    put(out / "config/model_index.json",
        R"({"_class_name": "MiniMaxH3Pipeline", "transformer": ["diffusers", "MiniMaxH3Transformer3DModel"],)"
        R"( "vae": ["diffusers", "AutoencoderKLMiniMaxH3"], "audio_vae": ["diffusers", "AutoencoderKLMiniMaxH3Audio"],)"
        R"( "scheduler": ["diffusers", "FlowMatchEulerDiscreteScheduler"]})");
    lora_seeds(out, scratch);
    fs::remove_all(scratch);
    std::printf("fuzz_seeds: wrote %s\n", out.c_str());
    return 0;
}
