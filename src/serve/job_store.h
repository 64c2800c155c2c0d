// Persistence of jobs: one directory per job under the output directory, holding job.json (the video
// record, written atomically through a temporary file and rename) and the outputs (video.mp4, audio.wav,
// renamed into place only when complete). On start, recover() reads every record back; a job that was
// queued or running when the process died is marked failed with the reason, never dropped.
#pragma once

#include "core/status.h"
#include "serve/wire/video_object.h"

#include <string>
#include <vector>

namespace h3::serve {

// "video_" + 32 hex digits from the OS's random device.
std::string new_job_id();
// True for ids new_job_id could have made (the HTTP layer checks before touching the disk).
bool valid_job_id(const std::string& id);

struct Recovery {
    std::vector<api::VideoRecord> records; // every readable record, interrupted ones already marked failed
    int interrupted = 0;                   // queued / in_progress jobs marked failed
    std::vector<std::string> skipped;      // directories without a readable record ("dir: reason")
};

class JobStore {
public:
    // Creates the directory when missing.
    static Result<JobStore> open(const std::string& root);

    const std::string& root() const { return root_; }
    std::string job_dir(const std::string& id) const;
    // A content file's final path and the path it is written under until it is complete.
    std::string content_path(const std::string& id, const char* file) const;
    std::string partial_path(const std::string& id, const char* file) const;

    Status save(const api::VideoRecord& record) const; // job.json via tmp + rename (creates the directory)
    Status remove(const std::string& id) const;        // the job's whole directory
    // Moves a finished partial output into place.
    Status commit(const std::string& id, const char* file) const;

    // Reads every job directory. Interrupted jobs are marked failed (code "interrupted") and saved back,
    // and partial outputs are removed.
    Result<Recovery> recover(int64_t now) const;

private:
    explicit JobStore(std::string root) : root_(std::move(root)) {}
    std::string root_;
};

} // namespace h3::serve
