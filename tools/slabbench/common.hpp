// common.hpp - what the workloads share: clocks, CPU pinning, the process's peak RSS.
#pragma once

#include <cstdint>
#include <string>

namespace slabbench {

// CLOCK_MONOTONIC in nanoseconds.
uint64_t now_ns();
// The calling thread's CPU time in nanoseconds (CLOCK_THREAD_CPUTIME_ID).
uint64_t thread_cpu_ns();
// Pins the calling thread to the n-th CPU of the process's affinity mask as it was at start
// (n modulo their count), whatever mask the thread inherited from its creator; false when the
// mask cannot be set (the thread then runs where the OS puts it).
bool pin_to_cpu(unsigned n);
// CPUs in the process's affinity mask at start.
unsigned allowed_cpus();
// The process's peak and current resident set in KiB (getrusage / /proc/self/statm).
uint64_t peak_rss_kib();
uint64_t current_rss_kib();
// The last `n` non-empty lines of a program's output, on one line joined by " | " (for a
// failure's reason).
std::string last_lines(const std::string &text, int n);
// A pause for a spinning wait (the CPU's pause or yield hint).
inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    asm volatile("yield");
#endif
}
// "1234 of 1234 messages" style detail for checks.
std::string count_detail(uint64_t seen, uint64_t expected, const char *what);

} // namespace slabbench
