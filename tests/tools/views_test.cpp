// views_test.cpp - slabinfo's tables and its selection of caches, on the hand-made snapshot:
// every figure expected here is worked out by hand from sample_snapshot.hpp.
#include "sample_snapshot.hpp"
#include "slabinfo/views.hpp"

#include <sstream>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using namespace slabinfo;
using strings = std::vector<std::string>;

snapshot sample() {
    return parse_snapshot(slabinfo_test::kSampleJson, "sample");
}

strings lines_of(const std::string &text) {
    strings out;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
}

strings tokens_of(const std::string &line) {
    strings out;
    std::istringstream in(line);
    for (std::string t; in >> t;) out.push_back(t);
    return out;
}

std::vector<strings> table_of(const std::string &text) {
    std::vector<strings> out;
    for (const auto &line : lines_of(text)) out.push_back(tokens_of(line));
    return out;
}

std::string error_of(const std::function<void()> &f) {
    try {
        f();
    } catch (const slabinfo_error &e) {
        return e.what();
    }
    return "";
}

strings names(const std::vector<const cache_stats *> &caches) {
    strings out;
    for (const auto *c : caches) out.push_back(c->name);
    return out;
}

// The line of text whose first token is `first`.
strings row(const std::string &text, const std::string &first) {
    for (const auto &line : lines_of(text)) {
        auto t = tokens_of(line);
        if (!t.empty() && t[0] == first) return t;
    }
    return {};
}

TEST(Views, SizesAsTheKernelToolWritesThem) {
    EXPECT_EQ(format_size(0), "0");
    EXPECT_EQ(format_size(999), "999");
    EXPECT_EQ(format_size(1000), "1000");
    EXPECT_EQ(format_size(1001), "1.0K");
    EXPECT_EQ(format_size(4096), "4.0K");
    EXPECT_EQ(format_size(12288), "12.2K");
    EXPECT_EQ(format_size(1000000), "1000.0K");
    EXPECT_EQ(format_size(1310720), "1.3M");
    EXPECT_EQ(format_size(1000000000), "1000.0M");
    EXPECT_EQ(format_size(1073741824), "1.0G");
    EXPECT_EQ(format_size(UINT64_MAX), "18446744073.7G");
    EXPECT_EQ(percent(1, 3), 33u);
    EXPECT_EQ(percent(UINT64_MAX, UINT64_MAX), 100u);
    EXPECT_EQ(percent(5, 0), std::nullopt);
}

TEST(Views, ListLinesByName) {
    const snapshot s = sample();
    const auto t = table_of(list_view(s, select_caches(s, {})));
    ASSERT_EQ(t.size(), 5u); // the header and four caches: the empty one is hidden
    EXPECT_EQ(t[0], (strings{"Name", "Design", "Objects", "Objsize", "Space", "Slabs", "O/S", "O",
                             "%Ef", "Flg"}));
    // Space = slabs * 4096 << order; %Ef = active_objects * object_size * 100 / Space.
    EXPECT_EQ(t[1],
              (strings{"dentry", "slab", "250", "192", "81.9K", "10", "32", "1", "58", "FZP"}));
    EXPECT_EQ(t[2], (strings{"kmalloc-4096", "slub", "300", "4096", "1.3M", "40", "8", "3", "93"}));
    EXPECT_EQ(t[3], (strings{"kmalloc-64", "slqb", "120", "64", "12.2K", "3", "64", "0", "62"}));
    EXPECT_EQ(t[4],
              (strings{"slob-objects", "slob", "50", "100", "8.1K", "2", "40", "0", "61", "U"}));
    // The columns line up under the header.
    const auto l = lines_of(list_view(s, select_caches(s, {})));
    EXPECT_EQ(l[0].find("Objects") + 7, l[1].find("250") + 3);
    EXPECT_EQ(l[0].find("%Ef") + 3, l[2].find("93") + 2);
}

TEST(Views, EmptyCachesWithMinusE) {
    const snapshot s = sample();
    selection sel;
    sel.show_empty = true;
    const auto t = table_of(list_view(s, select_caches(s, sel)));
    ASSERT_EQ(t.size(), 6u);
    // No space: no efficiency to show.
    EXPECT_EQ(t[2], (strings{"empty-cache", "slub", "0", "32", "0", "0", "128", "0", "-"}));
}

TEST(Views, SortOrders) {
    const snapshot s = sample();
    selection sel;
    sel.order = sort_order::space;
    EXPECT_EQ(names(select_caches(s, sel)),
              (strings{"kmalloc-4096", "dentry", "kmalloc-64", "slob-objects"}));
    sel.order = sort_order::activity;
    EXPECT_EQ(names(select_caches(s, sel)),
              (strings{"kmalloc-4096", "dentry", "kmalloc-64", "slob-objects"}));
    // Traffic, not space: make the smallest cache the busiest.
    snapshot busy = s;
    busy.caches[4].activity.allocs = 2000000;
    EXPECT_EQ(names(select_caches(busy, sel)),
              (strings{"slob-objects", "kmalloc-4096", "dentry", "kmalloc-64"}));
    sel.order = sort_order::name;
    snapshot upper = s;
    upper.caches[4].name = "Alpha";
    EXPECT_EQ(names(select_caches(upper, sel)),
              (strings{"Alpha", "dentry", "kmalloc-4096", "kmalloc-64"}));
}

TEST(Views, RegexSelectsCaseInsensitively) {
    const snapshot s = sample();
    EXPECT_EQ(names(select_caches(s, {"KMALLOC", false, sort_order::name})),
              (strings{"kmalloc-4096", "kmalloc-64"}));
    EXPECT_EQ(names(select_caches(s, {"^d.*y$", false, sort_order::name})), (strings{"dentry"}));
    EXPECT_EQ(names(select_caches(s, {"-64$|slob", false, sort_order::name})),
              (strings{"kmalloc-64", "slob-objects"}));
    EXPECT_EQ(error_of([&] {
                  select_caches(s, {"nothing", false, sort_order::name});
              }),
              "no cache matches 'nothing'");
    EXPECT_EQ(error_of([&] {
                  select_caches(s, {"empty", false, sort_order::name});
              }),
              "'empty' names only empty caches (empty-cache); -e shows them");
    EXPECT_EQ(names(select_caches(s, {"empty", true, sort_order::name})), (strings{"empty-cache"}));
    EXPECT_EQ(names(select_caches(s, {"nothing", false, sort_order::name}, false)), strings{});
    const std::string bad = error_of([&] { select_caches(s, {"(", false, sort_order::name}); });
    EXPECT_EQ(bad.rfind("bad regex '(': ", 0), 0u) << bad;
    EXPECT_EQ(names(matching_caches(s, "e")),
              (strings{"dentry", "empty-cache", "slob-objects"})); // creation order, empty too
}

TEST(Views, ReportCacheIsTheOneNamed) {
    snapshot s = sample();
    EXPECT_EQ(report_cache(s, "dentry").name, "dentry");
    EXPECT_EQ(report_cache(s, "4096").name, "kmalloc-4096");
    EXPECT_EQ(report_cache(s, "EMPTY").name, "empty-cache"); // empty caches too
    EXPECT_EQ(error_of([&] { report_cache(s, "kmalloc"); }),
              "'kmalloc' names 2 caches (kmalloc-64, kmalloc-4096); -r reports one");
    EXPECT_EQ(error_of([&] { report_cache(s, ""); }),
              "-r reports one cache: name it (slabinfo -r NAME)");
    EXPECT_EQ(error_of([&] { report_cache(s, "zzz"); }), "no cache matches 'zzz'");
    // A name that is also part of others: the exact one.
    s.caches.push_back(s.caches[0]);
    s.caches.back().name = "kmalloc-64-dma";
    EXPECT_EQ(report_cache(s, "KMALLOC-64").name, "kmalloc-64");
}

TEST(Views, RequestTargets) {
    const snapshot s = sample();
    EXPECT_EQ(request_targets(s, ""), strings{""});
    EXPECT_EQ(request_targets(s, "."), strings{""}); // names every cache: one request
    EXPECT_EQ(request_targets(s, "kmalloc"), (strings{"kmalloc-64", "kmalloc-4096"}));
    EXPECT_EQ(request_targets(s, "empty"), strings{"empty-cache"});
    EXPECT_EQ(error_of([&] { request_targets(s, "zzz"); }), "no cache matches 'zzz'");
}

TEST(Views, ActivityLines) {
    const snapshot s = sample();
    selection sel;
    sel.order = sort_order::activity;
    const auto t = table_of(activity_view(s, select_caches(s, sel)));
    ASSERT_EQ(t.size(), 5u);
    EXPECT_EQ(t[0], (strings{"Name", "Objects", "Alloc", "Free", "%Fast", "O", "Design"}));
    // %Fast = (allocs - alloc_slow) * 100 / allocs "/" (frees - free_slow) * 100 / frees.
    EXPECT_EQ(t[1], (strings{"kmalloc-4096", "300", "1000000", "999700", "90/99", "3", "slub"}));
    EXPECT_EQ(t[2], (strings{"dentry", "250", "7300", "7050", "95/97", "1", "slab"}));
    EXPECT_EQ(t[3], (strings{"kmalloc-64", "120", "5000", "4880", "99/89", "0", "slqb"}));
    EXPECT_EQ(t[4], (strings{"slob-objects", "50", "2000", "1950", "0/0", "0", "slob"}));

    snapshot idle = s;
    idle.caches[0].activity = {};
    idle.caches[0].activity.alloc_slow = 5; // more slow than all: never a wrapped figure
    const auto u = table_of(activity_view(idle, {&idle.caches[0]}));
    EXPECT_EQ(u[1], (strings{"kmalloc-64", "120", "0", "0", "-/-", "0", "slqb"}));
}

TEST(Views, Totals) {
    const snapshot s = sample();
    selection sel;
    sel.show_empty = true;
    const std::string text = totals_view(s, select_caches(s, sel));
    EXPECT_EQ(row(text, "Slabcache"), (strings{"Slabcache", "totals:", "process", "4242",
                                               "(sample-prog),", "design", "slqb"}));
    EXPECT_EQ(row(text, "Caches"),
              (strings{"Caches", ":", "5", "Active", ":", "4", "Empty", ":", "1"}));
    // Memory 81920 + 1310720 + 12288 + 0 + 8192 = 1413120; used 48000 + 1228800 + 7680 + 5000 =
    // 1289480; loss 123640, 8%.
    EXPECT_EQ(row(text, "Memory"),
              (strings{"Memory", "used:", "1.4M", "#", "Loss", ":", "123.6K", "MRatio:", "8%"}));
    // Objects 720, queued 20 + 30 = 50 (6%), slots 192 + 320 + 320 + 80 = 912, free 192 (21%).
    EXPECT_EQ(row(text, "#"),
              (strings{"#", "Objects", ":", "720", "#", "Queued:", "50", "ORatio:", "6%"}));
    EXPECT_EQ(row(text, "#Objects"), (strings{"#Objects", "144", "0", "300", "720"}));
    EXPECT_EQ(row(text, "#Slabs"), (strings{"#Slabs", "11", "0", "40", "55"}));
    EXPECT_EQ(row(text, "Loss"), (strings{"Loss", "24.7K", "0", "81.9K", "123.6K"}));
    // Every heap, page and slot figure, by its JSON name.
    EXPECT_EQ(row(text, "caches"), (strings{"caches", "5", "slab_pages", "392"}));
    EXPECT_EQ(row(text, "large_bytes"), (strings{"large_bytes", "16.7M", "kept_blocks", "1"}));
    EXPECT_EQ(row(text, "kept_bytes"), (strings{"kept_bytes", "8.3M", "errors", "1"}));
    EXPECT_EQ(row(text, "refusals"), (strings{"refusals", "4"}));
    EXPECT_EQ(row(text, "in_use"), (strings{"in_use", "399", "in_pcp", "30"}));
    EXPECT_EQ(row(text, "returned"), (strings{"returned", "3", "resident", "529"}));
    EXPECT_EQ(row(text, "busy"), (strings{"busy", "5", "shared_holds", "6"}));
    EXPECT_EQ(row(text, "cpu_drains"), (strings{"cpu_drains", "7"}));
    EXPECT_NE(text.find("Slots: mode thread, rseq glibc\n  SLABKIT_SLOTS=thread\n"),
              std::string::npos);
    EXPECT_NE(text.find("Page allocator (4096-byte pages, 2 nodes)"), std::string::npos);

    const auto none = totals_view(s, {});
    EXPECT_EQ(row(none, "#Objects"), (strings{"#Objects", "-", "-", "-", "-"}));
}

TEST(Views, ReportOfOneCache) {
    const snapshot s = sample();
    const std::string text = cache_report(s, report_cache(s, "dentry"));
    EXPECT_EQ(lines_of(text)[0],
              "Slabcache: dentry  Design: slab  Order: 1  Objects: 250  Flags: FZP");
    // Sizes, slabs, debug flags (F Z P on; U T off) and memory: Total 10 * 8192 = 81920, Used
    // 250 * 192 = 48000, Loss 33920, Lalig (256 - 192) * 250 = 16000, Lpadd 81920 - 256 * 320 = 0.
    EXPECT_EQ(row(text, "Object"), (strings{"Object", ":", "192", "Total", ":", "10", "Sanity",
                                            "checks", ":", "On", "Total", ":", "81920"}));
    EXPECT_EQ(row(text, "SlabObj:"), (strings{"SlabObj:", "256", "Active", ":", "8", "Red", "zones",
                                              ":", "On", "Used", ":", "48000"}));
    EXPECT_EQ(row(text, "SlabSiz:"), (strings{"SlabSiz:", "8192", "Objects:", "320", "Poisoning",
                                              ":", "On", "Loss", ":", "33920"}));
    EXPECT_EQ(row(text, "Loss"), (strings{"Loss", ":", "64", "In", "use", ":", "250", "Tracking",
                                          ":", "Off", "Lalig", ":", "16000"}));
    EXPECT_EQ(row(text, "Align"), (strings{"Align", ":", "64", "Queued", ":", "30", "Tracing", ":",
                                           "Off", "Lpadd", ":", "0"}));
    EXPECT_EQ(row(text, "O/S"), (strings{"O/S", ":", "32", "Shared", ":", "12"}));
    // Every tunable, the slabinfo columns, every counter in the design's order.
    EXPECT_EQ(row(text, "limit"), (strings{"limit", "120"}));
    EXPECT_EQ(row(text, "batchcount"), (strings{"batchcount", "60"}));
    EXPECT_EQ(row(text, "shared"), (strings{"shared", "8"}));
    EXPECT_EQ(row(text, "/proc/slabinfo"), (strings{"/proc/slabinfo", "columns", "120", "60", "8",
                                                    "(limit", "batchcount", "sharedfactor)"}));
    const size_t at = text.find("Counters (slab)\n");
    ASSERT_NE(at, std::string::npos);
    strings order;
    for (const auto &line : lines_of(text.substr(at + 16))) { // after its title
        if (line.empty()) break;
        auto t = tokens_of(line);
        if (t.size() == 2) order.push_back(t[0] + "=" + t[1]);
    }
    EXPECT_EQ(order, (strings{"ALLOCHIT=7000", "ALLOCMISS=300", "FREEHIT=6900", "FREEMISS=150",
                              "GROWN=12", "REAPED=2"}));
    // Activity: fast = all - slow, and the percentages of each.
    EXPECT_EQ(row(text, "Fastpath"), (strings{"Fastpath", "7000", "6900", "95", "97"}));
    EXPECT_EQ(row(text, "Slowpath"), (strings{"Slowpath", "300", "150", "4", "2"}));
    EXPECT_EQ(row(text, "Total"), (strings{"Total", "7300", "7050"}));

    const std::string slob = cache_report(s, report_cache(s, "slob"));
    EXPECT_NE(slob.find("SLOB: the activity and counters are the arena's"), std::string::npos);
    EXPECT_NE(slob.find("Counters (slob)\n  (none)\n"), std::string::npos);
    EXPECT_EQ(row(slob, "Loss"), (strings{"Loss", ":", "2", "In", "use", ":", "50", "Tracking", ":",
                                          "On", "Lalig", ":", "100"}));
    EXPECT_EQ(row(slob, "Fastpath"), (strings{"Fastpath", "0", "0", "0", "0"}));
    EXPECT_EQ(text.find("SLOB:"), std::string::npos);
}

TEST(Views, Buddyinfo) {
    const snapshot s = sample();
    const std::string text = buddy_view(s);
    const auto l = lines_of(text);
    ASSERT_EQ(l.size(), 6u);
    EXPECT_EQ(l[0], "Free blocks of 2^order 4096-byte pages, orders 0..10 (as /proc/buddyinfo)");
    EXPECT_EQ(tokens_of(l[1]), (strings{"Node", "0,", "slabkit", "1", "0", "2", "0", "0", "0", "0",
                                        "0", "0", "0", "1"}));
    EXPECT_EQ(l[2], "        free 400 (60 resident), in use 300, in pcp 20, usable 258048, chunks "
                    "1, returned 2, decommits 5");
    EXPECT_EQ(tokens_of(l[3]), (strings{"Node", "1,", "slabkit", "3", "1", "0", "0", "4", "0", "0",
                                        "0", "0", "0", "0"}));
    EXPECT_EQ(l[4], "        free 100 (40 resident), in use 99, in pcp 10, usable 129024, chunks "
                    "1, returned 1, decommits 7");
    EXPECT_EQ(l[5], "All nodes: in use 399, in pcp 30, free 500 (100 resident), returned 3, "
                    "resident 529, reserved 1.0G, chunks 2, errors 1");
}

TEST(Views, ValidateAndShrinkReplies) {
    const std::string all = validate_view(77, {{"", {40, 0, "", 1}}});
    EXPECT_EQ(all, "process 77: 40 caches checked, 0 problems\n");
    const std::string some =
        validate_view(77, {{"kmalloc-64", {1, 2, "first problem\nsecond problem", 2, 3}},
                           {"dentry", {1, 0, "", 2, 1}}});
    EXPECT_EQ(some, "kmalloc-64: 1 cache checked, 2 problems (found again in a second copy of the "
                    "process)\n"
                    "  first problem\n"
                    "  second problem\n"
                    "dentry: 1 cache checked, 0 problems (a first copy of the process found 1, a "
                    "second none: a list was being changed when the first was made)\n");

    const std::string shrunk =
        shrink_view({{{{"kmalloc-64", 12, 3}, {"dentry", 10, 10}}}, {{{"x", 5, 1}}}});
    const auto t = table_of(shrunk);
    ASSERT_EQ(t.size(), 5u);
    EXPECT_EQ(t[0], (strings{"Name", "Pages", "before", "Pages", "after", "Freed"}));
    EXPECT_EQ(t[1], (strings{"kmalloc-64", "12", "3", "9"}));
    EXPECT_EQ(t[2], (strings{"dentry", "10", "10", "0"}));
    EXPECT_EQ(t[3], (strings{"x", "5", "1", "4"}));
    EXPECT_EQ(t[4], (strings{"Total", "27", "14", "13"}));
}

TEST(Views, TracesAsTheKernelListsThem) {
    EXPECT_EQ(traces_view({}), "no cache keeps owner tracks (SLABKIT_DEBUG=U, or a cache made with "
                               "SLABKIT_STORE_USER)\n");
    cache_traces c;
    c.name = "kmalloc-64";
    c.alloc.objects = 30;
    c.alloc.dropped = 2;
    c.alloc.sites = {{20, "0x55aa f+0x1c (prog)", 5, 7, 9, 100, 104, 0b1011},
                     {8, "0x55bb (libx.so+0x10)", 1, 1, 1, 7, 7, uint64_t{1} << 63}};
    c.free.objects = 3;
    c.free.sites = {{3, "g+0x4 (prog)", 0, 0, 0, 9, 9, 1}};
    EXPECT_EQ(traces_view({c}),
              "kmalloc-64: 30 objects in use, from 2 sites (2 objects of more sites not shown)\n"
              "      20 f+0x1c (prog) age=5/7/9ms tid=100-104 cpus=0-1,3\n"
              "       8 (libx.so+0x10) age=1/1/1ms tid=7 cpus=63+\n"
              "kmalloc-64: 3 objects free, from 1 sites\n"
              "       3 g+0x4 (prog) age=0/0/0ms tid=9 cpus=0\n");
    c.free_sites_kept = false;
    EXPECT_NE(traces_view({c}).find("free sites are not kept (SLOB"), std::string::npos);
}

TEST(Views, ProcessList) {
    EXPECT_EQ(process_list_view({}, 0), "no process publishes statistics now\n");
    segment_entry live;
    live.pid = 100;
    live.path = "/dev/shm/slabkit.100";
    live.program = "prog";
    live.status = "live";
    live.header = segment_header{};
    live.header->period_ms = 250;
    live.header->publish_count = 9;
    live.header->published_ns = 5000000000;
    segment_entry stale;
    stale.pid = 200;
    stale.path = "/dev/shm/slabkit.200";
    stale.status = "stale: process gone";
    stale.stale = true;
    const auto t = table_of(process_list_view({live, stale}, 6500000000));
    ASSERT_EQ(t.size(), 4u);
    EXPECT_EQ(t[0], (strings{"PID", "Program", "State", "Period", "Published", "Snapshots"}));
    EXPECT_EQ(t[1], (strings{"100", "prog", "live", "250", "ms", "1.5", "s", "ago", "9"}));
    EXPECT_EQ(t[2], (strings{"200", "?", "stale:", "process", "gone", "-", "-", "-"}));
    EXPECT_EQ(t[3], (strings{"stale", "segments", "(their", "process", "is", "gone)", "may", "be",
                             "removed:", "rm", "/dev/shm/slabkit.200"}));
}

TEST(Views, WatchTitle) {
    const snapshot s = sample();
    EXPECT_EQ(watch_title(s, 2, s.time_ns + 300000000),
              "slabinfo: process 4242 (sample-prog), design slqb, every 2 s; snapshot 12 taken "
              "0.3 s ago\n");
}

TEST(Views, JsonOfTheSelectedCaches) {
    const snapshot s = sample();
    const snapshot only =
        with_caches(s, select_caches(s, {"kmalloc", false, sort_order::creation}));
    ASSERT_EQ(only.caches.size(), 2u);
    EXPECT_EQ(only.caches[0], s.caches[0]); // creation order: kmalloc-64 first
    EXPECT_EQ(only.caches[1], s.caches[1]);
    EXPECT_EQ(only.heap, s.heap);
    EXPECT_EQ(names(select_caches(s, {"", true, sort_order::creation})),
              (strings{"kmalloc-64", "kmalloc-4096", "dentry", "empty-cache", "slob-objects"}));
}

TEST(Views, NamesWithControlCharactersStayOnTheirLine) {
    snapshot s = sample();
    s.caches[0].name = "bad\nname";
    const auto l = lines_of(list_view(s, {&s.caches[0]}));
    ASSERT_EQ(l.size(), 2u);
    EXPECT_EQ(tokens_of(l[1])[0], "bad?name");
}

} // namespace
