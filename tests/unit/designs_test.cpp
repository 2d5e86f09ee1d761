// The design interface and the dispatch over it: the concept rejects a design that misses a
// part, every design of the build passes it, and blocks of several designs' kmalloc sets live in
// one process, each freed through the one kfree into its own design.
#include "designs/designs.hpp"
#include "kmalloc/kmalloc.hpp"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

namespace slabkit {
namespace {

// A design's interface with every part...
struct complete_ops {
    using cache_type = cache;
    struct slot_storage {};
    static constexpr design kind = design::slqb;
    static void bootstrap() {}
    static cache *create(const cache_args &, const char **) { return nullptr; }
    static bool open_static(cache *, slot_storage *, const cache_args &, const char **) {
        return false;
    }
    static void destroy(cache *) {}
    static void flush_slot(cache *, unsigned, bool) {}
    static size_t reclaim(cache *) { return 0; }
    static void trim(cache *) {}
    static bool tune(cache *, const char *, unsigned long, const char **) { return false; }
    static bool set_order(cache *, unsigned, const char **) { return false; }
    static void statistics(cache *, design_stats *) {}
    static unsigned validate(cache *, char *, size_t) { return 0; }
    static void fork_boot(fork_op) {}
    static void fork_cache(cache *, fork_op) {}
    static void *alloc(cache *, bool) { return nullptr; }
    static void *alloc_fast(cache *, const slot_storage *) { return nullptr; }
    static void *alloc_cpu(cache *, const slot_storage *) { return nullptr; }
    static void *alloc_node(cache *, int, bool) { return nullptr; }
    static void free(cache *, void *) {}
    static void free_to_slab(cache *, page *, void *) {}
};
// ...and ones that miss one (no fork hooks for the caches) or get one wrong (validate).
struct no_fork_ops : complete_ops {
    static void fork_cache() = delete;
};
struct wrong_validate_ops : complete_ops {
    static void validate(cache *, char *, size_t) {}
};
static_assert(slab_design<complete_ops>);
static_assert(!slab_design<no_fork_ops>, "a design without fork_cache must not build");
static_assert(!slab_design<wrong_validate_ops>, "validate must return the problem count");
static_assert(slab_design<slqb::ops> && slab_design<slub::ops> && slab_design<slab::ops> &&
              slab_design<slob::ops>);

TEST(Designs, ListNamesEveryDesign) {
    EXPECT_STREQ(design_names(), "slqb slub slab slob");
    design d;
    ASSERT_TRUE(parse_design("slub", &d));
    EXPECT_EQ(d, design::slub);
    EXPECT_STREQ(design_name(d), "slub");
    ASSERT_TRUE(parse_design("slab", &d));
    EXPECT_EQ(d, design::slab);
    EXPECT_STREQ(design_name(d), "slab");
    EXPECT_FALSE(parse_design("slab-of-the-future", &d));
}

// kmalloc blocks of every design in one process: allocated from each design's own set, freed
// through the same kfree, which finds the design from the slab's cache.
TEST(Designs, KmallocBlocksOfEveryDesignShareOneKfree) {
    std::vector<std::pair<void *, design>> blocks;
    for (int round = 0; round < 3; ++round) {
        for (design d : {design::slqb, design::slub, design::slab, design::slob}) {
            for (size_t size : {8, 24, 100, 200, 700, 3000, 8192}) {
                void *p = kmalloc::alloc(d, size, false, kAnyNode);
                ASSERT_NE(p, nullptr);
                memset(p, 0x3c, size);
                page *pg = virt_to_head_page(p);
                if (d == design::slob && size >= kPageSize - 8) {
                    // SLOB's kmalloc serves below a page less its 8-byte header; 8 KiB is a page
                    // block.
                    EXPECT_FALSE(pg->flags() & PG_slab);
                    blocks.emplace_back(p, d);
                    continue;
                }
                ASSERT_TRUE(pg->flags() & PG_slab) << design_name(d) << " " << size;
                EXPECT_EQ(slab_cache(pg)->kind, d) << size;
                EXPECT_GE(kmalloc::usable_size(p), size);
                blocks.emplace_back(p, d);
            }
        }
    }
    // The other design's classes have their own names beside the process design's.
    design other = process_design() == design::slqb ? design::slub : design::slqb;
    cache *c = kmalloc::cache_for(other, kmalloc::class_of(64));
    ASSERT_NE(c, nullptr);
    EXPECT_EQ(std::string(c->name), std::string(design_name(other)) + "-kmalloc-64");
    EXPECT_EQ(std::string(kmalloc::cache_for(process_design(), kmalloc::class_of(64))->name),
              "kmalloc-64");
    for (auto &b : blocks) kmalloc::free(b.first);
    designs::trim_all();
    for (design d : {design::slqb, design::slub, design::slab, design::slob}) {
        for (unsigned i = 0; i < kmalloc::kNrClasses; ++i) {
            cache *k = kmalloc::cache_for(d, i);
            ASSERT_NE(k, nullptr);
            char report[512];
            unsigned problems =
                designs::visit(k, [&](auto ops, auto *s) { return ops.validate(s, report, 512); });
            EXPECT_EQ(problems, 0u) << report;
        }
    }
}

} // namespace
} // namespace slabkit
