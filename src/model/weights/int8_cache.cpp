#include "model/weights/int8_cache.h"

#include "core/log.h"
#include "io/safetensors.h"

#include <cstdio>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

uint64_t fnv1a(const std::string& s, uint64_t h = 0xcbf29ce484222325ull) {
    for (unsigned char ch : s) h = (h ^ ch) * 0x100000001b3ull;
    return h;
}

constexpr const char* kFormat = "h3-int8-rows-v1"; // symmetric per-row, f32 scales

} // namespace

std::string int8_cache_path(const std::string& dir, const std::string& identity,
                            const std::string& component) {
    char buf[64];
    std::snprintf(buf, sizeof(buf), "int8-%016llx.safetensors",
                  static_cast<unsigned long long>(fnv1a(component, fnv1a(kFormat, fnv1a(identity)))));
    return (fs::path(dir) / buf).string();
}

Result<std::optional<std::vector<std::vector<WeightMaster>>>>
read_int8_cache(const std::string& path, const std::string& identity,
                const std::vector<std::vector<std::string>>& names, const std::vector<Shape>& shapes) {
    using Out = std::optional<std::vector<std::vector<WeightMaster>>>;
    std::error_code ec;
    if (!fs::exists(path, ec)) return Out{};
    auto f = io::SafetensorsFile::open(path);
    auto ignore = [&](const std::string& why) -> Result<Out> {
        H3_LOG_WARN("ignoring int8 weight cache {}: {}", path, why);
        return Out{};
    };
    if (!f.ok()) return ignore(f.status().message());
    auto meta = f->metadata();
    if (meta["format"] != kFormat || meta["checkpoint"] != identity)
        return ignore("written for another checkpoint or format");
    std::vector<std::vector<WeightMaster>> out(names.size());
    for (size_t l = 0; l < names.size(); ++l)
        for (size_t i = 0; i < names[l].size(); ++i) {
            const std::string& n = names[l][i];
            auto q = f->tensor(n);
            auto s = f->tensor(n + ".scale");
            if (!q.ok() || !s.ok()) return ignore("tensor '" + n + "' is missing");
            if (q->dtype() != DType::kI8 || !(q->shape() == shapes[i]) || s->dtype() != DType::kF32 ||
                !(s->shape() == Shape{shapes[i][0]}))
                return ignore("tensor '" + n + "' is " + q->describe() + " / " + s->describe() +
                              ", expected i8" + shapes[i].to_string());
            out[l].push_back({std::move(q).value(), std::move(s).value()});
        }
    return Out{std::move(out)};
}

Status write_int8_cache(const std::string& path, const std::string& identity,
                        const std::vector<std::vector<std::string>>& names,
                        const std::vector<std::vector<WeightMaster>>& masters) {
    std::error_code ec;
    fs::create_directories(fs::path(path).parent_path(), ec);
    if (ec) return io_error("cannot create the int8 cache folder of " + path + ": " + ec.message());
    // Scales first: every f32 then stays 4-byte aligned in the mapping whatever the int8 sizes are.
    std::vector<io::NamedTensor> tensors;
    for (size_t l = 0; l < names.size(); ++l)
        for (size_t i = 0; i < names[l].size(); ++i)
            tensors.push_back({names[l][i] + ".scale", masters[l][i].scale});
    for (size_t l = 0; l < names.size(); ++l)
        for (size_t i = 0; i < names[l].size(); ++i) tensors.push_back({names[l][i], masters[l][i].data});
    return io::write_safetensors(path, tensors, {{"format", kFormat}, {"checkpoint", identity}});
}

} // namespace h3::model
