// generate's progress output (--progress bar|json|none) for every stage of a job: a line per stage as it
// starts (load COMPONENT, encode, denoise, decode, mux) with the seconds since the run began, the denoise
// steps as a bar (stderr) or JSON lines (stdout: {"event":"stage",...}, {"event":"step",...}), and the final
// {"event":"done",...} naming the files written. Events come from the generator's thread, one at a time.
#pragma once

#include "pipeline/generator.h"

#include <chrono>
#include <string>

namespace h3::cli {

class ProgressPrinter {
public:
    explicit ProgressPrinter(std::string mode); // bar | json | none
    void operator()(const pipeline::JobProgress& p);
    // Ends an unfinished bar line (a cancelled or failed run).
    void interrupted();
    // JSON mode: the done event (the files written, the media output and latents paths, the stage and wall
    // seconds); every mode: the closing line "generate: wrote PATHS in S s" on stderr.
    void done(const pipeline::JobReport& r, const std::string& media, const std::string& latents);
    double wall_seconds() const;

private:
    std::string mode_;
    std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
    std::string last_stage_; // the last stage line's stage (a load between two events of one stage does not
                             // print that stage again)
    std::string last_load_;  // the last load line's component
    bool in_bar_ = false;    // a bar line without its newline yet
};

} // namespace h3::cli
