// live_format.hpp - the layout of a live statistics segment (SLABKIT_STATS=live), shared by the
// publishing process (api/live.cpp) and its readers (tools/slabinfo). Version 1.
//
// A process that publishes keeps one POSIX shared-memory object, /dev/shm/slabkit.<pid>
// (shm_open name "/slabkit.<pid>", mode 0600), of kSegmentBytes (sparse: only written pages
// take memory), laid out as
//
//   [0, kHeaderBytes)                      live_header below
//   [kReplyOffset, kReplyOffset + kReplyBytes)
//                                          the reply to the last request (JSON text)
//   [kPayloadOffset, kSegmentBytes)        the statistics snapshot (JSON text, docs/slabinfo.md)
//
// Consistency (a sequence lock): the publisher makes `generation` odd, writes the payload and its
// length, then makes it even again. A reader copies the header's length and the payload between
// two loads of `generation` and keeps the copy only if both loads are equal and even; otherwise
// it tries again. So a reader never takes the process's locks and never sees a torn snapshot.
//
// Requests (validate, shrink, report, failslab, traces, leaks): a reader takes `request_owner` (0
// -> its pid, by compare-and-swap), writes `request_kind` and `request_arg`, then increments
// `request_seq` and wakes it (FUTEX_WAKE, shared). The publisher's helper thread, which waits on
// `request_seq` between publications, serves the request, writes the reply's JSON into the reply
// region, `reply_bytes` and `reply_status`, then stores `reply_seq = request_seq`. The reader waits
// for that, copies the reply and gives `request_owner` back (0). An owner that died is recognised
// by its pid no longer existing.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace slabkit::live {

inline constexpr char kMagic[8] = {'S', 'L', 'A', 'B', 'K', 'I', 'T', 'L'};
inline constexpr uint32_t kVersion = 1;
inline constexpr size_t kHeaderBytes = 4096;
inline constexpr size_t kReplyOffset = kHeaderBytes;
inline constexpr size_t kReplyBytes = size_t{1} << 20;
inline constexpr size_t kPayloadOffset = kReplyOffset + kReplyBytes;
inline constexpr size_t kSegmentBytes = size_t{32} << 20;
inline constexpr size_t kPayloadBytes = kSegmentBytes - kPayloadOffset;
// "/slabkit.<pid>": the name for shm_open; /dev/shm/slabkit.<pid> on Linux.
inline constexpr const char *kNamePrefix = "/slabkit.";

// failslab's argument: fault injection's settings, "SPEC" or "SPEC;CACHES" (core/failslab.hpp;
// without ';' the cache filter stays as it is).
// traces' argument: a cache name, or "" for every cache with owner tracking. leaks' argument:
// the least age in ms of an object reported ("" for 0).
enum class request : uint32_t {
    none = 0,
    validate = 1,
    shrink = 2,
    report = 3,
    failslab = 4,
    traces = 5,
    leaks = 6,
};

enum class state : uint32_t {
    starting = 0, // the header is being laid out: not yet readable
    live = 1,     // the helper thread publishes
    stopped = 2,  // publishing stopped (slabkit_stats_live_stop, or the process exits)
};

struct live_header {
    char magic[8];
    uint32_t version;
    uint32_t header_bytes; // sizeof(live_header), for a reader's check
    uint64_t segment_bytes;
    int32_t pid;
    uint32_t period_ms;   // how often the helper publishes
    uint64_t start_ticks; // field 22 of /proc/<pid>/stat: tells a reused pid from the publisher
    std::atomic<uint32_t> state;
    uint32_t reserved0;
    // The snapshot.
    std::atomic<uint64_t> generation; // odd while the payload is being written
    std::atomic<uint64_t> payload_bytes;
    std::atomic<uint64_t> published_ns; // CLOCK_REALTIME of the last publication
    std::atomic<uint64_t> publish_count;
    std::atomic<uint64_t> heartbeat_ns; // CLOCK_REALTIME of the helper's last wake-up
    // Requests.
    std::atomic<int32_t> request_owner; // pid of the reader whose request is pending; 0: none
    std::atomic<uint32_t> request_seq;
    std::atomic<uint32_t> request_kind; // enum request
    char request_arg[64];               // a cache name, or "" for every cache
    std::atomic<uint32_t> reply_seq;
    std::atomic<int32_t>
        reply_status; // 0: served; else the request was refused (the reply says why)
    std::atomic<uint64_t> reply_bytes;
};

static_assert(sizeof(live_header) <= kHeaderBytes);
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              std::atomic<uint32_t>::is_always_lock_free);

} // namespace slabkit::live
