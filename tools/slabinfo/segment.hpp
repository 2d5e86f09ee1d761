// segment.hpp - reading a live process's statistics segment (/dev/shm/slabkit.<pid>, laid out as
// src/api/live_format.hpp says) and sending it requests.
//
//   live_segment seg = live_segment::open(pid, options);   // checks the header and the process
//   snapshot s = seg.read_snapshot();                       // a consistent copy (sequence lock)
//   validate_result v = request_validate(seg, "");          // needs options.writable
//
// Every failure is a slabinfo_error with a one-line message; every wait is bounded by the options.
#pragma once

#include "slabinfo/snapshot.hpp"

#include "api/live_format.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <sys/types.h>

namespace slabinfo {

using seconds = std::chrono::duration<double>;

// "/dev/shm/slabkit.<pid>".
std::string segment_path(pid_t pid, std::string_view dir = "/dev/shm");

// What /proc/<pid>/stat says of a process.
struct process_stat {
    char state = '?';         // field 3: R, S, D, Z (zombie), X (dead), ...
    uint64_t start_ticks = 0; // field 22: clock ticks after boot
};
// nullopt when there is no such process (or its stat cannot be read).
std::optional<process_stat> read_process_stat(pid_t pid);
// Whether process pid runs (a zombie does not) and, with start_ticks, is the one started then.
bool process_runs(pid_t pid, std::optional<uint64_t> start_ticks = std::nullopt);

struct segment_options {
    std::string dir = "/dev/shm";
    // Open for writing too: needed to send requests.
    bool writable = false;
    // How long a segment may stay in its starting state (header not laid out yet).
    seconds start_timeout{1.0};
    // How long a read may keep finding the snapshot mid-write before it gives up.
    seconds read_timeout{2.0};
    // How long a request may wait for the request slot and for its answer.
    seconds request_timeout{5.0};
};

// A copy of the header's figures (the atomics loaded once).
struct segment_header {
    pid_t pid = 0;
    uint32_t period_ms = 0;
    uint64_t start_ticks = 0;
    slabkit::live::state state = slabkit::live::state::starting;
    uint64_t generation = 0;
    uint64_t payload_bytes = 0;
    uint64_t published_ns = 0;
    uint64_t publish_count = 0;
    uint64_t heartbeat_ns = 0;
};

// The reply to a request, as the process wrote it.
struct raw_reply {
    int32_t status = 0; // 0: served; else refused (the text says why)
    std::string text;   // JSON
};

struct attach_verdict;
struct segment_entry;

// An open, checked, mapped segment. Move-only.
class live_segment {
  public:
    // Opens /dev/shm/slabkit.<pid> and checks it: the magic, version, sizes, the pid, and that
    // the process that made it still runs. Errors: no such process, a process that does not
    // publish, a stale, truncated or corrupt segment, another version, publishing stopped.
    static live_segment open(pid_t pid, const segment_options &options = {});

    live_segment(live_segment &&other) noexcept;
    live_segment &operator=(live_segment &&other) noexcept;
    live_segment(const live_segment &) = delete;
    live_segment &operator=(const live_segment &) = delete;
    ~live_segment();

    pid_t pid() const { return pid_; }
    const std::string &path() const { return path_; }
    const segment_options &options() const { return options_; }
    segment_header header() const;

    // Throws "process N exited" / "process N stopped publishing" when it no longer publishes.
    void check_publishing() const;

    // The payload's text, copied consistently (the sequence lock of live_format.hpp).
    std::string read_payload() const;
    // The payload parsed; its pid must be the segment's.
    snapshot read_snapshot() const;

    // Sends one request and waits for its reply (live_format.hpp's protocol). arg: "" for every
    // cache, else one cache's name. Needs options.writable.
    raw_reply send_request(slabkit::live::request kind, std::string_view arg) const;

  private:
    friend std::vector<segment_entry> list_segments(const segment_options &options);
    live_segment() = default;
    // One try at opening and checking the file (segment.cpp).
    attach_verdict attach_once();
    void unmap() noexcept;
    const slabkit::live::live_header &head() const;
    slabkit::live::live_header &head_rw() const;
    [[noreturn]] void exited_while_reading() const;

    void *base_ = nullptr;
    size_t mapped_ = 0;
    size_t payload_limit_ = 0;
    pid_t pid_ = 0;
    uint64_t start_ticks_ = 0;
    std::string path_;
    segment_options options_;
};

// "validate", "shrink", "report".
const char *request_name(slabkit::live::request kind);

// The typed replies (docs/slabinfo.md). A refused request, a reply to another request or a reply
// missing a field is an error.
struct validate_result {
    uint64_t caches_checked = 0;
    uint64_t problems = 0;
    std::string report;
    uint64_t copies = 1;
    // With 2 copies (the first found problems, so a second was checked): what the first found;
    // `problems` is the second's.
    uint64_t first_copy_problems = 0;
    bool operator==(const validate_result &) const = default;
};
struct shrunk_cache {
    std::string name;
    uint64_t pages_before = 0;
    uint64_t pages_after = 0;
    bool operator==(const shrunk_cache &) const = default;
};
struct shrink_result {
    std::vector<shrunk_cache> caches;
    bool operator==(const shrink_result &) const = default;
};

// Fault injection's settings and counts in a process (its snapshot's or reply's "failslab").
using failslab_state = failslab_info;

// --traces: one call site's objects of a cache with owner tracking (the kernel's alloc_traces
// and free_traces lines).
struct trace_row {
    uint64_t count = 0;
    std::string site; // "0x... function+0xoff (module)"
    uint64_t age_min_ms = 0, age_avg_ms = 0, age_max_ms = 0;
    uint64_t tid_min = 0, tid_max = 0;
    uint64_t cpus = 0; // bit n: CPU n (63: CPU 63 and up)
    bool operator==(const trace_row &) const = default;
};
struct trace_side {
    uint64_t objects = 0;
    uint64_t dropped = 0; // objects of sites past the process's table
    std::vector<trace_row> sites;
    bool operator==(const trace_side &) const = default;
};
struct cache_traces {
    std::string name;
    bool free_sites_kept = true; // false: SLOB's slots, whose free bytes are SLOB's
    trace_side alloc, free;
    bool operator==(const cache_traces &) const = default;
};

// --leaks: the process's leak scan (core/leak_scan.hpp), leaked objects by cache and site.
struct leak_group {
    std::string cache;
    std::string site;
    uint64_t count = 0, bytes = 0, age_min_ms = 0, age_max_ms = 0;
    bool operator==(const leak_group &) const = default;
};
struct leak_report {
    bool roots_listed = true;
    uint64_t debug_caches = 0, root_bytes = 0, objects = 0, leaked = 0, leaked_bytes = 0,
             groups_dropped = 0;
    std::vector<leak_group> groups;
    bool operator==(const leak_report &) const = default;
};

validate_result parse_validate_reply(const raw_reply &reply, pid_t pid);
leak_report parse_leaks_reply(const raw_reply &reply, pid_t pid);
std::vector<cache_traces> parse_traces_reply(const raw_reply &reply, pid_t pid);
failslab_state parse_failslab_reply(const raw_reply &reply, pid_t pid);
shrink_result parse_shrink_reply(const raw_reply &reply, pid_t pid);
std::string parse_report_reply(const raw_reply &reply, pid_t pid);

validate_result request_validate(const live_segment &seg, std::string_view cache);
shrink_result request_shrink(const live_segment &seg, std::string_view cache);
std::string request_report(const live_segment &seg);
// The leak scan, objects younger than min_age_ms left out.
leak_report request_leaks(const live_segment &seg, uint64_t min_age_ms);
// Every matching cache's sites ("" names every cache with owner tracking).
std::vector<cache_traces> request_traces(const live_segment &seg, std::string_view cache);
// Sets fault injection's settings ("SPEC" or "SPEC;CACHES", core/failslab.hpp) in the process,
// or with "" only reads them; what the process has then.
failslab_state request_failslab(const live_segment &seg, std::string_view settings);

// One file of --list.
struct segment_entry {
    pid_t pid = 0;
    std::string path;
    std::string program; // from the snapshot, else /proc/<pid>/comm; "" if neither
    std::string status;  // "live", "starting", "stopped", "stale: ...", "unreadable: ...", ...
    bool stale = false;  // the process that made it is gone: the file may be removed
    std::optional<segment_header> header;
};
// Every /dev/shm/slabkit.<pid> (of options.dir), by pid. Never throws for one bad file.
std::vector<segment_entry> list_segments(const segment_options &options = {});

} // namespace slabinfo
