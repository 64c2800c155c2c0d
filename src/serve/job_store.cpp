#include "serve/job_store.h"

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;

namespace h3::serve {

namespace {

constexpr const char* kRecordFile = "job.json";
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
    nlohmann::json j = nlohmann::json::parse(ss.str(), nullptr, false);
    if (j.is_discarded()) return bad_input(path.string() + " is not valid JSON");
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

Result<JobStore> JobStore::open(const std::string& root) {
    std::error_code ec;
    fs::create_directories(root, ec);
    if (ec || !fs::is_directory(root)) return io_error("output directory " + root + ": cannot create it");
    // A write probe: a read-only directory fails at start, not at the first job.
    const fs::path probe = fs::path(root) / ".write_probe";
    if (Status s = write_atomically(probe, "ok"); !s.ok())
        return io_error("output directory " + root + " is not writable");
    fs::remove(probe, ec);
    return JobStore(fs::absolute(root).lexically_normal().string());
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
    fs::remove_all(job_dir(id), ec);
    if (ec) return io_error("cannot remove " + job_dir(id) + ": " + ec.message());
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
    for (const auto& entry : fs::directory_iterator(root_, ec)) {
        if (!entry.is_directory()) continue;
        const std::string name = entry.path().filename().string();
        if (!valid_job_id(name)) continue;
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
    return rec;
}

} // namespace h3::serve
