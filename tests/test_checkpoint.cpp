#include "io/checkpoint.h"

#include "io/json_file.h"

#include <gtest/gtest.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <unistd.h>

#include "temp_dir.h"

namespace fs = std::filesystem;
using namespace h3;
using namespace h3::io;
using nlohmann::json;

namespace {

using test::TempDir;

const fs::path kOfficial = fs::path(H3_SOURCE_DIR) / ".." / "shared" / "h3-official";

// Copies files of `src` into `dst` (recursively), making the copies writable.
void copy_tree(const fs::path& src, const fs::path& dst) {
    fs::create_directories(dst);
    for (const auto& e : fs::recursive_directory_iterator(src)) {
        fs::path rel = fs::relative(e.path(), src);
        if (e.is_directory()) {
            fs::create_directories(dst / rel);
        } else if (e.is_regular_file()) {
            fs::create_directories((dst / rel).parent_path());
            fs::copy_file(e.path(), dst / rel, fs::copy_options::overwrite_existing);
            fs::permissions(dst / rel, fs::perms::owner_read | fs::perms::owner_write, fs::perm_options::add);
        }
    }
}

void write_text(const fs::path& p, const std::string& text) {
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
}

Tensor seq(int n, float start) {
    std::vector<float> v;
    for (int i = 0; i < n; ++i) v.push_back(start + static_cast<float>(i));
    return host_tensor_from(v, {n});
}

// Two shards in `dir` named `<prefix>-0000K-of-00002.safetensors` and the index
// `<prefix>.safetensors.index.json`.
std::string write_two_shards(const fs::path& dir, const std::string& prefix) {
    std::string s1 = prefix + "-00001-of-00002.safetensors", s2 = prefix + "-00002-of-00002.safetensors";
    EXPECT_TRUE(
        write_safetensors((dir / s1).string(), {{"b.weight", seq(4, 0)}, {"a.bias", seq(2, 10)}}).ok());
    EXPECT_TRUE(write_safetensors((dir / s2).string(), {{"c.weight", seq(6, 20)}}).ok());
    json index = {{"metadata", {{"total_size", 48}}},
                  {"weight_map", {{"b.weight", s1}, {"a.bias", s1}, {"c.weight", s2}}}};
    std::string index_path = (dir / (prefix + ".safetensors.index.json")).string();
    EXPECT_TRUE(write_json_file(index_path, index).ok());
    return index_path;
}

void expect_two_shard_set(const TensorSet& set) {
    EXPECT_EQ(set.names(), (std::vector<std::string>{"a.bias", "b.weight", "c.weight"}));
    EXPECT_EQ(set.files().size(), 2u);
    EXPECT_EQ(set.total_bytes(), 48u);
    ASSERT_NE(set.info("c.weight"), nullptr);
    EXPECT_EQ(set.info("c.weight")->shape, (std::vector<int64_t>{6}));
    EXPECT_EQ(set.info("zzz"), nullptr);
    EXPECT_FALSE(set.contains("zzz"));
    auto c = set.tensor("c.weight");
    ASSERT_TRUE(c.ok()) << c.status().to_string();
    EXPECT_TRUE(c->read_only());
    EXPECT_EQ(to_f32_vector(c.value()).value(), (std::vector<float>{20, 21, 22, 23, 24, 25}));
    EXPECT_EQ(to_f32_vector(set.tensor("a.bias").value()).value(), (std::vector<float>{10, 11}));
    auto missing = set.tensor("zzz");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

void expect_message(const Status& st, ErrorCode code, std::initializer_list<std::string> parts) {
    EXPECT_EQ(st.code(), code) << st.to_string();
    for (const auto& p : parts)
        EXPECT_NE(st.message().find(p), std::string::npos) << "'" << p << "' in " << st.message();
}

} // namespace

// ---- TensorSet
// ----------------------------------------------------------------------------------------------

TEST(TensorSet, ShardedRoundTripDiffusersNames) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "diffusion_pytorch_model");
    for (const std::string& p : {index, dir.str()}) {
        auto set = TensorSet::open(p);
        ASSERT_TRUE(set.ok()) << set.status().to_string();
        expect_two_shard_set(set.value());
    }
}

TEST(TensorSet, ShardedRoundTripModelNames) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "model");
    for (const std::string& p : {index, dir.str()}) {
        auto set = TensorSet::open(p);
        ASSERT_TRUE(set.ok()) << set.status().to_string();
        expect_two_shard_set(set.value());
        EXPECT_NE(set->files()[0].find("model-00001-of-00002.safetensors"), std::string::npos);
    }
}

TEST(TensorSet, SingleFileAndFolderWithOneFile) {
    TempDir dir("checkpoint");
    std::string file = dir.str("weights.safetensors");
    ASSERT_TRUE(write_safetensors(file, {{"x", seq(3, 1)}, {"y", seq(1, 5)}}).ok());
    for (const std::string& p : {file, dir.str()}) {
        auto set = TensorSet::open(p);
        ASSERT_TRUE(set.ok()) << set.status().to_string();
        EXPECT_EQ(set->names(), (std::vector<std::string>{"x", "y"}));
        EXPECT_EQ(set->files(), (std::vector<std::string>{file}));
        EXPECT_EQ(set->total_bytes(), 16u);
        EXPECT_EQ(to_f32_vector(set->tensor("x").value()).value(), (std::vector<float>{1, 2, 3}));
    }
}

TEST(TensorSet, MissingShard) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "model");
    fs::remove(dir.path() / "model-00002-of-00002.safetensors");
    auto set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kNotFound,
                   {index, "model-00002-of-00002.safetensors", "missing"});
}

TEST(TensorSet, IndexNamesTensorItsShardLacks) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "diffusion_pytorch_model");
    json j = {{"weight_map",
               {{"b.weight", "diffusion_pytorch_model-00001-of-00002.safetensors"},
                {"a.bias", "diffusion_pytorch_model-00001-of-00002.safetensors"},
                {"c.weight", "diffusion_pytorch_model-00001-of-00002.safetensors"}}}};
    ASSERT_TRUE(write_json_file(index, j).ok());
    auto set = TensorSet::open(dir.str());
    ASSERT_FALSE(set.ok());
    expect_message(
        set.status(), ErrorCode::kBadInput,
        {index, "'c.weight'", "diffusion_pytorch_model-00001-of-00002.safetensors", "does not contain"});
}

TEST(TensorSet, TensorInTwoShards) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "model");
    ASSERT_TRUE(write_safetensors(dir.str("model-00002-of-00002.safetensors"),
                                  {{"c.weight", seq(6, 20)}, {"a.bias", seq(2, 0)}})
                    .ok());
    auto set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kBadInput, {index, "'a.bias'", "two shards"});
}

TEST(TensorSet, InvalidIndexJson) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "model");
    write_text(index, "{\"weight_map\": {\"a\": ");
    auto set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kBadInput, {index, "JSON"});

    write_text(index, R"({"metadata": {}})");
    set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kBadInput, {index, "weight_map"});

    write_text(index, R"({"weight_map": {"a.bias": 3}})");
    set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kBadInput, {index, "'a.bias'", "shard file name"});

    write_text(index, R"({"weight_map": {"a.bias": "../escape.safetensors"}})");
    set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kBadInput, {index, "relative"});
}

TEST(TensorSet, BadShardFileIsNamed) {
    TempDir dir("checkpoint");
    std::string index = write_two_shards(dir.path(), "model");
    write_text(dir.path() / "model-00002-of-00002.safetensors", "garbage");
    auto set = TensorSet::open(index);
    ASSERT_FALSE(set.ok());
    expect_message(set.status(), ErrorCode::kBadInput,
                   {index, "model-00002-of-00002.safetensors", "truncated"});
}

TEST(TensorSet, AmbiguousOrEmptyFolder) {
    TempDir dir("checkpoint");
    auto empty = TensorSet::open(dir.str());
    ASSERT_FALSE(empty.ok());
    expect_message(empty.status(), ErrorCode::kNotFound, {dir.str(), "0 .safetensors"});

    ASSERT_TRUE(write_safetensors(dir.str("a.safetensors"), {{"x", seq(1, 0)}}).ok());
    ASSERT_TRUE(write_safetensors(dir.str("b.safetensors"), {{"y", seq(1, 0)}}).ok());
    auto two = TensorSet::open(dir.str());
    ASSERT_FALSE(two.ok());
    expect_message(two.status(), ErrorCode::kNotFound, {"a.safetensors", "b.safetensors", "exactly one"});

    write_text(dir.path() / "a.safetensors.index.json", R"({"weight_map": {"x": "a.safetensors"}})");
    write_text(dir.path() / "b.safetensors.index.json", R"({"weight_map": {"y": "b.safetensors"}})");
    auto idx = TensorSet::open(dir.str());
    ASSERT_FALSE(idx.ok());
    expect_message(idx.status(), ErrorCode::kBadInput, {"2 index files", "exactly one"});

    auto gone = TensorSet::open(dir.str("nothing.safetensors"));
    ASSERT_FALSE(gone.ok());
    EXPECT_EQ(gone.status().code(), ErrorCode::kNotFound);
}

// ---- discovery: synthetic layouts (always run)
// ---------------------------------------------------------------

TEST(Discover, SyntheticDiffusersLayout) {
    TempDir dir("checkpoint");
    json index = {
        {"_class_name", "MiniMaxH3ModularPipeline"},
        {"transformer", {"diffusers", "MiniMaxH3Transformer3DModel", {{"subfolder", "transformer"}}}},
        {"vae", {"diffusers", "AutoencoderKLMiniMaxH3"}},
        {"text_encoder", {"transformers", "Qwen3VLForConditionalGeneration"}},
        {"scheduler", {"diffusers", "MiniMaxH3Scheduler"}},
        {"absent", nullptr}};
    ASSERT_TRUE(write_json_file(dir.str("model_index.json"), index).ok());
    write_text(dir.path() / "transformer" / "config.json",
               R"({"_class_name": "MiniMaxH3Transformer3DModel"})");
    ASSERT_TRUE(
        write_safetensors(dir.str("transformer/diffusion_pytorch_model.safetensors"), {{"w", seq(2, 0)}})
            .ok());
    write_text(dir.path() / "vae" / "config.json", R"({"_class_name": "AutoencoderKLMiniMaxH3"})");
    write_text(dir.path() / "scheduler" / "scheduler_config.json", R"({"shift": 7.5})");
    write_text(dir.path() / "audio_scheduler" / "scheduler_config.json", R"({"shift": 2.0})");

    auto d = discover_checkpoint(dir.str() + "/");
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->layout, CheckpointLayout::kDiffusers);
    EXPECT_STREQ(layout_name(d->layout), "diffusers");
    EXPECT_EQ(fs::path(d->root), fs::absolute(dir.path()).lexically_normal());
    ASSERT_EQ(d->components.size(), 3u) << "text_encoder has no folder, absent is null";
    const Component* t = d->find("transformer");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->kind, "MiniMaxH3Transformer3DModel");
    EXPECT_TRUE(t->has_weights);
    EXPECT_EQ(fs::path(t->config_path), fs::path(t->dir) / "config.json");
    ASSERT_NE(d->find("vae"), nullptr);
    EXPECT_FALSE(d->find("vae")->has_weights);
    EXPECT_EQ(d->find("text_encoder"), nullptr);
    ASSERT_NE(d->find("scheduler"), nullptr);
    EXPECT_EQ(fs::path(d->find("scheduler")->config_path).filename(), "scheduler_config.json");
    ASSERT_TRUE(d->video_shift.has_value());
    EXPECT_DOUBLE_EQ(*d->video_shift, 7.5);
    ASSERT_TRUE(d->audio_shift.has_value());
    EXPECT_DOUBLE_EQ(*d->audio_shift, 2.0);

    write_text(dir.path() / "model_index.json", R"({"vae": ["diffusers"]})");
    auto bad = discover_checkpoint(dir.str());
    ASSERT_FALSE(bad.ok());
    expect_message(bad.status(), ErrorCode::kBadInput, {"model_index.json", "'vae'", "[library, class"});
}

TEST(Discover, BareComponentFolder) {
    TempDir dir("checkpoint");
    fs::path dit = dir.path() / "my_dit";
    write_text(dit / "config.json", R"({"_class_name": "MiniMaxH3DiTModel", "hidden_size": 8})");
    ASSERT_TRUE(write_safetensors((dit / "model.safetensors").string(), {{"w", seq(2, 0)}}).ok());
    auto d = discover_checkpoint(dit.string());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->layout, CheckpointLayout::kComponent);
    ASSERT_EQ(d->components.size(), 1u);
    EXPECT_EQ(d->components[0].name, "transformer");
    EXPECT_EQ(d->components[0].kind, "MiniMaxH3DiTModel");
    EXPECT_TRUE(d->components[0].has_weights);
    EXPECT_EQ(fs::path(d->components[0].dir), fs::absolute(dit));
    EXPECT_FALSE(d->video_shift.has_value());

    fs::path te = dir.path() / "qwen";
    write_text(te / "config.json", R"({"architectures": ["Qwen3VLForConditionalGeneration"]})");
    write_text(te / "model.safetensors.index.json", R"({"weight_map": {}})");
    auto d2 = discover_checkpoint(te.string());
    ASSERT_TRUE(d2.ok()) << d2.status().to_string();
    EXPECT_EQ(d2->components[0].name, "qwen");
    EXPECT_EQ(d2->components[0].kind, "Qwen3VLForConditionalGeneration");
    EXPECT_FALSE(d2->components[0].has_weights) << "index without shards";
}

TEST(Discover, RootMatchingNoLayout) {
    TempDir dir("checkpoint");
    auto d = discover_checkpoint(dir.str());
    ASSERT_FALSE(d.ok());
    expect_message(
        d.status(), ErrorCode::kNotFound,
        {dir.str(), "model_index.json", "FL2VA/model_index.json", "Ref2VA/model_index.json", "config.json"});
    write_text(dir.path() / "config.json", "{}");
    d = discover_checkpoint(dir.str());
    ASSERT_FALSE(d.ok());
    expect_message(d.status(), ErrorCode::kNotFound, {"no *.safetensors"});
    auto gone = discover_checkpoint(dir.str("does_not_exist"));
    ASSERT_FALSE(gone.ok());
    EXPECT_EQ(gone.status().code(), ErrorCode::kNotFound);
}

// ---- discovery: the official config and index files
// -----------------------------------------------------------

class OfficialLayout : public ::testing::Test {
protected:
    void SetUp() override {
        if (!fs::exists(kOfficial / "model_index.json")) GTEST_SKIP() << "no official files at " << kOfficial;
    }
};

TEST_F(OfficialLayout, Diffusers) {
    TempDir dir("checkpoint");
    for (const auto& e : fs::directory_iterator(kOfficial)) {
        std::string name = e.path().filename().string();
        if (name == "FL2VA" || name == "Ref2VA") continue;
        if (e.is_directory())
            copy_tree(e.path(), dir.path() / name);
        else
            fs::copy_file(e.path(), dir.path() / name);
    }
    auto d = discover_checkpoint(dir.str());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->layout, CheckpointLayout::kDiffusers);
    const std::pair<const char*, const char*> expected[] = {
        {"transformer", "MiniMaxH3Transformer3DModel"},
        {"transformer_ref", "MiniMaxH3Transformer3DModel"},
        {"text_encoder", "Qwen3VLForConditionalGeneration"},
        {"vae", "AutoencoderKLMiniMaxH3"},
        {"audio_vae", "AutoencoderKLMiniMaxH3Audio"},
        {"tokenizer", "Qwen2TokenizerFast"},
        {"processor", "Qwen3VLProcessor"},
        {"scheduler", "MiniMaxH3Scheduler"},
        {"audio_scheduler", "MiniMaxH3Scheduler"}};
    EXPECT_EQ(d->components.size(), std::size(expected));
    for (const auto& [name, kind] : expected) {
        const Component* c = d->find(name);
        ASSERT_NE(c, nullptr) << name;
        EXPECT_EQ(c->kind, kind) << name;
        EXPECT_EQ(fs::path(c->dir).filename(), name);
        EXPECT_FALSE(c->has_weights) << name << ": only config/index files were copied";
    }
    EXPECT_EQ(fs::path(d->find("transformer")->config_path).filename(), "config.json");
    ASSERT_TRUE(d->video_shift && d->audio_shift);
    EXPECT_DOUBLE_EQ(*d->video_shift, 12.0);
    EXPECT_DOUBLE_EQ(*d->audio_shift, 3.0);

    // Dropping in a shard makes the weights visible.
    ASSERT_TRUE(write_safetensors(dir.str("transformer/diffusion_pytorch_model-00001-of-00014.safetensors"),
                                  {{"proj_in.weight", seq(2, 0)}})
                    .ok());
    d = discover_checkpoint(dir.str());
    ASSERT_TRUE(d.ok());
    EXPECT_TRUE(d->find("transformer")->has_weights);

    // The official index names 14 shards; with one present the set names the first missing one.
    auto set = TensorSet::open(dir.str("transformer"));
    ASSERT_FALSE(set.ok());
    expect_message(
        set.status(), ErrorCode::kNotFound,
        {"diffusion_pytorch_model.safetensors.index.json", "diffusion_pytorch_model-00002-of-00014"});
}

TEST_F(OfficialLayout, Original) {
    TempDir dir("checkpoint");
    copy_tree(kOfficial / "FL2VA", dir.path() / "FL2VA");
    copy_tree(kOfficial / "Ref2VA", dir.path() / "Ref2VA");
    auto d = discover_checkpoint(dir.str());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->layout, CheckpointLayout::kOriginal);
    const Component* t = d->find("transformer");
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(t->kind, "MiniMaxH3DiTModel");
    EXPECT_EQ(fs::path(t->dir), fs::absolute(dir.path() / "FL2VA" / "transformer"));
    ASSERT_NE(d->find("video_vae"), nullptr);
    EXPECT_EQ(d->find("video_vae")->kind, "MiniMaxH3VideoVAE");
    ASSERT_NE(d->find("audio_vae"), nullptr);
    EXPECT_EQ(d->find("audio_vae")->kind, "MiniMaxH3AudioVAE");
    EXPECT_EQ(d->find("transformer_ref"), nullptr) << "the mirror's Ref2VA/ has no transformer folder";
    ASSERT_TRUE(d->video_shift && d->audio_shift);
    EXPECT_DOUBLE_EQ(*d->video_shift, 12.0);
    EXPECT_DOUBLE_EQ(*d->audio_shift, 3.0);

    // Ref2VA/transformer becomes transformer_ref; the video VAE's weights live in source/.
    copy_tree(kOfficial / "FL2VA" / "transformer", dir.path() / "Ref2VA" / "transformer");
    ASSERT_TRUE(
        write_safetensors(dir.str("FL2VA/video_vae/source/model.safetensors"), {{"w", seq(1, 0)}}).ok());
    d = discover_checkpoint(dir.str());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    const Component* r = d->find("transformer_ref");
    ASSERT_NE(r, nullptr);
    EXPECT_EQ(r->kind, "MiniMaxH3DiTModel");
    EXPECT_EQ(fs::path(r->dir), fs::absolute(dir.path() / "Ref2VA" / "transformer"));
    EXPECT_TRUE(d->find("video_vae")->has_weights);
    EXPECT_EQ(d->components.size(), 4u);

    // A partition folder opened directly.
    auto part = discover_checkpoint(dir.str("Ref2VA"));
    ASSERT_TRUE(part.ok()) << part.status().to_string();
    EXPECT_EQ(part->layout, CheckpointLayout::kOriginal);
    ASSERT_NE(part->find("transformer_ref"), nullptr);
    EXPECT_DOUBLE_EQ(part->video_shift.value_or(0), 12.0);
}

TEST_F(OfficialLayout, BothLayoutsPreferDiffusers) {
    TempDir dir("checkpoint");
    copy_tree(kOfficial, dir.path());
    auto d = discover_checkpoint(dir.str());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->layout, CheckpointLayout::kDiffusers);
    EXPECT_EQ(d->find("transformer")->kind, "MiniMaxH3Transformer3DModel");
}

TEST_F(OfficialLayout, BareComponentFromOfficialConfig) {
    TempDir dir("checkpoint");
    fs::path vae = dir.path() / "my_vae";
    copy_tree(kOfficial / "vae", vae);
    ASSERT_TRUE(
        write_safetensors((vae / "diffusion_pytorch_model.safetensors").string(), {{"w", seq(1, 0)}}).ok());
    fs::remove(vae / "diffusion_pytorch_model.safetensors.index.json");
    auto d = discover_checkpoint(vae.string());
    ASSERT_TRUE(d.ok()) << d.status().to_string();
    EXPECT_EQ(d->layout, CheckpointLayout::kComponent);
    ASSERT_EQ(d->components.size(), 1u);
    EXPECT_EQ(d->components[0].name, "my_vae");
    EXPECT_EQ(d->components[0].kind, "AutoencoderKLMiniMaxH3");
    EXPECT_TRUE(d->components[0].has_weights);

    fs::path dit = dir.path() / "dit";
    copy_tree(kOfficial / "transformer", dit);
    auto d2 = discover_checkpoint(dit.string());
    ASSERT_TRUE(d2.ok()) << d2.status().to_string();
    EXPECT_EQ(d2->components[0].name, "transformer");
    EXPECT_EQ(d2->components[0].kind, "MiniMaxH3Transformer3DModel");
    EXPECT_FALSE(d2->components[0].has_weights);
}
