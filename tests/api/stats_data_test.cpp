// Statistics as data, for every design: the JSON text (slabkit_stats_json) and the
// /proc/slabinfo 2.1 text parsed back and checked field by field against the C structures, the
// C++ value type (slabkit::snapshot), the activity figures, the heap and node structures, and
// glibc's malloc_info XML against the heap totals.
#include "api/api_support.hpp"

#include <slabkit/slabkit.h>
#include <slabkit/slabkit.hpp>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <regex>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace slabkit::apitest {
namespace {

using json = nlohmann::ordered_json;

json stats_json() {
    return json::parse(slabkit::stats_json());
}

const json *cache_in(const json &j, const std::string &name) {
    for (const auto &c : j.at("caches"))
        if (c.at("name") == name) return &c;
    return nullptr;
}

// A cache with objects out, some freed (queued or back in slabs): figures that are not all 0.
class StatsData : public DesignTest {
  protected:
    slabkit_cache *busy(const std::string &what, size_t size, unsigned n, unsigned freed) {
        slabkit_cache *c = create(name(what), size);
        EXPECT_NE(c, nullptr);
        if (!c) return nullptr;
        for (unsigned i = 0; i < n; ++i) objs_.push_back(slabkit_cache_alloc(c, 0));
        for (unsigned i = 0; i < freed; ++i) {
            slabkit_cache_free(c, objs_.back());
            objs_.pop_back();
        }
        cache_ = c;
        return c;
    }
    void TearDown() override {
        for (void *p : objs_) slabkit_cache_free(cache_, p);
        objs_.clear();
        DesignTest::TearDown();
    }
    std::vector<void *> objs_;
    slabkit_cache *cache_ = nullptr;
};

TEST_P(StatsData, JsonMatchesTheStructuresFieldByField) {
    slabkit_cache *c = busy("json", 200, 3000, 1000);
    ASSERT_NE(c, nullptr);
    // Two reads of a quiescent process: the same numbers.
    const cache_stats_t st = stats_of(c);
    const json j = stats_json();
    EXPECT_EQ(j.at("format"), "slabkit-stats");
    EXPECT_EQ(j.at("version"), 1);
    EXPECT_EQ(j.at("pid"), getpid());
    EXPECT_EQ(j.at("design"), slabkit_allocator());
    EXPECT_EQ(j.at("designs"), slabkit_designs());
    EXPECT_EQ(j.at("page_size"), 4096);
    const json *jc = cache_in(j, name("json"));
    ASSERT_NE(jc, nullptr) << j.dump(1);
    EXPECT_EQ(jc->at("design"), std::string(st.design));
    EXPECT_EQ(jc->at("design"), GetParam());
    EXPECT_EQ(jc->at("object_size"), st.object_size);
    EXPECT_EQ(jc->at("slot_size"), st.slot_size);
    EXPECT_EQ(jc->at("align"), st.align);
    EXPECT_EQ(jc->at("order"), st.order);
    EXPECT_EQ(jc->at("objects_per_slab"), st.objects_per_slab);
    EXPECT_EQ(jc->at("flags"), std::string(st.flags));
    EXPECT_EQ(jc->at("slabs"), st.slabs);
    EXPECT_EQ(jc->at("active_slabs"), st.active_slabs);
    EXPECT_EQ(jc->at("objects"), st.objects);
    EXPECT_EQ(jc->at("active_objects"), st.active_objects);
    EXPECT_EQ(jc->at("queued_objects"), st.queued_objects);
    EXPECT_EQ(jc->at("shared_avail"), st.shared_avail);
    ASSERT_EQ(jc->at("slabinfo_tunables").size(), 3u);
    for (unsigned i = 0; i < 3; ++i)
        EXPECT_EQ(jc->at("slabinfo_tunables")[i], st.slabinfo_tunables[i]) << i;
    ASSERT_EQ(jc->at("tunables").size(), st.nr_tunables);
    unsigned i = 0;
    for (const auto &[k, v] : jc->at("tunables").items()) {
        EXPECT_EQ(k, st.tunable_names[i]);
        EXPECT_EQ(v, st.tunables[i]) << k;
        ++i;
    }
    ASSERT_EQ(jc->at("counters").size(), st.nr_counters);
    i = 0;
    for (const auto &[k, v] : jc->at("counters").items()) {
        EXPECT_EQ(k, st.counter_names[i]);
        EXPECT_EQ(v, st.counters[i]) << k;
        ++i;
    }
    const json &a = jc->at("activity");
    EXPECT_EQ(a.at("allocs"), st.allocs);
    EXPECT_EQ(a.at("alloc_slow"), st.alloc_slow);
    EXPECT_EQ(a.at("frees"), st.frees);
    EXPECT_EQ(a.at("free_slow"), st.free_slow);
    EXPECT_GT(st.slabs, 0u);
    EXPECT_GE(st.active_objects, 2000u);

    // Every cache of slabkit_stats, in the same order.
    std::vector<cache_stats_t> all(slabkit_cache_count() + 4);
    all.resize(slabkit_stats(all.data(), all.size()));
    const json again = stats_json();
    ASSERT_EQ(again.at("caches").size(), all.size());
    for (size_t k = 0; k < all.size(); ++k) {
        EXPECT_EQ(again.at("caches")[k].at("name"), std::string(all[k].name)) << k;
        EXPECT_EQ(again.at("caches")[k].at("slabs"), all[k].slabs) << all[k].name;
    }
}

TEST_P(StatsData, HeapNodesAndSlotsInJsonMatchTheirStructures) {
    ASSERT_NE(busy("heap", 64, 500, 100), nullptr);
    slabkit_heap_stats h{};
    slabkit_get_heap_stats(&h);
    std::vector<slabkit_node_stats> nodes(slabkit_get_node_stats(nullptr, 0));
    ASSERT_GE(nodes.size(), 1u);
    ASSERT_EQ(slabkit_get_node_stats(nodes.data(), nodes.size()), nodes.size());
    slabkit_slot_stats sl{};
    slabkit_get_slot_stats(&sl);
    const json j = stats_json();
    const json &jh = j.at("heap");
    EXPECT_EQ(jh.at("caches"), h.caches);
    EXPECT_EQ(jh.at("caches"), slabkit_cache_count());
    EXPECT_EQ(jh.at("slab_pages"), h.slab_pages);
    EXPECT_EQ(jh.at("objects_in_use"), h.objects_in_use);
    EXPECT_EQ(jh.at("object_bytes"), h.object_bytes);
    EXPECT_EQ(jh.at("free_objects"), h.free_objects);
    EXPECT_EQ(jh.at("free_object_bytes"), h.free_object_bytes);
    EXPECT_EQ(jh.at("block_pages"), h.block_pages);
    EXPECT_EQ(jh.at("free_pages"), h.free_pages);
    EXPECT_EQ(jh.at("free_resident_pages"), h.free_resident_pages);
    EXPECT_EQ(jh.at("returned_pages"), h.returned_pages);
    EXPECT_EQ(jh.at("reserved_bytes"), h.reserved_bytes);
    EXPECT_EQ(jh.at("large_blocks"), h.large_blocks);
    EXPECT_EQ(jh.at("large_bytes"), h.large_bytes);
    EXPECT_EQ(jh.at("kept_blocks"), h.kept_blocks);
    EXPECT_EQ(jh.at("kept_bytes"), h.kept_bytes);
    EXPECT_EQ(jh.at("errors"), h.errors);
    EXPECT_EQ(jh.at("refusals"), slabkit_refusals());
    EXPECT_GE(h.objects_in_use, 400u);
    const json &jn = j.at("pages").at("nodes");
    ASSERT_EQ(jn.size(), nodes.size());
    uint64_t in_use = 0;
    for (size_t n = 0; n < nodes.size(); ++n) {
        const json &x = jn[n];
        EXPECT_EQ(x.at("node"), nodes[n].node);
        ASSERT_EQ(x.at("free_blocks").size(), 11u);
        uint64_t free_from_blocks = 0;
        for (unsigned k = 0; k < 11; ++k) {
            EXPECT_EQ(x.at("free_blocks")[k], nodes[n].free_blocks[k]) << "order " << k;
            free_from_blocks += nodes[n].free_blocks[k] << k;
        }
        // buddyinfo's blocks add up to the node's free pages.
        EXPECT_EQ(free_from_blocks, nodes[n].free_pages);
        EXPECT_EQ(x.at("free_pages"), nodes[n].free_pages);
        EXPECT_EQ(x.at("free_resident"), nodes[n].free_resident);
        EXPECT_EQ(x.at("in_use"), nodes[n].in_use);
        EXPECT_EQ(x.at("in_pcp"), nodes[n].in_pcp);
        EXPECT_EQ(x.at("usable_pages"), nodes[n].usable_pages);
        EXPECT_EQ(x.at("chunks"), nodes[n].chunks);
        EXPECT_EQ(x.at("returned"), nodes[n].returned);
        EXPECT_EQ(x.at("decommits"), nodes[n].decommits);
        in_use += nodes[n].in_use;
    }
    EXPECT_EQ(j.at("pages").at("in_use"), in_use);
    EXPECT_EQ(j.at("pages").at("in_use"), page_stats().pages_in_use);
    const json &js = j.at("slots");
    EXPECT_EQ(js.at("mode"), std::string(sl.mode));
    EXPECT_EQ(js.at("why"), std::string(sl.why));
    EXPECT_EQ(js.at("rseq"), std::string(sl.rseq));
    EXPECT_EQ(js.at("cpu_slots"), sl.cpu_slots);
    EXPECT_EQ(js.at("thread_slots"), sl.thread_slots);
    EXPECT_EQ(js.at("threads_owning"), sl.threads_owning);
    EXPECT_EQ(js.at("restarts"), sl.restarts);
    EXPECT_EQ(js.at("busy"), sl.busy);
    EXPECT_EQ(js.at("shared_holds"), sl.shared_holds);
    EXPECT_EQ(js.at("cpu_drains"), sl.cpu_drains);
}

TEST_P(StatsData, SlabinfoTextParsesBackFieldByField) {
    slabkit_cache *c = busy("text", 300, 2000, 700);
    ASSERT_NE(c, nullptr);
    const cache_stats_t st = stats_of(c);
    const std::string text = slabinfo_text();
    std::istringstream in(text);
    std::string line;
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(line, "slabinfo - version: 2.1");
    ASSERT_TRUE(std::getline(in, line));
    EXPECT_EQ(line.rfind("# name", 0), 0u);
    // name active num objsize objperslab pagesperslab : tunables l b s : slabdata a n s
    const std::regex row(R"(^(\S+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+)\s+(\d+) : tunables\s+(\d+)\s+)"
                         R"((\d+)\s+(\d+) : slabdata\s+(\d+)\s+(\d+)\s+(\d+)$)");
    unsigned rows = 0;
    bool found = false;
    while (std::getline(in, line)) {
        std::smatch m;
        ASSERT_TRUE(std::regex_match(line, m, row)) << "not a 2.1 line: " << line;
        ++rows;
        if (m[1] != name("text")) continue;
        found = true;
        auto u = [&](int k) { return std::stoull(m[k].str()); };
        EXPECT_EQ(u(2), st.active_objects);
        EXPECT_EQ(u(3), st.objects);
        EXPECT_EQ(u(4), st.slot_size);
        EXPECT_EQ(u(5), st.objects_per_slab);
        EXPECT_EQ(u(6), 1ull << st.order);
        EXPECT_EQ(u(7), st.slabinfo_tunables[0]);
        EXPECT_EQ(u(8), st.slabinfo_tunables[1]);
        EXPECT_EQ(u(9), st.slabinfo_tunables[2]);
        EXPECT_EQ(u(10), st.active_slabs);
        EXPECT_EQ(u(11), st.slabs);
        EXPECT_EQ(u(12), st.shared_avail);
    }
    EXPECT_TRUE(found) << text;
    EXPECT_EQ(rows, slabkit_cache_count());
}

TEST_P(StatsData, ActivityCountsEveryAllocationAndFree) {
    slabkit_cache *c = create(name("act"), 128);
    ASSERT_NE(c, nullptr);
    const cache_stats_t before = stats_of(c);
    std::vector<void *> v;
    // Rounds of 100: within every design's per-slot structure (SLAB's array holds 120).
    for (int round = 0; round < 150; ++round) {
        for (int i = 0; i < 100; ++i) v.push_back(slabkit_cache_alloc(c, 0));
        for (void *p : v) slabkit_cache_free(c, p);
        v.clear();
    }
    const cache_stats_t st = stats_of(c);
    EXPECT_EQ(st.allocs - before.allocs, 15000u);
    EXPECT_EQ(st.frees - before.frees, 15000u);
    EXPECT_LE(st.alloc_slow, st.allocs);
    EXPECT_LE(st.free_slow, st.frees);
    // A new cache's first objects come from new slabs: some slow allocations in every design;
    // SLOB has no fast path at all.
    EXPECT_GT(st.alloc_slow, 0u);
    if (GetParam() == "slob") {
        EXPECT_EQ(st.alloc_slow, st.allocs);
        EXPECT_EQ(st.free_slow, st.frees);
    } else {
        // The later rounds reuse what the first freed: most allocations are fast.
        EXPECT_LT(st.alloc_slow, st.allocs / 2);
    }
}

TEST_P(StatsData, FlagsNameTheDebugLetters) {
    slabkit_cache *plain = create(name("plain"), 64);
    slabkit_cache *dbg = create(name("dbg"), 64, 0, SLABKIT_RED_ZONE | SLABKIT_POISON);
    ASSERT_NE(plain, nullptr);
    ASSERT_NE(dbg, nullptr);
    EXPECT_STREQ(stats_of(plain).flags, "");
    EXPECT_STREQ(stats_of(dbg).flags, "ZP");
    const json j = stats_json();
    EXPECT_EQ(cache_in(j, name("dbg"))->at("flags"), "ZP");
}

TEST_P(StatsData, SnapshotValueMatchesTheStructures) {
    slabkit_cache *c = busy("value", 96, 1000, 300);
    ASSERT_NE(c, nullptr);
    const cache_stats_t st = stats_of(c);
    const slabkit::statistics s = slabkit::snapshot();
    EXPECT_EQ(s.caches.size(), slabkit_cache_count());
    const slabkit::cache_statistics *v = s.find(name("value"));
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(v->design, GetParam());
    EXPECT_EQ(v->object_size, st.object_size);
    EXPECT_EQ(v->slot_size, st.slot_size);
    EXPECT_EQ(v->slabs, st.slabs);
    EXPECT_EQ(v->active_objects, st.active_objects);
    EXPECT_EQ(v->queued_objects, st.queued_objects);
    EXPECT_EQ(v->allocs, st.allocs);
    ASSERT_EQ(v->counters.size(), st.nr_counters);
    for (unsigned i = 0; i < st.nr_counters; ++i) {
        EXPECT_EQ(v->counters[i].first, st.counter_names[i]);
        EXPECT_EQ(v->counters[i].second, st.counters[i]);
        EXPECT_EQ(v->counter(st.counter_names[i]), st.counters[i]);
    }
    ASSERT_EQ(v->tunables.size(), st.nr_tunables);
    if (GetParam() == "slob") {
        EXPECT_TRUE(v->tunables.empty()); // SLOB has none, not even the order
    } else {
        ASSERT_FALSE(v->tunables.empty());
        EXPECT_EQ(v->tunables[0].first, "order");
    }
    EXPECT_THROW((void)v->counter("NO_SUCH_COUNTER"), std::out_of_range);
    EXPECT_EQ(s.find("no-such-cache"), nullptr);
    EXPECT_GE(s.nodes.size(), 1u);
    EXPECT_EQ(s.heap.caches, s.caches.size());
}

SLABKIT_INSTANTIATE_FOR_DESIGNS(StatsData);

// The snapshot's text is bounded like snprintf: a short buffer gets a cut, terminated text and
// the full length.
TEST(StatsJson, BoundedLikeSnprintf) {
    const size_t full = slabkit_stats_json(nullptr, 0);
    ASSERT_GT(full, 100u);
    std::string small(64, 'x');
    EXPECT_GE(slabkit_stats_json(small.data(), small.size()), full - 200);
    EXPECT_EQ(small[63], '\0');
    EXPECT_EQ(small.rfind("{\"format\":\"slabkit-stats\"", 0), 0u);
}

// A cache name may hold any printable character: quotes and backslashes come back whole.
TEST(StatsJson, NamesWithQuotesAndBackslashesRoundTrip) {
    const std::string odd = "q\"uo\\te{},:[]";
    slabkit_cache *c = slabkit_cache_create(odd.c_str(), 32, 0, 0, nullptr);
    ASSERT_NE(c, nullptr);
    const json j = stats_json();
    EXPECT_NE(cache_in(j, odd), nullptr);
    slabkit_cache_destroy(c);
    EXPECT_EQ(cache_in(stats_json(), odd), nullptr);
}

// glibc's malloc_info XML: its totals are the heap's.
TEST(MallocInfo, TotalsAreTheHeapsFigures) {
    std::vector<void *> blocks;
    for (int i = 0; i < 2000; ++i)
        blocks.push_back(slabkit_malloc(static_cast<size_t>(i % 500 + 1)));
    for (size_t i = 0; i < blocks.size(); i += 2) slabkit_free(blocks[i]);
    slabkit_heap_stats h{};
    slabkit_get_heap_stats(&h);
    std::string xml(256 * 1024, '\0');
    xml.resize(slabkit_malloc_info(xml.data(), xml.size()));
    slabkit_heap_stats h2{};
    slabkit_get_heap_stats(&h2);
    ASSERT_EQ(h.free_objects, h2.free_objects) << "the heap moved meanwhile";
    EXPECT_EQ(xml.rfind("<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n", 0), 0u) << xml;
    EXPECT_NE(xml.find("</malloc>\n"), std::string::npos);
    const std::regex size_row(R"re(<size from="(\d+)" to="(\d+)" total="(\d+)" count="(\d+)"/>)re");
    uint64_t count = 0, total = 0;
    unsigned rows = 0;
    for (std::sregex_iterator it(xml.begin(), xml.end(), size_row), end; it != end; ++it) {
        const uint64_t from = std::stoull((*it)[1]), c = std::stoull((*it)[4]);
        EXPECT_EQ(std::stoull((*it)[2]), from);
        EXPECT_EQ(std::stoull((*it)[3]), from * c);
        EXPECT_GT(c, 0u);
        count += c;
        total += std::stoull((*it)[3]);
        ++rows;
    }
    EXPECT_GT(rows, 0u);
    EXPECT_EQ(count, h.free_objects);
    EXPECT_EQ(total, h.free_object_bytes);
    const std::string rest = "<total type=\"rest\" count=\"" + std::to_string(h.free_objects) +
                             "\" size=\"" + std::to_string(h.free_object_bytes) + "\"/>";
    EXPECT_NE(xml.find(rest), std::string::npos) << xml;
    const std::string mmap = "<total type=\"mmap\" count=\"" + std::to_string(h.large_blocks) +
                             "\" size=\"" + std::to_string(h.large_bytes) + "\"/>";
    EXPECT_NE(xml.find(mmap), std::string::npos) << xml;
    for (size_t i = 1; i < blocks.size(); i += 2) slabkit_free(blocks[i]);
}

} // namespace
} // namespace slabkit::apitest
