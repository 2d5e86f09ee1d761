// stats_json.hpp - every statistic as one JSON text (docs/slabinfo.md has the schema).
#pragma once

#include "core/slabinfo.hpp"

#include <cstdint>

namespace slabkit::api {

inline constexpr unsigned kStatsJsonVersion = 1;

// What a live segment's snapshot adds ("live": {...}).
struct live_info {
    uint64_t period_ms;
    uint64_t publish_count;
};

// Writes the snapshot into out (live: nullptr for slabkit_stats_json). Takes the cache
// registry lock; never allocates.
void write_stats_json(text_out &out, const live_info *live);

class json_out;
// Fault injection's settings and counts as the snapshot's "failslab" member (and the reply to
// a live failslab request).
void write_failslab(json_out &j);

} // namespace slabkit::api
