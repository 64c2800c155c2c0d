// The LoRA / few-step job fields on the seam (pipeline/job_lora.h through the one JobBuilder): every error
// names its field and no flag; preset steps and shifts with explicit fields winning; run-time adapters
// resolved through an AdapterLibrary (cached: the second job shares the first one's set); merged jobs checked
// against the store's merged set.
#include "model/lora/lora_file.h"
#include "model/lora/lora_random.h"
#include "model/tiny/tiny_checkpoint.h"
#include "pipeline/job_builder.h"
#include "runtime/adapter_library.h"
#include "runtime/model_store.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>

namespace fs = std::filesystem;
using namespace h3;

namespace {

const fs::path kWork = fs::path(H3_BINARY_DIR) / "test_job_lora";

struct Fixture {
    std::unique_ptr<runtime::ModelStore> store;
    std::unique_ptr<runtime::AdapterLibrary> library;
};

Fixture open_tiny() {
    Fixture f;
    const fs::path d = kWork / "tiny";
    fs::create_directories(kWork / "loras");
    if (!fs::exists(d / "model_index.json")) {
        Status s = model::write_tiny_checkpoint({.dir = d.string(), .seed = 3});
        EXPECT_TRUE(s.ok()) << s.to_string();
    }
    auto a =
        model::random_lora_adapter(model::tiny_dit_config(), {.rank = 4, .dtype = DType::kF32, .seed = 5});
    EXPECT_TRUE(a.ok());
    EXPECT_TRUE(model::write_lora_file((kWork / "loras" / "a.safetensors").string(), *a).ok());
    auto store = runtime::ModelStore::open(d.string(), runtime::PlacementPlan::per_job(Device::cpu()));
    EXPECT_TRUE(store.ok()) << store.status().to_string();
    f.store = std::move(store).value();
    auto lib = runtime::AdapterLibrary::open({.dir = (kWork / "loras").string(),
                                              .config = *f.store->info().dit,
                                              .ctx = f.store->context(),
                                              .dtype = DType::kBF16});
    EXPECT_TRUE(lib.ok()) << lib.status().to_string();
    f.library = std::move(lib).value();
    return f;
}

pipeline::JobInput request() {
    pipeline::JobInput in;
    in.prompt = "a ball";
    in.size = "64x32";
    in.frames = 107;
    in.seed = 11;
    return in;
}

} // namespace

TEST(JobLora, ErrorsNameTheFieldNeverAFlag) {
    Fixture f = open_tiny();
    const pipeline::JobBuilder with_library(f.store->info(), {.lora = {.library = f.library.get()}});
    const pipeline::JobBuilder without(f.store->info());
    struct Case {
        const pipeline::JobBuilder* builder;
        std::function<void(pipeline::LoraJobInput&)> edit;
        const char* field;
        const char* needle;
    } cases[] = {
        {&with_library,
         [](auto& a) {
             a.lora = {{"", 1.0}};
         },
         "lora", "path is empty"},
        {&with_library,
         [](auto& a) {
             a.lora = {{"a.safetensors", std::nan("")}};
         },
         "lora", "finite"},
        {&with_library,
         [](auto& a) {
             a.lora = {{"../a.safetensors", 1.0}};
         },
         "lora", ".."},
        {&with_library,
         [](auto& a) {
             a.lora = {{"missing.safetensors", 1.0}};
         },
         "lora", "missing"},
        {&without,
         [](auto& a) {
             a.lora = {{"a.safetensors", 1.0}};
         },
         "lora", "no adapter library"},
        {&with_library,
         [](auto& a) {
             a.lora = {{"a.safetensors", 1.0}};
             a.lora_mode = "merged";
         },
         "lora", "merged adapters are fixed"},
        {&with_library,
         [](auto& a) {
             a.lora.assign(pipeline::kMaxJobAdapters + 1, {"a.safetensors", 0.1});
         },
         "lora", "at most 16 adapters, got 17"},
        {&with_library, [](auto& a) { a.lora_mode = "sometimes"; }, "lora_mode", "runtime or merged"},
        {&with_library, [](auto& a) { a.preset = "turbo-1step"; }, "preset", "unknown preset"},
        {&with_library, [](auto& a) { a.video_shift = -1; }, "video_shift", "positive"},
        {&with_library, [](auto& a) { a.audio_shift = 0; }, "audio_shift", "positive"},
    };
    for (const Case& c : cases) {
        SCOPED_TRACE(c.field);
        pipeline::JobInput in = request();
        c.edit(in.adapters);
        std::string field;
        auto job = c.builder->build(std::move(in), &field);
        ASSERT_FALSE(job.ok());
        EXPECT_EQ(field, c.field);
        const std::string& m = job.status().message();
        EXPECT_EQ(m.rfind(c.field, 0), 0u) << m;
        EXPECT_NE(m.find(c.needle), std::string::npos) << m;
        EXPECT_EQ(m.find("--"), std::string::npos) << m;
    }
}

TEST(JobLora, PresetAndShiftsExplicitFieldsWin) {
    Fixture f = open_tiny();
    const pipeline::JobBuilder builder(f.store->info());
    pipeline::JobInput in = request();
    in.adapters.preset = "turbo-4step-768p";
    auto job = builder.build(in);
    ASSERT_TRUE(job.ok()) << job.status().to_string();
    EXPECT_EQ(job->steps, 5);
    EXPECT_EQ(job->video_shift, 6.0);
    EXPECT_EQ(job->audio_shift, 3.0);
    EXPECT_EQ(job->adapters.preset, "turbo-4step-768p");
    in.num_inference_steps = 3;
    in.adapters.audio_shift = 2.0;
    job = builder.build(in);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->steps, 3);
    EXPECT_EQ(job->video_shift, 6.0);
    EXPECT_EQ(job->audio_shift, 2.0);
    in.adapters.preset.reset();
    job = builder.build(in);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->video_shift, 12.0); // the checkpoint's scheduler
}

TEST(JobLora, RuntimeAdaptersResolvedOnceAndShared) {
    Fixture f = open_tiny();
    const pipeline::JobBuilder builder(f.store->info(), {.lora = {.library = f.library.get()}});
    pipeline::JobInput in = request();
    in.adapters.lora = {{"a.safetensors", 0.5}};
    auto first = builder.build(in);
    ASSERT_TRUE(first.ok()) << first.status().to_string();
    ASSERT_TRUE(first->adapters.set);
    EXPECT_GT(first->adapters.set->factor_count(), 0u);
    EXPECT_EQ(first->adapters.names(), std::vector<std::string>{"a.safetensors:0.5"});
    auto second = builder.build(in);
    ASSERT_TRUE(second.ok());
    EXPECT_EQ(f.library->cached_sets(), 1u); // read once
    // no adapters: no set; scale 0 leaves the adapter out
    auto none = builder.build(request());
    ASSERT_TRUE(none.ok());
    EXPECT_FALSE(none->adapters.set);
    in.adapters.lora = {{"a.safetensors", 0.0}};
    auto zero = builder.build(in);
    ASSERT_TRUE(zero.ok());
    EXPECT_TRUE(!zero->adapters.set || zero->adapters.set->empty());
}

TEST(JobLora, MergedJobsMatchTheStoresSet) {
    Fixture f = open_tiny();
    const std::string path = (kWork / "loras" / "a.safetensors").string();
    auto adapter = model::read_lora_file(path, *f.store->info().dit);
    ASSERT_TRUE(adapter.ok());
    const std::vector<std::string> names = {pipeline::lora_use_name(path, 0.8)};
    ASSERT_TRUE(
        f.store->set_merged_adapters({{std::make_shared<const model::LoraAdapter>(*adapter), 0.8f}}, names)
            .ok());
    const pipeline::JobBuilder builder(f.store->info(), {.lora = {.merged = names}});
    pipeline::JobInput in = request();
    in.adapters.lora = {{path, 0.8}};
    in.adapters.lora_mode = "merged";
    std::string field;
    EXPECT_TRUE(builder.build(in, &field).ok());
    in.adapters.lora = {{path, 0.5}};
    EXPECT_FALSE(builder.build(in, &field).ok());
    EXPECT_EQ(field, "lora");
    // a job without the merged adapters cannot run on that store's DiT
    auto plain = builder.build(request(), &field);
    ASSERT_FALSE(plain.ok());
    EXPECT_EQ(field, "lora");
}
