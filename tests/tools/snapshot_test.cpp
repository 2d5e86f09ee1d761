// snapshot_test.cpp - the snapshot model: every field read from a hand-made JSON, the checks of
// what is read (format, version, every missing field, wrong types), and the round trip.
#include "sample_snapshot.hpp"
#include "slabinfo/snapshot.hpp"

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

using slabinfo::parse_snapshot;
using slabinfo::slabinfo_error;
using slabinfo::snapshot;
using json = nlohmann::ordered_json;
using slabinfo_test::kSampleJson;

// The message of the error parsing text throws ("" if it does not throw).
std::string parse_error(const std::string &text, const char *source = "snap.json") {
    try {
        parse_snapshot(text, source);
    } catch (const slabinfo_error &e) {
        return e.what();
    }
    return "";
}

std::string with(const std::function<void(json &)> &change) {
    json j = json::parse(kSampleJson);
    change(j);
    return j.dump();
}

TEST(Snapshot, ReadsEveryField) {
    const snapshot s = parse_snapshot(kSampleJson, "sample");
    EXPECT_EQ(s.pid, 4242u);
    EXPECT_EQ(s.program, "sample-prog");
    EXPECT_EQ(s.time_ns, 1764800000000000000u);
    EXPECT_EQ(s.design, "slqb");
    EXPECT_EQ(s.designs, "slqb slub slab slob");
    EXPECT_EQ(s.page_size, 4096u);
    ASSERT_EQ(s.caches.size(), 5u);

    const auto &c = s.caches[0];
    EXPECT_EQ(c.name, "kmalloc-64");
    EXPECT_EQ(c.design, "slqb");
    EXPECT_EQ(c.object_size, 64u);
    EXPECT_EQ(c.slot_size, 64u);
    EXPECT_EQ(c.align, 8u);
    EXPECT_EQ(c.order, 0u);
    EXPECT_EQ(c.objects_per_slab, 64u);
    EXPECT_EQ(c.flags, "");
    EXPECT_EQ(c.slabs, 3u);
    EXPECT_EQ(c.active_slabs, 3u);
    EXPECT_EQ(c.objects, 192u);
    EXPECT_EQ(c.active_objects, 120u);
    EXPECT_EQ(c.queued_objects, 20u);
    EXPECT_EQ(c.shared_avail, 0u);
    EXPECT_EQ(c.slabinfo_tunables, (std::array<uint64_t, 3>{1024, 256, 0}));
    EXPECT_EQ(c.tunables,
              (slabinfo::named_values{{"order", 0}, {"hiwater", 1024}, {"freebatch", 256}}));
    EXPECT_EQ(c.counters, (slabinfo::named_values{{"ALLOC", 5000},
                                                  {"ALLOC_SLAB_FILL", 10},
                                                  {"ALLOC_SLAB_NEW", 3},
                                                  {"FREE", 4880},
                                                  {"FREE_REMOTE", 400},
                                                  {"FLUSH_FREE_LIST", 100}}));
    EXPECT_EQ(c.activity.allocs, 5000u);
    EXPECT_EQ(c.activity.alloc_slow, 13u);
    EXPECT_EQ(c.activity.frees, 4880u);
    EXPECT_EQ(c.activity.free_slow, 500u);

    // A second cache, whose figures all differ from the first's.
    const auto &d = s.caches[2];
    EXPECT_EQ(d.name, "dentry");
    EXPECT_EQ(d.design, "slab");
    EXPECT_EQ(d.object_size, 192u);
    EXPECT_EQ(d.slot_size, 256u);
    EXPECT_EQ(d.align, 64u);
    EXPECT_EQ(d.order, 1u);
    EXPECT_EQ(d.objects_per_slab, 32u);
    EXPECT_EQ(d.flags, "FZP");
    EXPECT_EQ(d.slabs, 10u);
    EXPECT_EQ(d.active_slabs, 8u);
    EXPECT_EQ(d.objects, 320u);
    EXPECT_EQ(d.active_objects, 250u);
    EXPECT_EQ(d.queued_objects, 30u);
    EXPECT_EQ(d.shared_avail, 12u);
    EXPECT_EQ(d.slabinfo_tunables, (std::array<uint64_t, 3>{120, 60, 8}));
    EXPECT_EQ(d.tunables.size(), 4u);
    EXPECT_EQ(d.counters.back(), (slabinfo::named_value{"REAPED", 2}));
    EXPECT_EQ(d.activity, (slabinfo::activity_counts{7300, 300, 7050, 150, std::nullopt}));
    EXPECT_TRUE(s.caches[4].tunables.empty());
    EXPECT_TRUE(s.caches[4].counters.empty());

    const auto &h = s.heap;
    EXPECT_EQ(h.caches, 5u);
    EXPECT_EQ(h.slab_pages, 392u);
    EXPECT_EQ(h.objects_in_use, 720u);
    EXPECT_EQ(h.object_bytes, 1308480u);
    EXPECT_EQ(h.free_objects, 192u);
    EXPECT_EQ(h.free_object_bytes, 135616u);
    EXPECT_EQ(h.block_pages, 7u);
    EXPECT_EQ(h.free_pages, 500u);
    EXPECT_EQ(h.free_resident_pages, 100u);
    EXPECT_EQ(h.returned_pages, 3u);
    EXPECT_EQ(h.reserved_bytes, 1073741824u);
    EXPECT_EQ(h.large_blocks, 2u);
    EXPECT_EQ(h.large_bytes, 16777216u);
    EXPECT_EQ(h.kept_blocks, 1u);
    EXPECT_EQ(h.kept_bytes, 8388608u);
    EXPECT_EQ(h.errors, 1u);
    EXPECT_EQ(h.refusals, std::optional<uint64_t>(4));

    const auto &p = s.pages;
    EXPECT_EQ(p.in_use, 399u);
    EXPECT_EQ(p.in_pcp, 30u);
    EXPECT_EQ(p.free_pages, 500u);
    EXPECT_EQ(p.free_resident, 100u);
    EXPECT_EQ(p.returned, 3u);
    EXPECT_EQ(p.resident, 529u);
    EXPECT_EQ(p.reserved_bytes, 1073741824u);
    EXPECT_EQ(p.chunks, 2u);
    EXPECT_EQ(p.errors, 1u);
    ASSERT_EQ(p.nodes.size(), 2u);
    const auto &n = p.nodes[1];
    EXPECT_EQ(n.node, 1u);
    EXPECT_EQ(n.free_blocks, (std::vector<uint64_t>{3, 1, 0, 0, 4, 0, 0, 0, 0, 0, 0}));
    EXPECT_EQ(n.free_pages, 100u);
    EXPECT_EQ(n.free_resident, 40u);
    EXPECT_EQ(n.in_use, 99u);
    EXPECT_EQ(n.in_pcp, 10u);
    EXPECT_EQ(n.usable_pages, 129024u);
    EXPECT_EQ(n.chunks, 1u);
    EXPECT_EQ(n.returned, 1u);
    EXPECT_EQ(n.decommits, 7u);
    EXPECT_EQ(p.nodes[0].free_blocks, (std::vector<uint64_t>{1, 0, 2, 0, 0, 0, 0, 0, 0, 0, 1}));
    EXPECT_EQ(p.nodes[0].decommits, 5u);

    const auto &sl = s.slots;
    EXPECT_EQ(sl.mode, "thread");
    EXPECT_EQ(sl.why, "SLABKIT_SLOTS=thread");
    EXPECT_EQ(sl.rseq, "glibc");
    EXPECT_EQ(sl.cpu_slots, 0u);
    EXPECT_EQ(sl.thread_slots, 1024u);
    EXPECT_EQ(sl.threads_owning, 3u);
    EXPECT_EQ(sl.restarts, 4u);
    EXPECT_EQ(sl.busy, 5u);
    EXPECT_EQ(sl.shared_holds, 6u);
    EXPECT_EQ(sl.cpu_drains, 7u);

    ASSERT_TRUE(s.failslab.has_value());
    EXPECT_TRUE(s.failslab->armed);
    EXPECT_EQ(s.failslab->probability, 12.5);
    EXPECT_EQ(s.failslab->interval, 3u);
    EXPECT_EQ(s.failslab->times, -1);
    EXPECT_EQ(s.failslab->space, 4096);
    EXPECT_EQ(s.failslab->caches, "kmalloc-*");
    EXPECT_EQ(s.failslab->failures, 9u);
    EXPECT_EQ(s.failslab->block_failures, 2u);

    ASSERT_TRUE(s.live.has_value());
    EXPECT_EQ(s.live->period_ms, 1000u);
    EXPECT_EQ(s.live->publish_count, 12u);
    EXPECT_FALSE(s.saved_from.has_value());
}

TEST(Snapshot, RoundTripsFieldByField) {
    const snapshot s = parse_snapshot(kSampleJson, "sample");
    const snapshot back = parse_snapshot(slabinfo::to_json(s), "again");
    EXPECT_EQ(back, s);
    // The same JSON, keys in the same order.
    EXPECT_EQ(slabinfo::to_json_value(s), json::parse(kSampleJson));
    EXPECT_EQ(parse_snapshot(slabinfo::to_json(s, -1), "one line"), s);

    snapshot saved = s;
    saved.live.reset();
    saved.saved_from = "pid 4242";
    const json j = slabinfo::to_json_value(saved);
    EXPECT_FALSE(j.contains("live"));
    EXPECT_EQ(j.at("saved_from"), "pid 4242");
    EXPECT_EQ(parse_snapshot(j.dump(), "saved"), saved);
    EXPECT_NE(parse_snapshot(j.dump(), "saved"), s);
}

TEST(Snapshot, ChangedFiguresDoNotCompareEqual) {
    // The comparison the round trip relies on sees every kind of field.
    const snapshot s = parse_snapshot(kSampleJson, "sample");
    std::vector<std::function<void(snapshot &)>> changes = {
        [](snapshot &x) { x.caches[3].activity.free_slow++; },
        [](snapshot &x) { x.caches[0].counters[2].value++; },
        // (Strings assigned as std::string, not = "X": Debian 12's g++ 12.2 at -O3 reports a
        // false -Wrestrict inside libstdc++'s basic_string::_M_replace for the assignment of
        // a one-character literal, GCC bug 105329; a move assignment takes another path.)
        [](snapshot &x) { x.caches[0].counters[2].name = std::string("X"); },
        [](snapshot &x) { x.caches[1].slabinfo_tunables[2]++; },
        [](snapshot &x) { x.pages.nodes[1].free_blocks[4]++; },
        [](snapshot &x) { x.slots.why += "!"; },
        [](snapshot &x) { x.heap.kept_bytes++; },
        [](snapshot &x) { *x.heap.refusals += 1; },
        [](snapshot &x) { x.live->publish_count++; },
        [](snapshot &x) { x.failslab->times++; },
        [](snapshot &x) { x.failslab->probability += 0.5; },
        [](snapshot &x) { x.failslab->armed = false; },
        [](snapshot &x) { x.saved_from = std::string("f"); },
    };
    for (size_t i = 0; i < changes.size(); i++) {
        snapshot t = s;
        changes[i](t);
        EXPECT_NE(t, s) << "change " << i;
        EXPECT_EQ(parse_snapshot(slabinfo::to_json(t), "t"), t) << "change " << i;
    }
}

// Removes each field of the sample in turn: every one that the schema requires must be named.
// Snapshots saved before the heap counted refused requests load, with none.
TEST(Snapshot, HeapRefusalsAreOptional) {
    json j = json::parse(kSampleJson);
    j["heap"].erase("refusals");
    const snapshot s = parse_snapshot(j.dump(), "old.json");
    EXPECT_FALSE(s.heap.refusals.has_value());
    EXPECT_EQ(parse_snapshot(kSampleJson, "new.json").heap.refusals, std::optional<uint64_t>(4));
}

TEST(Snapshot, EveryMissingFieldIsNamed) {
    const json sample = json::parse(kSampleJson);
    size_t checked = 0;
    std::function<void(const std::vector<std::string> &, const std::string &, const json &)> walk;
    // keys: the path as JSON keys/indexes; shown: as the message writes it.
    std::function<json &(json &, const std::vector<std::string> &)> at =
        [&](json &j, const std::vector<std::string> &keys) -> json & {
        json *p = &j;
        for (const auto &k : keys) p = p->is_array() ? &(*p)[std::stoul(k)] : &(*p)[k];
        return *p;
    };
    walk = [&](const std::vector<std::string> &keys, const std::string &shown, const json &j) {
        if (j.is_object()) {
            for (const auto &[key, value] : j.items()) {
                if (keys.empty() &&
                    (key == "format" || key == "version" || key == "live" || key == "failslab"))
                    continue;
                // Optional: older snapshots have none (HeapRefusalsAreOptional).
                if (keys.size() == 1 && keys[0] == "heap" && key == "refusals") continue;
                auto sub = keys;
                sub.push_back(key);
                const std::string sub_shown = shown.empty() ? key : shown + "." + key;
                json copy = sample;
                at(copy, keys).erase(key);
                EXPECT_EQ(parse_error(copy.dump()),
                          "snap.json: field " + sub_shown + " is missing");
                checked++;
                // The names inside counters and tunables are the design's: none is required.
                if (key != "counters" && key != "tunables") walk(sub, sub_shown, value);
            }
        } else if (j.is_array()) {
            for (size_t i = 0; i < j.size(); i++) {
                auto sub = keys;
                sub.push_back(std::to_string(i));
                walk(sub, shown + "[" + std::to_string(i) + "]", j[i]);
            }
        }
    };
    walk({}, "", sample);
    // 10 top-level, 5 caches x (18 + 4 of activity), heap 16, pages 10 + 2 nodes x 10, slots 10.
    EXPECT_EQ(checked, 10u + 5 * (18 + 4) + 16 + 10 + 2 * 10 + 10);
    // live is optional, its fields are not.
    EXPECT_EQ(parse_error(with([](json &j) { j["live"].erase("period_ms"); })),
              "snap.json: field live.period_ms is missing");
    EXPECT_EQ(parse_error(with([](json &j) { j.erase("live"); })), "");
    // So is failslab (snapshots saved before fault injection), and a cache's failures.
    EXPECT_EQ(parse_error(with([](json &j) { j["failslab"].erase("times"); })),
              "snap.json: field failslab.times is missing");
    EXPECT_EQ(parse_error(with([](json &j) { j.erase("failslab"); })), "");
    EXPECT_EQ(
        parse_error(with([](json &j) { j["caches"][0]["activity"]["failslab_failures"] = 3; })),
        "");
}

TEST(Snapshot, WrongTypesAreNamed) {
    EXPECT_EQ(parse_error(with([](json &j) { j["caches"][1]["slabs"] = "x"; })),
              "snap.json: field caches[1].slabs is \"x\", not an unsigned integer");
    EXPECT_EQ(parse_error(with([](json &j) { j["heap"]["errors"] = -1; })),
              "snap.json: field heap.errors is -1, not an unsigned integer");
    EXPECT_EQ(parse_error(with([](json &j) { j["time_ns"] = 1.5; })),
              "snap.json: field time_ns is 1.5, not an unsigned integer");
    EXPECT_EQ(parse_error(with([](json &j) { j["program"] = 7; })),
              "snap.json: field program is 7, not a string");
    EXPECT_EQ(parse_error(with([](json &j) {
                  j["caches"][0]["slabinfo_tunables"] = {1, 2};
              })),
              "snap.json: field caches[0].slabinfo_tunables is [1,2], not an array of 3 numbers");
    EXPECT_EQ(parse_error(with([](json &j) { j["caches"][0]["counters"]["FREE"] = "many"; })),
              "snap.json: field caches[0].counters.FREE is \"many\", not an unsigned integer");
    EXPECT_EQ(
        parse_error(with([](json &j) { j["pages"]["nodes"][1]["free_blocks"][3] = nullptr; })),
        "snap.json: field pages.nodes[1].free_blocks[3] is null, not an unsigned integer");
    EXPECT_EQ(parse_error(with([](json &j) { j["caches"] = json::object(); })),
              "snap.json: field caches is {}, not an array");
    EXPECT_EQ(parse_error(with([](json &j) { j["slots"] = 3; })),
              "snap.json: field slots is 3, not an object");
    EXPECT_EQ(parse_error(with([](json &j) { j["failslab"]["armed"] = 1; })),
              "snap.json: field failslab.armed is 1, not true or false");
    EXPECT_EQ(parse_error(with([](json &j) { j["failslab"]["times"] = 1.5; })),
              "snap.json: field failslab.times is 1.5, not an integer");
    EXPECT_EQ(parse_error(with([](json &j) { j["failslab"]["probability"] = "x"; })),
              "snap.json: field failslab.probability is \"x\", not a number");
    EXPECT_EQ(parse_error(with([](json &j) { j["page_size"] = 4000; })),
              "snap.json: field page_size is 4000, not a power of two up to 1 GiB");
    EXPECT_EQ(parse_error(with([](json &j) { j["caches"][2]["order"] = 40; })),
              "snap.json: field caches[2].order is 40, more than 30");
    // A value longer than a message should hold is cut.
    const std::string long_name(300, 'n');
    EXPECT_EQ(parse_error(with([&](json &j) { j["designs"] = json::array({long_name}); })),
              "snap.json: field designs is [\"" + std::string(35, 'n') + "..., not a string");
}

TEST(Snapshot, RejectsWhatIsNotASlabkitSnapshotOfThisVersion) {
    EXPECT_EQ(parse_error(with([](json &j) { j["version"] = 2; })),
              "snap.json: a version 2 snapshot; this slabinfo reads version 1");
    EXPECT_EQ(parse_error(with([](json &j) { j["version"] = "1"; })),
              "snap.json: field version is \"1\", not 1");
    EXPECT_EQ(parse_error(with([](json &j) { j.erase("version"); })),
              "snap.json: field version is missing");
    EXPECT_EQ(parse_error(with([](json &j) { j["format"] = "other"; })),
              "snap.json: not a slabkit snapshot (format is \"other\", not \"slabkit-stats\")");
    EXPECT_EQ(parse_error(with([](json &j) { j.erase("format"); })),
              "snap.json: not a slabkit snapshot (no \"format\" field)");
    EXPECT_EQ(parse_error("[1, 2]"),
              "snap.json: not a slabkit snapshot (the JSON is an array, not an object)");
    EXPECT_EQ(parse_error("\"text\""),
              "snap.json: not a slabkit snapshot (the JSON is a string, not an object)");
    const std::string not_json = parse_error("slabinfo - version: 2.1\n# name <active_objs>");
    EXPECT_EQ(not_json, "snap.json: not JSON (parse error at line 1, column 1: syntax error while "
                        "parsing value - invalid literal; last read: 's')");
    EXPECT_EQ(parse_error("").rfind("snap.json: not JSON (", 0), 0u);
    // Where the error is: the line after the sample's last.
    const auto lines = std::count(kSampleJson.begin(), kSampleJson.end(), '\n') + 1;
    EXPECT_EQ(parse_error(std::string(kSampleJson) + "\n,"),
              "snap.json: not JSON (parse error at line " + std::to_string(lines + 1) +
                  ", column 1: syntax error while parsing value - unexpected ','; expected end "
                  "of input)");
    // Control characters in what the parser quotes stay out of the one-line message.
    const std::string quoted = parse_error("{\"a\": \"x\ty\"}");
    EXPECT_EQ(quoted.find('\t'), std::string::npos) << quoted;
    EXPECT_EQ(quoted.rfind("snap.json: not JSON (", 0), 0u);
}

TEST(Snapshot, APublisherThatCouldNotWriteItSaysWhy) {
    EXPECT_EQ(parse_error(R"({"format":"slabkit-stats","version":1,"error":"the statistics are )"
                          R"(larger than the live segment's payload"})"),
              "snap.json: the statistics are larger than the live segment's payload");
}

TEST(Snapshot, IgnoresFieldsItDoesNotKnow) {
    const snapshot s = parse_snapshot(kSampleJson, "sample");
    EXPECT_EQ(parse_snapshot(with([](json &j) {
                                 j["future"] = {1, 2};
                                 j["caches"][0]["future"] = "x";
                             }),
                             "f"),
              s);
}

TEST(Snapshot, SizesSaturate) {
    snapshot s = parse_snapshot(kSampleJson, "sample");
    EXPECT_EQ(slabinfo::slab_bytes(s, s.caches[1]), 32768u);
    EXPECT_EQ(slabinfo::space_bytes(s, s.caches[1]), 40u * 32768);
    EXPECT_EQ(slabinfo::used_bytes(s.caches[1]), 300u * 4096);
    s.caches[1].slabs = uint64_t{1} << 60;
    EXPECT_EQ(slabinfo::space_bytes(s, s.caches[1]), UINT64_MAX);
    s.caches[1].active_objects = UINT64_MAX / 2;
    EXPECT_EQ(slabinfo::used_bytes(s.caches[1]), UINT64_MAX);
    EXPECT_TRUE(slabinfo::is_empty(s.caches[3]));
    EXPECT_FALSE(slabinfo::is_empty(s.caches[4]));
}

TEST(Snapshot, OneLineReplacesControlCharacters) {
    EXPECT_EQ(slabinfo::one_line("a\nb\tc\x7f"), "a?b?c?");
    EXPECT_EQ(slabinfo::one_line("abcdefgh", 6), "abc...");
    EXPECT_EQ(slabinfo::one_line("abcdef", 6), "abcdef");
}

} // namespace
