// tables.hpp - the tables slabbench prints, shaped like the seeds': per configuration min, max,
// avg, sd over the runs, % against the baseline and a mark where the difference is within noise
// (Welch's t-test), or for a sweep a row per case and a column per configuration.
#pragma once

#include "outcome.hpp"

#include <string>
#include <vector>

namespace slabbench {

// One workload's tables (what its layout asks for), its skipped and failed configurations.
std::string format_workload(const workload_outcome &o);
// Who won each workload (best configuration and best design per case, counted), the targets.
std::string format_summary(const std::vector<workload_outcome> &all,
                           const std::vector<target_outcome> &targets);
// A number with about four significant figures, as the tables show it.
std::string short_number(double v);

} // namespace slabbench
