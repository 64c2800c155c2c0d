#include "model/inspect_report.h"

#include "model/dit/dit_config.h"
#include "model/dit/dit_tensors.h"

#include <filesystem>
#include <set>
#include <sstream>

namespace fs = std::filesystem;

namespace h3::model {

namespace {

std::string shape_str(const std::vector<int64_t>& s) {
    return Shape(s).to_string();
}

bool is_dit_kind(const std::string& kind) {
    return kind == "MiniMaxH3Transformer3DModel" || kind == "MiniMaxH3DiTModel";
}

// Checks a DiT component against the official naming scheme instantiated for its own config.
ConformanceReport check_dit(const io::Component& comp, const io::TensorSet& set) {
    ConformanceReport rep;
    auto cfg = DitConfig::from_file(comp.config_path);
    if (!cfg.ok()) {
        rep.checked = true;
        rep.missing.push_back("(config) " + cfg.status().message());
        return rep;
    }
    DitFormat format = comp.kind == "MiniMaxH3DiTModel" || set.contains("blocks.0.attn.qkv_proj.weight")
                           ? DitFormat::kOriginal
                           : DitFormat::kDiffusers;
    rep.checked = true;
    rep.scheme = std::string(format == DitFormat::kOriginal ? "original" : "diffusers") + " DiT (" +
                 std::to_string(cfg->num_layers) + " blocks, " + std::to_string(cfg->num_refiner_layers) +
                 " refiner blocks)";
    std::set<std::string> expected_names;
    for (const auto& spec : dit_tensor_specs(*cfg, format)) {
        expected_names.insert(spec.name);
        const io::TensorInfo* info = set.info(spec.name);
        if (!info) {
            rep.missing.push_back(spec.name);
            continue;
        }
        if (info->shape != spec.shape)
            rep.shape_mismatches.push_back(spec.name + ": expected " + shape_str(spec.shape) + ", found " +
                                           shape_str(info->shape));
        if (info->dtype != spec.dtype)
            rep.dtype_mismatches.push_back(spec.name + ": official " + dtype_name(spec.dtype) + ", found " +
                                           dtype_name(info->dtype));
    }
    for (const auto& n : set.names())
        if (!expected_names.count(n)) rep.unexpected.push_back(n);
    return rep;
}

} // namespace

bool InspectReport::ok() const {
    for (const auto& c : components)
        if (!c.error.empty() || (c.conformance.checked && !c.conformance.ok())) return false;
    return true;
}

TensorSetSummary summarize(const io::TensorSet& set) {
    TensorSetSummary s;
    s.source = set.source();
    s.files = set.files().size();
    for (const auto& n : set.names()) {
        const io::TensorInfo* info = set.info(n);
        ++s.tensors;
        s.bytes += info->end - info->begin;
        ++s.dtype_counts[dtype_name(info->dtype)];
    }
    return s;
}

Result<InspectReport> inspect_path(const std::string& path) {
    InspectReport r;
    r.path = path;
    std::error_code ec;
    if (!fs::exists(path, ec)) return not_found("inspect: " + path + " does not exist");
    if (!fs::is_directory(path, ec)) {
        if (!fs::is_regular_file(path, ec)) // a device (/dev/zero), a FIFO: never read
            return bad_input("inspect: " + path + " is not a regular file or a folder");
        H3_ASSIGN_OR_RETURN(auto set, io::TensorSet::open(path));
        r.layout = "safetensors";
        r.tensors = summarize(set);
        return r;
    }
    auto ckpt = io::discover_checkpoint(path);
    if (!ckpt.ok()) {
        // A folder of safetensors without configs is still inspectable as a tensor set.
        auto set = io::TensorSet::open(path);
        if (!set.ok()) return ckpt.status();
        r.layout = "safetensors";
        r.tensors = summarize(*set);
        return r;
    }
    r.layout = io::layout_name(ckpt->layout);
    r.video_shift = ckpt->video_shift;
    r.audio_shift = ckpt->audio_shift;
    for (const auto& comp : ckpt->components) {
        ComponentReport cr;
        cr.component = comp;
        if (comp.has_weights) {
            auto set = io::TensorSet::open(comp.dir);
            if (!set.ok()) {
                cr.error = set.status().message();
            } else {
                cr.weights = summarize(*set);
                if (is_dit_kind(comp.kind) && !comp.config_path.empty())
                    cr.conformance = check_dit(comp, *set);
            }
        }
        r.components.push_back(std::move(cr));
    }
    return r;
}

namespace {
nlohmann::json summary_json(const TensorSetSummary& s) {
    return {{"source", s.source},
            {"files", s.files},
            {"tensors", s.tensors},
            {"bytes", s.bytes},
            {"dtypes", s.dtype_counts}};
}
} // namespace

nlohmann::json to_json(const InspectReport& r) {
    nlohmann::json j = {{"path", r.path}, {"layout", r.layout}, {"ok", r.ok()}};
    if (r.video_shift) j["video_shift"] = *r.video_shift;
    if (r.audio_shift) j["audio_shift"] = *r.audio_shift;
    if (r.tensors) j["tensors"] = summary_json(*r.tensors);
    nlohmann::json comps = nlohmann::json::array();
    for (const auto& c : r.components) {
        nlohmann::json cj = {{"name", c.component.name},
                             {"kind", c.component.kind},
                             {"dir", c.component.dir},
                             {"has_weights", c.component.has_weights}};
        if (c.weights) cj["weights"] = summary_json(*c.weights);
        if (!c.error.empty()) cj["error"] = c.error;
        if (c.conformance.checked)
            cj["conformance"] = {{"scheme", c.conformance.scheme},
                                 {"ok", c.conformance.ok()},
                                 {"missing", c.conformance.missing},
                                 {"unexpected", c.conformance.unexpected},
                                 {"shape_mismatches", c.conformance.shape_mismatches},
                                 {"dtype_mismatches", c.conformance.dtype_mismatches}};
        comps.push_back(cj);
    }
    j["components"] = comps;
    return j;
}

namespace {
void list(std::ostringstream& os, const char* title, const std::vector<std::string>& items) {
    if (items.empty()) return;
    os << "      " << title << " (" << items.size() << "):\n";
    size_t shown = 0;
    for (const auto& s : items) {
        if (++shown > 20) {
            os << "        ... " << items.size() - 20 << " more\n";
            break;
        }
        os << "        " << s << "\n";
    }
}
void summary_text(std::ostringstream& os, const TensorSetSummary& s, const char* indent) {
    os << indent << s.tensors << " tensors in " << s.files << " file(s), " << s.bytes << " bytes;";
    for (const auto& [dt, n] : s.dtype_counts) os << " " << dt << "×" << n;
    os << "\n";
}
} // namespace

std::string to_text(const InspectReport& r) {
    std::ostringstream os;
    os << r.path << ": " << r.layout << " layout\n";
    if (r.video_shift || r.audio_shift)
        os << "  schedule shifts: video " << (r.video_shift ? std::to_string(*r.video_shift) : "?")
           << ", audio " << (r.audio_shift ? std::to_string(*r.audio_shift) : "?") << "\n";
    if (r.tensors) summary_text(os, *r.tensors, "  ");
    for (const auto& c : r.components) {
        os << "  " << c.component.name << " (" << (c.component.kind.empty() ? "?" : c.component.kind) << ")";
        if (!c.component.has_weights) os << ": no weights";
        os << "\n";
        if (c.weights) summary_text(os, *c.weights, "    ");
        if (!c.error.empty()) os << "    error: " << c.error << "\n";
        if (c.conformance.checked) {
            os << "    against the official " << c.conformance.scheme << ": "
               << (c.conformance.ok() ? "all tensors present with the expected shapes" : "MISMATCH") << "\n";
            list(os, "missing", c.conformance.missing);
            list(os, "unexpected", c.conformance.unexpected);
            list(os, "shape mismatches", c.conformance.shape_mismatches);
            list(os, "dtype differences", c.conformance.dtype_mismatches);
        }
    }
    return os.str();
}

} // namespace h3::model
