#include "bench/quality/settings.h"

#include "cache/cache_spec.h"

#include <algorithm>
#include <charconv>

namespace h3::bench {

namespace {

// The high preset's DBCache (F1B0, rdt 0.04, warmup 4, at most 1 consecutive hit) as a spec, to add one
// field to.
constexpr const char* kHighSpec = "dbcache:Fn=1,Bn=0,rdt=0.04,warmup=4,mc=1";

// TeaCache with the engine's one fitted coefficient set (vLLM-Omni's FL2VA set, which the full-size
// transformer takes by default) given explicitly, so the row runs on every checkpoint.
// The shortest text that reads back as the same double.
std::string shortest(double v) {
    char b[64];
    const auto r = std::to_chars(b, b + sizeof(b), v);
    return std::string(b, r.ptr);
}

std::string teacache_spec() {
    std::string s = "teacache:thresh=" + shortest(cache::kH3Fl2vaTeaCacheThreshold) + ",coeffs=";
    for (size_t i = 0; i < cache::kH3Fl2vaTeaCacheCoefficients.size(); ++i) {
        if (i) s += '/';
        s += shortest(cache::kH3Fl2vaTeaCacheCoefficients[i]);
    }
    return s;
}

QualitySetting cache_row(std::string name, std::string spec) {
    return {.name = std::move(name), .group = "cache", .flags = "--cache " + spec, .cache = spec};
}

QualitySetting attention_row(std::string name, std::string spec) {
    return {.name = std::move(name),
            .group = "attention",
            .flags = "--attention " + spec,
            .attention = std::move(spec)};
}

std::vector<QualitySetting> make_settings() {
    std::vector<QualitySetting> s;
    s.push_back(
        {.name = "lossless", .group = "reference", .flags = "--quality lossless", .quality = "lossless"});
    s.push_back({.name = "high", .group = "cache", .flags = "--quality high", .quality = "high"});
    s.push_back(cache_row("high-taylorseer1", std::string(kHighSpec) + ",taylorseer=1"));
    s.push_back(cache_row("high-taylorseer2", std::string(kHighSpec) + ",taylorseer=2"));
    for (const char* scm : {"fast", "medium", "slow", "ultra"})
        s.push_back(cache_row(std::string("scm-") + scm, std::string("dbcache:Fn=1,Bn=0,scm=") + scm));
    s.push_back(cache_row("scm-fast-static", "dbcache:Fn=1,Bn=0,scm=fast,scm_policy=static"));
    s.push_back(cache_row("dbcache-defaults", "dbcache"));
    s.push_back(cache_row("teacache", teacache_spec()));
    s.push_back(cache_row("velocity", "velocity"));
    s.push_back({.name = "int8", .group = "weights", .flags = "--weight-dtype int8", .weight_dtype = "int8"});
    s.push_back({.name = "bf16", .group = "precision", .flags = "--dtype bf16", .dtype = "bf16"});
    s.push_back({.name = "fp16", .group = "precision", .flags = "--dtype fp16", .dtype = "fp16"});
    s.push_back({.name = "fp8",
                 .group = "precision",
                 .flags = "--dtype bf16 --precision fp8",
                 .dtype = "bf16",
                 .precision = "fp8"});
    s.push_back(attention_row("vsa-0.5", "vsa:sparsity=0.5"));
    s.push_back(attention_row("vsa-0.9", "vsa:sparsity=0.9"));
    s.push_back(attention_row("vsa-0.9-compete", "vsa:sparsity=0.9,mode=compete"));
    return s;
}

template <typename T>
Result<std::vector<T>> select_by_name(const std::vector<T>& all, const std::string& names, const char* flag) {
    if (names.empty() || names == "all") return all;
    std::vector<std::string> wanted;
    size_t start = 0;
    while (start <= names.size()) {
        const size_t comma = std::min(names.find(',', start), names.size());
        wanted.push_back(names.substr(start, comma - start));
        start = comma + 1;
    }
    std::string known;
    for (const T& t : all) known += (known.empty() ? "" : ", ") + t.name;
    for (const std::string& w : wanted)
        if (std::none_of(all.begin(), all.end(), [&](const T& t) { return t.name == w; }))
            return invalid_argument(std::string(flag) + ": unknown name '" + w + "' (known: " + known +
                                    ", or all)");
    std::vector<T> out;
    for (const T& t : all)
        if (std::find(wanted.begin(), wanted.end(), t.name) != wanted.end()) out.push_back(t);
    return out;
}

} // namespace

const std::vector<QualitySetting>& all_quality_settings() {
    static const std::vector<QualitySetting> settings = make_settings();
    return settings;
}

Result<std::vector<QualitySetting>> select_quality_settings(const std::string& names) {
    return select_by_name(all_quality_settings(), names, "--settings");
}

const std::vector<QualityCase>& all_quality_cases() {
    static const std::vector<QualityCase> cases = {
        // captions in the demo model's vocabulary (tools/train_demo/demo_data.py), so that its table measures
        // clips that follow their prompts; the random tiny model takes any text
        {.name = "ball",
         .task = "t2va",
         .prompt = "a red ball bounces to the left on a dark background",
         .seed = 1},
        {.name = "square",
         .task = "t2va",
         .prompt = "a blue square bounces up on a light background",
         .seed = 2},
        {.name = "keyframe",
         .task = "fl2va",
         .prompt = "a yellow ball bounces to the right on a dark background",
         .seed = 3},
    };
    return cases;
}

Result<std::vector<QualityCase>> select_quality_cases(const std::string& names) {
    return select_by_name(all_quality_cases(), names, "--cases");
}

io::DecodedImage quality_keyframe(int width, int height) {
    io::DecodedImage d;
    d.image = io::RgbImage(width, height);
    d.format = io::ImageFormat::kPng;
    d.source_mode = "RGB";
    d.stored_width = width;
    d.stored_height = height;
    // demo_data's yellow (240, 215, 40) ball of radius 10 px at a 64 px height, centred, on its dark
    // background (24, 28, 44): the first frame of a demo clip
    const int cx = width / 2, cy = height / 2, r = std::max(2, height * 10 / 64);
    for (int y = 0; y < height; ++y) {
        uint8_t* row = d.image.row(y);
        for (int x = 0; x < width; ++x) {
            const bool disc = (x - cx) * (x - cx) + (y - cy) * (y - cy) <= r * r;
            row[3 * x + 0] = static_cast<uint8_t>(disc ? 240 : 24);
            row[3 * x + 1] = static_cast<uint8_t>(disc ? 215 : 28);
            row[3 * x + 2] = static_cast<uint8_t>(disc ? 40 : 44);
        }
    }
    return d;
}

} // namespace h3::bench
