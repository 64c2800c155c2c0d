// Persistence of jobs: one directory per job under the output directory, holding job.json (the video
// record, written atomically through a temporary file and rename) and the outputs (video.mp4, audio.wav,
// renamed into place only when complete). On start, recover() reads every record back; a job that was
// queued or running when the process died is marked failed with the reason, never dropped. The directory is
// held under an exclusive lock (flock on <dir>/.lock) for the store's lifetime, so a second server on the
// same directory is refused instead of marking the first one's running job interrupted. A deleted job's
// directory is first renamed to a ".deleted-" name (atomic), then removed: a crash in between cannot bring
// the job back.
#pragma once

#include "core/status.h"
#include "serve/wire/video_object.h"

#include <memory>
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
    int orphans_removed = 0; // directories left with only a job.json.tmp (a crash during the first write)
};

class JobStore {
public:
    // Creates the directory when missing and takes its lock (io_error naming the holder's pid when another
    // process has it).
    static Result<JobStore> open(const std::string& root);

    const std::string& root() const { return root_; }
    std::string job_dir(const std::string& id) const;
    // A content file's final path and the path it is written under until it is complete.
    std::string content_path(const std::string& id, const char* file) const;
    std::string partial_path(const std::string& id, const char* file) const;

    Status save(const api::VideoRecord& record) const; // job.json via tmp + rename (creates the directory)
    Status remove(const std::string& id) const; // the job's whole directory (rename first, then delete)
    // Moves a finished partial output into place.
    Status commit(const std::string& id, const char* file) const;

    // Reads every job directory. Interrupted jobs are marked failed (code "interrupted") and saved back,
    // partial outputs and stray job.json.tmp files are removed, directories holding nothing but a
    // job.json.tmp are removed (orphans_removed), and leftovers of interrupted deletions go.
    Result<Recovery> recover(int64_t now) const;

private:
    struct DirLock; // the open, flock'ed lock file
    JobStore(std::string root, std::shared_ptr<const DirLock> lock)
        : root_(std::move(root)), lock_(std::move(lock)) {}
    std::string root_;
    std::shared_ptr<const DirLock> lock_;
};

} // namespace h3::serve
