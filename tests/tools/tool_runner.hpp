// tool_runner.hpp - runs the built slabinfo binary (SLABINFO_PATH) and collects what it said.
#pragma once

#include <string>
#include <vector>

namespace slabinfo_test {

struct tool_result {
    int status = -1; // the exit status; 128 + N for a signal N; -1: it did not end in time
    std::string out;
    std::string err;
};

// Runs slabinfo with args; kills it after timeout_s (a test then fails on status -1).
tool_result run_tool(const std::vector<std::string> &args, double timeout_s = 60);

// Whether text is exactly one line (one '\n', at its end).
bool is_one_line(const std::string &text);

} // namespace slabinfo_test
