// views.hpp - what slabinfo prints: the caches it selects and its tables (docs/slabinfo.md),
// modelled on the kernel's tools/mm/slabinfo. Every view returns its text.
#pragma once

#include "slabinfo/segment.hpp"
#include "slabinfo/snapshot.hpp"

#include <cstdint>
#include <optional>
#include <regex>
#include <string>
#include <utility>
#include <vector>

namespace slabinfo {

// ---- selecting caches ---------------------------------------------------------------------------

// A regex over cache names: ECMAScript syntax, case-insensitive, found anywhere in the name (as
// the kernel's tool). An empty pattern matches every name. A bad regex is a slabinfo_error.
class name_filter {
  public:
    explicit name_filter(std::string pattern);
    bool matches(const std::string &name) const;
    const std::string &pattern() const { return pattern_; }

  private:
    std::string pattern_;
    std::optional<std::regex> regex_;
};

enum class sort_order {
    name,     // by name, case-insensitive (the default)
    space,    // -S: by Space, largest first
    activity, // -A: by allocs + frees, busiest first
    creation, // the snapshot's own order (--json)
};

struct selection {
    std::string pattern;     // "" for every cache
    bool show_empty = false; // -e: caches without slabs and objects too
    sort_order order = sort_order::name;
};

// The caches a view shows, in its order. With require_match, a pattern that names no cache, or
// only empty ones that are hidden, is an error.
std::vector<const cache_stats *> select_caches(const snapshot &s, const selection &sel,
                                               bool require_match = true);
// Every cache the pattern names, empty ones too, in creation order (none: an error).
std::vector<const cache_stats *> matching_caches(const snapshot &s, const std::string &pattern);
// -r's cache: the one whose name is the pattern (case-insensitively), else the only one it
// names; none or several is an error.
const cache_stats &report_cache(const snapshot &s, const std::string &pattern);
// The names for requests (-v, -s): {""} (every cache) when the pattern is empty or names every
// cache, else the names it matches.
std::vector<std::string> request_targets(const snapshot &s, const std::string &pattern);
// The snapshot with only the selected caches (--json).
snapshot with_caches(const snapshot &s, const std::vector<const cache_stats *> &caches);

// ---- figures ------------------------------------------------------------------------------------

// Sizes as the kernel's tool writes them: decimal K, M, G with one (truncated) decimal above
// 1000, 10^6 and 10^9; the number itself up to there.
std::string format_size(uint64_t value);
// part * 100 / whole, truncated; whole 0: nullopt.
std::optional<uint64_t> percent(uint64_t part, uint64_t whole);

// ---- tables -------------------------------------------------------------------------------------

// Default / -l: Name Design Objects Objsize Space Slabs O/S O %Ef Flg.
std::string list_view(const snapshot &s, const std::vector<const cache_stats *> &caches);
// -D / -A: Name Objects Alloc Free %Fast O Design.
std::string activity_view(const snapshot &s, const std::vector<const cache_stats *> &caches);
// -T: the caches' totals, then the heap, the page allocator and the slots.
std::string totals_view(const snapshot &s, const std::vector<const cache_stats *> &caches);
// -r: everything about one cache.
std::string cache_report(const snapshot &s, const cache_stats &c);
// -b: the page allocator's free blocks per node and order, as /proc/buddyinfo.
std::string buddy_view(const snapshot &s);

// -v: one entry per request sent ("" named every cache).
std::string validate_view(pid_t pid,
                          const std::vector<std::pair<std::string, validate_result>> &results);
// -s: the caches of every reply.
std::string shrink_view(const std::vector<shrink_result> &results);
// --traces: each cache's allocation sites (objects in use) and free sites (free objects), as the
// kernel's alloc_traces and free_traces.
std::string traces_view(const std::vector<cache_traces> &caches);
// --leaks: what the leak scan found, by cache and allocation site, most objects first.
std::string leaks_view(pid_t pid, const leak_report &r);
// --failslab: the process's fault injection settings and counts after the request.
std::string failslab_view(pid_t pid, const failslab_state &st);
// --list. now_ns: CLOCK_REALTIME, for the age of the last publication.
std::string process_list_view(const std::vector<segment_entry> &entries, uint64_t now_ns);
// --watch's first line.
std::string watch_title(const snapshot &s, double period_s, uint64_t now_ns);

} // namespace slabinfo
