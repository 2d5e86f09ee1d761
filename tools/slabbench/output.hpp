// output.hpp - the machine's description and the files of a run: JSON of everything (the
// report's input, schema in docs/slabbench.md) and CSV of every value of every run.
#pragma once

#include "outcome.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace slabbench {

// The CPU model, CPU count, memory, kernel, OS, date (UTC), commit and host.
nlohmann::json describe_machine();

struct run_header {
    std::string command;
    std::string scale;
    unsigned runs = 0;
};

nlohmann::json outcome_json(const run_header &h, const nlohmann::json &machine,
                            const std::vector<workload_outcome> &all,
                            const std::vector<target_outcome> &targets);
// One line per value: workload,case,metric,unit,better,config,run,value (RFC 4180 quoting).
std::string outcome_csv(const std::vector<workload_outcome> &all);
// Writes text to a file; false with errno's reason in `why` when it cannot.
bool write_file(const std::string &path, const std::string &text, std::string &why);

} // namespace slabbench
