// Factories of the policy classes (one .cpp each); used by make_step_cache only.
#pragma once

#include "cache/step_cache.h"

namespace h3::cache {

std::unique_ptr<StepCache> make_teacache(const TeaCacheConfig& config, std::vector<double> coefficients,
                                         const StepCacheSetup& setup);
std::unique_ptr<StepCache> make_dbcache(const DbCacheConfig& config, std::vector<int> mask,
                                        const StepCacheSetup& setup);
std::unique_ptr<StepCache> make_velocity(const VelocityConfig& config, const StepCacheSetup& setup);

} // namespace h3::cache
