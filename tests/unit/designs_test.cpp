// The design interface and the dispatch over it: the concept rejects a design that misses a
// part, every design of the build passes it, and blocks of several designs' kmalloc sets live in
// one process, each freed through the one kfree into its own design, beside caches of every
// design held at once.
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
              slab_design<slob::ops> && slab_design<sheaves::ops>);

// Every design of the build, in the list's order.
#define SLABKIT_DESIGN_VALUE(name) design::name,
const design kAllDesigns[] = {SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_VALUE)};
#undef SLABKIT_DESIGN_VALUE

TEST(Designs, ListNamesEveryDesign) {
    EXPECT_STREQ(design_names(), "slqb slub slab slob sheaves");
    EXPECT_EQ(kNrDesigns, 5u);
    design d;
    ASSERT_TRUE(parse_design("slub", &d));
    EXPECT_EQ(d, design::slub);
    EXPECT_STREQ(design_name(d), "slub");
    ASSERT_TRUE(parse_design("slab", &d));
    EXPECT_EQ(d, design::slab);
    EXPECT_STREQ(design_name(d), "slab");
    ASSERT_TRUE(parse_design("sheaves", &d));
    EXPECT_EQ(d, design::sheaves);
    EXPECT_STREQ(design_name(d), "sheaves");
    EXPECT_FALSE(parse_design("slab-of-the-future", &d));
}

// kmalloc blocks of every design in one process: allocated from each design's own set, freed
// through the same kfree, which finds the design from the slab's cache.
TEST(Designs, KmallocBlocksOfEveryDesignShareOneKfree) {
    std::vector<std::pair<void *, design>> blocks;
    for (int round = 0; round < 3; ++round) {
        for (design d : kAllDesigns) {
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
    for (design d : kAllDesigns) {
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

// One process holds a cache of every design at once, with kmalloc blocks of every design in
// between: objects of each cache go back to their own cache, every kmalloc block through the one
// kfree, in an order that mixes the designs; afterwards every cache and kmalloc class is valid and
// the caches hold no slab.
TEST(Designs, CachesAndKmallocBlocksOfEveryDesignAtOnce) {
    std::vector<cache *> caches;
    for (design d : kAllDesigns) {
        std::string name = std::string("every-") + design_name(d);
        const char *why = nullptr;
        cache *c = designs::create(d, cache_args{name.c_str(), 72, 0, 0, nullptr}, &why);
        ASSERT_NE(c, nullptr) << design_name(d) << ": " << (why ? why : "");
        EXPECT_EQ(c->kind, d);
        caches.push_back(c);
    }
    struct block {
        void *p;
        cache *owner; // nullptr: a kmalloc block
        design d;
        unsigned char fill;
    };
    std::vector<block> blocks;
    for (int round = 0; round < 200; ++round) {
        for (size_t k = 0; k < caches.size(); ++k) {
            cache *c = caches[k];
            auto fill = static_cast<unsigned char>(round * 7 + k);
            void *obj = designs::visit(c, [](auto ops, auto *s) { return ops.alloc(s, false); });
            ASSERT_NE(obj, nullptr) << design_name(c->kind);
            memset(obj, fill, 72);
            blocks.push_back({obj, c, c->kind, fill});
            size_t size = 8 + static_cast<size_t>(round * 37 + k * 11) % 3000;
            void *p = kmalloc::alloc(c->kind, size, false, kAnyNode);
            ASSERT_NE(p, nullptr) << design_name(c->kind) << " " << size;
            memset(p, fill, 8);
            blocks.push_back({p, nullptr, c->kind, fill});
        }
    }
    // A kmalloc block of each design is its design's.
    for (const block &b : blocks) {
        if (b.owner) continue;
        page *pg = virt_to_head_page(b.p);
        if (pg->flags() & PG_slab) {
            EXPECT_EQ(slab_cache(pg)->kind, b.d);
        }
    }
    // Free in an order that mixes the designs: every third, then the rest backwards.
    auto give_back = [](const block &b) {
        const auto *bytes = static_cast<const unsigned char *>(b.p);
        for (size_t i = 0; i < (b.owner ? 72u : 8u); ++i) ASSERT_EQ(bytes[i], b.fill);
        if (b.owner)
            designs::visit(b.owner, [&](auto ops, auto *s) { ops.free(s, b.p); });
        else
            kmalloc::free(b.p);
    };
    for (size_t i = 0; i < blocks.size(); i += 3) give_back(blocks[i]);
    for (size_t i = blocks.size(); i-- > 0;)
        if (i % 3 != 0) give_back(blocks[i]);
    designs::trim_all();
    for (cache *c : caches) {
        char report[512];
        EXPECT_EQ(designs::validate(c, report, sizeof report), 0u)
            << design_name(c->kind) << ": " << report;
        design_stats st;
        designs::statistics(c, &st);
        EXPECT_EQ(st.active_objects, st.queued_objects) << design_name(c->kind);
        EXPECT_EQ(designs::shrink(c), 0u) << design_name(c->kind);
        designs::destroy(c);
    }
    for (design d : kAllDesigns) {
        for (unsigned i = 0; i < kmalloc::kNrClasses; ++i) {
            cache *k = kmalloc::cache_for(d, i);
            ASSERT_NE(k, nullptr);
            char report[512];
            EXPECT_EQ(designs::validate(k, report, sizeof report), 0u) << k->name << ": " << report;
        }
    }
}

} // namespace
} // namespace slabkit
