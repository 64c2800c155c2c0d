#include "io/output_path.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <unistd.h>

namespace fs = std::filesystem;

namespace h3::io {

namespace {

std::string lower(std::string s) {
    for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    return s;
}

std::string quoted(const std::string& p) {
    return "'" + p + "'";
}

std::string list(const std::vector<std::string>& v) {
    std::string out;
    for (const std::string& s : v) out += (out.empty() ? "" : ", ") + s;
    return out;
}

// The folder exists (created when missing) and this process may create entries in it.
Status ready_folder(const fs::path& dir, const std::string& path) {
    std::error_code ec;
    if (dir.empty()) return ok_status(); // the working directory
    // the nearest existing ancestor must be a folder
    for (fs::path a = dir; !a.empty(); a = a.parent_path()) {
        if (!fs::exists(a, ec)) {
            if (a == a.parent_path()) break;
            continue;
        }
        if (!fs::is_directory(a, ec))
            return bad_input(quoted(path) + ": " + quoted(a.string()) + " is a file, not a folder");
        break;
    }
    if (!fs::exists(dir, ec)) {
        fs::create_directories(dir, ec);
        if (ec)
            return io_error(quoted(path) + ": cannot create the folder " + quoted(dir.string()) + ": " +
                            ec.message());
    }
    if (::access(dir.c_str(), W_OK | X_OK) != 0)
        return io_error(quoted(path) + ": the folder " + quoted(dir.string()) +
                        " is not writable: " + std::strerror(errno));
    return ok_status();
}

} // namespace

Status prepare_output_path(const std::string& path, const OutputPathRule& rule) {
    if (path.empty()) return bad_input("the path is empty");
    std::error_code ec;
    const fs::path p(path);
    if (rule.kind == OutputPathKind::kDirectory) {
        H3_TRY(ready_folder(p, path));
        return ok_status();
    }
    if (path.back() == '/' || fs::is_directory(p, ec))
        return bad_input(quoted(path) + " is a folder; " + (rule.what.empty() ? "a file" : rule.what) +
                         " is wanted");
    const std::string ext = lower(p.extension().string());
    if (std::find(rule.refused.begin(), rule.refused.end(), ext) != rule.refused.end())
        return bad_input(quoted(path) + ": a " + ext + " file is another output's; this one is " +
                         (rule.what.empty() ? "a file" : rule.what));
    if (!rule.extensions.empty() &&
        std::find(rule.extensions.begin(), rule.extensions.end(), ext) == rule.extensions.end())
        return bad_input(quoted(path) + ": unknown extension '" + p.extension().string() + "'; give " +
                         list(rule.extensions) + (rule.what.empty() ? "" : " (" + rule.what + ")"));
    H3_TRY(ready_folder(p.parent_path(), path));
    if (fs::exists(p, ec) && ::access(p.c_str(), W_OK) != 0)
        return io_error(quoted(path) + " exists and is not writable: " + std::strerror(errno));
    return ok_status();
}

} // namespace h3::io
