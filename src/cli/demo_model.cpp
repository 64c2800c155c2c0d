#include "cli/demo_model.h"

#include "core/strict_int.h"
#include "io/json_file.h"

#include <filesystem>

#ifndef H3_DEMO_MODEL_DIR
#error "H3_DEMO_MODEL_DIR must name models/h3-demo in the source tree (src/cli/CMakeLists.txt sets it)"
#endif

namespace h3::cli {

namespace {

// "--flag value" pairs of train_demo.json's flag lists.
std::string flag_value(const nlohmann::json& flags, const std::string& name) {
    if (!flags.is_array()) return {};
    for (size_t i = 0; i + 1 < flags.size(); ++i)
        if (flags[i].is_string() && flags[i].get<std::string>() == name && flags[i + 1].is_string())
            return flags[i + 1].get<std::string>();
    return {};
}

} // namespace

Result<DemoModel> embedded_demo_model() {
    DemoModel m;
    m.dir = H3_DEMO_MODEL_DIR;
    const std::string info = m.dir + "/train_demo.json";
    std::error_code ec;
    if (!std::filesystem::is_regular_file(info, ec))
        return not_found("no --model given, and the embedded demo model is not at " + m.dir +
                         " (this binary was built from a source tree that held it): pass --model DIR");
    H3_ASSIGN_OR_RETURN(auto j, io::read_json_file(info));
    const nlohmann::json none;
    const nlohmann::json& gen = j.contains("generate_flags") ? j["generate_flags"] : none;
    m.size = flag_value(gen, "--size");
    const std::string frames = flag_value(gen, "--frames");
    if (m.size.empty() || frames.empty())
        return bad_input(info + ": generate_flags must name the demo's --size WxH and --frames N");
    H3_ASSIGN_OR_RETURN(const int64_t f, parse_int64(frames, info + ": generate_flags --frames", 1, 1 << 20));
    m.frames = static_cast<int>(f);
    const std::string edge =
        flag_value(j.contains("ref2va_flags") ? j["ref2va_flags"] : none, "--reference-image-edge");
    if (!edge.empty()) {
        H3_ASSIGN_OR_RETURN(const int64_t e,
                            parse_int64(edge, info + ": ref2va_flags --reference-image-edge", 1, 1 << 16));
        m.reference_image_edge = static_cast<int>(e);
    }
    return m;
}

} // namespace h3::cli
