#include "model/fasth3_contract.h"

#include "io/json_file.h"

#include <cmath>
#include <filesystem>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

constexpr const char* kVsaBackend = "VIDEO_SPARSE_ATTN_H3";
// FastVideo's dense attention backends: a student declaring one of them runs dense.
constexpr const char* kDenseBackends[] = {"FLASH_ATTN", "TORCH_SDPA", "SAGE_ATTN", "SAGE_ATTN_THREE"};

bool is_int(const nlohmann::json& v) {
    return v.is_number_integer() || v.is_number_unsigned();
}

Result<double> positive_number(const nlohmann::json& j, const char* key, const std::string& origin) {
    const auto& v = j.at(key);
    if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
        return bad_input(origin + ": " + key + " must be a positive number, got " + v.dump());
    return v.get<double>();
}

} // namespace

Result<FastH3Contract> parse_fasth3_contract(const nlohmann::json& j, const std::string& origin) {
    if (!j.is_object()) return bad_input(origin + ": the FastH3 inference contract must be a JSON object");
    auto field = [&](const char* key) { return j.contains(key) ? j.at(key) : nlohmann::json(); };
    if (field("schema_version") != kFastH3Schema)
        return bad_input(origin + ": schema_version must be \"" + std::string(kFastH3Schema) + "\", got " +
                         field("schema_version").dump());
    if (field("task") != "t2av")
        return bad_input(origin + ": task " + field("task").dump() +
                         " is not served (FastH3 students are t2av: text to video+audio, also fl2va)");
    if (j.contains("guidance_scale") &&
        !(j.at("guidance_scale").is_number() && j.at("guidance_scale") == 1.0))
        return bad_input(origin + ": guidance_scale " + j.at("guidance_scale").dump() +
                         " declares CFG; H3 students are CFG-distilled (guidance_scale 1.0)");
    FastH3Contract c;
    c.path = origin;
    const nlohmann::json steps = field("dmd_denoising_steps");
    bool ladder_ok = steps.is_array() && !steps.empty();
    for (size_t i = 0; ladder_ok && i < steps.size(); ++i) {
        ladder_ok = is_int(steps[i]) && steps[i].get<int64_t>() > 0 && steps[i].get<int64_t>() <= 1000 &&
                    (i == 0 || steps[i].get<int64_t>() < steps[i - 1].get<int64_t>());
        if (ladder_ok) c.dmd_denoising_steps.push_back(steps[i].get<int>());
    }
    if (!ladder_ok)
        return bad_input(origin +
                         ": dmd_denoising_steps must be strictly decreasing integers in (0, 1000], got " +
                         steps.dump());
    const int forwards = static_cast<int>(c.dmd_denoising_steps.size());
    if (field("transformer_forwards") != forwards || field("num_inference_steps") != forwards + 1)
        return bad_input(
            origin + ": " + std::to_string(forwards) + " dmd_denoising_steps need transformer_forwards " +
            std::to_string(forwards) + " and num_inference_steps " + std::to_string(forwards + 1) + ", got " +
            field("transformer_forwards").dump() + " and " + field("num_inference_steps").dump());
    c.transformer_forwards = forwards;
    c.num_inference_steps = forwards + 1;
    // The ladder labels the uniform grid of num_inference_steps points (FastVideo basic_fasth3, SGLang).
    for (int i = 0; i < forwards; ++i) {
        const int rung = static_cast<int>(std::lround(1000.0 * (1.0 - static_cast<double>(i) / forwards)));
        if (std::abs(rung - c.dmd_denoising_steps[static_cast<size_t>(i)]) > 1)
            return bad_input(origin + ": dmd_denoising_steps[" + std::to_string(i) +
                             "] = " + std::to_string(c.dmd_denoising_steps[static_cast<size_t>(i)]) +
                             " is not a label of the uniform " + std::to_string(forwards + 1) +
                             "-point grid (expected " + std::to_string(rung) +
                             " ± 1), the schedule FastH3 serves");
        c.grid_rungs.push_back(rung);
    }
    const nlohmann::json backend = field("attention_backend");
    if (backend == kVsaBackend) {
        c.vsa = true;
        if (field("vsa_tile_size") != 64)
            return bad_input(origin + ": vsa_tile_size " + field("vsa_tile_size").dump() +
                             " is not served: VSA runs 64-row (4, 4, 4) tiles");
        c.vsa_tile_size = 64;
        const nlohmann::json sp = field("vsa_sparsity");
        if (!sp.is_number() || !(sp.get<double>() >= 0.0 && sp.get<double>() < 1.0))
            return bad_input(origin + ": vsa_sparsity must be a number in [0, 1), got " + sp.dump());
        c.vsa_sparsity = sp.get<double>();
    } else if (!backend.is_null()) {
        bool dense = false;
        for (const char* b : kDenseBackends) dense = dense || backend == b;
        if (!dense)
            return bad_input(origin + ": attention_backend " + backend.dump() + " is not served (" +
                             kVsaBackend + " or a dense backend: FLASH_ATTN, TORCH_SDPA, SAGE_ATTN)");
    }
    if (j.contains("video_scheduler_shift")) {
        H3_ASSIGN_OR_RETURN(double v, positive_number(j, "video_scheduler_shift", origin));
        c.video_shift = v;
    }
    if (j.contains("audio_scheduler_shift")) {
        H3_ASSIGN_OR_RETURN(double v, positive_number(j, "audio_scheduler_shift", origin));
        c.audio_shift = v;
    }
    return c;
}

Result<std::optional<FastH3Contract>> read_fasth3_contract(const std::string& root) {
    std::error_code ec;
    fs::path p = fs::path(root) / kFastH3ContractFile;
    if (!fs::exists(p, ec) && fs::exists(fs::path(root) / "config.json", ec)) // a transformer folder
        p = fs::path(root).parent_path() / kFastH3ContractFile;
    if (!fs::exists(p, ec)) return std::optional<FastH3Contract>();
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(p.string()));
    H3_ASSIGN_OR_RETURN(FastH3Contract c, parse_fasth3_contract(j, p.string()));
    return std::optional<FastH3Contract>(std::move(c));
}

} // namespace h3::model
