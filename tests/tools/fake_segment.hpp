// fake_segment.hpp - live segments made by the tests themselves, laid out as
// src/api/live_format.hpp says, so that slabinfo's reader can be tested without a publishing
// process; and a stand-in for the publisher's helper thread that serves requests.
#pragma once

#include "api/live_format.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

#include <sys/types.h>

namespace slabinfo_test {

namespace live = slabkit::live;

// Field 22 of /proc/<pid>/stat, read here without slabinfo's code.
uint64_t start_ticks_of(pid_t pid);
// A pid that no process has now (kill(pid, 0) fails with ESRCH).
pid_t unused_pid();
// The sample snapshot's JSON with its pid replaced.
std::string sample_with_pid(pid_t pid);

// /dev/shm/slabkit.<pid> of file_bytes (sparse), mapped; removed by the destructor.
class fake_segment {
  public:
    // For the test's own pid, an old file of that name is removed first (it cannot be anyone
    // else's). Fails the test (and throws) if the file cannot be made.
    explicit fake_segment(pid_t pid, size_t file_bytes = live::kSegmentBytes);
    // The same at a pid no process has, chosen so that no other test's file is taken.
    static fake_segment at_unused_pid();
    fake_segment(fake_segment &&other) noexcept;
    fake_segment(const fake_segment &) = delete;
    fake_segment &operator=(const fake_segment &) = delete;
    ~fake_segment();

    // A valid header: magic, version, sizes, pid, start ticks (default: the process's own), the
    // state live.
    void lay_out(std::optional<uint64_t> start_ticks = std::nullopt, uint32_t period_ms = 1000);
    // Publishes text as the publisher does (generation odd, payload, length, generation even).
    void publish(std::string_view text);

    live::live_header &header() { return *static_cast<live::live_header *>(base_); }
    char *bytes() { return static_cast<char *>(base_); }
    pid_t pid() const { return pid_; }
    const std::string &path() const { return path_; }

  private:
    fake_segment() = default;
    void create(pid_t pid, size_t file_bytes, bool exclusive);
    pid_t pid_ = 0;
    std::string path_;
    void *base_ = nullptr;
    size_t mapped_ = 0;
};

// What a served request asked.
struct served_request {
    uint32_t kind = 0;
    std::string arg;
    int32_t owner = 0;
    uint32_t seq = 0;
};
struct reply_text {
    int32_t status = 0;
    std::string text;
};

// Serves the next request on seg as the publisher's helper thread does: waits for request_seq to
// pass `seen` (FUTEX_WAIT, shared, in slices of `slice`) up to `wait`, then writes the reply
// `answer` gives and sets reply_seq. nullopt if no request came in time.
std::optional<served_request>
serve_one(fake_segment &seg, uint32_t seen,
          const std::function<reply_text(const served_request &)> &answer,
          std::chrono::milliseconds wait,
          std::chrono::milliseconds slice = std::chrono::milliseconds(50));

// Waits (up to `wait`) until thread tid of this process sleeps (state S).
bool wait_until_sleeping(pid_t tid, std::chrono::milliseconds wait);

} // namespace slabinfo_test
