// Sharded checkpoints (*.safetensors.index.json + shards) and checkpoint-directory discovery.
#pragma once

#include "core/status.h"
#include "core/tensor.h"
#include "io/safetensors.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace h3::io {

// A set of tensors spread over one or more safetensors files: a single file, a folder holding one
// `*.safetensors.index.json` (weight_map: tensor -> shard file; both `diffusion_pytorch_model-*` and
// `model-*` shard names), or a folder with exactly one `*.safetensors` file.
class TensorSet {
public:
    // `path` is a .safetensors file, an .index.json file, or a folder. Opens every shard and checks that
    // each tensor the index names is in its shard (and nowhere else); errors name the index, shard, tensor.
    static Result<TensorSet> open(const std::string& path);

    std::vector<std::string> names() const; // sorted
    bool contains(const std::string& name) const;
    const TensorInfo* info(const std::string& name) const;
    Result<Tensor> tensor(const std::string& name) const; // read-only host view
    const std::vector<std::string>& files() const { return files_; }
    const std::string& source() const { return source_; }
    uint64_t total_bytes() const;

private:
    std::string source_;
    std::vector<std::string> files_;
    std::vector<std::shared_ptr<SafetensorsFile>> shards_;
    std::map<std::string, size_t> where_; // tensor -> shard index
};

// Writes `tensors` (in order) as `shards` files `<stem>-0000i-of-0000n.safetensors` in `dir` plus
// `<stem>.safetensors.index.json` (weight_map + metadata.total_size), the official sharded layout.
Status write_sharded_safetensors(const std::string& dir, const std::string& stem,
                                 const std::vector<NamedTensor>& tensors, int shards);
// The same layout with each shard's tensors made only when it is written (`shard(s)` for s = 0..shards−1),
// so a checkpoint larger than memory can be written (bench load's full-width DiT).
Status write_sharded_safetensors(const std::string& dir, const std::string& stem, int shards,
                                 const std::function<Result<std::vector<NamedTensor>>(int)>& shard);

enum class CheckpointLayout { kDiffusers, kOriginal, kComponent };

// One model component found in a checkpoint directory.
struct Component {
    std::string name; // "transformer", "transformer_ref", "text_encoder", "vae", ... (as named on disk)
    std::string kind; // class name from model_index.json / config.json, e.g. MiniMaxH3Transformer3DModel
    std::string dir;  // absolute folder
    std::string config_path; // config.json inside it, if any
    bool has_weights = false;
};

struct CheckpointDir {
    std::string root;
    CheckpointLayout layout = CheckpointLayout::kDiffusers;
    std::vector<Component> components;
    std::optional<double> video_shift; // from scheduler/ or _minimax_h3.sigma_shift_scales
    std::optional<double> audio_shift;
    const Component* find(const std::string& name) const;
};

// Discovers a checkpoint root: the diffusers layout (model_index.json + component folders), the original
// layout (FL2VA/ and/or Ref2VA/ each with model_index.json), or a bare component folder (config.json +
// safetensors, as save_pretrained writes it).
Result<CheckpointDir> discover_checkpoint(const std::string& root);
const char* layout_name(CheckpointLayout l);

} // namespace h3::io
