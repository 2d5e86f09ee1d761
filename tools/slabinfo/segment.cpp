// segment.cpp - opening and checking a live segment, the sequence-locked read of its snapshot,
// the request protocol and --list's scan (live_format.hpp has the layout and the protocol).
#include "slabinfo/segment.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <climits>
#include <cstring>
#include <system_error>
#include <thread>
#include <utility>

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <fmt/format.h>

namespace slabinfo {

namespace live = slabkit::live;

// The outcome of one try at opening a segment.
struct attach_verdict {
    enum kind_t { ok, retry, fatal } kind = ok;
    std::string message; // the error's line (for retry: the one to give when the retries end)
    std::string status;  // --list's word for it
    bool stale = false;  // the process that made the file is gone
};

namespace {

using clock_type = std::chrono::steady_clock;

[[noreturn]] void fail(std::string message) {
    throw slabinfo_error(std::move(message));
}

std::string errno_text(int e) {
    return std::error_code(e, std::generic_category()).message();
}

std::string format_seconds(seconds s) {
    return fmt::format("{:g} s", s.count());
}

clock_type::time_point deadline_after(seconds s) {
    return clock_type::now() + std::chrono::duration_cast<clock_type::duration>(s);
}

void pause_briefly(unsigned attempt) {
    if (attempt < 4) {
        std::this_thread::yield();
    } else {
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
}

// A file descriptor closed on every way out.
struct fd_guard {
    int fd;
    ~fd_guard() {
        if (fd >= 0) ::close(fd);
    }
};

enum class liveness { runs, gone, reused };

liveness check_process(pid_t pid, std::optional<uint64_t> start_ticks = std::nullopt) {
    if (pid <= 0) return liveness::gone;
    auto st = read_process_stat(pid);
    if (!st) {
        // /proc may hide other users' processes (hidepid): ask the kernel whether the pid exists.
        if (::kill(pid, 0) == 0 || errno == EPERM) return liveness::runs;
        return liveness::gone;
    }
    if (st->state == 'Z' || st->state == 'X') return liveness::gone;
    if (start_ticks && st->start_ticks != *start_ticks) return liveness::reused;
    return liveness::runs;
}

std::string read_small_file(const std::string &path, size_t max) {
    int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return {};
    fd_guard guard{fd};
    std::string out(max, '\0');
    size_t got = 0;
    while (got < max) {
        ssize_t n = ::read(fd, out.data() + got, max - got);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    out.resize(got);
    return out;
}

std::string process_comm(pid_t pid) {
    std::string comm = read_small_file(fmt::format("/proc/{}/comm", pid), 64);
    while (!comm.empty() && (comm.back() == '\n' || comm.back() == '\0')) comm.pop_back();
    return one_line(comm);
}

std::string stale_message(const std::string &path, pid_t pid, liveness l) {
    return fmt::format("stale segment {}: {}; remove the file", path,
                       l == liveness::reused
                           ? fmt::format("pid {} now belongs to a later process", pid)
                           : fmt::format("process {} no longer runs", pid));
}

void futex_wake_all(std::atomic<uint32_t> *word) {
    // Shared memory: no FUTEX_PRIVATE_FLAG, so that the publisher's wait (keyed by the page) wakes.
    ::syscall(SYS_futex, static_cast<void *>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

} // namespace

std::string segment_path(pid_t pid, std::string_view dir) {
    return fmt::format("{}{}{}", dir, live::kNamePrefix, pid);
}

std::optional<process_stat> read_process_stat(pid_t pid) {
    if (pid <= 0) return std::nullopt;
    const std::string text = read_small_file(fmt::format("/proc/{}/stat", pid), 4096);
    // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the fields after it
    // start after the last ')'.
    const size_t close = text.rfind(')');
    if (close == std::string::npos) return std::nullopt;
    std::string_view rest(text);
    rest.remove_prefix(close + 1);
    process_stat out;
    unsigned field = 2; // the field just read: comm
    while (!rest.empty()) {
        while (!rest.empty() && rest.front() == ' ') rest.remove_prefix(1);
        size_t end = std::min(rest.find(' '), rest.size());
        std::string_view token = rest.substr(0, end);
        rest.remove_prefix(end);
        if (token.empty()) break;
        field++;
        if (field == 3) {
            out.state = token.front();
        } else if (field == 22) {
            auto [ptr, ec] =
                std::from_chars(token.data(), token.data() + token.size(), out.start_ticks);
            if (ec != std::errc() || ptr != token.data() + token.size()) return std::nullopt;
            return out;
        }
    }
    return std::nullopt;
}

bool process_runs(pid_t pid, std::optional<uint64_t> start_ticks) {
    return check_process(pid, start_ticks) == liveness::runs;
}

// ---- opening ------------------------------------------------------------------------------------

attach_verdict live_segment::attach_once() {
    using verdict = attach_verdict;
    const int flags = (options_.writable ? O_RDWR : O_RDONLY) | O_CLOEXEC;
    int fd = ::open(path_.c_str(), flags);
    if (fd < 0) {
        const int e = errno;
        if (e == ENOENT) {
            if (check_process(pid_) == liveness::gone)
                return {verdict::fatal, fmt::format("no process {}", pid_), "missing"};
            return {verdict::fatal,
                    fmt::format("process {} does not publish statistics (no {}; run it with "
                                "SLABKIT_STATS=live)",
                                pid_, path_),
                    "missing"};
        }
        return {verdict::fatal,
                fmt::format("cannot open {}{}: {}", path_, options_.writable ? " for writing" : "",
                            errno_text(e)),
                fmt::format("unreadable: {}", errno_text(e))};
    }
    fd_guard guard{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0)
        return {verdict::fatal, fmt::format("cannot stat {}: {}", path_, errno_text(errno)),
                "unreadable"};
    if (!S_ISREG(st.st_mode))
        return {verdict::fatal, fmt::format("{} is not a regular file", path_), "not a file"};
    const auto size = static_cast<uint64_t>(st.st_size);
    const std::string not_laid_out =
        fmt::format("process {} did not finish laying out its segment {} within {}", pid_, path_,
                    format_seconds(options_.start_timeout));
    // shm_open makes an empty file; its size comes with the layout.
    if (size == 0) return {verdict::retry, not_laid_out, "starting"};
    if (size < live::kHeaderBytes)
        return {verdict::fatal,
                fmt::format("truncated segment {}: {} bytes, less than its {}-byte header", path_,
                            size, live::kHeaderBytes),
                "truncated"};

    const int prot = PROT_READ | (options_.writable ? PROT_WRITE : 0);
    void *map = ::mmap(nullptr, live::kHeaderBytes, prot, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return {verdict::fatal, fmt::format("cannot map {}: {}", path_, errno_text(errno)),
                "unreadable"};
    struct unmap_guard {
        void *p;
        size_t n;
        ~unmap_guard() {
            if (p) ::munmap(p, n);
        }
    } header_map{map, live::kHeaderBytes};
    const auto &h = *static_cast<const live::live_header *>(map);

    static constexpr char kZeros[sizeof live::kMagic] = {};
    if (std::memcmp(h.magic, kZeros, sizeof h.magic) == 0)
        return {verdict::retry, not_laid_out, "starting"};
    if (std::memcmp(h.magic, live::kMagic, sizeof h.magic) != 0)
        return {verdict::fatal,
                fmt::format("{} is not a slabkit statistics segment (bad magic)", path_),
                "not slabkit"};
    if (h.version != live::kVersion)
        return {verdict::fatal,
                fmt::format("{} is a version {} segment; this slabinfo reads version {}", path_,
                            h.version, live::kVersion),
                fmt::format("version {}", h.version)};
    const auto state = h.state.load(std::memory_order_acquire);
    if (state == static_cast<uint32_t>(live::state::starting))
        return {verdict::retry, not_laid_out, "starting"};
    if (state > static_cast<uint32_t>(live::state::stopped))
        return {verdict::fatal, fmt::format("{} is corrupt: state {}", path_, state), "corrupt"};
    if (h.header_bytes != sizeof(live::live_header))
        return {verdict::fatal,
                fmt::format("{} is corrupt: header_bytes {}, not {}", path_, h.header_bytes,
                            sizeof(live::live_header)),
                "corrupt"};
    if (h.segment_bytes <= live::kPayloadOffset || h.segment_bytes > (uint64_t{1} << 40))
        return {verdict::fatal,
                fmt::format("{} is corrupt: segment_bytes {}", path_, h.segment_bytes), "corrupt"};
    if (size < h.segment_bytes)
        return {
            verdict::fatal,
            fmt::format("truncated segment {}: {} bytes of its {}", path_, size, h.segment_bytes),
            "truncated"};
    if (h.pid != pid_)
        return {verdict::fatal, fmt::format("{} is corrupt: it names pid {}", path_, h.pid),
                "corrupt"};

    void *whole = ::mmap(nullptr, h.segment_bytes, prot, MAP_SHARED, fd, 0);
    if (whole == MAP_FAILED)
        return {verdict::fatal, fmt::format("cannot map {}: {}", path_, errno_text(errno)),
                "unreadable"};
    base_ = whole;
    mapped_ = h.segment_bytes;
    payload_limit_ =
        std::min<uint64_t>(live::kPayloadBytes, h.segment_bytes - live::kPayloadOffset);
    start_ticks_ = h.start_ticks;
    // Mapped even when stale: --list still shows which program left it.
    if (auto l = check_process(pid_, h.start_ticks); l != liveness::runs)
        return {verdict::fatal, stale_message(path_, pid_, l),
                l == liveness::reused ? "stale: pid reused" : "stale: process gone", true};
    if (state == static_cast<uint32_t>(live::state::stopped))
        return {verdict::fatal, fmt::format("process {} stopped publishing", pid_), "stopped"};
    return {verdict::ok, {}, "live"};
}

live_segment live_segment::open(pid_t pid, const segment_options &options) {
    live_segment seg;
    seg.pid_ = pid;
    seg.path_ = segment_path(pid, options.dir);
    seg.options_ = options;
    if (pid <= 0) fail(fmt::format("no process {}", pid));
    const auto deadline = deadline_after(options.start_timeout);
    for (unsigned attempt = 0;; attempt++) {
        attach_verdict v = seg.attach_once();
        if (v.kind == attach_verdict::ok) return seg;
        seg.unmap();
        if (v.kind == attach_verdict::fatal) fail(v.message);
        // Still starting: wait for the layout, unless the process is gone.
        if (check_process(pid) == liveness::gone)
            fail(stale_message(seg.path_, pid, liveness::gone));
        if (clock_type::now() >= deadline) fail(v.message);
        pause_briefly(attempt);
    }
}

void live_segment::unmap() noexcept {
    if (base_) ::munmap(base_, mapped_);
    base_ = nullptr;
    mapped_ = 0;
}

live_segment::live_segment(live_segment &&other) noexcept {
    *this = std::move(other);
}

live_segment &live_segment::operator=(live_segment &&other) noexcept {
    if (this != &other) {
        unmap();
        base_ = std::exchange(other.base_, nullptr);
        mapped_ = std::exchange(other.mapped_, 0);
        payload_limit_ = other.payload_limit_;
        pid_ = other.pid_;
        start_ticks_ = other.start_ticks_;
        path_ = std::move(other.path_);
        options_ = std::move(other.options_);
    }
    return *this;
}

live_segment::~live_segment() {
    unmap();
}

const live::live_header &live_segment::head() const {
    return *static_cast<const live::live_header *>(base_);
}

live::live_header &live_segment::head_rw() const {
    return *static_cast<live::live_header *>(base_);
}

segment_header live_segment::header() const {
    const auto &h = head();
    segment_header out;
    out.pid = h.pid;
    out.period_ms = h.period_ms;
    out.start_ticks = h.start_ticks;
    out.state = static_cast<live::state>(h.state.load(std::memory_order_acquire));
    out.generation = h.generation.load(std::memory_order_acquire);
    out.payload_bytes = h.payload_bytes.load(std::memory_order_relaxed);
    out.published_ns = h.published_ns.load(std::memory_order_relaxed);
    out.publish_count = h.publish_count.load(std::memory_order_relaxed);
    out.heartbeat_ns = h.heartbeat_ns.load(std::memory_order_relaxed);
    return out;
}

void live_segment::exited_while_reading() const {
    fail(fmt::format("process {} exited while being read", pid_));
}

void live_segment::check_publishing() const {
    if (check_process(pid_, start_ticks_) != liveness::runs)
        fail(fmt::format("process {} exited", pid_));
    if (head().state.load(std::memory_order_acquire) == static_cast<uint32_t>(live::state::stopped))
        fail(fmt::format("process {} stopped publishing", pid_));
}

// ---- the snapshot: a sequence-locked copy ------------------------------------------------------

std::string live_segment::read_payload() const {
    const auto &h = head();
    const char *payload = static_cast<const char *>(base_) + live::kPayloadOffset;
    const auto deadline = deadline_after(options_.read_timeout);
    std::string out;
    enum { mid_write, changed, empty } why = mid_write;
    for (unsigned attempt = 0;; attempt++) {
        const uint64_t before = h.generation.load(std::memory_order_acquire);
        if ((before & 1) == 0) {
            const uint64_t bytes = h.payload_bytes.load(std::memory_order_acquire);
            if (bytes <= payload_limit_) {
                out.resize(bytes);
                std::memcpy(out.data(), payload, bytes);
            }
            std::atomic_thread_fence(std::memory_order_acquire);
            const uint64_t after = h.generation.load(std::memory_order_relaxed);
            if (before == after) {
                if (bytes > payload_limit_)
                    fail(fmt::format("{} is corrupt: payload_bytes {}, more than its {}-byte "
                                     "payload region",
                                     path_, bytes, payload_limit_));
                if (bytes > 0) return out;
                why = empty; // laid out, not published yet
            } else {
                why = changed;
            }
        } else {
            why = mid_write;
        }
        const bool late = clock_type::now() >= deadline;
        if (late || attempt % 16 == 15) {
            if (check_process(pid_, start_ticks_) != liveness::runs) exited_while_reading();
        }
        if (late) {
            const std::string span = format_seconds(options_.read_timeout);
            switch (why) {
            case mid_write:
                fail(fmt::format("process {}'s snapshot stayed mid-write for {} (generation odd)",
                                 pid_, span));
            case changed:
                fail(fmt::format("process {}'s snapshot changed under every read for {}", pid_,
                                 span));
            case empty:
                fail(fmt::format("process {} published no snapshot within {}", pid_, span));
            }
        }
        pause_briefly(attempt);
    }
}

snapshot live_segment::read_snapshot() const {
    const std::string source = fmt::format("process {}'s snapshot", pid_);
    snapshot s = parse_snapshot(read_payload(), source);
    if (s.pid != static_cast<uint64_t>(pid_)) fail(fmt::format("{} names pid {}", source, s.pid));
    return s;
}

// ---- requests -----------------------------------------------------------------------------------

const char *request_name(live::request kind) {
    switch (kind) {
    case live::request::validate:
        return "validate";
    case live::request::shrink:
        return "shrink";
    case live::request::report:
        return "report";
    case live::request::failslab:
        return "failslab";
    case live::request::traces:
        return "traces";
    case live::request::leaks:
        return "leaks";
    case live::request::none:
        break;
    }
    return "none";
}

raw_reply live_segment::send_request(live::request kind, std::string_view arg) const {
    auto &h = head_rw();
    const char *name = request_name(kind);
    if (!options_.writable) fail(fmt::format("{} is not open for a request", path_));
    if (arg.size() >= sizeof h.request_arg || arg.find('\0') != arg.npos)
        fail(fmt::format("{} '{}' does not fit a request ({} bytes at most)",
                         kind == live::request::failslab ? "the failslab settings" : "cache name",
                         one_line(arg), sizeof h.request_arg - 1));
    const pid_t me = ::getpid();
    const auto deadline = deadline_after(options_.request_timeout);
    const std::string too_late = fmt::format("process {} did not answer the {} request within {}",
                                             pid_, name, format_seconds(options_.request_timeout));
    auto check_target = [&](const char *when) {
        if (check_process(pid_, start_ticks_) != liveness::runs)
            fail(fmt::format("process {} exited {} the {} request", pid_, when, name));
        if (h.state.load(std::memory_order_acquire) == static_cast<uint32_t>(live::state::stopped))
            fail(fmt::format("process {} stopped publishing {} the {} request", pid_, when, name));
    };

    // The request slot: 0 -> our pid. A holder that no longer exists died holding it.
    for (unsigned attempt = 0;; attempt++) {
        int32_t holder = 0;
        if (h.request_owner.compare_exchange_strong(holder, me, std::memory_order_acq_rel)) break;
        if (holder != me && check_process(holder) == liveness::gone) {
            if (h.request_owner.compare_exchange_strong(holder, me, std::memory_order_acq_rel))
                break;
            continue;
        }
        if (attempt % 8 == 7) check_target("before taking");
        if (clock_type::now() >= deadline)
            fail(fmt::format("{} (its request slot stayed held by pid {})", too_late, holder));
        pause_briefly(attempt);
    }
    struct release_slot {
        live::live_header &h;
        pid_t me;
        ~release_slot() {
            int32_t mine = me;
            h.request_owner.compare_exchange_strong(mine, 0, std::memory_order_acq_rel);
        }
    } release{h, me};

    h.request_kind.store(static_cast<uint32_t>(kind), std::memory_order_relaxed);
    std::memset(h.request_arg, 0, sizeof h.request_arg);
    std::memcpy(h.request_arg, arg.data(), arg.size());
    const uint32_t seq = h.request_seq.fetch_add(1, std::memory_order_acq_rel) + 1;
    futex_wake_all(&h.request_seq);

    for (unsigned attempt = 0;; attempt++) {
        if (h.reply_seq.load(std::memory_order_acquire) == seq) break;
        if (attempt % 8 == 7) check_target("before answering");
        if (clock_type::now() >= deadline) fail(too_late);
        pause_briefly(attempt);
    }
    raw_reply reply;
    reply.status = h.reply_status.load(std::memory_order_relaxed);
    const uint64_t bytes = h.reply_bytes.load(std::memory_order_relaxed);
    if (bytes > live::kReplyBytes)
        fail(fmt::format("{} is corrupt: reply_bytes {}, more than its {}-byte reply region", path_,
                         bytes, live::kReplyBytes));
    reply.text.assign(static_cast<const char *>(base_) + live::kReplyOffset, bytes);
    return reply;
}

namespace {

using json = nlohmann::ordered_json;

// The reply's JSON, checked to answer `kind`; a refusal is an error.
json reply_json(const raw_reply &reply, pid_t pid, live::request kind) {
    const char *name = request_name(kind);
    json j;
    try {
        j = json::parse(reply.text);
    } catch (const json::parse_error &) {
        fail(fmt::format("process {}'s reply to the {} request is not JSON", pid, name));
    }
    if (!j.is_object())
        fail(fmt::format("process {}'s reply to the {} request is not a JSON object", pid, name));
    // A refusal first: a reply the process had to cut short names no request.
    auto error = j.find("error");
    if (reply.status != 0 || error != j.end()) {
        std::string why = error != j.end() && error->is_string()
                              ? one_line(error->get<std::string>())
                              : fmt::format("status {}", reply.status);
        fail(fmt::format("process {} refused the {} request: {}", pid, name, why));
    }
    auto req = j.find("request");
    if (req == j.end() || !req->is_string() || req->get<std::string>() != name)
        fail(fmt::format("process {} answered the {} request with a reply to another request", pid,
                         name));
    return j;
}

struct reply_reader {
    pid_t pid;
    const char *name;
    [[noreturn]] void bad(const std::string &field, const char *want) const {
        fail(fmt::format("process {}'s reply to the {} request: field {} is missing or not {}", pid,
                         name, field, want));
    }
    uint64_t number(const json &j, const char *key, const std::string &path) const {
        auto it = j.find(key);
        if (it == j.end() || !it->is_number_unsigned()) bad(path, "an unsigned integer");
        return it->get<uint64_t>();
    }
    std::string text(const json &j, const char *key, const std::string &path) const {
        auto it = j.find(key);
        if (it == j.end() || !it->is_string()) bad(path, "a string");
        return it->get<std::string>();
    }
    // The member `key` of j, of the kind `is` tells (json::is_array, ...), named `want` if not.
    const json &member(const json &j, const char *key, const std::string &path,
                       bool (json::*is)() const noexcept, const char *want) const {
        auto it = j.find(key);
        if (it == j.end() || !((*it).*is)()) bad(path, want);
        return *it;
    }
};

} // namespace

validate_result parse_validate_reply(const raw_reply &reply, pid_t pid) {
    const json j = reply_json(reply, pid, live::request::validate);
    reply_reader r{pid, "validate"};
    validate_result out;
    out.caches_checked = r.number(j, "caches_checked", "caches_checked");
    out.problems = r.number(j, "problems", "problems");
    out.report = r.text(j, "report", "report");
    out.copies = r.number(j, "copies", "copies");
    if (j.contains("first_copy_problems"))
        out.first_copy_problems = r.number(j, "first_copy_problems", "first_copy_problems");
    return out;
}

shrink_result parse_shrink_reply(const raw_reply &reply, pid_t pid) {
    const json j = reply_json(reply, pid, live::request::shrink);
    reply_reader r{pid, "shrink"};
    const json &caches = r.member(j, "caches", "caches", &json::is_array, "an array");
    shrink_result out;
    for (size_t i = 0; i < caches.size(); i++) {
        const json &c = caches[i];
        const std::string path = fmt::format("caches[{}]", i);
        if (!c.is_object()) r.bad(path, "an object");
        out.caches.push_back({r.text(c, "name", path + ".name"),
                              r.number(c, "pages_before", path + ".pages_before"),
                              r.number(c, "pages_after", path + ".pages_after")});
    }
    return out;
}

leak_report parse_leaks_reply(const raw_reply &reply, pid_t pid) {
    const json j = reply_json(reply, pid, live::request::leaks);
    reply_reader r{pid, "leaks"};
    const json &s = r.member(j, "scan", "scan", &json::is_object, "an object");
    leak_report out;
    out.roots_listed =
        r.member(s, "roots_listed", "scan.roots_listed", &json::is_boolean, "a boolean")
            .get<bool>();
    out.debug_caches = r.number(s, "debug_caches", "scan.debug_caches");
    out.root_bytes = r.number(s, "root_bytes", "scan.root_bytes");
    out.objects = r.number(s, "objects", "scan.objects");
    out.leaked = r.number(s, "leaked", "scan.leaked");
    out.leaked_bytes = r.number(s, "leaked_bytes", "scan.leaked_bytes");
    out.groups_dropped = r.number(s, "groups_dropped", "scan.groups_dropped");
    const json &groups = r.member(s, "groups", "scan.groups", &json::is_array, "an array");
    for (size_t i = 0; i < groups.size(); i++) {
        const json &g = groups[i];
        const std::string p = fmt::format("scan.groups[{}]", i);
        if (!g.is_object()) r.bad(p, "an object");
        out.groups.push_back({r.text(g, "cache", p + ".cache"), r.text(g, "site", p + ".site"),
                              r.number(g, "count", p + ".count"),
                              r.number(g, "bytes", p + ".bytes"),
                              r.number(g, "age_min_ms", p + ".age_min_ms"),
                              r.number(g, "age_max_ms", p + ".age_max_ms")});
    }
    return out;
}

std::vector<cache_traces> parse_traces_reply(const raw_reply &reply, pid_t pid) {
    const json j = reply_json(reply, pid, live::request::traces);
    reply_reader r{pid, "traces"};
    const json &caches = r.member(j, "caches", "caches", &json::is_array, "an array");
    std::vector<cache_traces> out;
    for (size_t i = 0; i < caches.size(); i++) {
        const json &c = caches[i];
        const std::string path = fmt::format("caches[{}]", i);
        if (!c.is_object()) r.bad(path, "an object");
        cache_traces ct;
        ct.name = r.text(c, "name", path + ".name");
        ct.free_sites_kept = r.member(c, "free_sites_kept", path + ".free_sites_kept",
                                      &json::is_boolean, "a boolean")
                                 .get<bool>();
        for (auto [key, side] : {std::pair{"alloc", &ct.alloc}, std::pair{"free", &ct.free}}) {
            const std::string sp = path + "." + key;
            const json &o = r.member(c, key, sp, &json::is_object, "an object");
            side->objects = r.number(o, "objects", sp + ".objects");
            side->dropped = r.number(o, "dropped", sp + ".dropped");
            const json &sites = r.member(o, "sites", sp + ".sites", &json::is_array, "an array");
            for (size_t k = 0; k < sites.size(); k++) {
                const json &e = sites[k];
                const std::string ep = fmt::format("{}.sites[{}]", sp, k);
                if (!e.is_object()) r.bad(ep, "an object");
                side->sites.push_back(
                    {r.number(e, "count", ep + ".count"), r.text(e, "site", ep + ".site"),
                     r.number(e, "age_min_ms", ep + ".age_min_ms"),
                     r.number(e, "age_avg_ms", ep + ".age_avg_ms"),
                     r.number(e, "age_max_ms", ep + ".age_max_ms"),
                     r.number(e, "tid_min", ep + ".tid_min"),
                     r.number(e, "tid_max", ep + ".tid_max"), r.number(e, "cpus", ep + ".cpus")});
            }
        }
        out.push_back(std::move(ct));
    }
    return out;
}

failslab_state parse_failslab_reply(const raw_reply &reply, pid_t pid) {
    const json j = reply_json(reply, pid, live::request::failslab);
    reply_reader r{pid, "failslab"};
    const json &f = r.member(j, "failslab", "failslab", &json::is_object, "an object");
    failslab_state out;
    out.armed = r.member(f, "armed", "failslab.armed", &json::is_boolean, "a boolean").get<bool>();
    out.probability =
        r.member(f, "probability", "failslab.probability", &json::is_number, "a number")
            .get<double>();
    out.interval = r.number(f, "interval", "failslab.interval");
    out.times = r.member(f, "times", "failslab.times", &json::is_number_integer, "an integer")
                    .get<int64_t>();
    out.space = r.member(f, "space", "failslab.space", &json::is_number_integer, "an integer")
                    .get<int64_t>();
    out.caches = r.text(f, "caches", "failslab.caches");
    out.failures = r.number(f, "failures", "failslab.failures");
    out.block_failures = r.number(f, "block_failures", "failslab.block_failures");
    return out;
}

std::string parse_report_reply(const raw_reply &reply, pid_t pid) {
    const json j = reply_json(reply, pid, live::request::report);
    return reply_reader{pid, "report"}.text(j, "text", "text");
}

validate_result request_validate(const live_segment &seg, std::string_view cache) {
    return parse_validate_reply(seg.send_request(live::request::validate, cache), seg.pid());
}

shrink_result request_shrink(const live_segment &seg, std::string_view cache) {
    return parse_shrink_reply(seg.send_request(live::request::shrink, cache), seg.pid());
}

std::string request_report(const live_segment &seg) {
    return parse_report_reply(seg.send_request(live::request::report, ""), seg.pid());
}

leak_report request_leaks(const live_segment &seg, uint64_t min_age_ms) {
    return parse_leaks_reply(seg.send_request(live::request::leaks, std::to_string(min_age_ms)),
                             seg.pid());
}

std::vector<cache_traces> request_traces(const live_segment &seg, std::string_view cache) {
    return parse_traces_reply(seg.send_request(live::request::traces, cache), seg.pid());
}

failslab_state request_failslab(const live_segment &seg, std::string_view settings) {
    return parse_failslab_reply(seg.send_request(live::request::failslab, settings), seg.pid());
}

// ---- --list -------------------------------------------------------------------------------------

std::vector<segment_entry> list_segments(const segment_options &options) {
    std::vector<segment_entry> out;
    DIR *dir = ::opendir(options.dir.c_str());
    if (!dir) return out;
    const std::string_view prefix = std::string_view(live::kNamePrefix).substr(1); // "slabkit."
    std::vector<pid_t> pids;
    while (const dirent *e = ::readdir(dir)) {
        std::string_view name = e->d_name;
        if (!name.starts_with(prefix)) continue;
        name.remove_prefix(prefix.size());
        pid_t pid = 0;
        auto [ptr, ec] = std::from_chars(name.data(), name.data() + name.size(), pid);
        if (ec != std::errc() || ptr != name.data() + name.size() || pid <= 0) continue;
        pids.push_back(pid);
    }
    ::closedir(dir);
    std::sort(pids.begin(), pids.end());

    segment_options quick = options;
    quick.writable = false;
    quick.read_timeout = seconds(0.2);
    for (pid_t pid : pids) {
        segment_entry entry;
        entry.pid = pid;
        entry.path = segment_path(pid, options.dir);
        live_segment seg;
        seg.pid_ = pid;
        seg.path_ = entry.path;
        seg.options_ = quick;
        attach_verdict v = seg.attach_once();
        entry.status = v.status;
        entry.stale = v.stale;
        if (v.kind == attach_verdict::retry && check_process(pid) == liveness::gone) {
            entry.status = "stale: process gone";
            entry.stale = true;
        }
        if (seg.base_) {
            entry.header = seg.header();
            try {
                entry.program = one_line(seg.read_snapshot().program, 40);
            } catch (const slabinfo_error &) {
                // The snapshot is unreadable now: the process's own name will do.
            }
        }
        if (entry.program.empty() && !entry.stale) entry.program = process_comm(pid);
        out.push_back(std::move(entry));
    }
    return out;
}

} // namespace slabinfo
