// fake_segment.cpp - the tests' own live segments and request server (fake_segment.hpp).
#include "fake_segment.hpp"

#include "sample_snapshot.hpp"

#include <atomic>
#include <cerrno>
#include <climits>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace slabinfo_test {

namespace {

std::string slurp(const std::string &path) {
    std::ifstream in(path);
    std::stringstream ss;
    ss << in.rdbuf();
    return ss.str();
}

long pid_max() {
    long max = 0;
    std::ifstream("/proc/sys/kernel/pid_max") >> max;
    return max > 1000 ? max : 32768;
}

bool pid_unused(pid_t pid) {
    return ::kill(pid, 0) == -1 && errno == ESRCH;
}

// Candidates from near pid_max downwards, starting at a place of this process's own, so that
// tests running side by side rarely try the same ones.
template <class F>
pid_t first_unused(F &&accept) {
    const long top = pid_max() - 1;
    const long start = top - (::getpid() % 4096) * 4;
    for (long p = start; p > 1000; p--) {
        if (pid_unused(static_cast<pid_t>(p)) && accept(static_cast<pid_t>(p)))
            return static_cast<pid_t>(p);
    }
    throw std::runtime_error("no unused pid found");
}

} // namespace

uint64_t start_ticks_of(pid_t pid) {
    const std::string text = slurp("/proc/" + std::to_string(pid) + "/stat");
    const size_t close = text.rfind(')');
    if (close == std::string::npos) throw std::runtime_error("no /proc/<pid>/stat");
    std::istringstream rest(text.substr(close + 1));
    std::string token;
    for (int field = 3; field <= 22; field++) rest >> token; // fields 3 .. 22
    return std::stoull(token);
}

pid_t unused_pid() {
    return first_unused([](pid_t) { return true; });
}

std::string sample_with_pid(pid_t pid) {
    auto j = nlohmann::ordered_json::parse(kSampleJson);
    j["pid"] = pid;
    return j.dump();
}

void fake_segment::create(pid_t pid, size_t file_bytes, bool exclusive) {
    pid_ = pid;
    path_ = "/dev/shm/slabkit." + std::to_string(pid);
    if (!exclusive) ::unlink(path_.c_str());
    int fd = ::open(path_.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        const int e = errno;
        path_.clear(); // not ours: not to be removed
        throw std::system_error(e, std::generic_category(), "creating a fake segment");
    }
    if (::ftruncate(fd, static_cast<off_t>(file_bytes)) != 0) {
        ::close(fd);
        throw std::runtime_error("ftruncate");
    }
    if (file_bytes >= live::kHeaderBytes) {
        void *p = ::mmap(nullptr, file_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            ::close(fd);
            throw std::runtime_error("mmap");
        }
        base_ = p;
        mapped_ = file_bytes;
    } else if (file_bytes > 0) {
        // Something that is not all zeros (which would read as "starting").
        std::string junk(file_bytes, 'x');
        if (::pwrite(fd, junk.data(), junk.size(), 0) != static_cast<ssize_t>(junk.size())) {
            ::close(fd);
            throw std::runtime_error("pwrite");
        }
    }
    ::close(fd);
}

fake_segment::fake_segment(pid_t pid, size_t file_bytes) {
    create(pid, file_bytes, false);
}

fake_segment fake_segment::at_unused_pid() {
    fake_segment seg;
    first_unused([&](pid_t p) {
        try {
            seg.create(p, live::kSegmentBytes, true);
            return true;
        } catch (const std::system_error &) {
            return false; // another test's
        }
    });
    return seg;
}

fake_segment::fake_segment(fake_segment &&other) noexcept
    : pid_(other.pid_), path_(std::move(other.path_)), base_(std::exchange(other.base_, nullptr)),
      mapped_(std::exchange(other.mapped_, 0)) {
    other.path_.clear();
}

fake_segment::~fake_segment() {
    if (base_) ::munmap(base_, mapped_);
    if (!path_.empty()) ::unlink(path_.c_str());
}

void fake_segment::lay_out(std::optional<uint64_t> start_ticks, uint32_t period_ms) {
    auto &h = header();
    std::memcpy(h.magic, live::kMagic, sizeof h.magic);
    h.version = live::kVersion;
    h.header_bytes = sizeof(live::live_header);
    h.segment_bytes = live::kSegmentBytes;
    h.pid = pid_;
    h.period_ms = period_ms;
    h.start_ticks = start_ticks ? *start_ticks : start_ticks_of(pid_);
    h.state.store(static_cast<uint32_t>(live::state::live), std::memory_order_release);
}

void fake_segment::publish(std::string_view text) {
    auto &h = header();
    const uint64_t g = h.generation.load(std::memory_order_relaxed);
    h.generation.store(g + 1, std::memory_order_relaxed);
    std::atomic_thread_fence(std::memory_order_release);
    std::memcpy(bytes() + live::kPayloadOffset, text.data(), text.size());
    h.payload_bytes.store(text.size(), std::memory_order_relaxed);
    h.generation.store(g + 2, std::memory_order_release);
    h.published_ns.store(1764800000000000000, std::memory_order_relaxed);
    h.publish_count.fetch_add(1, std::memory_order_relaxed);
}

std::optional<served_request>
serve_one(fake_segment &seg, uint32_t seen,
          const std::function<reply_text(const served_request &)> &answer,
          std::chrono::milliseconds wait, std::chrono::milliseconds slice) {
    auto &h = seg.header();
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
        const uint32_t seq = h.request_seq.load(std::memory_order_acquire);
        if (seq != seen) {
            served_request req;
            req.kind = h.request_kind.load(std::memory_order_relaxed);
            req.arg.assign(h.request_arg, ::strnlen(h.request_arg, sizeof h.request_arg));
            req.owner = h.request_owner.load(std::memory_order_relaxed);
            req.seq = seq;
            const reply_text reply = answer(req);
            std::memcpy(seg.bytes() + live::kReplyOffset, reply.text.data(), reply.text.size());
            h.reply_bytes.store(reply.text.size(), std::memory_order_relaxed);
            h.reply_status.store(reply.status, std::memory_order_relaxed);
            h.reply_seq.store(seq, std::memory_order_release);
            return req;
        }
        const auto now = std::chrono::steady_clock::now();
        if (now >= deadline) return std::nullopt;
        const auto left = std::min<std::chrono::nanoseconds>(slice, deadline - now);
        timespec ts{static_cast<time_t>(left.count() / 1000000000),
                    static_cast<long>(left.count() % 1000000000)};
        // Shared (no FUTEX_PRIVATE_FLAG), as the publisher waits on its segment.
        ::syscall(SYS_futex, static_cast<void *>(&h.request_seq), FUTEX_WAIT, seen, &ts, nullptr,
                  0);
    }
}

bool wait_until_sleeping(pid_t tid, std::chrono::milliseconds wait) {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    const std::string path = "/proc/self/task/" + std::to_string(tid) + "/stat";
    while (std::chrono::steady_clock::now() < deadline) {
        const std::string text = slurp(path);
        const size_t close = text.rfind(')');
        if (close != std::string::npos && close + 2 < text.size() && text[close + 2] == 'S')
            return true;
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return false;
}

} // namespace slabinfo_test
