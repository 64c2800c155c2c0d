#include "io/json_file.h"

#include <fstream>
#include <sstream>

namespace h3::io {

Result<nlohmann::json> read_json_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return not_found("cannot open JSON file " + path);
    std::stringstream ss;
    ss << in.rdbuf();
    try {
        return nlohmann::json::parse(ss.str());
    } catch (const nlohmann::json::parse_error& e) {
        return bad_input("file " + path + " is not valid JSON: " + e.what());
    }
}

Status write_json_file(const std::string& path, const nlohmann::json& j) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    if (!out) return io_error("cannot write " + path);
    out << j.dump(2) << "\n";
    if (!out) return io_error("write to " + path + " failed");
    return ok_status();
}

} // namespace h3::io
