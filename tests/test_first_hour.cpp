// A user's first hour (issue 44), below the front ends: a checkpoint's h3_defaults.json (parsed strictly,
// read by the model store, applied by the job builder to what a request leaves out, with the caption
// vocabulary's warning), output paths prepared before any compute (folders created, a file where a folder
// is wanted refused, extensions), the slow-job estimate from the DiT FLOPs and a measured rate, human FLOP
// rates, the --size suggestion and the documented field aliases.
#include "cache/work.h"
#include "io/output_path.h"
#include "model/tiny/tiny_checkpoint.h"
#include "pipeline/cost_estimate.h"
#include "pipeline/job_builder.h"
#include "runtime/checkpoint_defaults.h"
#include "runtime/model_store.h"
#include "serve/wire/video_request.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace fs = std::filesystem;
using namespace h3;

namespace {

const fs::path kWork = fs::path(H3_BINARY_DIR) / "test_first_hour";

std::string tiny(const std::string& name, const std::string& defaults_json) {
    const fs::path d = kWork / name;
    if (!fs::exists(d / "model_index.json")) {
        fs::remove_all(d);
        Status s = model::write_tiny_checkpoint({.dir = d.string(), .seed = 3});
        EXPECT_TRUE(s.ok()) << s.to_string();
    }
    if (defaults_json.empty())
        fs::remove(d / runtime::kCheckpointDefaultsFile);
    else
        std::ofstream(d / runtime::kCheckpointDefaultsFile) << defaults_json;
    return d.string();
}

bool contains(const std::string& s, const std::string& needle) {
    return s.find(needle) != std::string::npos;
}

} // namespace

TEST(CheckpointDefaults, ParsesAndRefusesWhatItCannotUse) {
    auto d = runtime::parse_checkpoint_defaults(
        nlohmann::json::parse(R"({"what": "x", "size": "128x64", "frames": 107, "num_inference_steps": 30,
                                  "reference_image_edge": 64, "vocabulary": ["red", "a", "ball", "a"]})"),
        "h3_defaults.json");
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(*d->size, "128x64");
    EXPECT_EQ(*d->frames, 107);
    EXPECT_EQ(*d->num_inference_steps, 30);
    EXPECT_EQ(*d->reference_image_edge, 64);
    EXPECT_EQ(d->vocabulary, (std::vector<std::string>{"a", "ball", "red"}));
    EXPECT_EQ(d->describe(), "128x64, 107 frames, 30 steps");
    const struct {
        const char* json;
        const char* needle;
    } bad[] = {{R"({"steps": 30})", "unknown field 'steps'"},
               {R"({"size": "big"})", "size must be a string \"WxH\""},
               {R"({"size": 128})", "size must be"},
               {R"({"frames": 0})", "frames"},
               {R"({"num_inference_steps": 1001})", "num_inference_steps"},
               {R"({"num_inference_steps": 2.5})", "num_inference_steps"},
               {R"({"vocabulary": ["Red"]})", "vocabulary[0] must be one lower-case word"},
               {R"({"vocabulary": ["two words"]})", "vocabulary[0]"},
               {R"([1])", "must be a JSON object"}};
    for (const auto& b : bad) {
        auto r = runtime::parse_checkpoint_defaults(nlohmann::json::parse(b.json), "f.json");
        ASSERT_FALSE(r.ok()) << b.json;
        EXPECT_TRUE(contains(r.status().message(), b.needle)) << b.json << ": " << r.status().message();
        EXPECT_TRUE(contains(r.status().message(), "f.json")) << r.status().message();
    }
}

TEST(CheckpointDefaults, WordsOutsideTheVocabulary) {
    const std::vector<std::string> vocab = {"a", "ball", "bounces", "red", "up"};
    EXPECT_EQ(runtime::words_outside_vocabulary("A RED ball bounces up", vocab), std::vector<std::string>{});
    EXPECT_EQ(runtime::words_outside_vocabulary("a cat, a CAT's 'piano'; red-ball!", vocab),
              (std::vector<std::string>{"cat", "cat's", "piano"}));
    EXPECT_EQ(runtime::words_outside_vocabulary("<Picture 1> bounces up", vocab), std::vector<std::string>{});
    EXPECT_EQ(runtime::words_outside_vocabulary("anything at all", {}), std::vector<std::string>{});
}

TEST(CheckpointDefaults, TheBuilderAppliesThemToWhatTheRequestLeavesOut) {
    const std::string dir = tiny("defaults", R"({"size": "64x32", "frames": 124, "num_inference_steps": 3,
                                                 "vocabulary": ["a", "red", "ball"]})");
    auto store = runtime::ModelStore::open(dir, runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    ASSERT_TRUE((*store)->info().defaults.has_value());
    const pipeline::JobBuilder builder((*store)->info());
    pipeline::JobInput in;
    in.prompt = "a red cat plays the piano";
    in.seed = 1;
    auto job = builder.build(in);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->geometry.width, 64);
    EXPECT_EQ(job->geometry.height, 32);
    EXPECT_EQ(job->geometry.frames, 124);
    EXPECT_EQ(job->steps, 3);
    EXPECT_EQ(job->checkpoint_defaults, "size 64x32, frames 124, num_inference_steps 3");
    ASSERT_EQ(job->warnings.size(), 1u);
    EXPECT_TRUE(contains(job->warnings[0], "prompt: the words 'cat', 'plays', 'the', 'piano' are outside"))
        << job->warnings[0];
    EXPECT_TRUE(contains(job->warnings[0], "the words it knows: a, ball, red")) << job->warnings[0];
    // what the request says wins; an aspect replaces the default size; seconds replace the default frames
    pipeline::JobInput given = in;
    given.prompt = "a red ball";
    given.size = "96x64";
    given.seconds = 6.0; // 144 frames, snapped to 158
    given.num_inference_steps = 2;
    job = builder.build(given);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->geometry.width, 96);
    EXPECT_EQ(job->geometry.frames, 158);
    EXPECT_EQ(job->steps, 2);
    EXPECT_EQ(job->checkpoint_defaults, "");
    EXPECT_TRUE(job->warnings.empty());
    given.size.reset();
    given.aspect = "1:1";
    job = builder.build(given);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->geometry.width, job->geometry.height);
    // without a sidecar: the release defaults
    auto plain = runtime::ModelStore::open(tiny("plain", ""), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(plain.ok());
    EXPECT_FALSE((*plain)->info().defaults.has_value());
    job = pipeline::JobBuilder((*plain)->info()).build(in);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->geometry.width, 1344);
    EXPECT_EQ(job->steps, pipeline::kDefaultInferenceSteps);
    EXPECT_TRUE(job->warnings.empty());
    // a malformed sidecar fails the open, naming the file
    auto broken = runtime::ModelStore::open(tiny("broken", R"({"frames": "many"})"),
                                            runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_FALSE(broken.ok());
    EXPECT_TRUE(contains(broken.status().message(), "h3_defaults.json: frames")) << broken.status().message();
}

TEST(OutputPaths, PreparedBeforeCompute) {
    const fs::path w = kWork / "outputs";
    fs::remove_all(w);
    fs::create_directories(w);
    std::ofstream(w / "afile") << "x";
    pipeline::OutputRequest o;
    o.media = pipeline::media_targets_for((w / "new/sub/clip.mp4").string());
    o.latents = (w / "other/deep/x.st").string();
    std::string field;
    ASSERT_TRUE(pipeline::prepare_outputs(o, &field).ok());
    EXPECT_TRUE(fs::is_directory(w / "new/sub"));
    EXPECT_TRUE(fs::is_directory(w / "other/deep"));
    EXPECT_FALSE(fs::exists(w / "new/sub/clip.mp4")); // nothing written yet
    // a PNG folder is created itself
    o = {};
    o.media = pipeline::media_targets_for((w / "frames/").string());
    ASSERT_TRUE(pipeline::prepare_outputs(o, &field).ok());
    EXPECT_TRUE(fs::is_directory(w / "frames"));
    // errors name the field and the path
    const struct {
        std::string media, latents;
        const char* field;
        const char* needle;
    } bad[] = {{(w / "afile/x.mp4").string(), "", "output", "is a file, not a folder"},
               {(w / "x.mkv").string(), "", "output", "unknown extension '.mkv'"},
               {"", (w / "afile/x.st").string(), "save_latents", "is a file, not a folder"},
               {"", (w / "x.wav").string(), "save_latents", "safetensors"},
               {"", (w / "new").string(), "save_latents", "is a folder"}};
    for (const auto& b : bad) {
        o = {};
        if (!b.media.empty()) o.media = pipeline::media_targets_for(b.media);
        o.latents = b.latents;
        field.clear();
        Status s = pipeline::prepare_outputs(o, &field);
        ASSERT_FALSE(s.ok()) << b.media << b.latents;
        EXPECT_EQ(field, b.field);
        EXPECT_EQ(s.message().rfind(b.field, 0), 0u) << s.message();
        EXPECT_TRUE(contains(s.message(), b.needle)) << s.message();
        EXPECT_TRUE(contains(s.message(), b.media + b.latents)) << s.message();
    }
    Status s = io::prepare_output_path((w / "m.txt").string(), {.extensions = {".json"}});
    EXPECT_TRUE(contains(s.message(), "unknown extension '.txt'; give .json")) << s.message();
}

TEST(CostEstimate, FlopsRateAndWarning) {
    auto store =
        runtime::ModelStore::open(tiny("defaults", ""), runtime::PlacementPlan::per_job(Device::cpu()));
    ASSERT_TRUE(store.ok());
    auto rate = pipeline::cpu_flops_rate(**store);
    ASSERT_TRUE(rate.ok()) << rate.status().to_string();
    EXPECT_GT(*rate, 1e6); // any CPU does a million FLOP/s
    pipeline::JobInput in;
    in.random_prompt_embeds = 4;
    in.size = "64x32";
    in.frames = 107;
    in.num_inference_steps = 3;
    auto job = pipeline::JobBuilder((*store)->info(), {.flops_per_second = *rate}).build(in);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    const model::DitConfig& cfg = *(*store)->info().dit;
    EXPECT_DOUBLE_EQ(job->dit_flops,
                     2.0 * cfg.num_layers * cache::block_flops(cfg, pipeline::job_rows(*job)));
    ASSERT_TRUE(job->estimated_seconds.has_value());
    EXPECT_DOUBLE_EQ(*job->estimated_seconds, job->dit_flops / *rate);
    EXPECT_EQ(pipeline::slow_job_warning(*job, *rate), ""); // a tiny job is quick
    // the same job at a rate that makes it take an hour
    const std::string w = pipeline::slow_job_warning(
        [&] {
            pipeline::GenerationJob j = *job;
            j.estimated_seconds = 3600 * 2 + 600;
            return j;
        }(),
        2.5e9);
    EXPECT_TRUE(contains(w, "estimated at 2 h 10 min on the CPU")) << w;
    EXPECT_TRUE(contains(w, "at 2.50 GFLOP/s")) << w;
    EXPECT_TRUE(contains(w, "smaller job")) << w;
    // no rate: no estimate
    job = pipeline::JobBuilder((*store)->info()).build(in);
    ASSERT_TRUE(job.ok());
    EXPECT_FALSE(job->estimated_seconds.has_value());
}

TEST(HumanUnits, FlopRatesAndDurations) {
    EXPECT_EQ(cache::format_flops_rate(8.96e8), "896 MFLOP/s");
    EXPECT_EQ(cache::format_flops_rate(1.25e9), "1.25 GFLOP/s");
    EXPECT_EQ(cache::format_flops_rate(34e12), "34 TFLOP/s");
    EXPECT_EQ(cache::format_flops_rate(0), "0 FLOP/s");
    EXPECT_EQ(pipeline::format_duration(38), "38 s");
    EXPECT_EQ(pipeline::format_duration(14 * 60), "14 min");
    EXPECT_EQ(pipeline::format_duration(3 * 3600 + 5 * 60), "3 h 5 min");
}

TEST(FieldNames, SizeSuggestionAndTheStepsAlias) {
    int w = 0, h = 0;
    Status s = pipeline::parse_size("1344X768", w, h);
    EXPECT_TRUE(contains(s.message(), "did you mean 1344x768?")) << s.message();
    s = pipeline::parse_size("big", w, h);
    EXPECT_FALSE(contains(s.message(), "did you mean")) << s.message();
    // `steps` is num_inference_steps on the wire; both at once is an error naming the canonical field
    std::string field;
    auto r = api::read_video_body(nlohmann::json{{"prompt", "x"}, {"steps", 7}}, &field);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_EQ(*r->input.num_inference_steps, 7);
    r = api::read_video_body(nlohmann::json{{"prompt", "x"}, {"steps", 7}, {"num_inference_steps", 7}},
                             &field);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(field, "num_inference_steps");
    r = api::read_video_body(nlohmann::json{{"prompt", "x"}, {"steps", "seven"}}, &field);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(field, "num_inference_steps");
    // one limit for every front end
    EXPECT_EQ(pipeline::JobBuilderOptions{}.max_steps, runtime::kMaxInferenceSteps);
}
