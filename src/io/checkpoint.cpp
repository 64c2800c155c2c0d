#include "io/checkpoint.h"

#include "io/json_file.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <set>
#include <system_error>

namespace h3::io {

namespace fs = std::filesystem;

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_dir(const fs::path& p) {
    std::error_code ec;
    return fs::is_directory(p, ec);
}

bool is_file(const fs::path& p) {
    std::error_code ec;
    return fs::is_regular_file(p, ec);
}

// Sorted names of the regular files in `dir` whose names end with `suffix`.
std::vector<std::string> files_with_suffix(const fs::path& dir, const std::string& suffix) {
    std::vector<std::string> out;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
        std::string name = it->path().filename().string();
        if (ends_with(name, suffix) && is_file(it->path())) out.push_back(name);
    }
    std::sort(out.begin(), out.end());
    return out;
}

std::string join(const std::vector<std::string>& v) {
    std::string s;
    for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
    return s;
}

// A shard named by an index must be a relative path below the index's folder.
bool safe_shard_name(const std::string& name) {
    if (name.empty()) return false;
    fs::path p(name);
    if (p.is_absolute()) return false;
    for (const auto& part : p)
        if (part == "..") return false;
    return true;
}

} // namespace

// ---- TensorSet
// ----------------------------------------------------------------------------------------------

namespace {

Status add_shard_tensors(const std::vector<std::shared_ptr<SafetensorsFile>>& shards, size_t k,
                         std::map<std::string, size_t>* where, const std::string& context) {
    for (const TensorInfo& info : shards[k]->tensors()) {
        auto [it, inserted] = where->emplace(info.name, k);
        if (!inserted && it->second != k)
            return bad_input(context + "tensor '" + info.name +
                             "' is present in two shards: " + shards[it->second]->path() + " and " +
                             shards[k]->path() + ", expected it in exactly one");
    }
    return ok_status();
}

} // namespace

Result<TensorSet> TensorSet::open(const std::string& path) {
    fs::path p(path);
    std::error_code ec;
    if (!fs::exists(p, ec)) return not_found("checkpoint path " + path + " does not exist");

    TensorSet set;
    set.source_ = path;
    if (is_dir(p)) {
        auto indexes = files_with_suffix(p, ".index.json");
        if (indexes.size() > 1)
            return bad_input("folder " + path + " holds " + std::to_string(indexes.size()) +
                             " index files (" + join(indexes) + "), expected exactly one");
        if (indexes.size() == 1) return open((p / indexes[0]).string());
        auto files = files_with_suffix(p, ".safetensors");
        if (files.size() != 1)
            return not_found("folder " + path + " holds " + std::to_string(files.size()) +
                             " .safetensors files" + (files.empty() ? "" : " (" + join(files) + ")") +
                             " and no *.index.json, expected one index or exactly one .safetensors file");
        return open((p / files[0]).string());
    }

    if (!ends_with(path, ".json")) {
        auto file = SafetensorsFile::open(path);
        if (!file.ok()) return file.status();
        set.files_.push_back(path);
        set.shards_.push_back(std::make_shared<SafetensorsFile>(std::move(file).value()));
        H3_TRY(add_shard_tensors(set.shards_, 0, &set.where_, ""));
        return set;
    }

    // An index: {"metadata": {...}, "weight_map": {tensor: shard}}.
    H3_ASSIGN_OR_RETURN(nlohmann::json index, read_json_file(path));
    auto fail = [&](const std::string& what) { return bad_input("index " + path + ": " + what); };
    if (!index.is_object())
        return fail(std::string("is a JSON ") + index.type_name() + ", expected an object");
    auto wm = index.find("weight_map");
    if (wm == index.end() || !wm->is_object())
        return fail("missing 'weight_map' object (tensor name -> shard file)");
    if (wm->empty()) return fail("'weight_map' is empty, expected at least one tensor");

    std::map<std::string, size_t> shard_of_name; // shard file name -> shard index
    std::vector<std::pair<std::string, std::string>> entries;
    for (const auto& [tensor, shard] : wm->items()) {
        if (!shard.is_string())
            return fail("tensor '" + tensor + "' maps to " + shard.dump() + ", expected a shard file name");
        std::string shard_name = shard.get<std::string>();
        if (!safe_shard_name(shard_name))
            return fail("tensor '" + tensor + "' maps to '" + shard_name +
                        "', expected a file name relative to the index's folder");
        entries.emplace_back(tensor, shard_name);
        shard_of_name.emplace(shard_name, 0);
    }
    for (auto& [shard_name, k] : shard_of_name) { // shards in name order
        k = set.files_.size();
        set.files_.push_back((p.parent_path() / shard_name).string());
    }
    for (size_t k = 0; k < set.files_.size(); ++k) {
        const std::string& file_path = set.files_[k];
        if (!is_file(file_path))
            return not_found("index " + path + ": shard " + fs::path(file_path).filename().string() +
                             " is missing (expected at " + file_path + ")");
        auto file = SafetensorsFile::open(file_path);
        if (!file.ok()) return file.status().with_context("index " + path);
        set.shards_.push_back(std::make_shared<SafetensorsFile>(std::move(file).value()));
    }
    for (const auto& [tensor, shard_name] : entries) {
        size_t k = shard_of_name.at(shard_name);
        if (!set.shards_[k]->contains(tensor))
            return bad_input("index " + path + ": tensor '" + tensor + "' is mapped to shard " + shard_name +
                             ", but that shard does not contain it");
        set.where_[tensor] = k;
    }
    // Every tensor must live in exactly one shard (tensors the index does not list are kept too).
    for (size_t k = 0; k < set.shards_.size(); ++k)
        H3_TRY(add_shard_tensors(set.shards_, k, &set.where_, "index " + path + ": "));
    return set;
}

std::vector<std::string> TensorSet::names() const {
    std::vector<std::string> out;
    out.reserve(where_.size());
    for (const auto& [name, k] : where_) out.push_back(name);
    return out;
}

bool TensorSet::contains(const std::string& name) const {
    return where_.count(name) != 0;
}

const TensorInfo* TensorSet::info(const std::string& name) const {
    auto it = where_.find(name);
    return it == where_.end() ? nullptr : shards_[it->second]->find(name);
}

Result<Tensor> TensorSet::tensor(const std::string& name) const {
    auto it = where_.find(name);
    if (it == where_.end()) return not_found("checkpoint " + source_ + ": no tensor named '" + name + "'");
    return shards_[it->second]->tensor(name);
}

uint64_t TensorSet::total_bytes() const {
    uint64_t total = 0;
    for (const auto& [name, k] : where_) {
        const TensorInfo* i = shards_[k]->find(name);
        total += i->end - i->begin;
    }
    return total;
}

// ---- discovery
// ----------------------------------------------------------------------------------------------

const Component* CheckpointDir::find(const std::string& name) const {
    for (const Component& c : components)
        if (c.name == name) return &c;
    return nullptr;
}

const char* layout_name(CheckpointLayout l) {
    switch (l) {
    case CheckpointLayout::kDiffusers:
        return "diffusers";
    case CheckpointLayout::kOriginal:
        return "original";
    case CheckpointLayout::kComponent:
        return "component";
    }
    return "unknown";
}

namespace {

// Weights in the folder or one level below (the original video_vae keeps them in source/).
bool holds_safetensors(const fs::path& dir) {
    if (!files_with_suffix(dir, ".safetensors").empty()) return true;
    std::error_code ec;
    for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
        if (is_dir(it->path()) && !files_with_suffix(it->path(), ".safetensors").empty()) return true;
    return false;
}

// config.json, else the component's own *_config.json (scheduler, tokenizer, processor folders).
std::string component_config(const fs::path& dir) {
    if (is_file(dir / "config.json")) return (dir / "config.json").string();
    for (const char* name : {"scheduler_config.json", "tokenizer_config.json", "preprocessor_config.json"})
        if (is_file(dir / name)) return (dir / name).string();
    return "";
}

Component make_component(const std::string& name, const std::string& kind, const fs::path& dir) {
    Component c;
    c.name = name;
    c.kind = kind;
    c.dir = dir.string();
    c.config_path = component_config(dir);
    c.has_weights = holds_safetensors(dir);
    return c;
}

// A model_index.json component entry: [library, class, ...]; null marks an absent component.
struct IndexEntry {
    std::string name;
    std::string kind;
    std::string subfolder;
};

Result<std::vector<IndexEntry>> read_model_index(const fs::path& path, const nlohmann::json& index) {
    std::vector<IndexEntry> out;
    if (!index.is_object())
        return bad_input("file " + path.string() + ": is a JSON " + index.type_name() +
                         ", expected an object");
    for (const auto& [key, value] : index.items()) {
        if (key.empty() || key[0] == '_' || value.is_null()) continue;
        if (!value.is_array()) continue; // other top-level settings
        if (value.size() < 2 || !value[0].is_string() || !value[1].is_string())
            return bad_input("file " + path.string() + ": component '" + key + "' is " + value.dump() +
                             ", expected [library, class, ...]");
        IndexEntry e{key, value[1].get<std::string>(), key};
        if (value.size() >= 3 && value[2].is_object()) {
            auto sub = value[2].find("subfolder");
            if (sub != value[2].end() && sub->is_string() && safe_shard_name(sub->get<std::string>()))
                e.subfolder = sub->get<std::string>();
        }
        out.push_back(std::move(e));
    }
    return out;
}

Result<std::optional<double>> read_shift(const fs::path& path) {
    if (!is_file(path)) return std::optional<double>();
    H3_ASSIGN_OR_RETURN(nlohmann::json j, read_json_file(path.string()));
    if (!j.is_object()) return bad_input("file " + path.string() + ": expected a JSON object");
    auto it = j.find("shift");
    if (it == j.end()) return std::optional<double>();
    if (!it->is_number())
        return bad_input("file " + path.string() + ": 'shift' is " + it->dump() + ", expected a number");
    return std::optional<double>(it->get<double>());
}

// `_minimax_h3.sigma_shift_scales` {video, audio} of an original-layout model_index.json.
Status read_sigma_shifts(const fs::path& path, const nlohmann::json& index, CheckpointDir* out) {
    auto block = index.find("_minimax_h3");
    if (block == index.end() || !block->is_object()) return ok_status();
    auto scales = block->find("sigma_shift_scales");
    if (scales == block->end()) return ok_status();
    if (!scales->is_object())
        return bad_input("file " + path.string() + ": '_minimax_h3.sigma_shift_scales' is " + scales->dump() +
                         ", expected {\"video\": number, \"audio\": number}");
    for (const char* key : {"video", "audio"}) {
        auto v = scales->find(key);
        if (v == scales->end()) continue;
        if (!v->is_number())
            return bad_input("file " + path.string() + ": '_minimax_h3.sigma_shift_scales." + key + "' is " +
                             v->dump() + ", expected a number");
        (std::string(key) == "video" ? out->video_shift : out->audio_shift) = v->get<double>();
    }
    return ok_status();
}

bool is_dit_class(const std::string& kind) {
    return kind == "MiniMaxH3Transformer3DModel" || kind == "MiniMaxH3DiTModel";
}

// Components of one original-layout partition folder (FL2VA/ or Ref2VA/); the transformer gets `dit_name`.
Status add_partition(const fs::path& part, const std::string& dit_name, bool only_dit, CheckpointDir* out) {
    fs::path index_path = part / "model_index.json";
    H3_ASSIGN_OR_RETURN(nlohmann::json index, read_json_file(index_path.string()));
    H3_ASSIGN_OR_RETURN(auto entries, read_model_index(index_path, index));
    if (!out->video_shift && !out->audio_shift) H3_TRY(read_sigma_shifts(index_path, index, out));
    for (const IndexEntry& e : entries) {
        fs::path dir = part / e.subfolder;
        if (!is_dir(dir)) continue; // listed but not downloaded
        bool dit = e.name == "transformer";
        if (only_dit && !dit) continue;
        std::string name = dit ? dit_name : e.name;
        if (out->find(name)) continue;
        out->components.push_back(make_component(name, e.kind, dir));
    }
    return ok_status();
}

Result<CheckpointDir> discover_diffusers(const fs::path& root, CheckpointDir out) {
    fs::path index_path = root / "model_index.json";
    H3_ASSIGN_OR_RETURN(nlohmann::json index, read_json_file(index_path.string()));
    H3_ASSIGN_OR_RETURN(auto entries, read_model_index(index_path, index));
    // An original-layout partition folder (FL2VA/ or Ref2VA/) opened directly.
    bool original = index.is_object() && index.contains("_minimax_h3");
    std::string dit_name = "transformer";
    if (original) {
        out.layout = CheckpointLayout::kOriginal;
        const auto& block = index["_minimax_h3"];
        if (block.is_object() && block.value("partition", nlohmann::json()) == "ref2va")
            dit_name = "transformer_ref";
        H3_TRY(read_sigma_shifts(index_path, index, &out));
    }
    for (const IndexEntry& e : entries) {
        fs::path dir = root / e.subfolder;
        if (!is_dir(dir)) continue; // listed but not downloaded
        std::string name = original && e.name == "transformer" ? dit_name : e.name;
        out.components.push_back(make_component(name, e.kind, dir));
    }
    if (!original) {
        H3_ASSIGN_OR_RETURN(out.video_shift, read_shift(root / "scheduler" / "scheduler_config.json"));
        H3_ASSIGN_OR_RETURN(out.audio_shift, read_shift(root / "audio_scheduler" / "scheduler_config.json"));
    }
    if (out.components.empty())
        return not_found("checkpoint " + root.string() +
                         ": model_index.json lists no component folder that " + "exists under the root");
    return out;
}

Result<CheckpointDir> discover_component(const fs::path& root, CheckpointDir out) {
    fs::path config_path = root / "config.json";
    H3_ASSIGN_OR_RETURN(nlohmann::json config, read_json_file(config_path.string()));
    if (!config.is_object())
        return bad_input("file " + config_path.string() + ": is a JSON " + config.type_name() +
                         ", expected an object");
    std::string kind;
    auto cls = config.find("_class_name");
    if (cls != config.end() && cls->is_string())
        kind = cls->get<std::string>();
    else {
        auto arch = config.find("architectures"); // transformers configs
        if (arch != config.end() && arch->is_array() && !arch->empty() && (*arch)[0].is_string())
            kind = (*arch)[0].get<std::string>();
    }
    std::string name = is_dit_class(kind) ? "transformer" : root.filename().string();
    out.layout = CheckpointLayout::kComponent;
    out.components.push_back(make_component(name, kind, root));
    return out;
}

} // namespace

Result<CheckpointDir> discover_checkpoint(const std::string& root_str) {
    std::error_code ec;
    fs::path root = fs::absolute(fs::path(root_str), ec);
    if (ec) root = fs::path(root_str);
    root = root.lexically_normal();
    if (root.has_filename() == false && root.has_parent_path()) root = root.parent_path();
    if (!fs::exists(root, ec)) return not_found("checkpoint root " + root_str + " does not exist");
    if (!is_dir(root)) return bad_input("checkpoint root " + root_str + " is not a folder");

    CheckpointDir out;
    out.root = root.string();
    if (is_file(root / "model_index.json")) return discover_diffusers(root, std::move(out));

    bool fl2va = is_file(root / "FL2VA" / "model_index.json");
    bool ref2va = is_file(root / "Ref2VA" / "model_index.json");
    if (fl2va || ref2va) {
        out.layout = CheckpointLayout::kOriginal;
        if (fl2va) H3_TRY(add_partition(root / "FL2VA", "transformer", false, &out));
        if (ref2va) H3_TRY(add_partition(root / "Ref2VA", "transformer_ref", fl2va, &out));
        if (out.components.empty())
            return not_found("checkpoint " + root.string() +
                             ": FL2VA/ and Ref2VA/ list no component folder that exists");
        return out;
    }

    bool has_config = is_file(root / "config.json");
    bool has_weights = !files_with_suffix(root, ".safetensors").empty() ||
                       !files_with_suffix(root, ".safetensors.index.json").empty();
    if (has_config && has_weights) return discover_component(root, std::move(out));

    std::string found = has_config
                            ? " (config.json is there but no *.safetensors or *.safetensors.index.json)"
                            : (has_weights ? " (safetensors are there but no config.json)" : "");
    return not_found(
        "checkpoint root " + root.string() +
        " matches no known layout: looked for model_index.json (diffusers), FL2VA/model_index.json "
        "or Ref2VA/model_index.json (original), or config.json with *.safetensors (a component "
        "folder)" +
        found);
}

Status write_sharded_safetensors(const std::string& dir, const std::string& stem, int shards,
                                 const std::function<Result<std::vector<NamedTensor>>(int)>& shard) {
    shards = std::max(shards, 1);
    nlohmann::json weight_map = nlohmann::json::object();
    uint64_t total = 0;
    for (int s = 0; s < shards; ++s) {
        char file[256];
        std::snprintf(file, sizeof(file), "%s-%05d-of-%05d.safetensors", stem.c_str(), s + 1, shards);
        H3_ASSIGN_OR_RETURN(std::vector<NamedTensor> part, shard(s));
        for (const auto& t : part) {
            weight_map[t.name] = file;
            total += t.tensor.nbytes();
        }
        H3_TRY(write_safetensors((std::filesystem::path(dir) / file).string(), part, {{"format", "pt"}}));
    }
    nlohmann::json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    return write_json_file((std::filesystem::path(dir) / (stem + ".safetensors.index.json")).string(), index);
}

Status write_sharded_safetensors(const std::string& dir, const std::string& stem,
                                 const std::vector<NamedTensor>& tensors, int shards) {
    shards = std::max(shards, 1);
    const size_t per = (tensors.size() + static_cast<size_t>(shards) - 1) / static_cast<size_t>(shards);
    return write_sharded_safetensors(dir, stem, shards, [&](int s) -> Result<std::vector<NamedTensor>> {
        const size_t begin = std::min(tensors.size(), static_cast<size_t>(s) * per);
        const size_t end = std::min(tensors.size(), begin + per);
        return std::vector<NamedTensor>(tensors.begin() + static_cast<std::ptrdiff_t>(begin),
                                        tensors.begin() + static_cast<std::ptrdiff_t>(end));
    });
}

} // namespace h3::io
