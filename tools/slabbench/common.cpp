// common.cpp - clocks, pinning and RSS for the workloads (common.hpp).
#include "common.hpp"

#include <pthread.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <fmt/format.h>
#include <string>
#include <vector>

namespace slabbench {

uint64_t now_ns() {
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t thread_cpu_ns() {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// The CPUs the process may run on, read once before main (before any thread pins itself). A
// thread's own mask is no guide: a new thread inherits its creator's, so after micro pinned its
// main thread to CPU 0, its remote case's producer and consumer found a mask of one CPU and both
// "pinned" themselves there - the remote frees were never remote.
struct process_cpus {
    cpu_set_t set;
    int count = 0;
    process_cpus() {
        CPU_ZERO(&set);
        if (sched_getaffinity(0, sizeof set, &set) == 0) count = CPU_COUNT(&set);
    }
};
const process_cpus g_process_cpus;

} // namespace

unsigned allowed_cpus() {
    return g_process_cpus.count > 0 ? static_cast<unsigned>(g_process_cpus.count) : 1u;
}

bool pin_to_cpu(unsigned n) {
    const int count = g_process_cpus.count;
    if (count <= 0) return false;
    unsigned want = n % static_cast<unsigned>(count);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
        if (!CPU_ISSET(cpu, &g_process_cpus.set)) continue;
        if (want-- == 0) {
            cpu_set_t one;
            CPU_ZERO(&one);
            CPU_SET(cpu, &one);
            return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
        }
    }
    return false;
}

uint64_t peak_rss_kib() {
    rusage ru{};
    getrusage(RUSAGE_SELF, &ru);
    return static_cast<uint64_t>(ru.ru_maxrss);
}

uint64_t current_rss_kib() {
    FILE *f = std::fopen("/proc/self/statm", "r");
    if (!f) return 0;
    unsigned long size = 0, resident = 0;
    const int n = std::fscanf(f, "%lu %lu", &size, &resident);
    std::fclose(f);
    if (n != 2) return 0;
    return static_cast<uint64_t>(resident) * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) / 1024u;
}

std::string last_lines(const std::string &text, int n) {
    std::vector<std::string> lines;
    size_t at = 0;
    while (at < text.size()) {
        size_t end = text.find('\n', at);
        if (end == std::string::npos) end = text.size();
        if (end > at) lines.push_back(text.substr(at, end - at));
        at = end + 1;
    }
    std::string out;
    const size_t first = lines.size() > static_cast<size_t>(n) ? lines.size() - n : 0;
    for (size_t i = first; i < lines.size(); ++i) out += (out.empty() ? "" : " | ") + lines[i];
    return out;
}

std::string count_detail(uint64_t seen, uint64_t expected, const char *what) {
    return fmt::format("{} of {} {}", seen, expected, what);
}

} // namespace slabbench
