// The generation seam on tiny checkpoints (CPU): runtime::ModelStore (configs → LatentSpec, cross-checks at
// open naming both files and fields, leases, per-job release, resident components loaded once),
// pipeline::JobBuilder (field-named errors, no CLI flag in them) and pipeline::Generator end to end — t2va
// and fl2va on a checkpoint with non-release geometry (8 video latent channels, an 8x VAE, 16 audio latent
// channels, a 48-wide conditioner), decoded to MP4.
#include "io/json_file.h"
#include "io/media_reader.h"
#include "io/media_writer.h"
#include "pipeline/generator.h"
#include "pipeline/job_builder.h"
#include "runtime/model_store.h"
#include "tiny_checkpoint_once.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <functional>

namespace fs = std::filesystem;
using namespace h3;
using runtime::Component;

namespace {

const fs::path kWork = fs::path(H3_BINARY_DIR) / "test_generator";

// A tiny checkpoint written once per geometry (and name).
std::string tiny(const std::string& name, model::TinyGeometry geometry = {}) {
    return test::tiny_checkpoint_once(kWork / name, 3, model::TinyVariant::kBase, geometry);
}

model::TinyGeometry other_geometry() {
    return {.latent_channels = 8, .vae_stride = 8, .audio_latent_channels = 16, .text_dim = 48};
}

io::DecodedImage pattern(int w, int h) {
    io::DecodedImage d;
    d.image = io::RgbImage(w, h);
    for (size_t i = 0; i < d.image.pixels.size(); ++i)
        d.image.pixels[i] = static_cast<uint8_t>((i * 13) % 251);
    return d;
}

pipeline::JobInput request(const std::string& prompt, const std::string& size) {
    pipeline::JobInput in;
    in.prompt = prompt;
    in.size = size;
    in.frames = 107;
    in.num_inference_steps = 3;
    in.seed = 11;
    return in;
}

// Copies `src` to `dst` with one config field changed.
std::string edited(const std::string& src, const std::string& dst, const std::string& config,
                   const std::function<void(nlohmann::json&)>& edit) {
    const fs::path d = kWork / dst;
    fs::remove_all(d);
    fs::copy(src, d, fs::copy_options::recursive);
    const std::string path = (d / config).string();
    auto j = io::read_json_file(path);
    EXPECT_TRUE(j.ok());
    edit(*j);
    EXPECT_TRUE(io::write_json_file(path, *j).ok());
    return d.string();
}

} // namespace

TEST(ModelStore, LatentSpecFromTheConfigs) {
    auto store = runtime::ModelStore::open(tiny("other", other_geometry()),
                                           runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    const model::LatentSpec& s = (*store)->spec();
    EXPECT_EQ(s.latent_channels, 8);
    EXPECT_EQ(s.spatial_compression, 8);
    EXPECT_EQ(s.canvas_multiple(), 16);
    EXPECT_EQ(s.audio_latent_channels, 16);
    EXPECT_EQ(s.text_dim, 48);
    EXPECT_EQ(s.frames_per_chunk, 17);
    EXPECT_EQ(s.latents_per_chunk, 5);
    EXPECT_EQ(s.audio_latents_per_second(), 40.0);
    for (Component c : runtime::kAllComponents) EXPECT_TRUE((*store)->info().has(c)) << component_name(c);
    // a per-job plan loads nothing at open
    for (Component c : runtime::kAllComponents) EXPECT_EQ((*store)->loads(c), 0u) << component_name(c);
    auto released =
        runtime::ModelStore::open(tiny("default"), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(released.ok());
    model::LatentSpec expected; // the released VAEs' latent spaces, the tiny text width
    expected.text_dim = 64;
    EXPECT_EQ((*released)->spec(), expected);
}

TEST(ModelStore, ConfigMismatchesAreRejectedAtOpen) {
    const std::string base = tiny("default");
    struct Case {
        const char* name;
        const char* config;
        std::function<void(nlohmann::json&)> edit;
        std::vector<std::string> needles;
    } cases[] = {
        {"in_channels",
         "transformer/config.json",
         [](nlohmann::json& j) { j["in_channels"] = 8; },
         {"transformer/config.json", "in_channels 8", "vae/config.json", "latent_channels 24"}},
        {"vae_latents",
         "vae/config.json",
         [](nlohmann::json& j) {
             j["latent_channels"] = 16;
             j["latents_mean"] = std::vector<float>(16, 0.0f);
             j["latents_std"] = std::vector<float>(16, 1.0f);
         },
         {"transformer/config.json", "in_channels 24", "vae/config.json", "latent_channels 16"}},
        {"audio",
         "transformer/config.json",
         [](nlohmann::json& j) { j["audio_in_channels"] = 16; },
         {"transformer/config.json", "audio_in_channels 16", "audio_vae/config.json", "latent_channels 32"}},
        {"text",
         "transformer/config.json",
         [](nlohmann::json& j) { j["text_dim"] = 48; },
         {"transformer/config.json", "text_dim 48", "text_encoder/config.json",
          "text_config.hidden_size 64"}},
        {"ref",
         "transformer_ref/config.json",
         [](nlohmann::json& j) { j["in_channels"] = 8; },
         {"transformer_ref/config.json", "in_channels 8", "transformer/config.json", "in_channels 24"}},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.name);
        const std::string dir = edited(base, std::string("mismatch_") + c.name, c.config, c.edit);
        auto store = runtime::ModelStore::open(dir, runtime::PlacementPlan::per_job(Device::cpu()));
        ASSERT_FALSE(store.ok());
        EXPECT_EQ(store.status().code(), ErrorCode::kBadInput);
        for (const std::string& n : c.needles)
            EXPECT_NE(store.status().message().find(n), std::string::npos)
                << n << ": " << store.status().message();
    }
}

TEST(JobBuilder, ErrorsNameTheFieldNeverAFlag) {
    auto store = runtime::ModelStore::open(tiny("default"), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok());
    const pipeline::JobBuilder builder((*store)->info());
    struct Case {
        std::function<void(pipeline::JobInput&)> edit;
        const char* field;
        const char* needle;
    } cases[] = {
        {[](pipeline::JobInput& in) { in.size = "100x64"; }, "size", "multiple of 32"},
        {[](pipeline::JobInput& in) { in.size = "big"; }, "size", "1344x768"},
        {[](pipeline::JobInput& in) { in.aspect = "16:9"; }, "aspect", "exclusive"},
        {[](pipeline::JobInput& in) { in.frames = 400; }, "frames", "107 to 345"},
        {[](pipeline::JobInput& in) { in.num_inference_steps = 1; }, "num_inference_steps", "[2, 1000]"},
        {[](pipeline::JobInput& in) { in.prompt.reset(); }, "prompt", "required"},
        {[](pipeline::JobInput& in) { in.quality = "ultra"; }, "quality", "lossless or high"},
        {[](pipeline::JobInput& in) { in.cache = "dbcache:Fn=1,refresh=8"; }, "cache", "outside"},
        {[](pipeline::JobInput& in) { in.task = "fl2va"; }, "task", "first_frame"},
        {[](pipeline::JobInput& in) {
             in.first_frame = pattern(40, 30);
             in.size.reset();
             in.aspect = "1:1";
         },
         "aspect", "does not apply with keyframes"},
        {[](pipeline::JobInput& in) {
             in.prompt.reset();
             in.random_prompt_embeds = 4;
             pipeline::ReferenceMedia r;
             r.image = pattern(40, 30).image;
             in.references.push_back(r);
         },
         "prompt", "required with references"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.field);
        pipeline::JobInput in = request("a ball", "64x32");
        c.edit(in);
        std::string field;
        auto job = builder.build(std::move(in), &field);
        ASSERT_FALSE(job.ok());
        EXPECT_EQ(field, c.field);
        const std::string& m = job.status().message();
        EXPECT_EQ(m.rfind(c.field, 0), 0u) << m;
        EXPECT_NE(m.find(c.needle), std::string::npos) << m;
        EXPECT_EQ(m.find("--"), std::string::npos) << m;
    }
    // the same request builds, with the checkpoint's defaults filled in
    auto job = builder.build(request("a ball", "64x32"));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->task, pipeline::Task::kT2va);
    EXPECT_EQ(job->geometry.frames, 107);
    EXPECT_EQ(job->video_shift, 12.0);
    EXPECT_EQ(job->audio_shift, 3.0);
}

TEST(Generator, NonReleaseGeometryT2vaAndFl2va) {
    // 8 latent channels, x8 VAE (canvas multiple 16: 48x32 is a valid size), 16 audio channels, text 48.
    auto store = runtime::ModelStore::open(tiny("other", other_geometry()),
                                           runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto generator = pipeline::Generator::create(**store);
    ASSERT_TRUE(generator.ok());
    const pipeline::JobBuilder builder((*store)->info());
    std::vector<pipeline::Stage> stages;
    std::vector<std::string> loads; // kLoad events: what was about to be read
    pipeline::JobEvents events;
    events.progress = [&](const pipeline::JobProgress& p) {
        if (p.stage == pipeline::Stage::kLoad) {
            loads.push_back(p.component);
            return;
        }
        if (stages.empty() || stages.back() != p.stage) stages.push_back(p.stage);
    };
    for (const bool fl2va : {false, true}) {
        SCOPED_TRACE(fl2va ? "fl2va" : "t2va");
        pipeline::JobInput in = request("a red ball", "48x32");
        if (fl2va) in.first_frame = pattern(40, 30);
        const std::string name = fl2va ? "fl2va" : "t2va";
        in.outputs.latents = (kWork / (name + ".safetensors")).string();
#ifdef H3_WITH_FFMPEG
        in.outputs.media.mp4 = (kWork / (name + ".mp4")).string();
#else
        in.outputs.media.wav = (kWork / (name + ".wav")).string(); // no MP4 writer in this build
#endif
        auto job = builder.build(std::move(in));
        ASSERT_TRUE(job.ok()) << job.status().to_string();
        EXPECT_EQ(job->task, fl2va ? pipeline::Task::kFl2va : pipeline::Task::kT2va);
        stages.clear();
        loads.clear();
        auto r = (*generator)->run(*job, events);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        EXPECT_EQ(r->video_latents.shape(), (Shape{1, 8, 32, 4, 6}));
        EXPECT_EQ(r->audio_latents.shape(), (Shape{2, 16, 178}));
        EXPECT_EQ(r->keyframes, fl2va ? 1 : 0);
        if (fl2va) EXPECT_GT(r->vision_rows, 0); // the keyframe reached the conditioner
#ifdef H3_WITH_FFMPEG
        EXPECT_EQ(r->frames, 107);
        EXPECT_EQ(r->width, 48);
        EXPECT_EQ(r->height, 32);
        EXPECT_GT(fs::file_size(kWork / (name + ".mp4")), 1000u);
#endif
        EXPECT_EQ(r->audio_samples, 178 * 800);
        EXPECT_TRUE(fs::exists(kWork / (name + ".safetensors")));
        EXPECT_EQ(stages, (std::vector<pipeline::Stage>{pipeline::Stage::kEncode, pipeline::Stage::kDenoise,
                                                        pipeline::Stage::kDecode, pipeline::Stage::kMux}));
        // every component this per-job store read was announced (a load event) before its stage
        const std::vector<std::string> want =
            fl2va
                ? std::vector<std::string>{"vae_encoder", "text_encoder", "vision_tower",
                                           "transformer", "vae_decoder",  "audio_vae_decoder"}
                : std::vector<std::string>{"text_encoder", "transformer", "vae_decoder", "audio_vae_decoder"};
        EXPECT_EQ(loads, want);
        const nlohmann::json m = r->metrics(job->task);
        EXPECT_EQ(m["task"], fl2va ? "fl2va" : "t2va");
        EXPECT_EQ(m["steps"], 2);
        EXPECT_EQ(m.contains("keyframe_seconds"), fl2va);
    }
    // per job: every component was released after its stage
    for (Component c : runtime::kAllComponents) EXPECT_FALSE((*store)->loaded(c)) << component_name(c);
    EXPECT_EQ((*store)->loads(Component::kVideoDecoder), 2u);
    EXPECT_EQ((*store)->loads(Component::kVideoEncoder), 1u);
    EXPECT_EQ((*store)->loads(Component::kTransformerRef), 0u);
}

TEST(Generator, AudioVaeWithOtherRatesKeepsTheOfficialAudioLength) {
    // Audio VAE rates [2, 2] (hop 4): the job has the official pipeline's int(round(107 / 24 * 40)) = 178
    // audio latents, not 107 / 24 * 8000 = 35,667 (which made a CPU job that never ends); the decoder then
    // turns each latent into its own 4 samples.
    model::TinyGeometry geometry;
    geometry.audio_hop = 4;
    auto store =
        runtime::ModelStore::open(tiny("hop4", geometry), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    EXPECT_EQ((*store)->spec().audio_hop, 4);
    auto generator = pipeline::Generator::create(**store);
    ASSERT_TRUE(generator.ok());
    const pipeline::JobBuilder builder((*store)->info());
    pipeline::JobInput in = request("a red ball", "64x32");
    in.outputs.latents = (kWork / "hop4.safetensors").string();
    in.outputs.media.wav = (kWork / "hop4.wav").string();
    auto job = builder.build(std::move(in));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_EQ(job->geometry.audio_latents, 178);
    auto r = (*generator)->run(*job, {});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(r->audio_latents.shape(), (Shape{2, 32, 178}));
    EXPECT_EQ(r->audio_samples, 178 * 4);
}

TEST(Generator, ResidentComponentsLoadOnce) {
    // The serving plan: DiT and decoders loaded at open and kept; two jobs read none of them again. The DiT
    // variants share a slot: a ref2va lease swaps transformer_ref in (transformer out) and back.
    auto store = runtime::ModelStore::open(
        tiny("default"), runtime::PlacementPlan::serving(Device::cpu(), runtime::ComputePrecision::kFp32,
                                                         runtime::Residency::kResident));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    runtime::ModelStore& s = **store;
    for (Component c : {Component::kTransformer, Component::kTextEncoder, Component::kVisionTower,
                        Component::kVideoDecoder, Component::kAudioDecoder})
        EXPECT_EQ(s.loads(c), 1u) << component_name(c);
    EXPECT_EQ(s.loads(Component::kTransformerRef), 0u);
    EXPECT_EQ(s.loads(Component::kVideoEncoder), 0u);
    auto generator = pipeline::Generator::create(s);
    ASSERT_TRUE(generator.ok());
    const pipeline::JobBuilder builder(s.info());
    for (int i = 0; i < 2; ++i) {
        pipeline::JobInput in = request("job " + std::to_string(i), "64x32");
        in.num_inference_steps = 2;
        in.outputs.media.wav = (kWork / ("resident" + std::to_string(i) + ".wav")).string();
        in.outputs.return_media = i == 1; // a binding's view: the decoded media in the report
        auto job = builder.build(std::move(in));
        ASSERT_TRUE(job.ok()) << job.status().to_string();
        auto r = (*generator)->run(*job, {});
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        if (i == 1) {
            EXPECT_EQ(r->decoded_frames.shape(), (Shape{107, 32, 64, 3}));
            EXPECT_EQ(r->decoded_audio.shape(), (Shape{2, 178 * 800}));
        } else {
            EXPECT_FALSE(r->decoded_frames.defined());
        }
        EXPECT_EQ(r->component_loads.at("audio_vae_decoder"), 1u);
        EXPECT_EQ(r->component_loads.at("transformer"), 1u);
    }
    EXPECT_TRUE(s.loaded(Component::kAudioDecoder));
    EXPECT_TRUE(s.loaded(Component::kTransformer));
    {
        auto ref = s.dit(Component::kTransformerRef);
        ASSERT_TRUE(ref.ok()) << ref.status().to_string();
        EXPECT_FALSE(s.loaded(Component::kTransformer)); // never two DiTs in memory
        auto other = s.dit(Component::kTransformer);
        EXPECT_FALSE(other.ok()); // the slot is leased
    }
    auto back = s.dit(Component::kTransformer);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(s.loads(Component::kTransformer), 2u);
    EXPECT_EQ(s.loads(Component::kTransformerRef), 1u);
    EXPECT_TRUE(s.loaded(Component::kTransformerRef) == false);
}

// Issue #45: the MP4 is encoded while the decoder works (pipeline/mp4_stream.h). The streamed file decodes
// to the same frames and audio as write_mp4 of the whole decoded clip (x264 is deterministic for the same
// settings and input: byte-equal frames, PSNR inf); and the job's kernel provenance names the CPU paths.
TEST(Generator, StreamedMp4EqualsTheWholeClipAndProvenanceSaysCpu) {
#ifndef H3_WITH_FFMPEG
    GTEST_SKIP() << "no MP4 writer in this build";
#else
    auto store = runtime::ModelStore::open(tiny("default"), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto generator = pipeline::Generator::create(**store);
    ASSERT_TRUE(generator.ok());
    const pipeline::JobBuilder builder((*store)->info());
    pipeline::JobInput in = request("a red ball", "64x32");
    in.num_inference_steps = 2;
    const std::string streamed = (kWork / "streamed.mp4").string(), whole = (kWork / "whole.mp4").string();
    in.outputs.media.mp4 = streamed;
    in.outputs.return_media = true;
    auto job = builder.build(std::move(in));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    auto r = (*generator)->run(*job, {});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    ASSERT_EQ(r->decoded_frames.shape(), (Shape{107, 32, 64, 3}));
    EXPECT_EQ(r->frames, 107);
    EXPECT_GT(r->mux_encode_seconds, 0.0);
    ASSERT_TRUE(io::write_mp4(whole, r->decoded_frames, r->decoded_audio, r->sample_rate).ok());
    auto a = io::read_mp4(streamed), b = io::read_mp4(whole);
    ASSERT_TRUE(a.ok() && b.ok()) << a.status().to_string() << b.status().to_string();
    ASSERT_EQ(a->frames.shape(), b->frames.shape());
    EXPECT_EQ(std::memcmp(a->frames.data(), b->frames.data(), a->frames.nbytes()), 0);
    ASSERT_TRUE(a->audio.defined() && b->audio.defined());
    ASSERT_EQ(a->audio.shape(), b->audio.shape());
    EXPECT_EQ(std::memcmp(a->audio.data(), b->audio.data(), a->audio.nbytes()), 0);

    // provenance: every op family the denoise ran, by its CPU implementation; no fallback
    const auto& denoise = r->kernels.at("denoise");
    EXPECT_EQ(denoise.at("dense_attention").size(), 1u);
    EXPECT_GT(denoise.at("dense_attention").at("cpu"), 0);
    EXPECT_GT(denoise.at("gemm").at("cpu-fp32"), 0) << "the per-job CPU plan computes in fp32";
    EXPECT_GT(denoise.at("block_graphs").at("cpu"), 0);
    EXPECT_EQ(denoise.count("sparse_attention"), 0u);
    EXPECT_EQ(denoise.count("fp8_quantization"), 0u);
    EXPECT_GT(r->kernels.at("decode").at("gemm").at("cpu-fp32"), 0) << "the decoders' GEMMs";
    EXPECT_TRUE(r->fallbacks.empty());
    const nlohmann::json m = r->metrics(job->task);
    EXPECT_EQ(m.at("kernels").at("denoise").at("dense_attention").begin().key(), "cpu");
    EXPECT_TRUE(m.at("fallbacks").is_array());
    EXPECT_TRUE(m.contains("mux_encode_seconds"));
    // the denoise stage adds up: its parts (the steps' own seconds among them) and what is around the call
    const nlohmann::json& parts = m.at("denoise_parts");
    double step_sum = 0;
    for (double s : r->step_seconds) step_sum += s;
    EXPECT_DOUBLE_EQ(parts.at("steps_seconds").get<double>(), step_sum);
    EXPECT_DOUBLE_EQ(parts.at("setup_seconds").get<double>(), r->setup_seconds);
    double sum = 0;
    for (const auto& [key, v] : parts.items()) {
        EXPECT_GE(v.get<double>(), 0.0) << key;
        sum += v.get<double>();
    }
    EXPECT_EQ(parts.size(), 7u) << parts.dump();
    EXPECT_GT(parts.at("noise_and_layout_seconds").get<double>(), 0.0);
    EXPECT_NEAR(sum, r->denoise_seconds, 1e-9) << parts.dump();
#endif
}

// fp8 asked on a FastH3 checkpoint (VSA by default): the compression gate is an e4m3 GEMM on the norm's
// e4m3 rows, so the blocks run the fused quantization the fp8 setting asks — no fallback, no warning (issue
// #45); the denoise names the e4m3 GEMMs, the sparse attention's CPU kernel and the fused quantization.
// (What still falls back — a gate kept in bf16, run-time LoRA — is tested on the DiT in test_dit_fp8.)
TEST(Generator, Fp8WithVsaRunsFusedQuantizationWithoutFallback) {
    const std::string d = test::tiny_checkpoint_once(kWork / "fasth3", 3, model::TinyVariant::kFastH3);
    auto store = runtime::ModelStore::open(
        d, runtime::PlacementPlan::per_job(Device::cpu(), runtime::ComputePrecision::kFp8));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    auto generator = pipeline::Generator::create(**store);
    ASSERT_TRUE(generator.ok());
    pipeline::JobInput in = request("a red ball", "64x32");
    in.num_inference_steps.reset(); // the contract's rungs
    in.outputs.latents = (kWork / "fasth3_fp8.safetensors").string();
    auto job = pipeline::JobBuilder((*store)->info()).build(std::move(in));
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    ASSERT_TRUE(job->attention.is_vsa());
    auto r = (*generator)->run(*job, {});
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_TRUE(r->fallbacks.empty()) << r->fallbacks[0].family << ": " << r->fallbacks[0].why;
    const nlohmann::json m = r->metrics(job->task);
    EXPECT_TRUE(m.at("fallbacks").empty()) << m.at("fallbacks").dump();
    const nlohmann::json& k = m.at("kernels");
    SCOPED_TRACE(k.dump());
    ASSERT_TRUE(k.contains("denoise"));
    const nlohmann::json& denoise = k.at("denoise");
    EXPECT_GT(denoise.value("/gemm/cpu-e4m3"_json_pointer, 0), 0);
    // the tiny DiT's head dim is 32: its attention stays bf16 (the e4m3 attention takes head dim 128)
    EXPECT_EQ(denoise.at("sparse_attention").size(), 1u);
    EXPECT_GT(denoise.value("/sparse_attention/cpu"_json_pointer, 0), 0);
    // the norms, the SwiGLU and the compression branch's gate add (to_out's input) write the e4m3 rows
    EXPECT_GT(denoise.value("/fp8_quantization/fused"_json_pointer, 0), 0);
    EXPECT_FALSE(k.contains("/encode/fp8_quantization"_json_pointer)) << "the text stack is not fp8";
}

// The record itself: a fallback noted many times is one entry (and one warning); notes outside a scope go
// nowhere.
TEST(Provenance, RecordCountsCallsAndKeepsOneFallbackPerReason) {
    ops::ProvenanceRecord record;
    {
        const ops::ProvenanceScope scope(&record);
        for (int block = 0; block < 3; ++block) // what a DiT's blocks note, each block
            ops::note_fallback(ops::OpFamily::kFp8Quantization, "fused", "unfused",
                               "run-time LoRA adapters read the blocks' bf16 rows");
        ops::note_impl(ops::OpFamily::kGemm, ops::gemm_impl_name(false, "e4m3"));
    }
    ops::note_impl(ops::OpFamily::kGemm, "outside the scope");
    const auto fallbacks = record.fallbacks();
    ASSERT_EQ(fallbacks.size(), 1u);
    EXPECT_EQ(fallbacks[0].family, "fp8_quantization");
    EXPECT_EQ(fallbacks[0].wanted, "fused");
    EXPECT_EQ(fallbacks[0].used, "unfused");
    const auto calls = record.calls();
    EXPECT_EQ(calls.at("job").at("fp8_quantization").at("unfused"), 3);
    EXPECT_EQ(calls.at("job").at("gemm").size(), 1u);
    EXPECT_EQ(calls.at("job").at("gemm").at("cpu-e4m3"), 1);
}
