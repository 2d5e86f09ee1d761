// trimmer.cpp - the rate-limited trimmer (see trimmer.hpp).
#include "core/trimmer.hpp"

#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

#include <atomic>

namespace slabkit::trimmer {

namespace {
constexpr unsigned kMaxHandlers = 4;
std::atomic<handler> g_handlers[kMaxHandlers];
std::atomic<uint64_t> g_next_ms{0};
std::atomic<uint64_t> g_epoch{0};
} // namespace

bool add_handler(handler h) {
    for (auto &slot : g_handlers) {
        handler empty = nullptr;
        if (slot.compare_exchange_strong(empty, h, std::memory_order_acq_rel)) return true;
    }
    return false;
}

void maybe_run(bool force) {
    uint64_t now = platform::now_coarse_ms();
    uint64_t next = g_next_ms.load(std::memory_order_relaxed);
    if (now < next && !force) return;
    unsigned decay = page_allocator::global().settings().decay_ms;
    // One thread wins the run; the others go on with their allocation.
    if (!g_next_ms.compare_exchange_strong(next, now + (decay ? decay / 2 : 500),
                                           std::memory_order_relaxed) &&
        !force)
        return;
    g_epoch.fetch_add(1, std::memory_order_relaxed);
    for (auto &slot : g_handlers) {
        if (handler h = slot.load(std::memory_order_acquire))
            h(now > decay ? now - decay : 0, force);
    }
}

uint64_t epoch() {
    return g_epoch.load(std::memory_order_relaxed);
}

} // namespace slabkit::trimmer
