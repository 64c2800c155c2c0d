// Shared by the libFuzzer targets: an input may be refused, but only with a clean Status of an expected kind;
// anything else (a crash, a sanitizer report, an unexpected code) is a finding.
#pragma once

#include "core/status.h"

#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <string>

namespace h3::fuzz {

inline void expect_clean(const Status& st, std::initializer_list<ErrorCode> allowed, const char* what) {
    if (st.ok()) return;
    for (ErrorCode c : allowed)
        if (st.code() == c) return;
    std::fprintf(stderr, "%s: unexpected status %s\n", what, st.to_string().c_str());
    std::abort();
}

// A per-process scratch file for the readers that take a path (FFmpeg demuxers, the WAV reader).
std::string scratch_path(const char* name);
bool write_scratch(const std::string& path, const uint8_t* data, size_t size);

} // namespace h3::fuzz
