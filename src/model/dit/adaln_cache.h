// On-disk cache of AdaLN tables, keyed by the checkpoint's identity, the precision and the exact timesteps,
// so a server or a repeated run pays for the AdaLN projections once per schedule.
#pragma once

#include "model/dit/dit_model.h"

#include <string>

namespace h3::model {

// Absolute folder + name, size and mtime of every weight file + the config: changes when the weights do.
std::string checkpoint_identity(const DitCheckpoint& ckpt);
// File name (inside the cache folder) for these tables.
std::string adaln_cache_file_name(const std::string& identity, DitPrecision precision,
                                  const std::vector<float>& timesteps);

struct AdalnCacheResult {
    AdalnTables tables;
    bool hit = false; // read from disk (false: computed and written)
};
// Reads the tables from `cache_dir` when present and valid; otherwise computes them (streaming the AdaLN
// weights from `ckpt` when the model holds none) and writes the file. A damaged cache file is recomputed
// and replaced, never trusted.
Result<AdalnCacheResult> cached_adaln_tables(const DitModel& model, const DitCheckpoint& ckpt,
                                             const std::vector<float>& timesteps,
                                             const std::string& cache_dir);

} // namespace h3::model
