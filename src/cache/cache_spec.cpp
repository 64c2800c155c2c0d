#include "cache/cache_spec.h"

#include <cmath>
#include <cstdio>
#include <sstream>
#include <utility>

namespace h3::cache {

namespace {

using Fields = std::vector<std::pair<std::string, std::string>>;

Result<double> to_number(const std::string& kind, const std::string& key, const std::string& v) {
    try {
        size_t n = 0;
        double d = std::stod(v, &n);
        if (n != v.size() || !std::isfinite(d)) throw std::invalid_argument(v);
        return d;
    } catch (const std::exception&) {
        return invalid_argument("cache " + kind + ": field '" + key + "' must be a number, got '" + v + "'");
    }
}

Result<int> to_int(const std::string& kind, const std::string& key, const std::string& v) {
    H3_ASSIGN_OR_RETURN(double d, to_number(kind, key, v));
    if (d != std::floor(d) || std::fabs(d) > 1e9)
        return invalid_argument("cache " + kind + ": field '" + key + "' must be an integer, got '" + v +
                                "'");
    return static_cast<int>(d);
}

Status range(const std::string& kind, const std::string& key, double v, double lo, double hi,
             const std::string& what) {
    if (v < lo || v > hi)
        return invalid_argument("cache " + kind + ": " + key + " = " + std::to_string(v) +
                                " is out of range (" + what + ")");
    return ok_status();
}

Result<std::vector<double>> to_list(const std::string& kind, const std::string& key, const std::string& v) {
    std::vector<double> out;
    std::stringstream ss(v);
    std::string item;
    while (std::getline(ss, item, '/')) {
        H3_ASSIGN_OR_RETURN(double d, to_number(kind, key, item));
        out.push_back(d);
    }
    return out;
}

Status apply_refresh(CacheSpec& s, const std::string& key, const std::string& v, bool& used) {
    used = true;
    if (key == "refresh" || key == "force_refresh_step_hint") {
        H3_ASSIGN_OR_RETURN(s.refresh.step, to_int("refresh", key, v));
        if (s.refresh.policy == RefreshPolicy::kNone) s.refresh.policy = RefreshPolicy::kOnce;
        return range("refresh", key, s.refresh.step, 0, 1e6, "a step index ≥ 0");
    }
    if (key == "refresh_policy" || key == "force_refresh_step_policy") {
        if (v == "once")
            s.refresh.policy = RefreshPolicy::kOnce;
        else if (v == "repeat")
            s.refresh.policy = RefreshPolicy::kRepeat;
        else
            return invalid_argument("cache refresh_policy must be once or repeat, got '" + v + "'");
        return ok_status();
    }
    used = false;
    return ok_status();
}

Status apply_teacache(TeaCacheConfig& c, const std::string& key, const std::string& v) {
    const std::string k = "teacache";
    if (key == "thresh" || key == "rel_l1_thresh") {
        H3_ASSIGN_OR_RETURN(c.rel_l1_thresh, to_number(k, key, v));
        return range(k, key, c.rel_l1_thresh, 1e-9, 100, "must be > 0");
    }
    if (key == "coeffs" || key == "coefficients") {
        H3_ASSIGN_OR_RETURN(c.coefficients, to_list(k, key, v));
        if (c.coefficients.size() < 2 || c.coefficients.size() > 8)
            return invalid_argument(
                "cache teacache: coefficients need 2 to 8 values (highest power first), got " +
                std::to_string(c.coefficients.size()));
        return ok_status();
    }
    return invalid_argument("cache teacache: unknown field '" + key + "' (thresh, coeffs)");
}

Status apply_dbcache(DbCacheConfig& c, const std::string& key, const std::string& v) {
    const std::string k = "dbcache";
    if (key == "Fn" || key == "Fn_compute_blocks") {
        H3_ASSIGN_OR_RETURN(c.fn_compute_blocks, to_int(k, key, v));
        return range(k, key, c.fn_compute_blocks, 1, 1e6, "at least 1 front block");
    }
    if (key == "Bn" || key == "Bn_compute_blocks") {
        H3_ASSIGN_OR_RETURN(c.bn_compute_blocks, to_int(k, key, v));
        return range(k, key, c.bn_compute_blocks, 0, 1e6, "≥ 0");
    }
    if (key == "rdt" || key == "residual_diff_threshold") {
        H3_ASSIGN_OR_RETURN(c.residual_diff_threshold, to_number(k, key, v));
        return range(k, key, c.residual_diff_threshold, 0, 10, "[0, 10]");
    }
    if (key == "max_acc" || key == "max_accumulated_residual_diff_threshold") {
        H3_ASSIGN_OR_RETURN(c.max_accumulated_residual_diff_threshold, to_number(k, key, v));
        return range(k, key, c.max_accumulated_residual_diff_threshold, 0, 1e6, "≥ 0");
    }
    if (key == "warmup" || key == "max_warmup_steps") {
        H3_ASSIGN_OR_RETURN(c.max_warmup_steps, to_int(k, key, v));
        return range(k, key, c.max_warmup_steps, 0, 1e6, "≥ 0");
    }
    if (key == "interval" || key == "warmup_interval") {
        H3_ASSIGN_OR_RETURN(c.warmup_interval, to_int(k, key, v));
        return range(k, key, c.warmup_interval, 1, 1e6, "≥ 1");
    }
    if (key == "max_cached" || key == "max_cached_steps") {
        H3_ASSIGN_OR_RETURN(c.max_cached_steps, to_int(k, key, v));
        return range(k, key, c.max_cached_steps, -1, 1e6, "−1 (unlimited) or ≥ 0");
    }
    if (key == "mc" || key == "max_continuous_cached_steps") {
        H3_ASSIGN_OR_RETURN(c.max_continuous_cached_steps, to_int(k, key, v));
        return range(k, key, c.max_continuous_cached_steps, -1, 1e6, "−1 (unlimited) or ≥ 0");
    }
    if (key == "taylorseer" || key == "taylorseer_order") {
        H3_ASSIGN_OR_RETURN(c.taylorseer_order, to_int(k, key, v));
        return range(k, key, c.taylorseer_order, 0, 2, "0 (off), 1 or 2");
    }
    if (key == "scm" || key == "steps_computation_mask") {
        if (v == "fast" || v == "medium" || v == "slow" || v == "ultra") {
            c.scm_preset = v;
            return ok_status();
        }
        c.scm_mask.clear();
        for (char ch : v) {
            if (ch != '0' && ch != '1')
                return invalid_argument(
                    "cache dbcache: scm must be fast, medium, slow, ultra or a mask of 0/1 "
                    "digits, got '" +
                    v + "'");
            c.scm_mask.push_back(ch - '0');
        }
        if (c.scm_mask.empty()) return invalid_argument("cache dbcache: scm mask is empty");
        return ok_status();
    }
    if (key == "scm_policy" || key == "steps_computation_policy") {
        if (v == "dynamic")
            c.scm_policy = ScmPolicy::kDynamic;
        else if (v == "static")
            c.scm_policy = ScmPolicy::kStatic;
        else
            return invalid_argument("cache dbcache: scm_policy must be dynamic or static, got '" + v + "'");
        return ok_status();
    }
    return invalid_argument("cache dbcache: unknown field '" + key +
                            "' (Fn, Bn, rdt, warmup, interval, max_cached, mc, max_acc, taylorseer, scm, "
                            "scm_policy, refresh, refresh_policy)");
}

Status apply_velocity(VelocityConfig& c, const std::string& key, const std::string& v) {
    const std::string k = "velocity";
    if (key == "start" || key == "start_ratio") {
        H3_ASSIGN_OR_RETURN(c.start_ratio, to_number(k, key, v));
        return range(k, key, c.start_ratio, 0, 1, "[0, 1]");
    }
    if (key == "end" || key == "end_ratio") {
        H3_ASSIGN_OR_RETURN(c.end_ratio, to_number(k, key, v));
        return range(k, key, c.end_ratio, 0, 1, "[0, 1]");
    }
    if (key == "refresh_interval") {
        H3_ASSIGN_OR_RETURN(c.refresh_interval, to_int(k, key, v));
        return range(k, key, c.refresh_interval, 1, 1e6, "≥ 1");
    }
    if (key == "max_reuse" || key == "max_consecutive_reuse") {
        H3_ASSIGN_OR_RETURN(c.max_consecutive_reuse, to_int(k, key, v));
        return range(k, key, c.max_consecutive_reuse, 0, 1e6, "≥ 0");
    }
    if (key == "threshold") {
        H3_ASSIGN_OR_RETURN(double t, to_number(k, key, v));
        H3_TRY(range(k, key, t, 0, 100, "≥ 0"));
        c.threshold = t;
        return ok_status();
    }
    return invalid_argument("cache velocity: unknown field '" + key +
                            "' (start, end, refresh_interval, max_reuse, threshold)");
}

Result<CacheSpec> build(const std::string& kind, const Fields& fields) {
    CacheSpec s;
    if (kind == "none")
        s.kind = CacheKind::kNone;
    else if (kind == "teacache")
        s.kind = CacheKind::kTeaCache;
    else if (kind == "dbcache")
        s.kind = CacheKind::kDbCache;
    else if (kind == "velocity")
        s.kind = CacheKind::kVelocity;
    else
        return invalid_argument("unknown cache '" + kind + "' (none, teacache, dbcache, velocity)");
    for (const auto& [key, v] : fields) {
        bool used = false;
        H3_TRY(apply_refresh(s, key, v, used));
        if (used) continue;
        switch (s.kind) {
        case CacheKind::kNone:
            return invalid_argument("cache none takes no fields, got '" + key + "'");
        case CacheKind::kTeaCache:
            H3_TRY(apply_teacache(s.teacache, key, v));
            break;
        case CacheKind::kDbCache:
            H3_TRY(apply_dbcache(s.dbcache, key, v));
            break;
        case CacheKind::kVelocity:
            H3_TRY(apply_velocity(s.velocity, key, v));
            break;
        }
    }
    if (s.kind == CacheKind::kNone && s.refresh.policy != RefreshPolicy::kNone)
        return invalid_argument("cache none: refresh hints need a cache");
    if (s.refresh.policy == RefreshPolicy::kRepeat && s.refresh.step < 1)
        return invalid_argument("cache refresh: a repeat refresh needs refresh ≥ 1");
    if (s.kind == CacheKind::kVelocity && s.velocity.end_ratio <= s.velocity.start_ratio)
        return invalid_argument("cache velocity: end (" + std::to_string(s.velocity.end_ratio) +
                                ") must exceed start (" + std::to_string(s.velocity.start_ratio) + ")");
    return s;
}

std::string fmt(double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

} // namespace

const char* cache_kind_name(CacheKind k) {
    switch (k) {
    case CacheKind::kNone:
        return "none";
    case CacheKind::kTeaCache:
        return "teacache";
    case CacheKind::kDbCache:
        return "dbcache";
    case CacheKind::kVelocity:
        return "velocity";
    }
    return "?";
}

bool RefreshHint::fires(int i) const {
    switch (policy) {
    case RefreshPolicy::kNone:
        return false;
    case RefreshPolicy::kOnce:
        return i == step;
    case RefreshPolicy::kRepeat:
        return step > 0 && i > 0 && i % step == 0;
    }
    return false;
}

Result<CacheSpec> parse_cache_spec(const std::string& text) {
    if (text.find_first_of("+; ") != std::string::npos)
        return invalid_argument("cache '" + text +
                                "': one cache per request (two caches cannot be combined)");
    const auto colon = text.find(':');
    const std::string kind = text.substr(0, colon);
    Fields fields;
    if (colon != std::string::npos) {
        std::stringstream ss(text.substr(colon + 1));
        std::string item;
        while (std::getline(ss, item, ',')) {
            const auto eq = item.find('=');
            if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
                return invalid_argument("cache " + kind + ": field '" + item + "' must look like key=value");
            for (const auto& f : fields)
                if (f.first == item.substr(0, eq))
                    return invalid_argument("cache " + kind + ": field '" + f.first + "' given twice");
            fields.emplace_back(item.substr(0, eq), item.substr(eq + 1));
        }
    }
    return build(kind, fields);
}

Result<CacheSpec> parse_cache_json(const nlohmann::json& j) {
    if (j.is_string()) return parse_cache_spec(j.get<std::string>());
    if (!j.is_object()) return invalid_argument("cache: expected an object like {\"dbcache\": {...}}");
    if (j.size() != 1)
        return invalid_argument("cache: exactly one cache per request, got " + std::to_string(j.size()) +
                                " keys");
    const std::string kind = j.begin().key();
    const nlohmann::json& body = j.begin().value();
    if (!body.is_object() && !body.is_null())
        return invalid_argument("cache " + kind + ": the fields must be an object");
    Fields fields;
    if (body.is_object())
        for (auto it = body.begin(); it != body.end(); ++it) {
            const nlohmann::json& v = it.value();
            std::string s;
            if (v.is_string())
                s = v.get<std::string>();
            else if (v.is_boolean())
                s = v.get<bool>() ? "1" : "0";
            else if (v.is_number())
                s = v.dump();
            else if (v.is_array()) {
                // coefficient lists and explicit masks
                const bool mask = it.key() == "scm" || it.key() == "steps_computation_mask";
                for (size_t i = 0; i < v.size(); ++i) {
                    if (!v[i].is_number())
                        return invalid_argument("cache " + kind + ": field '" + it.key() +
                                                "' must hold numbers");
                    s += (i && !mask ? "/" : "") + v[i].dump();
                }
            } else
                return invalid_argument("cache " + kind + ": field '" + it.key() +
                                        "' has an unsupported type");
            fields.emplace_back(it.key(), s);
        }
    return build(kind, fields);
}

Result<CacheSpec> quality_preset(const std::string& name) {
    if (name == "lossless") return CacheSpec{};
    if (name == "high") {
        // vLLM-Omni / SGLang H3 "high" profile (h3-model.md §13).
        return parse_cache_spec("dbcache:Fn=1,Bn=0,rdt=0.04,warmup=4,mc=1");
    }
    return invalid_argument("quality must be lossless or high, got '" + name + "'");
}

Status validate_for_steps(const CacheSpec& s, int forwards, int num_layers) {
    if (s.refresh.policy != RefreshPolicy::kNone && s.refresh.step >= forwards)
        return invalid_argument("cache refresh step " + std::to_string(s.refresh.step) +
                                " is outside the request's schedule (steps 0.." +
                                std::to_string(forwards - 1) + ")");
    if (s.kind == CacheKind::kDbCache) {
        const DbCacheConfig& c = s.dbcache;
        if (c.fn_compute_blocks + c.bn_compute_blocks >= num_layers)
            return invalid_argument(
                "cache dbcache: Fn + Bn = " + std::to_string(c.fn_compute_blocks + c.bn_compute_blocks) +
                " leaves no middle block to cache (the model has " + std::to_string(num_layers) + " blocks)");
        if (!c.scm_mask.empty() && static_cast<int>(c.scm_mask.size()) != forwards)
            return invalid_argument("cache dbcache: the scm mask has " + std::to_string(c.scm_mask.size()) +
                                    " entries, the request runs " + std::to_string(forwards) + " forwards");
        if (!c.scm_preset.empty() && forwards < 8 && forwards != 4 && forwards != 6)
            return invalid_argument(
                "cache dbcache: the predefined scm masks need 4, 6 or at least 8 forwards, "
                "the request runs " +
                std::to_string(forwards));
    }
    return ok_status();
}

std::string CacheSpec::describe() const {
    std::string r;
    switch (kind) {
    case CacheKind::kNone:
        return "none";
    case CacheKind::kTeaCache:
        r = "teacache(thresh=" + fmt(teacache.rel_l1_thresh) +
            (teacache.coefficients.empty() ? "" : ",custom coefficients") + ")";
        break;
    case CacheKind::kDbCache: {
        const DbCacheConfig& c = dbcache;
        r = "DBCache_F" + std::to_string(c.fn_compute_blocks) + "B" + std::to_string(c.bn_compute_blocks) +
            "_W" + std::to_string(c.max_warmup_steps) + "I" + std::to_string(c.warmup_interval) + "M" +
            std::to_string(c.max_cached_steps) + "MC" + std::to_string(c.max_continuous_cached_steps) + "_R" +
            fmt(c.residual_diff_threshold);
        if (c.has_scm())
            r += "_SCM" + (c.scm_mask.empty() ? c.scm_preset : std::string("custom")) + "_" +
                 (c.scm_policy == ScmPolicy::kStatic ? "static" : "dynamic");
        if (c.taylorseer_order > 0) r += "_T1O" + std::to_string(c.taylorseer_order);
        break;
    }
    case CacheKind::kVelocity:
        r = "velocity(start=" + fmt(velocity.start_ratio) + ",end=" + fmt(velocity.end_ratio) +
            ",refresh_interval=" + std::to_string(velocity.refresh_interval) +
            ",max_reuse=" + std::to_string(velocity.max_consecutive_reuse) +
            (velocity.threshold ? ",threshold=" + fmt(*velocity.threshold) : std::string()) + ")";
        break;
    }
    if (refresh.policy != RefreshPolicy::kNone)
        r += std::string("+refresh_") + (refresh.policy == RefreshPolicy::kOnce ? "once@" : "every") +
             std::to_string(refresh.step);
    return r;
}

nlohmann::json CacheSpec::to_json() const {
    nlohmann::json j;
    j["kind"] = cache_kind_name(kind);
    j["describe"] = describe();
    return j;
}

} // namespace h3::cache
