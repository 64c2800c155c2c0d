// GEMM algorithm choices kept across processes (issue #45, no first-step penalty): the cuBLASLt tuner
// (ops/cuda/lt_autotune.h) times the heuristic's candidates once per problem — about 1 s of a full-width
// FastH3 request's first forward on an H100 and 1.6 s of its first video decode — and, with a table file
// (H3_GEMM_TUNING_FILE, read when the CUDA context is made), records the index it chose; a later process on
// the same device and library takes that index from the heuristic's list without timing anything. A choice
// is reused only when the heuristic offers the same number of candidates again, and a file written for
// another device or library version (its identity line) is ignored and rewritten. Without a file (an empty
// path) the table lives in memory for the process. A problem whose rows (the key's first value, M) differ
// from a recorded one's by at most 1/16 with everything else equal takes that choice too (find_near): a job
// whose prompt has a few tokens more than the warm-up's times nothing. Thread-safe.
//
// File: "h3-gemm-tuning 1" / the identity / one line per choice: "<family> <chosen> <candidates> <key...>"
// (integers). Written whole to a temporary file and renamed over the old one after every new choice.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace h3::ops {

class GemmTuningTable {
public:
    struct Choice {
        int chosen = 0;     // index among the heuristic's candidates
        int candidates = 0; // how many it offered
    };
    using Key = std::vector<int64_t>; // the problem: sizes, dtypes, alignments, flags

    // Reads `path` when it exists and holds `identity` (a damaged file or another identity: empty, logged);
    // an empty path: memory only.
    GemmTuningTable(std::string path, std::string identity);

    std::optional<Choice> find(const std::string& family, const Key& key) const;
    // find(), else the choice of the recorded problem nearest in rows (key[0]) within 1/16 of them whose
    // other values are equal.
    std::optional<Choice> find_near(const std::string& family, const Key& key) const;
    // Records a choice and rewrites the file; a failed write is logged once and otherwise ignored.
    void record(const std::string& family, const Key& key, Choice choice);
    size_t size() const;
    const std::string& path() const { return path_; }

private:
    void save_locked();
    std::string path_, identity_;
    mutable std::mutex m_;
    std::map<std::pair<std::string, Key>, Choice> choices_;
    bool write_failed_ = false;
};

} // namespace h3::ops
