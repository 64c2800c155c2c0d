// Private temporary files for data that arrives from outside (uploads): created fresh with mkostemp
// (O_CREAT|O_EXCL, so never an existing file or a symlink; O_NOFOLLOW|O_CLOEXEC), mode 0600, inside one
// private 0700 directory per process ("$TMPDIR/h3-<pid>-XXXXXX", made with mkdtemp), under a name that owes
// nothing to the client. The file is removed when its owner goes; the directory at exit.
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <string>

namespace h3::io {

class TempFile {
public:
    // A new empty file in the private directory; `tag` (letters only, e.g. "upload") starts its name.
    static Result<TempFile> create(const std::string& tag = "upload");

    TempFile() = default;
    TempFile(TempFile&& other) noexcept;
    TempFile& operator=(TempFile&& other) noexcept;
    TempFile(const TempFile&) = delete;
    TempFile& operator=(const TempFile&) = delete;
    ~TempFile(); // closes and unlinks

    bool valid() const { return fd_ >= 0; }
    const std::string& path() const { return path_; }
    int64_t size() const { return size_; }

    Status append(const void* data, size_t n); // writes at the end (no fsync: the file lives for one request)

private:
    void reset();
    int fd_ = -1;
    std::string path_;
    int64_t size_ = 0;
};

// The private directory (created on first use); for tests.
Result<std::string> private_temp_dir();

} // namespace h3::io
