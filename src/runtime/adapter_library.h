// The LoRA adapters a server may apply: files under one folder the operator names (`serve --lora-dir DIR`),
// named by requests relative to it. A file is read and converted on first use, placed on the model's device
// once (strength 1) and shared by every job that names it; per job the named sets are combined with the
// request's strengths (model::LoraSet::combine, no copy). Least recently used sets are dropped past a byte
// budget. Files are known by their identity (device, inode, size, mtime): one that changed on disk is read
// again, and one that was refused is refused again from a bounded cache of verdicts without being parsed.
// Errors name the adapter as the request named it, never the folder's path on the server.
#pragma once

#include "core/status.h"
#include "model/dit/dit_config.h"
#include "model/lora/lora_file.h"
#include "model/lora/lora_set.h"
#include "ops/context.h"

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace h3::runtime {

struct AdapterLibraryParams {
    std::string dir;                  // the only folder adapters are read from
    model::DitConfig config;          // the DiT the adapters are for
    ops::Context ctx;                 // where the sets live
    DType dtype = DType::kBF16;       // the model's activation dtype
    size_t budget_bytes = 8ull << 30; // device bytes of cached sets (the set in use is always kept)
    size_t max_refusals = 256;        // refused files remembered (the oldest is forgotten past it)
    model::LoraReadOptions read;      // `strict` here holds for every request; AdapterUse::strict adds to it
    // true (h3-engine generate): names are file paths as given, there is no folder (`dir` unused). A server
    // never sets it.
    bool any_path = false;
};

struct AdapterUse {
    std::string name; // relative to the library's folder
    float strength = 1.0f;
    bool strict = false; // keys that name no adapted projection are an error (not skipped)
};

class AdapterLibrary {
public:
    // `dir` must be an existing folder.
    static Result<std::unique_ptr<AdapterLibrary>> open(const AdapterLibraryParams& params);

    // The file a request's name refers to, or an invalid_argument naming the field's problem: empty,
    // absolute, a ".." component, not a .safetensors file, missing, or (symlinks resolved) outside the
    // folder.
    Result<std::string> resolve(const std::string& name) const;

    // The set of one adapter at strength 1 (read on first use or when the file changed). strict: an error
    // listing the keys the file holds that name no adapted projection, if it has any.
    Result<std::shared_ptr<const model::LoraSet>> get(const std::string& name, bool strict = false);
    // A request's adapters combined with their strengths; null when `uses` is empty.
    Result<std::shared_ptr<const model::LoraSet>> request_set(const std::vector<AdapterUse>& uses);

    size_t cached_sets() const;
    size_t cached_bytes() const;
    size_t cached_refusals() const;
    size_t files_read() const; // files parsed so far (a cached verdict or set reads none)
    const std::string& dir() const { return dir_; }

private:
    explicit AdapterLibrary(AdapterLibraryParams p, std::string canonical_dir);

    // What makes a file the same file: a rename keeps it, a rewrite or a replacement changes it.
    struct FileIdentity {
        uint64_t device = 0, inode = 0, size = 0;
        int64_t mtime_ns = 0;
        bool operator==(const FileIdentity&) const = default;
    };
    struct Entry {
        FileIdentity id;
        std::string path;
        std::shared_ptr<const model::LoraSet> set;
        std::vector<std::string> ignored; // keys skipped when it was read
    };
    struct Refusal {
        FileIdentity id;
        Status status; // with the file's name in the folder, never its path
    };
    // The error of a read with the server's paths replaced by the adapter's name.
    Status without_paths(const Status& s, const std::string& name, const std::string& path) const;

    AdapterLibraryParams params_;
    std::string dir_; // canonical
    mutable std::mutex mutex_;
    std::list<Entry> lru_;        // most recently used first
    std::list<Refusal> refusals_; // newest first, at most params_.max_refusals
    size_t files_read_ = 0;
};

} // namespace h3::runtime
