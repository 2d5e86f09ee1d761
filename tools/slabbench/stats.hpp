// stats.hpp - the statistics of a series of runs: min, max, average, standard deviation, the
// change against a baseline, and whether a difference is within noise (Welch's t-test).
#pragma once

#include "workload.hpp"

#include <cstddef>
#include <vector>

namespace slabbench {

struct summary {
    size_t n = 0;
    double min = 0, max = 0, avg = 0;
    double sd = 0; // the sample standard deviation (n - 1); 0 for a single run
};
summary summarize(const std::vector<double> &values);

// The two-sided p-value of Welch's t-test (unequal variances) that a and b have the same mean;
// NaN when a side has fewer than 2 values. Two series without spread: 1 if their means are
// equal, else 0.
double welch_p(const std::vector<double> &a, const std::vector<double> &b);
// The significance level below which a difference counts as real: p >= this is "within noise".
inline constexpr double kNoiseLevel = 0.05;

// How much better `avg` is than `base`, in percent of base (+3 = 3% better: more throughput or
// less time); NaN when base is 0.
double pct_better(double avg, double base, better dir);

} // namespace slabbench
