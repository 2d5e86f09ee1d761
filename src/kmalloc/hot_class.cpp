// hot_class.cpp - the malloc table's hot classes (hot_class.hpp).
#include "kmalloc/hot_class.hpp"

#include "kmalloc/kmalloc.hpp"
#include "platform/platform.hpp"

#include <atomic>

namespace slabkit::kmalloc {

namespace detail {
// Every step's class from the formula: hot classes replace entries while the process runs.
constinit std::array<uint8_t, kNrMallocSteps> g_malloc_class = [] {
    std::array<uint8_t, kNrMallocSteps> table{};
    for (unsigned step = 0; step < kNrMallocSteps; ++step)
        table[step] = static_cast<uint8_t>(malloc_class_by_formula((step + 1) << kMallocStepShift));
    return table;
}();
} // namespace detail

namespace {
// Hot class j's size; written before the table names it (release), read by the slow paths.
constinit std::atomic<uint32_t> g_hot_size[kNrHotClasses] = {};
constinit std::atomic<unsigned> g_nr_hot{0};
// One promotion at a time: a thread that finds it taken skips its own (a later slow path will
// note the size again). A try-lock, so that a fork while it is held only leaves the child
// without further hot classes.
constinit std::atomic<bool> g_promoting{false};
// Per thread and fixed class: the step the thread's last slow paths of the class came from (high
// half) and how many in a row. Per thread, because a thread allocating one size over and over
// is what makes a size hot, and because shared counters would lose the resets of other steps
// when threads race (four threads of random sizes made hot classes that way).
constinit thread_local uint32_t tls_streak[kNrFixedMallocClasses] SLABKIT_TLS = {};
// SLABKIT_HOT_CLASSES: 0 turns hot classes off. -1 until read.
constinit std::atomic<int> g_enabled{-1};

bool enabled() {
    int v = g_enabled.load(std::memory_order_relaxed);
    if (SLABKIT_UNLIKELY(v < 0)) {
        v = platform::env_uint("SLABKIT_HOT_CLASSES", 1, 0, 1) != 0 ? 1 : 0;
        g_enabled.store(v, std::memory_order_relaxed);
    }
    return v != 0;
}

SLABKIT_NOINLINE void promote(unsigned step, unsigned fixed) {
    if (g_promoting.exchange(true, std::memory_order_acquire)) return;
    uint8_t *entry = &detail::g_malloc_class[step];
    const unsigned j = g_nr_hot.load(std::memory_order_relaxed);
    if (j < kNrHotClasses && __atomic_load_n(entry, __ATOMIC_RELAXED) == fixed) {
        g_hot_size[j].store((step + 1) << kMallocStepShift, std::memory_order_release);
        g_nr_hot.store(j + 1, std::memory_order_release);
        __atomic_store_n(entry, static_cast<uint8_t>(kNrFixedMallocClasses + j), __ATOMIC_RELEASE);
    }
    g_promoting.store(false, std::memory_order_release);
}
} // namespace

void note_malloc_refill(design d, size_t size) {
    // Below 128 bytes the classes are 16 apart already: every step has its own.
    if (size <= 128 || size > kMaxCacheSize) return;
    const unsigned step = static_cast<unsigned>((size - 1) >> kMallocStepShift);
    const unsigned cls = __atomic_load_n(&detail::g_malloc_class[step], __ATOMIC_RELAXED);
    if (cls >= kNrFixedMallocClasses) return; // hot already
    // Every slow path of the class counts, so that another step's (one the class fits well
    // included) breaks the streak.
    const uint32_t want = step << 16;
    uint32_t v = tls_streak[cls];
    v = (v & 0xffff0000u) == want ? v + 1 : want | 1;
    if ((v & 0xffffu) < kHotStreak) {
        tls_streak[cls] = v;
        return;
    }
    tls_streak[cls] = want; // decided below: a step not worth a class is looked at again later
    // Worth a class only if the fixed one wastes a sixteenth or more of its block on this step.
    const size_t exact = size_t{step + 1} << kMallocStepShift;
    const size_t have = class_size(cls, class_table::malloc);
    if ((have - exact) * 16 < have) return;
    if (!enabled() || has_own_kmalloc(d) || debugging()) return;
    if (g_nr_hot.load(std::memory_order_relaxed) < kNrHotClasses) promote(step, cls);
}

size_t hot_class_size(unsigned j) {
    return j < kNrHotClasses ? g_hot_size[j].load(std::memory_order_acquire) : 0;
}

unsigned nr_hot_classes() {
    return g_nr_hot.load(std::memory_order_acquire);
}

unsigned hot_class_order(size_t size) {
    unsigned best = kHotMaxOrder;
    uint64_t best_waste_ppm = UINT64_MAX;
    for (unsigned order = 0; order <= kHotMaxOrder; ++order) {
        const size_t slab = kPageSize << order;
        const size_t objects = slab / size;
        if (objects == 0) continue;
        const size_t waste = slab - objects * size;
        if (waste * 64 <= slab) return order;
        const uint64_t ppm = uint64_t{waste} * 1000000 / slab;
        if (ppm < best_waste_ppm) {
            best_waste_ppm = ppm;
            best = order;
        }
    }
    return best;
}

} // namespace slabkit::kmalloc
