#include "serve/job_store.h"

#include "io/json_file.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <sys/file.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace h3::serve {

namespace {

constexpr const char* kRecordFile = "job.json";
constexpr const char* kRecordTmp = "job.json.tmp";
constexpr const char* kLockFile = ".lock";
constexpr const char* kDeletedPrefix = ".deleted-";
constexpr const char* kPrefix = "video_";
constexpr size_t kHexDigits = 32;

// Writes `text` to `path` through `path.tmp`, fsync and rename: a reader sees the old or the new file.
Status write_atomically(const fs::path& path, const std::string& text) {
    const fs::path tmp = path.string() + ".tmp";
    FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return io_error("cannot write " + tmp.string());
    const bool ok = std::fwrite(text.data(), 1, text.size(), f) == text.size() && std::fflush(f) == 0 &&
                    fsync(fileno(f)) == 0;
    if (std::fclose(f) != 0 || !ok) {
        std::error_code ec;
        fs::remove(tmp, ec);
        return io_error("cannot write " + tmp.string());
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) return io_error("cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
    return ok_status();
}

Result<api::VideoRecord> read_record(const fs::path& path) {
    std::ifstream in(path);
    if (!in) return not_found("no " + path.string());
    std::stringstream ss;
    ss << in.rdbuf();
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::parse_json(ss.str(), path.string()));
    auto r = api::record_from_json(j);
    if (!r.ok()) return r.status().with_context(path.string());
    return r;
}

} // namespace

std::string new_job_id() {
    std::random_device rd;
    static const char* hex = "0123456789abcdef";
    std::string id = kPrefix;
    for (size_t i = 0; i < kHexDigits / 8; ++i) {
        uint32_t v = rd();
        for (int k = 0; k < 8; ++k, v >>= 4) id += hex[v & 15];
    }
    return id;
}

bool valid_job_id(const std::string& id) {
    const size_t p = std::char_traits<char>::length(kPrefix);
    return id.size() == p + kHexDigits && id.compare(0, p, kPrefix) == 0 &&
           id.find_first_not_of("0123456789abcdef", p) == std::string::npos;
}

struct JobStore::DirLock {
    int fd = -1;
    ~DirLock() {
        if (fd >= 0) ::close(fd); // releases the flock
    }
};

Result<JobStore> JobStore::open(const std::string& root) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec || !fs::is_directory(root)) return io_error("output directory " + root + ": cannot create it");
    auto lock = std::make_shared<DirLock>();
    const std::string lock_path = (fs::path(root) / kLockFile).string();
    lock->fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (lock->fd < 0)
        return io_error("output directory " + root + ": cannot open its lock file " + lock_path + ": " +
                        std::strerror(errno));
    if (::flock(lock->fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = {};
        const ssize_t n = ::pread(lock->fd, pid, sizeof pid - 1, 0);
        const std::string holder = n > 0 ? std::string(pid, static_cast<size_t>(n)) : "unknown";
        return io_error("output directory " + root + " is in use by another h3-engine serve (pid " + holder +
                        "); give each server its own --output-dir");
    }
    const std::string me = std::to_string(::getpid());
    if (::ftruncate(lock->fd, 0) != 0 || ::pwrite(lock->fd, me.data(), me.size(), 0) < 0)
        return io_error("output directory " + root + ": cannot write its lock file " + lock_path);
    // A write probe: a read-only directory fails at start, not at the first job.
    const fs::path probe = fs::path(root) / ".write_probe";
    if (Status s = write_atomically(probe, "ok"); !s.ok())
        return io_error("output directory " + root + " is not writable");
    fs::remove(probe, ec);
    return JobStore(fs::absolute(root).lexically_normal().string(), std::move(lock));
}

std::string JobStore::job_dir(const std::string& id) const {
    return (fs::path(root_) / id).string();
}

std::string JobStore::content_path(const std::string& id, const char* file) const {
    return (fs::path(root_) / id / file).string();
}

std::string JobStore::partial_path(const std::string& id, const char* file) const {
    // the extension stays last: the decoder picks the container from it
    return (fs::path(root_) / id / (std::string("partial.") + file)).string();
}

Status JobStore::save(const api::VideoRecord& record) const {
    std::error_code ec;
    fs::create_directories(job_dir(record.id), ec);
    if (ec) return io_error("cannot create " + job_dir(record.id) + ": " + ec.message());
    return write_atomically(fs::path(job_dir(record.id)) / kRecordFile, record.to_json(true).dump(2) + "\n");
}

Status JobStore::remove(const std::string& id) const {
    std::error_code ec;
    if (!fs::exists(job_dir(id), ec)) return ok_status();
    // the rename is the deletion (atomic): recover() never sees the record again, whatever happens next
    const fs::path trash =
        fs::path(root_) / (std::string(kDeletedPrefix) + id + "-" + new_job_id().substr(6, 8));
    fs::rename(job_dir(id), trash, ec);
    if (ec) return io_error("cannot remove " + job_dir(id) + ": " + ec.message());
    fs::remove_all(trash, ec);
    if (ec) return io_error("cannot remove " + trash.string() + ": " + ec.message());
    return ok_status();
}

Status JobStore::commit(const std::string& id, const char* file) const {
    std::error_code ec;
    fs::rename(partial_path(id, file), content_path(id, file), ec);
    if (ec) return io_error("cannot move " + partial_path(id, file) + " into place: " + ec.message());
    return ok_status();
}

Result<Recovery> JobStore::recover(int64_t now) const {
    Recovery rec;
    std::error_code ec;
    std::vector<fs::path> trash;
    for (const auto& entry : fs::directory_iterator(root_, ec)) {
        if (!entry.is_directory()) continue;
        const std::string name = entry.path().filename().string();
        if (name.rfind(kDeletedPrefix, 0) == 0) { // a deletion the last process did not finish
            trash.push_back(entry.path());
            continue;
        }
        if (!valid_job_id(name)) continue;
        std::error_code fe;
        if (!fs::exists(entry.path() / kRecordFile, fe) && fs::exists(entry.path() / kRecordTmp, fe)) {
            // killed during the job's first record write: the submission never got an answer
            bool only_tmp = true;
            for (const auto& f : fs::directory_iterator(entry.path(), fe)) {
                const std::string fn = f.path().filename().string();
                if (fn != kRecordTmp && fn.rfind("partial.", 0) != 0) only_tmp = false;
            }
            if (only_tmp) {
                fs::remove_all(entry.path(), fe);
                ++rec.orphans_removed;
                continue;
            }
        }
        fs::remove(entry.path() / kRecordTmp, fe);
        auto r = read_record(entry.path() / kRecordFile);
        if (!r.ok()) {
            rec.skipped.push_back(name + ": " + r.status().message());
            continue;
        }
        api::VideoRecord record = std::move(r).value();
        if (record.id != name) {
            rec.skipped.push_back(name + ": its record names " + record.id);
            continue;
        }
        for (const char* f : api::kContentFiles) fs::remove(partial_path(name, f), ec);
        if (!api::is_final(record.status)) {
            const std::string was = api::job_status_name(record.status);
            record.status = api::JobStatus::kFailed;
            record.stage = "done";
            record.completed_at = now;
            record.error = api::JobError{"interrupted", "the server stopped while this job was " + was +
                                                            "; submit it again"};
            H3_TRY(save(record));
            ++rec.interrupted;
        }
        rec.records.push_back(std::move(record));
    }
    if (ec) return io_error("cannot list " + root_ + ": " + ec.message());
    for (const fs::path& t : trash) fs::remove_all(t, ec);
    return rec;
}

} // namespace h3::serve
