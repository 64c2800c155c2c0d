// A fresh folder under the build tree (test_tmp/<tag>_<pid>_<n>), removed with everything in it when the
// test's TempDir goes out of scope.
#pragma once

#include <atomic>
#include <filesystem>
#include <string>
#include <system_error>
#include <unistd.h>

namespace h3::test {

class TempDir {
public:
    explicit TempDir(const std::string& tag) {
        static std::atomic<int> counter{0};
        path_ = std::filesystem::path(H3_BINARY_DIR) / "test_tmp" /
                (tag + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
        std::filesystem::remove_all(path_);
        std::filesystem::create_directories(path_);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path_, ec);
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    const std::filesystem::path& path() const { return path_; }
    // The folder, or `rel` inside it, as a string.
    std::string str(const std::string& rel = "") const {
        return (rel.empty() ? path_ : path_ / rel).string();
    }

private:
    std::filesystem::path path_;
};

} // namespace h3::test
