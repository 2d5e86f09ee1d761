// outcome.hpp - what a slabbench run found: every run of every workload under every
// configuration, their statistics per case, who won, and the targets.
#pragma once

#include "stats.hpp"
#include "workload.hpp"

#include <map>
#include <string>
#include <vector>

namespace slabbench {

struct run_record {
    std::string config;
    unsigned run = 0;
    bool ok = false;
    std::string error; // why it failed: a check, a crash, a time limit
    double wall_s = 0;
    result res;
};

struct config_status {
    std::string name, what;
    std::string status = "ok"; // ok, skipped (cannot run here), failed (a run failed)
    std::string why;
};

struct case_row {
    std::string config;
    summary s;
    std::vector<double> values;
    double pct; // better than the baseline, in % (NaN for the baseline, or none)
    double p;   // Welch's p against the baseline (NaN when not testable)
    int noise;  // 1 within noise, 0 a real difference, -1 not testable
};

struct case_summary {
    std::string name, metric, unit;
    better dir = better::lower;
    std::string baseline;
    std::vector<case_row> rows;          // in the order of the configurations
    const case_row *best() const;        // the best avg
    const case_row *best_design() const; // the best avg among slabkit's configurations
    const case_row *row(const std::string &config) const;
};

struct workload_outcome {
    const workload *w = nullptr;
    std::string status = "ok"; // ok, skipped
    std::string why;
    std::string baseline;
    std::map<std::string, std::string> params;
    std::vector<config_status> configs;
    std::vector<run_record> runs;
    std::vector<case_summary> cases;
};

struct target_outcome {
    std::string name;
    bool met = false;
    bool measured = false; // false: the run did not have what the target needs
    std::string detail;
};

// True for slabkit's configurations (the designs and their variants), false for the peers.
bool is_design_config(const std::string &config);
// The case summaries of a workload from its ok runs, configurations in `order`.
void summarize_outcome(workload_outcome &o, const std::vector<std::string> &order);
// The targets, from whatever workloads ran.
std::vector<target_outcome> evaluate_targets(const std::vector<workload_outcome> &all);

} // namespace slabbench
