// Shortcuts (slot/slot.hpp, core/design.hpp): a thread that owns a slot finds its own-slot
// structure of a malloc class in a thread-local entry. These tests look inside: which entry a
// class has, that it is the thread's own structure and nothing else, that the malloc family's
// paths through it keep the queue's LIFO order, counts and checks, and that a thread never keeps
// an entry into a slot it no longer owns.
#include "core/report.hpp"
#include "designs/designs.hpp"
#include "kmalloc/kmalloc.hpp"
#include "override/malloc.hpp"
#include "slot/slot.hpp"
#include "slqb/slqb.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace slabkit {
namespace {

using kmalloc::class_table;

// The process's malloc design has shortcuts (SLQB, in builds that keep free pointers in the
// clear) and the calling thread owns a slot: else the reason to skip.
const char *shortcuts_unavailable() {
    if constexpr (std::is_void_v<designs::shortcut_design>) {
        return "no design of this build has shortcuts";
    } else {
        if (process_design() != designs::shortcut_design::kind)
            return "the process's design has no shortcuts";
        if (hardening::kFreelistHardened) return "free pointers are obfuscated: no shortcuts";
        if (kmalloc::debugging()) return "debug caches have no shortcuts";
        { slots::hold h; }
        if (slots::own_index() == kNoSlot) return "this thread owns no slot";
        return nullptr;
    }
}

// The malloc class serving `size`, its cache and the calling thread's structure of it.
struct class_view {
    slqb::slqb_cache *cache;
    slqb::slqb_cpu *mine; // the calling thread's own slot's structure, or nullptr
};
class_view view_of(size_t size) {
    const unsigned i = kmalloc::malloc_class_of(size);
    auto *c =
        static_cast<slqb::slqb_cache *>(kmalloc::cache_for(design::slqb, i, class_table::malloc));
    const unsigned own = slots::own_index();
    return {c, own == kNoSlot ? nullptr : c->cpu_slab[own].load()};
}

TEST(Shortcuts, AMallocClassHasAnEntryAndItIsTheOwnSlotsStructure) {
    if (const char *why = shortcuts_unavailable()) GTEST_SKIP() << why;
    std::thread([] {
        void *p = libc::malloc(200);
        ASSERT_NE(p, nullptr);
        class_view v = view_of(200);
        ASSERT_NE(v.cache, nullptr);
        EXPECT_EQ(v.cache->shortcut, kmalloc::malloc_class_of(200) + 1);
        ASSERT_NE(v.mine, nullptr);
        EXPECT_EQ(slots::shortcut(v.cache->shortcut), v.mine);
        // Entry 0 is every other cache's: always empty.
        EXPECT_EQ(slots::shortcut(0), nullptr);
        libc::free(p);
    }).join();
}

TEST(Shortcuts, MallocAndFreeThroughTheEntryKeepTheQueueAndItsCounts) {
    if (const char *why = shortcuts_unavailable()) GTEST_SKIP() << why;
    std::thread([] {
        void *first = libc::malloc(96);
        ASSERT_NE(first, nullptr);
        class_view v = view_of(96);
        ASSERT_NE(v.mine, nullptr);
        ASSERT_EQ(slots::shortcut(v.cache->shortcut), v.mine);
        slqb::slqb_list &l = v.mine->list;
        // LIFO: what is freed is the next malloc's, through the entry both ways.
        const uint32_t nr = l.freelist.count();
        const uint64_t allocs = l.stats[slqb::ALLOC].get();
        libc::free(first);
        EXPECT_EQ(l.freelist.count(), nr + 1);
        EXPECT_EQ(l.freelist.head(), first);
        void *again = libc::malloc(90); // same class
        EXPECT_EQ(again, first);
        EXPECT_EQ(l.freelist.count(), nr);
        EXPECT_EQ(l.stats[slqb::ALLOC].get(), allocs + 1);
        // Many blocks: the queue passes hiwater and flushes, and everything comes back.
        std::vector<void *> blocks;
        for (int k = 0; k < 5000; ++k) {
            void *b = libc::malloc(96);
            ASSERT_NE(b, nullptr);
            memset(b, k, 96);
            blocks.push_back(b);
        }
        for (void *b : blocks) libc::free(b);
        EXPECT_LE(l.freelist.count(), v.cache->hiwater.load());
        libc::free(again);
        char buf[256];
        EXPECT_EQ(slqb::validate(v.cache, buf, sizeof buf), 0u) << buf;
    }).join();
}

// The kernel table's classes (kmalloc, kfree) have entries after the malloc table's.
TEST(Shortcuts, KmallocClassesHaveEntriesToo) {
    if (const char *why = shortcuts_unavailable()) GTEST_SKIP() << why;
    std::thread([] {
        void *p = kmalloc::alloc(design::slqb, 200, false, kAnyNode);
        ASSERT_NE(p, nullptr);
        const unsigned i = kmalloc::class_of(200);
        auto *c = static_cast<slqb::slqb_cache *>(kmalloc::cache_for(design::slqb, i));
        EXPECT_EQ(c->shortcut, 1 + kmalloc::kNrMallocClasses + i);
        slqb::slqb_cpu *mine = c->cpu_slab[slots::own_index()].load();
        ASSERT_NE(mine, nullptr);
        EXPECT_EQ(slots::shortcut(c->shortcut), mine);
        // Through the entry both ways: LIFO, counted.
        const uint32_t nr = mine->list.freelist.count();
        kmalloc::free(p);
        EXPECT_EQ(mine->list.freelist.count(), nr + 1);
        EXPECT_EQ(kmalloc::alloc(design::slqb, 256, false, kAnyNode), p); // same class
        EXPECT_EQ(mine->list.freelist.count(), nr);
        // A zeroing allocation takes the shortcut's pop too, and zeroes the whole object.
        memset(p, 0xab, 256);
        kmalloc::free(p);
        auto *z = static_cast<unsigned char *>(kmalloc::alloc(design::slqb, 200, true, kAnyNode));
        EXPECT_EQ(z, p);
        ASSERT_NE(z, nullptr);
        for (int k = 0; k < 256; ++k) ASSERT_EQ(z[k], 0) << k;
        EXPECT_EQ(mine->list.freelist.count(), nr);
        kmalloc::free(z);
        // calloc the same way, on the malloc table.
        void *m = libc::malloc(96);
        memset(m, 0xcd, 96);
        libc::free(m);
        auto *cz = static_cast<unsigned char *>(libc::calloc(3, 32));
        EXPECT_EQ(static_cast<void *>(cz), m);
        for (int k = 0; k < 96; ++k) ASSERT_EQ(cz[k], 0) << k;
        libc::free(cz);
    }).join();
}

std::vector<std::string> g_reports;
void collect(const char *report) {
    g_reports.emplace_back(report);
}

TEST(Shortcuts, ADoubleFreeThroughTheEntryIsReportedAndLosesNothing) {
    if (const char *why = shortcuts_unavailable()) GTEST_SKIP() << why;
    if (!SLABKIT_FREELIST_CHECK) GTEST_SKIP() << "built with SLABKIT_FREELIST_CHECK=OFF";
    std::thread([] {
        g_reports.clear();
        set_error_hook(collect);
        void *keep = libc::malloc(48);
        void *p = libc::malloc(48);
        ASSERT_NE(slots::shortcut(view_of(48).cache->shortcut), nullptr);
        libc::free(p);
        libc::free(p);
        set_error_hook(nullptr);
        ASSERT_EQ(g_reports.size(), 1u);
        EXPECT_NE(g_reports[0].find("double free"), std::string::npos) << g_reports[0];
        void *a = libc::malloc(48);
        void *b = libc::malloc(48);
        EXPECT_EQ(a, p);
        EXPECT_NE(a, b);
        libc::free(a);
        libc::free(b);
        libc::free(keep);
    }).join();
}

// A thread that takes a slot another thread left finds its entries set to what that thread left
// there (the acquire hook), before any slow path of its own: a thread whose allocations and
// frees balance would otherwise never set them.
TEST(Shortcuts, AThreadTakingASlotGetsTheEntriesOfWhatItsLastOwnerLeft) {
    if (const char *why = shortcuts_unavailable()) GTEST_SKIP() << why;
    unsigned left_slot = kNoSlot;
    slqb::slqb_cpu *left = nullptr;
    uint8_t entry = 0;
    std::thread([&] {
        void *p = libc::malloc(640);
        class_view v = view_of(640);
        left_slot = slots::own_index();
        left = v.mine;
        entry = v.cache->shortcut;
        libc::free(p); // parked in the slot's queue
    }).join();
    ASSERT_NE(left, nullptr);
    ASSERT_NE(entry, 0);
    // The lowest free slot is the one just left, unless another thread took it meanwhile.
    std::thread([&] {
        { slots::hold h; } // takes a slot: the acquire hook runs
        const unsigned mine = slots::own_index();
        if (mine != left_slot) {
            GTEST_LOG_(INFO) << "took slot " << mine << ", not " << left_slot;
            EXPECT_EQ(slots::shortcut(entry), view_of(640).mine);
            return;
        }
        EXPECT_EQ(slots::shortcut(entry), left);
        // Balanced from here on: the object the last owner left comes back through the entry.
        const uint32_t nr = left->list.freelist.count();
        void *p = libc::malloc(640);
        EXPECT_EQ(left->list.freelist.count(), nr - 1);
        libc::free(p);
        EXPECT_EQ(left->list.freelist.count(), nr);
    }).join();
}

// Entries are per thread, and set only for the thread's own slot.
TEST(Shortcuts, AnotherThreadsEntriesAreItsOwn) {
    if (const char *why = shortcuts_unavailable()) GTEST_SKIP() << why;
    void *p = libc::malloc(128);
    class_view here = view_of(128);
    ASSERT_NE(here.mine, nullptr);
    EXPECT_EQ(slots::shortcut(here.cache->shortcut), here.mine);
    std::thread([&] {
        void *q = libc::malloc(128);
        class_view there = view_of(128);
        ASSERT_NE(there.mine, nullptr);
        EXPECT_NE(there.mine, here.mine);
        EXPECT_EQ(slots::shortcut(there.cache->shortcut), there.mine);
        // A block of the other thread's freed here joins this thread's queue.
        libc::free(p);
        EXPECT_EQ(there.mine->list.freelist.head(), p);
        libc::free(q);
    }).join();
    // A slot of someone else's is never stored (set_shortcut checks the slot is the caller's).
    slots::set_shortcut(slots::own_index() == 0 ? 1 : 0, here.cache->shortcut, nullptr);
    EXPECT_EQ(slots::shortcut(here.cache->shortcut), here.mine);
}

// A thread on the CPUs' slots (or on a shared one) has no entry: its fast paths reach the
// CPU's structures, which other threads use too.
TEST(Shortcuts, AThreadWithoutASlotOfItsOwnHasNone) {
    std::thread([] {
        void *p = libc::malloc(64);
        libc::free(p);
        if (slots::own_index() != kNoSlot) {
            GTEST_LOG_(INFO) << "this thread owns slot " << slots::own_index();
            return;
        }
        for (unsigned k = 0; k < kNrShortcuts; ++k) EXPECT_EQ(slots::shortcut(k), nullptr) << k;
    }).join();
}

} // namespace
} // namespace slabkit
