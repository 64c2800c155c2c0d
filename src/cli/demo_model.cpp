#include "cli/demo_model.h"

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

int int_value(const std::string& s) {
    try {
        size_t used = 0;
        const int v = std::stoi(s, &used);
        return used == s.size() && v > 0 ? v : 0;
    } catch (...) {
        return 0;
    }
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
    m.size = flag_value(j.value("generate_flags", nlohmann::json()), "--size");
    m.frames = int_value(flag_value(j.value("generate_flags", nlohmann::json()), "--frames"));
    m.reference_image_edge =
        int_value(flag_value(j.value("ref2va_flags", nlohmann::json()), "--reference-image-edge"));
    if (m.size.empty() || m.frames == 0)
        return bad_input(info + ": generate_flags must name the demo's --size WxH and --frames N");
    return m;
}

} // namespace h3::cli
