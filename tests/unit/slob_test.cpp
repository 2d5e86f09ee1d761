// SLOB internals: first fit inside a page, the free-block encoding (one-unit blocks included),
// merging with both neighbours in every position - before the page's first free block too (seed
// 002's fix) - aligned requests, the three lists and their 256 and 1024-byte thresholds, next
// fit's rotation of a list, pages given back once all free, constructors on every allocation,
// the units a cache's object takes, kmalloc's header, alignment, bound and ksize as the
// kernel's (mm/slob.c of v6.3), malloc's 16-byte alignment, and the invariant checker after
// stress phases.
#include "designs/designs.hpp"
#include "kmalloc/kmalloc.hpp"
#include "page/page_allocator.hpp"
#include "slob/slob_internal.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace slabkit::slob {
namespace {

::testing::AssertionResult valid() {
    char report[1024];
    unsigned problems = validate(&arena(), report, sizeof report);
    if (problems == 0) return ::testing::AssertionSuccess();
    return ::testing::AssertionFailure() << problems << " problem(s):\n" << report;
}

using blocks = std::vector<std::pair<unsigned, unsigned>>; // {offset, units}

// A page of the test's own, one free block, on no list: first fit inside it is deterministic.
class SlobPage : public ::testing::Test {
  protected:
    void SetUp() override {
        bootstrap();
        mem_ = page_allocator::global().alloc(0, kAnyNode, 0);
        ASSERT_NE(mem_, nullptr);
        platform::lock_guard guard(lock());
        add_page(mem_, 16); // the small list, at its head
    }
    void TearDown() override {
        // Whatever the test left allocated goes back through block_free, which gives the page
        // back once it is all free.
        for (auto &[p, bytes] : live_) drop(p, bytes);
        EXPECT_TRUE(valid());
    }
    page *pg() { return virt_to_page(mem_); }
    char *base() { return static_cast<char *>(mem_); }
    void *take(size_t bytes, size_t align = 0, size_t offset = 0) {
        platform::lock_guard guard(lock());
        void *p = alloc_in_page(pg(), bytes, align, offset);
        if (p) live_.emplace_back(p, bytes);
        return p;
    }
    void drop(void *p, size_t bytes) {
        void *page_out = nullptr;
        {
            platform::lock_guard guard(lock());
            ASSERT_EQ(block_free(p, bytes, &page_out), free_error::none);
        }
        if (page_out) release_page(page_out);
    }
    void give(void *p) {
        for (size_t i = 0; i < live_.size(); ++i) {
            if (live_[i].first != p) continue;
            size_t bytes = live_[i].second;
            live_.erase(live_.begin() + static_cast<long>(i));
            drop(p, bytes);
            return;
        }
        ADD_FAILURE() << "not live: " << p;
    }
    blocks free_blocks() {
        blocks out;
        platform::lock_guard guard(lock());
        for_each_free_block(
            pg(),
            [](unsigned off, unsigned units, void *arg) {
                static_cast<blocks *>(arg)->emplace_back(off, units);
            },
            &out);
        return out;
    }
    void *mem_ = nullptr;
    std::vector<std::pair<void *, size_t>> live_;
};

TEST_F(SlobPage, FirstFitFromThePageStart) {
    void *a = take(100), *b = take(100), *c = take(100);
    EXPECT_EQ(a, base());
    EXPECT_EQ(b, base() + 100);
    EXPECT_EQ(c, base() + 200);
    give(b);
    EXPECT_EQ(free_blocks(), (blocks{{50, 50}, {150, kPageUnits - 150}}));
    // The first block that fits: the hole b left, for a smaller request.
    void *d = take(60);
    EXPECT_EQ(d, base() + 100);
    EXPECT_EQ(free_blocks(), (blocks{{80, 20}, {150, kPageUnits - 150}}));
    // Too big for the hole: after c.
    void *e = take(200);
    EXPECT_EQ(e, base() + 300);
    EXPECT_TRUE(valid());
}

// Freeing merges with the free block after it, the one before it, both, or neither - and with
// the page's first free block when the freed block lies just before it (seed 002's fix: without
// it the two stayed apart, side by side, and the checker would report them).
TEST_F(SlobPage, MergesWithBothNeighboursInEveryPosition) {
    void *b[6];
    for (void *&p : b) p = take(64); // 32 units each, then the rest of the page
    const unsigned tail = kPageUnits - 6 * 32;
    give(b[1]); // neither neighbour free
    EXPECT_EQ(free_blocks(), (blocks{{32, 32}, {192, tail}}));
    give(b[3]); // neither
    EXPECT_EQ(free_blocks(), (blocks{{32, 32}, {96, 32}, {192, tail}}));
    give(b[2]); // both: 1..3 become one
    EXPECT_EQ(free_blocks(), (blocks{{32, 96}, {192, tail}}));
    give(b[5]); // the one after it (the page's tail)
    EXPECT_EQ(free_blocks(), (blocks{{32, 96}, {160, tail + 32}}));
    give(b[4]); // the one before it and the one after it
    EXPECT_EQ(free_blocks(), (blocks{{32, kPageUnits - 32}}));
    EXPECT_TRUE(valid());
}

TEST_F(SlobPage, FreeJustBeforeTheFirstFreeBlockMerges) {
    void *a = take(64), *b = take(64), *c = take(64);
    (void)c;
    give(b); // the first free block is now b's, at 32
    EXPECT_EQ(free_blocks(), (blocks{{32, 32}, {96, kPageUnits - 96}}));
    give(a); // a ends where the first free block starts
    EXPECT_EQ(free_blocks(), (blocks{{0, 64}, {96, kPageUnits - 96}}));
    EXPECT_TRUE(valid());
}

// A one-unit free block stores the negative offset of the next one (no room for two fields).
TEST_F(SlobPage, OneUnitBlocks) {
    void *a = take(10), *b = take(2), *c = take(10);
    EXPECT_EQ(b, base() + 10);
    (void)a;
    (void)c;
    give(b);
    EXPECT_EQ(free_blocks(), (blocks{{5, 1}, {11, kPageUnits - 11}}));
    {
        platform::lock_guard guard(lock());
        EXPECT_EQ(reinterpret_cast<slobidx *>(base())[5], -11) << "one unit: -(next offset)";
    }
    EXPECT_EQ(take(2), base() + 10); // reused
    EXPECT_EQ(free_blocks(), (blocks{{11, kPageUnits - 11}}));
    EXPECT_TRUE(valid());
}

// Alignment moves the block up inside the first free block that still holds it; the part
// skipped stays free in front of it. kmalloc's form: start + offset aligned (its header).
TEST_F(SlobPage, AlignedRequestsSplitTheHead) {
    void *a = take(10);
    (void)a;
    void *p = take(100, 64);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u);
    EXPECT_EQ(p, base() + 64);
    EXPECT_EQ(free_blocks(), (blocks{{5, 27}, {82, kPageUnits - 82}}));
    void *q = take(40, 16, 8); // q + 8 aligned to 16
    EXPECT_EQ((reinterpret_cast<uintptr_t>(q) + 8) % 16, 0u);
    EXPECT_EQ(q, base() + 24); // in the head's hole: 10 -> 24, leaving 10..24 free
    EXPECT_TRUE(valid());
}

// ---- through caches and kmalloc -----------------------------------------------------------

design_stats arena_stats() {
    design_stats st;
    statistics(&arena(), &st);
    return st;
}

int g_ctor_calls = 0;
void ctor(void *p) {
    ++g_ctor_calls;
    memset(p, 0x3c, 16);
}

// ---- the three lists, by request size --------------------------------------------------------

// Pages of a test's own, all free, one at the head of each list (small, medium, large): a
// request is served from the one at the head of the list it searches - it fits there - and
// from no other. `bytes` puts a page on a list (add_page: the list of a request of that size).
constexpr size_t kListBytes[3] = {16, 512, 2048};
class fresh_lists {
  public:
    fresh_lists() {
        bootstrap();
        for (unsigned l = 0; l < 3; ++l) {
            mem_[l] = page_allocator::global().alloc(0, kAnyNode, 0);
            EXPECT_NE(mem_[l], nullptr);
            platform::lock_guard guard(lock());
            add_page(mem_[l], kListBytes[l]);
        }
    }
    fresh_lists(const fresh_lists &) = delete;
    fresh_lists &operator=(const fresh_lists &) = delete;
    // Gives back the pages no block was taken from. The block one of them served is the
    // caller's to free afterwards (which gives its page back: it is then all free).
    ~fresh_lists() {
        for (void *mem : mem_) {
            void *out = nullptr;
            {
                platform::lock_guard guard(lock());
                page *pg = virt_to_page(mem);
                if (free_units_of(pg) != kPageUnits) continue; // it served a block
                // Taken whole, the page leaves its list; given back, it goes to the allocator.
                void *b = alloc_in_page(pg, kPageSize, 0, 0);
                EXPECT_EQ(b, mem);
                EXPECT_EQ(block_free(b, kPageSize, &out), free_error::none);
            }
            EXPECT_EQ(out, mem);
            if (out) release_page(out);
        }
    }
    // The list whose page holds p (0 small, 1 medium, 2 large), or -1: none of these pages.
    int list_of(const void *p) const {
        for (int l = 0; l < 3; ++l)
            if (virt_to_page(p) == virt_to_page(mem_[l])) return l;
        return -1;
    }

  private:
    void *mem_[3] = {};
};

// Which list a request searched: the list of the fresh page that served it.
template <class Alloc>
int list_served(Alloc &&alloc, void **out) {
    fresh_lists f;
    *out = alloc();
    return *out ? f.list_of(*out) : -2;
}

// Requests of 100, 500 and 2000 bytes each come from the page at the head of their own list
// (small under 256 bytes, medium under 1024, large from there), and a new page joins the list
// of the request it was taken for.
TEST(Slob, ThreeListsByRequestSize) {
    bootstrap();
    const char *why = nullptr;
    slob_cache *caches[3] = {create(cache_args{"slob-l-small", 100, 0, 0, nullptr}, &why),
                             create(cache_args{"slob-l-medium", 500, 0, 0, nullptr}, &why),
                             create(cache_args{"slob-l-large", 2000, 0, 0, nullptr}, &why)};
    ASSERT_TRUE(caches[0] && caches[1] && caches[2]);
    for (int want = 0; want < 3; ++want) {
        slob_cache *s = caches[want];
        void *p = nullptr;
        EXPECT_EQ(list_served([s] { return alloc(s, kAnyNode, false); }, &p), want)
            << s->object_size << " bytes";
        ASSERT_NE(p, nullptr);
        free(s, p);
    }
    // A page is taken for a request when no page of its list has room: it joins that list, and
    // only it, at its head.
    for (int want = 0; want < 3; ++want) {
        slob_cache *s = caches[want];
        const design_stats before = arena_stats();
        std::vector<void *> objs;
        for (;;) {
            objs.push_back(alloc(s, kAnyNode, false));
            ASSERT_NE(objs.back(), nullptr);
            if (arena_stats().counters[NEW_PAGES] != before.counters[NEW_PAGES]) break;
        }
        // The page the last object came from is new and is now on the request's list.
        page *pg = virt_to_page(objs.back());
        {
            platform::lock_guard guard(lock());
            EXPECT_EQ(list_of_page(pg), static_cast<unsigned>(want) + 1) << s->object_size;
            EXPECT_EQ(first_on_list(static_cast<unsigned>(want)), pg) << s->object_size;
        }
        // The other lists did not change (the request's own lost the pages it filled).
        const design_stats after = arena_stats();
        for (int l = 0; l < 3; ++l) {
            if (l == want) continue;
            EXPECT_EQ(after.counters[PAGES_SMALL + l], before.counters[PAGES_SMALL + l])
                << s->object_size << " bytes, list " << l;
        }
        EXPECT_TRUE(valid());
        for (void *p : objs) free(s, p);
    }
    EXPECT_TRUE(valid());
    for (slob_cache *s : caches) destroy(s);
}

// The thresholds, SLOB_BREAK1 (256) and SLOB_BREAK2 (1024), on the size slob_alloc is asked
// for: a cache's object size; a kmalloc block's size with its 8-byte header.
TEST(Slob, ListThresholdsAre256And1024Bytes) {
    bootstrap();
    const struct {
        size_t bytes;
        int list;
    } cases[] = {{255, 0}, {256, 1}, {1023, 1}, {1024, 2}, {1025, 2}};
    for (const auto &c : cases) {
        // Named copies, not structured bindings: clang 14 cannot capture those in a lambda.
        const size_t bytes = c.bytes;
        const int want = c.list;
        const char *why = nullptr;
        slob_cache *s = create(cache_args{"slob-threshold", bytes, 0, 0, nullptr}, &why);
        ASSERT_NE(s, nullptr) << why;
        void *p = nullptr;
        EXPECT_EQ(list_served([s] { return alloc(s, kAnyNode, false); }, &p), want)
            << "an object of " << bytes << " bytes";
        free(s, p);
        destroy(s);
        // kmalloc(bytes - 8) asks slob_alloc for `bytes`.
        EXPECT_EQ(
            list_served(
                [bytes] { return kmalloc::alloc(design::slob, bytes - 8, false, kAnyNode); }, &p),
            want)
            << "kmalloc(" << bytes - 8 << ")";
        kmalloc::free(p);
    }
    // The same pages, searched directly.
    for (const auto &c : cases) {
        const size_t bytes = c.bytes;
        const int want = c.list;
        void *p = nullptr;
        EXPECT_EQ(list_served(
                      [bytes] {
                          platform::lock_guard guard(lock());
                          return block_alloc(bytes, 0, 0, kAnyNode);
                      },
                      &p),
                  want)
            << bytes << " bytes";
        void *out = nullptr;
        {
            platform::lock_guard guard(lock());
            EXPECT_EQ(block_free(p, bytes, &out), free_error::none);
        }
        if (out) release_page(out);
    }
    EXPECT_TRUE(valid());
}

// ---- next fit --------------------------------------------------------------------------------

// Three pages of the test's own at the head of the small list, in the order a, b, c.
class SlobNextFit : public ::testing::Test {
  protected:
    void SetUp() override {
        bootstrap();
        for (void *&m : mem_) {
            m = page_allocator::global().alloc(0, kAnyNode, 0);
            ASSERT_NE(m, nullptr);
        }
        platform::lock_guard guard(lock());
        for (int i = 2; i >= 0; --i) add_page(mem_[i], 16); // each to the head
    }
    void TearDown() override {
        for (auto [p, bytes] : live_) give(p, bytes);
        // A page no block was taken from: taken whole and given back.
        for (void *m : mem_) {
            void *out = nullptr;
            {
                platform::lock_guard guard(lock());
                page *pg = virt_to_page(m);
                if (!(pg->flags() & PG_slab) || free_units_of(pg) != kPageUnits) continue;
                void *b = alloc_in_page(pg, kPageSize, 0, 0);
                ASSERT_EQ(b, m);
                ASSERT_EQ(block_free(b, kPageSize, &out), free_error::none);
            }
            if (out) release_page(out);
        }
        EXPECT_TRUE(valid());
    }
    page *pg(int i) { return virt_to_page(mem_[i]); }
    // A block taken inside page i (alloc_in_page: no search), kept to the end.
    void fill(int i, size_t bytes) {
        platform::lock_guard guard(lock());
        void *b = alloc_in_page(pg(i), bytes, 0, 0);
        ASSERT_NE(b, nullptr);
        live_.emplace_back(b, bytes);
    }
    // A search of the small list for `bytes`, 8-aligned as a cache's objects.
    void *search(size_t bytes) {
        platform::lock_guard guard(lock());
        void *b = block_alloc(bytes, kMinAlign, 0, kAnyNode);
        if (b) live_.emplace_back(b, bytes);
        return b;
    }
    void give(void *p, size_t bytes) {
        void *out = nullptr;
        {
            platform::lock_guard guard(lock());
            ASSERT_EQ(block_free(p, bytes, &out), free_error::none);
        }
        if (out) release_page(out);
    }
    // The small list's first pages, in search order, and its last.
    std::vector<page *> head(size_t n) {
        platform::lock_guard guard(lock());
        std::vector<page *> out;
        for (page *p = first_on_list(0); p && out.size() < n; p = p->next) out.push_back(p);
        return out;
    }
    page *last() {
        platform::lock_guard guard(lock());
        page *p = first_on_list(0);
        while (p && p->next) p = p->next;
        return p;
    }
    void *mem_[3] = {};
    std::vector<std::pair<void *, size_t>> live_;
};

// The page a search succeeds on becomes the list's first, and the pages it passed over go to
// the list's end (the kernel's list_rotate_to_front: list_move_tail of the list head), so that
// the next search starts there.
TEST_F(SlobNextFit, TheListIsRotatedToThePageThatServed) {
    fill(0, kPageSize - 16); // a keeps 8 units: too few for 96 bytes
    ASSERT_EQ(head(3), (std::vector<page *>{pg(0), pg(1), pg(2)}));
    void *p = search(96);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(virt_to_page(p), pg(1)) << "a is passed over, b has room";
    EXPECT_EQ(head(2), (std::vector<page *>{pg(1), pg(2)})) << "b first, c after it";
    EXPECT_EQ(last(), pg(0)) << "a, passed over, goes last";
    // The next search starts at b.
    void *q = search(96);
    EXPECT_EQ(virt_to_page(q), pg(1));
    EXPECT_EQ(head(2), (std::vector<page *>{pg(1), pg(2)}));
}

// A page the search found first stays where it is.
TEST_F(SlobNextFit, ASearchServedByTheFirstPageKeepsTheOrder) {
    void *p = search(96);
    EXPECT_EQ(virt_to_page(p), pg(0));
    EXPECT_EQ(head(3), (std::vector<page *>{pg(0), pg(1), pg(2)}));
}

// A page the allocation fills leaves the list, and the list is not rotated (the kernel's
// slob_alloc skips the rotation when slob_page_alloc took the page off the list).
TEST_F(SlobNextFit, APageThatFillsLeavesTheListUnrotated) {
    fill(0, kPageSize - 16); // a: 8 units left
    fill(1, kPageSize - 96); // b: 48 units left, 8-aligned: exactly 96 bytes
    void *p = search(96);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(virt_to_page(p), pg(1));
    {
        platform::lock_guard guard(lock());
        EXPECT_EQ(list_of_page(pg(1)), 0u) << "b is full";
    }
    EXPECT_EQ(head(2), (std::vector<page *>{pg(0), pg(2)})) << "a still first, then c";
}

TEST(Slob, PagesGoBackWhenAllTheirBlocksAreFree) {
    bootstrap();
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-back", 300, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr);
    design_stats before = arena_stats();
    std::vector<void *> objs;
    for (int i = 0; i < 500; ++i) objs.push_back(alloc(s, kAnyNode, false));
    EXPECT_GE(arena_stats().counters[NEW_PAGES] - before.counters[NEW_PAGES], 500u * 300 / 4096);
    std::shuffle(objs.begin(), objs.end(), std::mt19937(7));
    for (void *p : objs) free(s, p);
    design_stats after = arena_stats();
    // Every page this test made went back (other pages may have come and gone meanwhile).
    EXPECT_EQ(after.counters[NEW_PAGES] - before.counters[NEW_PAGES],
              after.counters[PAGES_FREED] - before.counters[PAGES_FREED]);
    EXPECT_GT(after.counters[MERGES], before.counters[MERGES]);
    EXPECT_TRUE(valid());
    destroy(s);
}

TEST(Slob, ConstructorRunsOnEveryAllocation) {
    bootstrap();
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-ctor", 64, 0, 0, ctor}, &why);
    ASSERT_NE(s, nullptr);
    EXPECT_EQ(s->size, 64u); // no free-pointer word: SLOB keeps free blocks' records in them
    int before = g_ctor_calls;
    for (int i = 0; i < 5; ++i) {
        void *p = alloc(s, kAnyNode, false);
        EXPECT_EQ(static_cast<unsigned char *>(p)[15], 0x3c);
        free(s, p);
    }
    EXPECT_EQ(g_ctor_calls - before, 5);
    destroy(s);
}

// ---- units taken -------------------------------------------------------------------------

// The arena's free units and page counts now: the units a block took are the fall in free
// units, plus a page's for each page taken meanwhile.
struct unit_meter {
    uint64_t free_units, new_pages, pages_freed;
    static unit_meter now() {
        const design_stats st = arena_stats();
        return {st.counters[FREE_UNITS], st.counters[NEW_PAGES], st.counters[PAGES_FREED]};
    }
    // The units taken since `before`; -1 if a page went back meanwhile (not measurable).
    long taken_since(const unit_meter &before) const {
        if (pages_freed != before.pages_freed) return -1;
        return static_cast<long>(before.free_units + kPageUnits * (new_pages - before.new_pages) -
                                 free_units);
    }
};

// A cache's object takes the SLOB units of its size (2 bytes each), aligned to the cache's
// alignment (8 at least): the kernel's slob_alloc of c->size with c->align - not the size
// rounded up to the alignment. Below a page (the kernel's c->size < PAGE_SIZE) it comes from
// SLOB's pages, however close to a page.
TEST(Slob, CacheObjectsTakeTheUnitsOfTheirSize) {
    bootstrap();
    const struct {
        size_t size;
        unsigned units;
    } cases[] = {{1, 1}, {13, 7}, {100, 50}, {255, 128}, {2001, 1001}, {4095, 2048}};
    for (auto [size, units] : cases) {
        const char *why = nullptr;
        slob_cache *s = create(cache_args{"slob-units", size, 0, 0, nullptr}, &why);
        ASSERT_NE(s, nullptr) << why;
        EXPECT_EQ(s->size, units * kUnit) << size;
        const unit_meter before = unit_meter::now();
        void *p = alloc(s, kAnyNode, false);
        ASSERT_NE(p, nullptr);
        EXPECT_EQ(unit_meter::now().taken_since(before), static_cast<long>(units)) << size;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % kMinAlign, 0u) << size;
        page *pg = virt_to_head_page(p);
        EXPECT_TRUE(pg->flags() & PG_slab) << size;
        EXPECT_EQ(slab_cache(pg), static_cast<cache *>(&arena())) << size << ": a SLOB page";
        memset(p, 0x5a, size);
        EXPECT_TRUE(valid());
        free(s, p);
        destroy(s);
    }
    // A page or more: whole pages, the cache's own.
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-units-page", 4096, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr) << why;
    void *p = alloc(s, kAnyNode, false);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(slab_cache(virt_to_head_page(p)), static_cast<cache *>(s));
    free(s, p);
    destroy(s);
}

// kmalloc as the kernel's __do_kmalloc_node (v6.3): the block is the size asked for after a
// header of the minimum alignment (the larger of ARCH_KMALLOC_MINALIGN and ARCH_SLAB_MINALIGN:
// 8 on x86-64) that holds that size; aligned to 8, a power-of-two size to itself. ksize (the
// kernel's __ksize) is the size's SLOB units in bytes. Through kmalloc's own path.
TEST(Slob, KmallocHeaderHoldsTheSizeAskedFor) {
    bootstrap();
    const struct {
        size_t size, ksize;
        unsigned units;
        size_t align;
    } cases[] = {
        {100, 100, 54, 8},
        {101, 102, 55, 8},
        {1, 2, 5, 8},
        {8, 8, 8, 8},
        {16, 16, 12, 16},
        {24, 24, 16, 8},
        {1024, 1024, 516, 1024},
        {4000, 4000, 2004, 8},
        {4087, 4088, 2048, 8},
    };
    for (auto [size, ksize, units, align] : cases) {
        const unit_meter before = unit_meter::now();
        void *p = kmalloc::alloc(design::slob, size, false, kAnyNode);
        ASSERT_NE(p, nullptr) << size;
        EXPECT_EQ(unit_meter::now().taken_since(before), static_cast<long>(units)) << size;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u) << size;
        uint32_t header;
        memcpy(&header, static_cast<char *>(p) - 8, sizeof header);
        EXPECT_EQ(header, size) << "the header holds the size asked for";
        EXPECT_EQ(kmalloc::usable_size(p), ksize) << size;
        EXPECT_EQ(usable_size(&arena(), p), ksize) << size;
        memset(p, 0x6b, ksize);
        EXPECT_TRUE(valid()) << size;
        kmalloc::free(p);
    }
    void *p = kmalloc::alloc(design::slob, 100, false, kAnyNode);
    EXPECT_EQ(usable_size(&arena(), static_cast<char *>(p) + 16), 0u); // no header there
    kmalloc::free(p);
    EXPECT_TRUE(valid());
}

// Sizes below a page less the minimum alignment (the kernel's size < PAGE_SIZE - minalign) are
// SLOB blocks; from there, page blocks, whose ksize is the pages'.
TEST(Slob, KmallocServesBelowAPageLessTheMinimumAlignment) {
    bootstrap();
    for (size_t size : {2048, 3000, 4064, 4087}) {
        void *p = kmalloc::alloc(design::slob, size, false, kAnyNode);
        ASSERT_NE(p, nullptr) << size;
        page *pg = virt_to_head_page(p);
        EXPECT_TRUE(pg->flags() & PG_slab) << size;
        EXPECT_EQ(slab_cache(pg), static_cast<cache *>(&arena())) << size;
        EXPECT_EQ(kmalloc::usable_size(p), units_of(size) * kUnit) << size;
        kmalloc::free(p);
    }
    for (size_t size : {4088, 4096, 5000}) {
        void *p = kmalloc::alloc(design::slob, size, false, kAnyNode);
        ASSERT_NE(p, nullptr) << size;
        EXPECT_FALSE(virt_to_head_page(p)->flags() & PG_slab) << size;
        EXPECT_EQ(kmalloc::usable_size(p), size <= kPageSize ? kPageSize : 2 * kPageSize) << size;
        kmalloc::free(p);
    }
    EXPECT_TRUE(valid());
}

// The malloc family keeps malloc's 16-byte alignment (max_align_t) under SLOB: it asks SLOB's
// kmalloc for 16 explicitly, and its blocks are rounded so that the next one can start 16-aligned
// right after it.
TEST(Slob, MallocBlocksStaySixteenByteAligned) {
    bootstrap();
    std::vector<void *> held;
    for (size_t size = 1; size <= 4200; size += size < 300 ? 1 : 37) {
        void *p = kmalloc::alloc<kmalloc::class_table::malloc>(design::slob, size, false, kAnyNode);
        ASSERT_NE(p, nullptr) << size;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 16, 0u) << size;
        const size_t usable = kmalloc::usable_size(p);
        EXPECT_GE(usable, size);
        if (size < kPageSize / 2) {
            const size_t rounded =
                size > 16 && (size & (size - 1)) == 0 ? size : ((size + 8 + 15) & ~size_t{15}) - 8;
            EXPECT_EQ(usable, rounded) << size;
        }
        held.push_back(p);
    }
    EXPECT_TRUE(valid());
    for (void *p : held) kmalloc::free(p);
    EXPECT_TRUE(valid());
}

TEST(SlobDeathTest, DoubleFreeIsCaughtWhenItOverlapsAFreeBlock) {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    bootstrap();
    const char *why = nullptr;
    slob_cache *s = create(cache_args{"slob-double", 48, 0, 0, nullptr}, &why);
    ASSERT_NE(s, nullptr);
    void *a = alloc(s, kAnyNode, false);
    void *b = alloc(s, kAnyNode, false);
    free(s, a);
    EXPECT_DEATH(free(s, a), "slob-double.*double free");
    free(s, b);
    destroy(s);
}

// Several threads, caches of several sizes and kmalloc, the checker after each phase.
TEST(Slob, StressKeepsInvariants) {
    bootstrap();
    const char *why = nullptr;
    std::vector<slob_cache *> caches;
    for (size_t size : {8, 24, 100, 250, 700, 1500, 3000, 5000})
        caches.push_back(create(
            cache_args{("slob-st-" + std::to_string(size)).c_str(), size, 0, 0, nullptr}, &why));
    for (int phase = 0; phase < 3; ++phase) {
        std::vector<std::thread> threads;
        std::mutex mu;
        std::vector<std::pair<int, void *>> handed; // cache index (-1: kmalloc), object
        for (int t = 0; t < 4; ++t) {
            threads.emplace_back([&, t] {
                std::mt19937 rng(static_cast<unsigned>(phase * 7 + t));
                std::vector<std::pair<int, void *>> mine;
                for (int i = 0; i < 4000; ++i) {
                    if (!mine.empty() && rng() % 2) {
                        size_t k = rng() % mine.size();
                        auto [ci, p] = mine[k];
                        if (ci < 0)
                            free_to_slab(&arena(), virt_to_page(p), p);
                        else
                            free(caches[static_cast<size_t>(ci)], p);
                        mine[k] = mine.back();
                        mine.pop_back();
                    } else if (rng() % 3 == 0) {
                        mine.emplace_back(
                            -1, kmalloc(1 + rng() % 2000, rng() % 2 ? 8 : 16, false, kAnyNode, 0));
                    } else {
                        int ci = static_cast<int>(rng() % caches.size());
                        mine.emplace_back(
                            ci, alloc(caches[static_cast<size_t>(ci)], kAnyNode, rng() % 5 == 0));
                    }
                }
                std::lock_guard<std::mutex> g(mu);
                handed.insert(handed.end(), mine.begin(), mine.end());
            });
        }
        for (auto &th : threads) th.join();
        EXPECT_TRUE(valid()) << "phase " << phase;
        for (auto [ci, p] : handed) {
            if (ci < 0)
                free_to_slab(&arena(), virt_to_page(p), p);
            else
                free(caches[static_cast<size_t>(ci)], p);
        }
        EXPECT_TRUE(valid()) << "phase " << phase;
    }
    for (slob_cache *s : caches) {
        EXPECT_EQ(s->live, 0u);
        destroy(s);
    }
}

} // namespace
} // namespace slabkit::slob
