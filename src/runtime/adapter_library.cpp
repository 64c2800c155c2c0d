#include "runtime/adapter_library.h"

#include "core/log.h"

#include <algorithm>
#include <filesystem>
#include <sys/stat.h>

namespace fs = std::filesystem;

namespace h3::runtime {

AdapterLibrary::AdapterLibrary(AdapterLibraryParams p, std::string canonical_dir)
    : params_(std::move(p)), dir_(std::move(canonical_dir)) {}

Result<std::unique_ptr<AdapterLibrary>> AdapterLibrary::open(const AdapterLibraryParams& p) {
    std::error_code ec;
    if (p.any_path) return std::unique_ptr<AdapterLibrary>(new AdapterLibrary(p, std::string()));
    if (p.dir.empty() || !fs::is_directory(p.dir, ec))
        return not_found("LoRA folder '" + p.dir + "' is not a directory");
    const fs::path canon = fs::canonical(p.dir, ec);
    if (ec) return io_error("LoRA folder '" + p.dir + "': " + ec.message());
    return std::unique_ptr<AdapterLibrary>(new AdapterLibrary(p, canon.string()));
}

Result<std::string> AdapterLibrary::resolve(const std::string& name) const {
    const std::string what = "LoRA '" + name + "'";
    if (name.empty()) return invalid_argument("a LoRA path is empty");
    if (params_.any_path) {
        std::error_code ec;
        if (!fs::is_regular_file(name, ec)) return not_found(what + ": no such file");
        const fs::path canon = fs::canonical(name, ec);
        if (ec) return io_error(what + ": " + ec.message());
        return canon.string();
    }
    const fs::path rel(name);
    if (rel.is_absolute() || name[0] == '/' || name[0] == '\\')
        return invalid_argument(what +
                                ": give a path relative to the server's LoRA folder, not an absolute one");
    for (const auto& part : rel)
        if (part == "..") return invalid_argument(what + ": '..' is not allowed in a LoRA path");
    if (rel.extension() != ".safetensors") return invalid_argument(what + ": LoRA files are .safetensors");
    std::error_code ec;
    const fs::path full = fs::path(dir_) / rel;
    const fs::path canon = fs::canonical(full, ec);
    if (ec) return not_found(what + " is not in the server's LoRA folder");
    const std::string c = canon.string();
    if (c.size() <= dir_.size() || c.compare(0, dir_.size(), dir_) != 0 || c[dir_.size()] != '/')
        return invalid_argument(what + " leads outside the server's LoRA folder");
    if (!fs::is_regular_file(canon, ec)) return invalid_argument(what + " is not a regular file");
    return c;
}

namespace {

Status strict_check(const std::string& name, const std::vector<std::string>& ignored, bool strict) {
    if (!strict || ignored.empty()) return ok_status();
    std::string keys;
    for (size_t i = 0; i < ignored.size() && i < 10; ++i) keys += (i ? ", " : "") + ignored[i];
    if (ignored.size() > 10) keys += ", ...";
    return invalid_argument("LoRA '" + name + "': " + std::to_string(ignored.size()) +
                            " key(s) name no adapted projection (strict): " + keys);
}

} // namespace

Status AdapterLibrary::without_paths(const Status& s, const std::string& name,
                                     const std::string& path) const {
    std::string m = s.message();
    const auto replace_all = [&m](const std::string& from, const std::string& to) {
        if (from.empty()) return;
        for (size_t at = m.find(from); at != std::string::npos; at = m.find(from, at + to.size()))
            m.replace(at, from.size(), to);
    };
    replace_all(path, name);
    replace_all(dir_, "the LoRA folder");
    return Status(s.code(), m);
}

Result<std::shared_ptr<const model::LoraSet>> AdapterLibrary::get(const std::string& name, bool strict) {
    H3_ASSIGN_OR_RETURN(std::string path, resolve(name));
    const std::string context = "LoRA '" + name + "'";
    // the name the file has in the folder (what a cached refusal says, whichever name reached it)
    const std::string in_folder = dir_.empty() ? name : path.substr(dir_.size() + 1);
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) return not_found(context + ": cannot be read");
    const FileIdentity id{static_cast<uint64_t>(st.st_dev), static_cast<uint64_t>(st.st_ino),
                          static_cast<uint64_t>(st.st_size),
                          static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec};
    std::lock_guard<std::mutex> lock(mutex_);
    for (auto it = lru_.begin(); it != lru_.end(); ++it) {
        if (it->id == id) {
            lru_.splice(lru_.begin(), lru_, it);
            H3_TRY(strict_check(name, lru_.front().ignored, strict));
            return lru_.front().set;
        }
        if (it->path == path) { // the file changed: read it again
            lru_.erase(it);
            break;
        }
    }
    for (const Refusal& r : refusals_)
        if (r.id == id) return r.status.with_context(context);
    ++files_read_;
    auto adapter = model::read_lora_file(path, params_.config, params_.read);
    if (!adapter.ok()) {
        const Status refused = without_paths(adapter.status(), in_folder, path);
        // a verdict on the file's content is kept; a failure to read it (I/O) may pass
        if (refused.code() == ErrorCode::kBadInput || refused.code() == ErrorCode::kInvalidArgument) {
            refusals_.push_front({id, refused});
            while (refusals_.size() > std::max<size_t>(1, params_.max_refusals)) refusals_.pop_back();
        }
        return refused.with_context(context);
    }
    std::vector<std::string> ignored = adapter->ignored;
    auto use = std::make_shared<const model::LoraAdapter>(std::move(adapter).value());
    auto built = model::LoraSet::build({{use, 1.0f}}, params_.config, params_.ctx, params_.dtype);
    if (!built.ok()) return without_paths(built.status(), in_folder, path).with_context(context);
    auto set = std::move(built).value();
    H3_LOG_INFO("LoRA library: loaded {} ({} targets, {:.1f} MiB on {})", use->summary(), set->factor_count(),
                static_cast<double>(set->device_bytes()) / (1 << 20), params_.ctx.device.to_string());
    lru_.push_front({id, path, set, std::move(ignored)});
    // Drop the least recently used past the budget; the set just loaded always stays.
    size_t total = 0;
    for (const auto& e : lru_) total += e.set->device_bytes();
    while (total > params_.budget_bytes && lru_.size() > 1) {
        total -= lru_.back().set->device_bytes();
        H3_LOG_INFO("LoRA library: dropped {}", lru_.back().path);
        lru_.pop_back();
    }
    H3_TRY(strict_check(name, lru_.front().ignored, strict));
    return set;
}

Result<std::shared_ptr<const model::LoraSet>>
AdapterLibrary::request_set(const std::vector<AdapterUse>& uses) {
    if (uses.empty()) return std::shared_ptr<const model::LoraSet>();
    std::vector<model::LoraSet::Part> parts;
    for (const AdapterUse& u : uses) {
        H3_ASSIGN_OR_RETURN(auto set, get(u.name, u.strict));
        parts.push_back({set, u.strength});
    }
    return model::LoraSet::combine(parts, params_.config);
}

size_t AdapterLibrary::cached_sets() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return lru_.size();
}

size_t AdapterLibrary::cached_refusals() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return refusals_.size();
}

size_t AdapterLibrary::files_read() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return files_read_;
}

size_t AdapterLibrary::cached_bytes() const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = 0;
    for (const auto& e : lru_) n += e.set->device_bytes();
    return n;
}

} // namespace h3::runtime
