// runner.hpp - starting a program and waiting for it, with a time limit: the workers, and the
// programs the external workloads measure (g++, mariadbd, sysbench).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace slabbench {

struct program_run {
    bool started = false;     // false: it could not be started (error says why)
    int status = -1;          // exit status, or -1 if it was killed by a signal
    int signal = 0;           // the signal that ended it, 0 for none
    bool timed_out = false;   // killed at the time limit
    double wall_s = 0;        // from start to exit
    uint64_t max_rss_kib = 0; // the peak RSS of the program (wait4's ru_maxrss)
    std::string out;          // what it wrote to stdout (when captured)
    std::string err;          // what it wrote to stderr (when captured; the last 64 KiB)
    std::string result;       // what it wrote to descriptor 3 (a worker's JSON result)
    std::string error;        // why it could not be started
    bool ok() const { return started && !timed_out && signal == 0 && status == 0; }
    // "exit status 2", "killed by signal 11 (Segmentation fault)", "timed out after 60 s" ...
    std::string how_it_ended(double limit_s) const;
};

struct program_spec {
    std::vector<std::string> argv;
    std::vector<std::string> env; // the whole environment (configs.hpp's config_environment)
    std::string cwd;              // "" for the driver's
    double timeout_s = 600;       // killed (SIGKILL to its process group) after this
    bool capture_out = true;      // else stdout goes to /dev/null
    bool capture_err = true;      // else stderr is the driver's
    bool result_fd = false;       // give it descriptor 3, a pipe read into `result`
};

// Runs a program to its end (or the time limit) and says how it ended; never throws.
program_run run_program(const program_spec &spec);

// A program started in the background (a server), to be stopped with stop_program.
struct background_program {
    int pid = -1;
    std::string error;
    std::string log_path; // where its stdout and stderr go
};
background_program start_program(const program_spec &spec, const std::string &log_path);
// SIGTERM, then SIGKILL after `grace_s`; returns the exit status (-1: signalled) and fills
// max_rss_kib when given.
int stop_program(background_program &p, double grace_s, uint64_t *max_rss_kib = nullptr);

// Makes SIGINT, SIGTERM and SIGHUP kill the programs running now (each runs in a process group
// of its own, which the terminal's Ctrl-C does not reach) before the driver ends.
void kill_programs_on_interrupt();

// The absolute path of this program (/proc/self/exe).
std::string self_path();
// Searches PATH for a program; "" when it is not there.
std::string which(const std::string &program);

} // namespace slabbench
