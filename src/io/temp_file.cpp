#include "io/temp_file.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <mutex>
#include <sys/stat.h>
#include <unistd.h>

namespace h3::io {

namespace {

struct PrivateDir {
    std::mutex mu;
    std::string path; // empty until made
    ~PrivateDir() {
        if (path.empty()) return;
        std::error_code ec;
        std::filesystem::remove_all(path, ec); // only files this process made live there
    }
};

PrivateDir& private_dir() {
    static PrivateDir d;
    return d;
}

std::string base_temp_dir() {
    const char* t = std::getenv("TMPDIR");
    std::string base = t && *t && t[0] == '/' ? t : "/tmp";
    while (base.size() > 1 && base.back() == '/') base.pop_back();
    return base;
}

} // namespace

Result<std::string> private_temp_dir() {
    PrivateDir& d = private_dir();
    std::lock_guard<std::mutex> lock(d.mu);
    struct stat st {};
    // made once; checked every time so a removed or replaced directory is made again
    if (!d.path.empty() && (lstat(d.path.c_str(), &st) != 0 || !S_ISDIR(st.st_mode) ||
                            st.st_uid != geteuid() || (st.st_mode & 077) != 0))
        d.path.clear();
    if (d.path.empty()) {
        std::string tmpl = base_temp_dir() + "/h3-" + std::to_string(::getpid()) + "-XXXXXX";
        if (!mkdtemp(tmpl.data()))
            return io_error("cannot create a private temporary directory under " + base_temp_dir() + ": " +
                            std::strerror(errno));
        d.path = tmpl; // mkdtemp makes it 0700
    }
    return d.path;
}

Result<TempFile> TempFile::create(const std::string& tag) {
    std::string safe;
    for (char c : tag)
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) safe += c;
    if (safe.empty()) safe = "tmp";
    H3_ASSIGN_OR_RETURN(std::string dir, private_temp_dir());
    std::string tmpl = dir + "/" + safe + "-XXXXXX";
    const int fd = mkostemp(tmpl.data(), O_CLOEXEC | O_NOFOLLOW); // O_CREAT|O_EXCL, mode 0600
    if (fd < 0) return io_error("cannot create a temporary file in " + dir + ": " + std::strerror(errno));
    TempFile f;
    f.fd_ = fd;
    f.path_ = tmpl;
    return f;
}

TempFile::TempFile(TempFile&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)), size_(o.size_) {
    o.fd_ = -1;
    o.path_.clear();
    o.size_ = 0;
}

TempFile& TempFile::operator=(TempFile&& o) noexcept {
    if (this != &o) {
        reset();
        fd_ = o.fd_;
        path_ = std::move(o.path_);
        size_ = o.size_;
        o.fd_ = -1;
        o.path_.clear();
        o.size_ = 0;
    }
    return *this;
}

TempFile::~TempFile() {
    reset();
}

void TempFile::reset() {
    if (fd_ >= 0) ::close(fd_);
    if (!path_.empty()) ::unlink(path_.c_str());
    fd_ = -1;
    path_.clear();
    size_ = 0;
}

Status TempFile::append(const void* data, size_t n) {
    if (fd_ < 0) return internal_error("TempFile::append on a closed file");
    const auto* p = static_cast<const char*>(data);
    while (n > 0) {
        const ssize_t w = ::write(fd_, p, n);
        if (w < 0) {
            if (errno == EINTR) continue;
            return io_error("cannot write the temporary file " + path_ + ": " + std::strerror(errno));
        }
        p += w;
        n -= static_cast<size_t>(w);
        size_ += w;
    }
    return ok_status();
}

} // namespace h3::io
