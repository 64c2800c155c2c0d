#include "runtime/memory_plan.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

namespace h3::runtime {

namespace {

using model::Residency;
using model::ResidencyOptions;
using model::WeightFormat;

struct Candidate {
    bool kept = false;
    ResidencyOptions r;
};

// Placements of `c` from the best (fastest, exact) to the smallest.
std::vector<Candidate> candidates(const ComponentBytes& c, const PlanOptions& o, bool keep) {
    std::vector<Candidate> out;
    auto add = [&](bool kept, Residency mode, int k, WeightFormat f) {
        Candidate cd;
        cd.kept = kept;
        cd.r.mode = mode;
        cd.r.resident_layers = k;
        cd.r.format = f;
        cd.r.prefetch_depth = o.prefetch_depth;
        out.push_back(cd);
    };
    if (c.layers == 0) {
        if (keep && !c.hot) add(true, Residency::kResident, 0, WeightFormat::kNative);
        add(c.hot ? keep : false, Residency::kResident, 0, WeightFormat::kNative);
        return out;
    }
    std::vector<WeightFormat> formats;
    if (c.hot && o.format) {
        formats = {*o.format};
    } else {
        formats = {WeightFormat::kNative};
        if (c.layer_int8 > 0 && (o.allow_int8 || (c.hot && o.format == WeightFormat::kInt8)))
            formats.push_back(WeightFormat::kInt8);
    }
    // A forced K means layerwise.
    const std::optional<Residency> forced =
        !c.hot ? std::nullopt : (o.resident_layers ? std::optional(Residency::kLayerwise) : o.residency);
    const bool forced_mode = forced.has_value();
    for (WeightFormat f : formats) {
        const bool kept = c.hot ? keep : false;
        if (!forced_mode || *forced == Residency::kResident) {
            if (keep && !c.hot) add(true, Residency::kResident, c.layers, f);
            add(kept, Residency::kResident, c.layers, f);
        }
        if (!forced_mode || *forced == Residency::kLayerwise)
            for (int k = c.layers; k >= 0; --k) {
                if (c.hot && o.resident_layers && *o.resident_layers != k) continue;
                add(kept, Residency::kLayerwise, k, f);
            }
    }
    return out;
}

struct State {
    std::vector<const ComponentBytes*> comps;
    std::vector<Candidate> chosen;
};

std::vector<std::pair<Stage, uint64_t>> stage_peaks(const State& s) {
    std::vector<std::pair<Stage, uint64_t>> peaks;
    for (Stage st : {Stage::kConditioning, Stage::kEncode, Stage::kDenoise, Stage::kDecode}) {
        bool present = false;
        uint64_t kept = 0, own = 0, working = 0;
        for (size_t i = 0; i < s.comps.size(); ++i) {
            const uint64_t b = placement_bytes(*s.comps[i], s.chosen[i].r);
            if (s.chosen[i].kept) kept += b;
            if (s.comps[i]->stage == st) {
                present = true;
                if (!s.chosen[i].kept) own += b;
                working = std::max(working, s.comps[i]->working);
            }
        }
        if (present) peaks.push_back({st, kept + own + working});
    }
    return peaks;
}

uint64_t worst(const State& s) {
    uint64_t w = 0;
    for (auto [st, b] : stage_peaks(s)) w = std::max(w, b);
    return w;
}

std::string describe(const ComponentBytes& c, const Candidate& cd) {
    std::string what = c.layers == 0 ? std::string("resident") : cd.r.describe();
    return std::string(cd.kept ? "kept" : "per job") + ", " + what;
}

} // namespace

const char* stage_name(Stage s) {
    switch (s) {
    case Stage::kConditioning:
        return "conditioning";
    case Stage::kEncode:
        return "encode";
    case Stage::kDenoise:
        return "denoise";
    default:
        return "decode";
    }
}

const ComponentPlan* MemoryPlan::find(const std::string& name) const {
    for (const ComponentPlan& c : components)
        if (c.name == name) return &c;
    return nullptr;
}

uint64_t placement_bytes(const ComponentBytes& c, const ResidencyOptions& r) {
    if (c.layers == 0) return c.fixed + c.resident_extra;
    const bool int8 = r.format == WeightFormat::kInt8 && c.layer_int8 > 0;
    const uint64_t layer = int8 ? c.layer_int8 : c.layer;
    const uint64_t staging = int8 ? c.layer : 0;
    if (r.mode == Residency::kResident) return c.fixed + c.resident_extra + c.layers * layer + staging;
    const int k = std::clamp(r.resident_layers, 0, c.layers);
    const int ring = std::min(r.prefetch_depth + 1, c.layers - k);
    return c.fixed + static_cast<uint64_t>(k + ring) * layer + staging;
}

Result<MemoryPlan> plan_memory(const std::vector<ComponentBytes>& comps, const PlanOptions& o) {
    if (comps.empty()) return invalid_argument("memory plan: no components");
    if (o.budget == 0) return invalid_argument("memory plan: the device budget is 0 bytes");
    if (o.prefetch_depth < 1) return invalid_argument("memory plan: prefetch depth must be at least 1");
    State s;
    std::vector<std::vector<Candidate>> cands;
    int hot = -1;
    for (size_t i = 0; i < comps.size(); ++i) {
        if (comps[i].hot) {
            if (hot >= 0) return invalid_argument("memory plan: more than one hot component");
            hot = static_cast<int>(i);
        }
        s.comps.push_back(&comps[i]);
        cands.push_back(candidates(comps[i], o, o.keep_between_jobs));
        if (cands.back().empty())
            return invalid_field("resident_blocks", "memory plan: the forced placement (resident_blocks " +
                                                        std::to_string(o.resident_layers.value_or(-1)) +
                                                        ") does not exist for " + comps[i].name + " (" +
                                                        std::to_string(comps[i].layers) + " layers)");
        s.chosen.push_back(cands.back().back()); // the smallest placement first
    }
    const std::string budget_text = format_bytes(o.budget);
    if (worst(s) > o.budget) {
        std::string parts;
        for (size_t i = 0; i < comps.size(); ++i)
            parts += "; " + comps[i].name + " at least " +
                     format_bytes(placement_bytes(comps[i], s.chosen[i].r)) + " (" +
                     describe(comps[i], s.chosen[i]) + ") + " + format_bytes(comps[i].working) + " working";
        std::string hint = o.allow_int8 || o.format == WeightFormat::kInt8
                               ? ""
                               : " (int8 weights would halve the streamed layers)";
        return invalid_argument("cannot fit the model in a " + budget_text +
                                " device budget: the smallest "
                                "placement peaks at " +
                                format_bytes(worst(s)) + parts + hint);
    }
    // The hot component: its best placement that fits with the others at their smallest.
    auto raise = [&](size_t i) {
        for (const Candidate& cd : cands[i]) {
            Candidate old = s.chosen[i];
            s.chosen[i] = cd;
            if (worst(s) <= o.budget) return;
            s.chosen[i] = old;
        }
    };
    if (hot >= 0) raise(static_cast<size_t>(hot));
    for (size_t i = 0; i < comps.size(); ++i)
        if (static_cast<int>(i) != hot) raise(i);

    MemoryPlan plan;
    plan.stage_peaks = stage_peaks(s);
    plan.peak = worst(s);
    char line[512];
    std::snprintf(line, sizeof(line), "memory plan for a %s device budget (peak %s):\n", budget_text.c_str(),
                  format_bytes(plan.peak).c_str());
    plan.text = line;
    for (size_t i = 0; i < comps.size(); ++i) {
        ComponentPlan cp;
        cp.name = comps[i].name;
        cp.stage = comps[i].stage;
        cp.kept = s.chosen[i].kept;
        cp.residency = s.chosen[i].r;
        cp.device_bytes = placement_bytes(comps[i], cp.residency);
        cp.working = comps[i].working;
        std::snprintf(line, sizeof(line), "  %-14s %s: %s weights + %s working\n", cp.name.c_str(),
                      describe(comps[i], s.chosen[i]).c_str(), format_bytes(cp.device_bytes).c_str(),
                      format_bytes(cp.working).c_str());
        plan.text += line;
        plan.components.push_back(std::move(cp));
    }
    plan.text += "  stage peaks:";
    for (auto [st, b] : plan.stage_peaks)
        plan.text += std::string(" ") + stage_name(st) + " " + format_bytes(b);
    return plan;
}

Result<uint64_t> parse_byte_size(const std::string& text, const std::string& field) {
    size_t pos = 0;
    double v = 0;
    try {
        v = std::stod(text, &pos);
    } catch (const std::exception&) {
        pos = 0;
    }
    std::string unit = text.substr(pos);
    unit.erase(std::remove_if(unit.begin(), unit.end(), [](unsigned char ch) { return std::isspace(ch); }),
               unit.end());
    for (char& ch : unit) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
    double mult = 0;
    if (unit.empty() || unit == "b")
        mult = 1;
    else if (unit == "k" || unit == "kib")
        mult = 1024.0;
    else if (unit == "kb")
        mult = 1e3;
    else if (unit == "m" || unit == "mib")
        mult = 1024.0 * 1024;
    else if (unit == "mb")
        mult = 1e6;
    else if (unit == "g" || unit == "gib")
        mult = 1024.0 * 1024 * 1024;
    else if (unit == "gb")
        mult = 1e9;
    else if (unit == "t" || unit == "tib")
        mult = 1024.0 * 1024 * 1024 * 1024;
    else if (unit == "tb")
        mult = 1e12;
    if (pos == 0 || mult == 0 || !(v > 0) || !std::isfinite(v) || v * mult > 9.0e18)
        return invalid_field(field,
                             field + " '" + text + "' must be a positive size such as 24GiB, 80GB or 512MiB");
    return static_cast<uint64_t>(std::llround(v * mult));
}

std::string format_bytes(uint64_t bytes) {
    char buf[32];
    const double b = static_cast<double>(bytes);
    if (bytes >= (1ull << 30))
        std::snprintf(buf, sizeof(buf), "%.2f GiB", b / (1ull << 30));
    else if (bytes >= (1ull << 20))
        std::snprintf(buf, sizeof(buf), "%.2f MiB", b / (1ull << 20));
    else
        std::snprintf(buf, sizeof(buf), "%.2f KiB", b / (1ull << 10));
    return buf;
}

} // namespace h3::runtime
