#include "fuzz_check.h"

#include <cstdio>
#include <unistd.h>

namespace h3::fuzz {

std::string scratch_path(const char* name) {
    const char* t = std::getenv("TMPDIR");
    return std::string(t && *t ? t : "/tmp") + "/h3-fuzz-" + std::to_string(::getpid()) + "-" + name;
}

bool write_scratch(const std::string& path, const uint8_t* data, size_t size) {
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) return false;
    const bool ok = std::fwrite(data, 1, size, f) == size;
    return std::fclose(f) == 0 && ok;
}

} // namespace h3::fuzz
