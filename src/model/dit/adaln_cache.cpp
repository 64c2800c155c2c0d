#include "model/dit/adaln_cache.h"

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

std::string timesteps_text(const std::vector<float>& t) {
    std::string out;
    char buf[16];
    for (float v : t) {
        std::snprintf(buf, sizeof(buf), "%08x,", f32_bits(v));
        out += buf;
    }
    return out;
}

Result<AdalnTables> read_cache(const std::string& path, const DitModel& model,
                               const std::vector<float>& timesteps, const std::string& expect_ts) {
    H3_ASSIGN_OR_RETURN(auto f, io::SafetensorsFile::open(path));
    auto it = f.metadata().find("timesteps");
    if (it == f.metadata().end() || it->second != expect_ts)
        return bad_input("AdaLN cache " + path + " holds other timesteps");
    const DitConfig& c = model.config();
    const int64_t M = static_cast<int64_t>(timesteps.size());
    AdalnTables t;
    t.timesteps = timesteps;
    auto get = [&](const std::string& name, const Shape& shape, DType dt) -> Result<Tensor> {
        H3_ASSIGN_OR_RETURN(Tensor host, f.tensor(name));
        if (!(host.shape() == shape) || host.dtype() != dt)
            return bad_input("AdaLN cache " + path + ": tensor '" + name + "' is " + host.describe() +
                             ", expected " + std::string(dtype_name(dt)) + shape.to_string());
        return host.to(model.context().device, model.context().stream());
    };
    H3_ASSIGN_OR_RETURN(t.temb, get("temb", Shape{M, c.time_embed_dim}, DType::kF32));
    H3_ASSIGN_OR_RETURN(t.final_layer,
                        get("final_layer", Shape{M, c.final_adaln_out_features()}, model.act_dtype()));
    for (int b = 0; b < c.num_layers; ++b) {
        H3_ASSIGN_OR_RETURN(Tensor tab, get("blocks." + std::to_string(b), Shape{M * 3, 6LL * c.hidden_size},
                                            model.act_dtype()));
        t.blocks.push_back(tab);
    }
    return t;
}

} // namespace

std::string checkpoint_identity(const DitCheckpoint& ckpt) {
    std::error_code ec;
    std::string id = fs::absolute(ckpt.dir, ec).string();
    std::vector<std::string> files = ckpt.tensors.files();
    files.push_back((fs::path(ckpt.dir) / "config.json").string());
    for (const auto& f : files) {
        auto size = fs::file_size(f, ec);
        auto mtime = fs::last_write_time(f, ec).time_since_epoch().count();
        id += "|" + fs::path(f).filename().string() + ":" + std::to_string(ec ? 0 : size) + ":" +
              std::to_string(mtime);
    }
    return id;
}

std::string adaln_cache_file_name(const std::string& identity, DitPrecision precision,
                                  const std::vector<float>& timesteps) {
    // kFp8 models compute their AdaLN tables in bf16 (the AdaLN GEMMs are not quantized): share bf16's file.
    if (precision == DitPrecision::kFp8) precision = DitPrecision::kBf16;
    uint64_t h = fnv1a(timesteps_text(timesteps), fnv1a(precision_name(precision), fnv1a(identity)));
    char buf[64];
    std::snprintf(buf, sizeof(buf), "adaln-%016llx.safetensors", static_cast<unsigned long long>(h));
    return buf;
}

Result<AdalnCacheResult> cached_adaln_tables(const DitModel& model, const DitCheckpoint& ckpt,
                                             const std::vector<float>& timesteps,
                                             const std::string& cache_dir) {
    const std::string ts = timesteps_text(timesteps);
    // Adapters merged into the model change its AdaLN projections: they are part of the identity.
    std::string identity = checkpoint_identity(ckpt);
    if (!model.merged_adapters().empty()) identity += "|lora:" + model.merged_adapters();
    const fs::path path = fs::path(cache_dir) / adaln_cache_file_name(identity, model.precision(), timesteps);
    std::error_code ec;
    if (fs::exists(path, ec)) {
        auto t = read_cache(path.string(), model, timesteps, ts);
        if (t.ok()) return AdalnCacheResult{std::move(t).value(), true};
        H3_LOG_WARN("ignoring AdaLN cache {}: {}", path.string(), t.status().message());
    }
    H3_ASSIGN_OR_RETURN(AdalnTables tables, model.compute_adaln_tables(timesteps, nullptr, &ckpt));
    fs::create_directories(cache_dir, ec);
    if (ec) return io_error("cannot create AdaLN cache folder " + cache_dir + ": " + ec.message());
    std::vector<io::NamedTensor> out = {{"temb", tables.temb}, {"final_layer", tables.final_layer}};
    for (size_t b = 0; b < tables.blocks.size(); ++b)
        out.push_back({"blocks." + std::to_string(b), tables.blocks[b]});
    H3_TRY(io::write_safetensors(
        path.string(), out,
        {{"timesteps", ts}, {"precision", precision_name(model.precision())}, {"checkpoint", identity}}));
    return AdalnCacheResult{std::move(tables), false};
}

} // namespace h3::model
