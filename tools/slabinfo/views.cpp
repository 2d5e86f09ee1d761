// views.cpp - slabinfo's selection of caches and its tables.
#include "slabinfo/views.hpp"

#include <algorithm>
#include <cctype>
#include <limits>
#include <strings.h>

#include <fmt/format.h>

namespace slabinfo {

namespace {

constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();

uint64_t sub_or_zero(uint64_t a, uint64_t b) {
    return a > b ? a - b : 0;
}
uint64_t add_saturating(uint64_t a, uint64_t b) {
    return a > kMax - b ? kMax : a + b;
}
uint64_t mul_saturating(uint64_t a, uint64_t b) {
    uint64_t out = 0;
    return __builtin_mul_overflow(a, b, &out) ? kMax : out;
}

// A name as a table shows it: one line, not too long.
std::string shown_name(const std::string &name) {
    return one_line(name, 64);
}

size_t name_width(const std::vector<const cache_stats *> &caches, size_t least = 4) {
    size_t w = least;
    for (const auto *c : caches) w = std::max(w, shown_name(c->name).size());
    return std::min<size_t>(w, 64);
}

// Appends one line, without the spaces an empty last column leaves.
void put_line(std::string &out, std::string line) {
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
}

std::string percent_text(std::optional<uint64_t> p) {
    return p ? fmt::format("{}", *p) : "-";
}

bool less_by_name(const cache_stats *a, const cache_stats *b) {
    const int r = ::strcasecmp(a->name.c_str(), b->name.c_str());
    return r != 0 ? r < 0 : a->name < b->name;
}

uint64_t traffic(const cache_stats &c) {
    return add_saturating(c.activity.allocs, c.activity.frees);
}

std::string names_for_message(const std::vector<const cache_stats *> &caches) {
    std::string out;
    for (size_t i = 0; i < caches.size() && i < 5; i++) {
        if (i) out += ", ";
        out += shown_name(caches[i]->name);
    }
    if (caches.size() > 5) out += ", ...";
    return out;
}

std::string age_text(uint64_t then_ns, uint64_t now_ns) {
    if (then_ns == 0) return "never";
    const uint64_t ns = sub_or_zero(now_ns, then_ns);
    return fmt::format("{:.1f} s ago", static_cast<double>(ns) / 1e9);
}

} // namespace

// ---- selecting caches ---------------------------------------------------------------------------

name_filter::name_filter(std::string pattern) : pattern_(std::move(pattern)) {
    if (pattern_.empty()) return;
    try {
        regex_.emplace(pattern_, std::regex::ECMAScript | std::regex::icase);
    } catch (const std::regex_error &e) {
        throw slabinfo_error(
            fmt::format("bad regex '{}': {}", one_line(pattern_, 80), one_line(e.what())));
    }
}

bool name_filter::matches(const std::string &name) const {
    return !regex_ || std::regex_search(name, *regex_);
}

std::vector<const cache_stats *> matching_caches(const snapshot &s, const std::string &pattern) {
    const name_filter filter(pattern);
    std::vector<const cache_stats *> out;
    for (const auto &c : s.caches) {
        if (filter.matches(c.name)) out.push_back(&c);
    }
    if (out.empty() && !pattern.empty())
        throw slabinfo_error(fmt::format("no cache matches '{}'", one_line(pattern, 80)));
    return out;
}

std::vector<const cache_stats *> select_caches(const snapshot &s, const selection &sel,
                                               bool require_match) {
    std::vector<const cache_stats *> matched;
    if (require_match) {
        matched = matching_caches(s, sel.pattern);
    } else {
        const name_filter filter(sel.pattern);
        for (const auto &c : s.caches) {
            if (filter.matches(c.name)) matched.push_back(&c);
        }
    }
    std::vector<const cache_stats *> out;
    for (const auto *c : matched) {
        if (sel.show_empty || !is_empty(*c)) out.push_back(c);
    }
    if (require_match && out.empty() && !matched.empty() && !sel.pattern.empty())
        throw slabinfo_error(fmt::format("'{}' names only empty caches ({}); -e shows them",
                                         one_line(sel.pattern, 80), names_for_message(matched)));
    switch (sel.order) {
    case sort_order::creation:
        break;
    case sort_order::name:
        std::stable_sort(out.begin(), out.end(), less_by_name);
        break;
    case sort_order::space:
        std::stable_sort(out.begin(), out.end(), [&](const cache_stats *a, const cache_stats *b) {
            const uint64_t sa = space_bytes(s, *a), sb = space_bytes(s, *b);
            return sa != sb ? sa > sb : less_by_name(a, b);
        });
        break;
    case sort_order::activity:
        std::stable_sort(out.begin(), out.end(), [](const cache_stats *a, const cache_stats *b) {
            const uint64_t ta = traffic(*a), tb = traffic(*b);
            return ta != tb ? ta > tb : less_by_name(a, b);
        });
        break;
    }
    return out;
}

const cache_stats &report_cache(const snapshot &s, const std::string &pattern) {
    if (pattern.empty()) throw slabinfo_error("-r reports one cache: name it (slabinfo -r NAME)");
    const auto matched = matching_caches(s, pattern);
    for (const auto *c : matched) {
        if (::strcasecmp(c->name.c_str(), pattern.c_str()) == 0) return *c;
    }
    if (matched.size() == 1) return *matched.front();
    throw slabinfo_error(fmt::format("'{}' names {} caches ({}); -r reports one",
                                     one_line(pattern, 80), matched.size(),
                                     names_for_message(matched)));
}

std::vector<std::string> request_targets(const snapshot &s, const std::string &pattern) {
    if (pattern.empty()) return {""};
    const auto matched = matching_caches(s, pattern);
    if (matched.size() == s.caches.size()) return {""};
    std::vector<std::string> out;
    for (const auto *c : matched) out.push_back(c->name);
    return out;
}

snapshot with_caches(const snapshot &s, const std::vector<const cache_stats *> &caches) {
    snapshot out = s;
    out.caches.clear();
    for (const auto *c : caches) out.caches.push_back(*c);
    return out;
}

// ---- figures ------------------------------------------------------------------------------------

std::string format_size(uint64_t value) {
    uint64_t divisor = 1;
    char unit = 0;
    if (value > 1000000000) {
        divisor = 100000000;
        unit = 'G';
    } else if (value > 1000000) {
        divisor = 100000;
        unit = 'M';
    } else if (value > 1000) {
        divisor = 100;
        unit = 'K';
    }
    if (!unit) return fmt::format("{}", value);
    const uint64_t tenths = value / divisor;
    return fmt::format("{}.{}{}", tenths / 10, tenths % 10, unit);
}

std::optional<uint64_t> percent(uint64_t part, uint64_t whole) {
    if (whole == 0) return std::nullopt;
    return static_cast<uint64_t>(static_cast<unsigned __int128>(part) * 100 / whole);
}

// ---- tables -------------------------------------------------------------------------------------

std::string list_view(const snapshot &s, const std::vector<const cache_stats *> &caches) {
    const size_t w = name_width(caches);
    std::string out;
    put_line(out, fmt::format("{:<{}} {:<6} {:>8} {:>7} {:>8} {:>6} {:>4} {:>2} {:>3} {}", "Name",
                              w, "Design", "Objects", "Objsize", "Space", "Slabs", "O/S", "O",
                              "%Ef", "Flg"));
    for (const auto *c : caches) {
        const uint64_t space = space_bytes(s, *c);
        put_line(out, fmt::format("{:<{}} {:<6} {:>8} {:>7} {:>8} {:>6} {:>4} {:>2} {:>3} {}",
                                  shown_name(c->name), w, one_line(c->design, 8), c->active_objects,
                                  c->object_size, format_size(space), c->slabs, c->objects_per_slab,
                                  c->order, percent_text(percent(used_bytes(*c), space)),
                                  one_line(c->flags, 16)));
    }
    return out;
}

std::string activity_view(const snapshot &, const std::vector<const cache_stats *> &caches) {
    const size_t w = name_width(caches);
    std::string out;
    put_line(out, fmt::format("{:<{}} {:>8} {:>12} {:>12} {:>7} {:>2} {}", "Name", w, "Objects",
                              "Alloc", "Free", "%Fast", "O", "Design"));
    for (const auto *c : caches) {
        const auto &a = c->activity;
        const auto alloc_fast = percent(sub_or_zero(a.allocs, a.alloc_slow), a.allocs);
        const auto free_fast = percent(sub_or_zero(a.frees, a.free_slow), a.frees);
        put_line(out, fmt::format(
                          "{:<{}} {:>8} {:>12} {:>12} {:>7} {:>2} {}", shown_name(c->name), w,
                          c->active_objects, a.allocs, a.frees,
                          fmt::format("{}/{}", percent_text(alloc_fast), percent_text(free_fast)),
                          c->order, one_line(c->design, 8)));
    }
    return out;
}

namespace {

// Average, min, max and total of one figure over the caches.
struct spread {
    uint64_t min = kMax, max = 0, total = 0, count = 0;
    void add(uint64_t v) {
        min = std::min(min, v);
        max = std::max(max, v);
        total = add_saturating(total, v);
        count++;
    }
    std::string row(const char *label) const {
        if (count == 0)
            return fmt::format("{:<14} {:>10} {:>10} {:>10} {:>10}", label, "-", "-", "-", "-");
        return fmt::format("{:<14} {:>10} {:>10} {:>10} {:>10}", label, format_size(total / count),
                           format_size(min), format_size(max), format_size(total));
    }
};

// Rows of "label value" pairs, two to a line.
void put_pairs(std::string &out, const std::vector<std::pair<std::string, std::string>> &pairs) {
    for (size_t i = 0; i < pairs.size(); i += 2) {
        std::string line = fmt::format("  {:<22} {:>10}", pairs[i].first, pairs[i].second);
        if (i + 1 < pairs.size())
            line += fmt::format("    {:<22} {:>10}", pairs[i + 1].first, pairs[i + 1].second);
        put_line(out, line);
    }
}

std::string count_text(uint64_t v) {
    return fmt::format("{}", v);
}

} // namespace

std::string totals_view(const snapshot &s, const std::vector<const cache_stats *> &caches) {
    uint64_t active = 0, empty = 0, memory = 0, used = 0, objects = 0, slots = 0, queued = 0;
    spread per_objects, per_slabs, per_memory, per_used, per_loss;
    for (const auto *c : caches) {
        const uint64_t space = space_bytes(s, *c), in_use = used_bytes(*c);
        if (c->active_objects) active++;
        if (is_empty(*c)) empty++;
        memory = add_saturating(memory, space);
        used = add_saturating(used, in_use);
        objects = add_saturating(objects, c->active_objects);
        slots = add_saturating(slots, c->objects);
        queued = add_saturating(queued, c->queued_objects);
        per_objects.add(c->active_objects);
        per_slabs.add(c->slabs);
        per_memory.add(space);
        per_used.add(in_use);
        per_loss.add(sub_or_zero(space, in_use));
    }
    const uint64_t loss = sub_or_zero(memory, used);
    std::string out;
    put_line(out, fmt::format("Slabcache totals: process {} ({}), design {}", s.pid,
                              one_line(s.program, 40), one_line(s.design, 8)));
    put_line(out, std::string(72, '-'));
    put_line(out, fmt::format("Caches     : {:>8}   Active  : {:>8}   Empty : {:>8}", caches.size(),
                              active, empty));
    put_line(out, fmt::format("Memory used: {:>8}   # Loss  : {:>8}   MRatio: {:>7}%",
                              format_size(memory), format_size(loss),
                              percent_text(percent(loss, memory))));
    put_line(out, fmt::format("# Objects  : {:>8}   # Queued: {:>8}   ORatio: {:>7}%",
                              format_size(objects), format_size(queued),
                              percent_text(percent(queued, objects))));
    put_line(out, fmt::format("# Slots    : {:>8}   # Free  : {:>8}   FRatio: {:>7}%",
                              format_size(slots), format_size(sub_or_zero(slots, objects)),
                              percent_text(percent(sub_or_zero(slots, objects), slots))));
    out += '\n';
    put_line(out, fmt::format("{:<14} {:>10} {:>10} {:>10} {:>10}", "Per cache", "Average", "Min",
                              "Max", "Total"));
    put_line(out, std::string(58, '-'));
    put_line(out, per_objects.row("#Objects"));
    put_line(out, per_slabs.row("#Slabs"));
    put_line(out, per_memory.row("Memory"));
    put_line(out, per_used.row("Used"));
    put_line(out, per_loss.row("Loss"));

    const auto &h = s.heap;
    out += "\nHeap\n";
    put_pairs(out, {{"caches", count_text(h.caches)},
                    {"slab_pages", count_text(h.slab_pages)},
                    {"objects_in_use", count_text(h.objects_in_use)},
                    {"object_bytes", format_size(h.object_bytes)},
                    {"free_objects", count_text(h.free_objects)},
                    {"free_object_bytes", format_size(h.free_object_bytes)},
                    {"block_pages", count_text(h.block_pages)},
                    {"free_pages", count_text(h.free_pages)},
                    {"free_resident_pages", count_text(h.free_resident_pages)},
                    {"returned_pages", count_text(h.returned_pages)},
                    {"reserved_bytes", format_size(h.reserved_bytes)},
                    {"large_blocks", count_text(h.large_blocks)},
                    {"large_bytes", format_size(h.large_bytes)},
                    {"kept_blocks", count_text(h.kept_blocks)},
                    {"kept_bytes", format_size(h.kept_bytes)},
                    {"errors", count_text(h.errors)},
                    {"refusals", h.refusals ? count_text(*h.refusals) : std::string("-")}});
    const auto &p = s.pages;
    out += fmt::format("\nPage allocator ({}-byte pages, {} node{})\n", s.page_size, p.nodes.size(),
                       p.nodes.size() == 1 ? "" : "s");
    put_pairs(out, {{"in_use", count_text(p.in_use)},
                    {"in_pcp", count_text(p.in_pcp)},
                    {"free_pages", count_text(p.free_pages)},
                    {"free_resident", count_text(p.free_resident)},
                    {"returned", count_text(p.returned)},
                    {"resident", count_text(p.resident)},
                    {"reserved_bytes", format_size(p.reserved_bytes)},
                    {"chunks", count_text(p.chunks)},
                    {"errors", count_text(p.errors)}});
    const auto &sl = s.slots;
    out += fmt::format("\nSlots: mode {}, rseq {}\n", one_line(sl.mode, 16), one_line(sl.rseq, 16));
    if (!sl.why.empty()) put_line(out, fmt::format("  {}", one_line(sl.why)));
    put_pairs(out, {{"cpu_slots", count_text(sl.cpu_slots)},
                    {"thread_slots", count_text(sl.thread_slots)},
                    {"threads_owning", count_text(sl.threads_owning)},
                    {"restarts", count_text(sl.restarts)},
                    {"busy", count_text(sl.busy)},
                    {"shared_holds", count_text(sl.shared_holds)},
                    {"cpu_drains", count_text(sl.cpu_drains)}});
    return out;
}

std::string cache_report(const snapshot &s, const cache_stats &c) {
    const uint64_t slab = slab_bytes(s, c), space = space_bytes(s, c), used = used_bytes(c);
    const uint64_t slot_loss = sub_or_zero(c.slot_size, c.object_size);
    auto debug = [&](char letter) {
        return c.flags.find(letter) != std::string::npos ? "On" : "Off";
    };
    std::string out;
    put_line(out, fmt::format("Slabcache: {}  Design: {}  Order: {}  Objects: {}  Flags: {}",
                              shown_name(c.name), one_line(c.design, 8), c.order, c.active_objects,
                              c.flags.empty() ? "-" : one_line(c.flags, 16)));
    if (c.design == "slob")
        put_line(out,
                 "SLOB: the activity and counters are the arena's, shared by every SLOB cache");
    out += '\n';
    put_line(out, fmt::format("{:<19}{:<19}{:<23}{}", "Sizes (bytes)", "Slabs", "Debug", "Memory"));
    put_line(out, std::string(78, '-'));
    const std::string rows[6][4] = {
        {fmt::format("Object : {:>8}", c.object_size), fmt::format("Total  : {:>8}", c.slabs),
         fmt::format("Sanity checks : {:<3}", debug('F')), fmt::format("Total : {:>10}", space)},
        {fmt::format("SlabObj: {:>8}", c.slot_size), fmt::format("Active : {:>8}", c.active_slabs),
         fmt::format("Red zones     : {:<3}", debug('Z')), fmt::format("Used  : {:>10}", used)},
        {fmt::format("SlabSiz: {:>8}", slab), fmt::format("Objects: {:>8}", c.objects),
         fmt::format("Poisoning     : {:<3}", debug('P')),
         fmt::format("Loss  : {:>10}", sub_or_zero(space, used))},
        {fmt::format("Loss   : {:>8}", slot_loss), fmt::format("In use : {:>8}", c.active_objects),
         fmt::format("Tracking      : {:<3}", debug('U')),
         fmt::format("Lalig : {:>10}", mul_saturating(slot_loss, c.active_objects))},
        {fmt::format("Align  : {:>8}", c.align), fmt::format("Queued : {:>8}", c.queued_objects),
         fmt::format("Tracing       : {:<3}", debug('T')),
         fmt::format("Lpadd : {:>10}", sub_or_zero(space, mul_saturating(c.slot_size, c.objects)))},
        {fmt::format("O/S    : {:>8}", c.objects_per_slab),
         fmt::format("Shared : {:>8}", c.shared_avail), std::string(), std::string()},
    };
    for (const auto &r : rows)
        put_line(out, fmt::format("{:<19}{:<19}{:<23}{}", r[0], r[1], r[2], r[3]));

    out += "\nTunables\n";
    for (const auto &t : c.tunables)
        put_line(out, fmt::format("  {:<24} {:>12}", one_line(t.name, 40), t.value));
    put_line(out, fmt::format("  {:<24} {:>4} {:>4} {:>4}  (limit batchcount sharedfactor)",
                              "/proc/slabinfo columns", c.slabinfo_tunables[0],
                              c.slabinfo_tunables[1], c.slabinfo_tunables[2]));

    out += fmt::format("\nCounters ({})\n", one_line(c.design, 8));
    if (c.counters.empty()) put_line(out, "  (none)");
    for (const auto &k : c.counters)
        put_line(out, fmt::format("  {:<32} {:>14}", one_line(k.name, 40), k.value));

    const auto &a = c.activity;
    const uint64_t alloc_fast = sub_or_zero(a.allocs, a.alloc_slow);
    const uint64_t free_fast = sub_or_zero(a.frees, a.free_slow);
    out += '\n';
    put_line(out, fmt::format("{:<10} {:>14} {:>14} {:>5} {:>5}", "Activity", "Alloc", "Free",
                              "%Al", "%Fr"));
    put_line(out, fmt::format("{:<10} {:>14} {:>14} {:>5} {:>5}", "Fastpath", alloc_fast, free_fast,
                              percent_text(percent(alloc_fast, a.allocs)),
                              percent_text(percent(free_fast, a.frees))));
    put_line(out, fmt::format("{:<10} {:>14} {:>14} {:>5} {:>5}", "Slowpath", a.alloc_slow,
                              a.free_slow, percent_text(percent(a.alloc_slow, a.allocs)),
                              percent_text(percent(a.free_slow, a.frees))));
    put_line(out, fmt::format("{:<10} {:>14} {:>14}", "Total", a.allocs, a.frees));
    return out;
}

std::string buddy_view(const snapshot &s) {
    const auto &p = s.pages;
    size_t orders = 0;
    for (const auto &n : p.nodes) orders = std::max(orders, n.free_blocks.size());
    std::string out;
    put_line(out,
             fmt::format("Free blocks of 2^order {}-byte pages, orders 0..{} (as /proc/buddyinfo)",
                         s.page_size, orders ? orders - 1 : 0));
    for (const auto &n : p.nodes) {
        std::string line = fmt::format("Node {}, slabkit ", n.node);
        for (uint64_t blocks : n.free_blocks) line += fmt::format(" {:>6}", blocks);
        put_line(out, line);
        put_line(out, fmt::format("        free {} ({} resident), in use {}, in pcp {}, usable {}, "
                                  "chunks {}, returned {}, decommits {}",
                                  n.free_pages, n.free_resident, n.in_use, n.in_pcp, n.usable_pages,
                                  n.chunks, n.returned, n.decommits));
    }
    if (p.nodes.empty()) put_line(out, "(no node)");
    put_line(out,
             fmt::format("All nodes: in use {}, in pcp {}, free {} ({} resident), returned {}, "
                         "resident {}, reserved {}, chunks {}, errors {}",
                         p.in_use, p.in_pcp, p.free_pages, p.free_resident, p.returned, p.resident,
                         format_size(p.reserved_bytes), p.chunks, p.errors));
    return out;
}

std::string validate_view(pid_t pid,
                          const std::vector<std::pair<std::string, validate_result>> &results) {
    std::string out;
    for (const auto &[name, r] : results) {
        const std::string what = name.empty() ? fmt::format("process {}", pid) : shown_name(name);
        std::string line = fmt::format("{}: {} cache{} checked, ", what, r.caches_checked,
                                       r.caches_checked == 1 ? "" : "s");
        line += fmt::format("{} problem{}", r.problems, r.problems == 1 ? "" : "s");
        if (r.copies > 1 && r.problems)
            line += " (found again in a second copy of the process)";
        else if (r.copies > 1)
            line += fmt::format(" (a first copy of the process found {}, a second none: a list "
                                "was being changed when the first was made)",
                                r.first_copy_problems);
        put_line(out, line);
        size_t start = 0;
        while (start < r.report.size()) {
            size_t end = std::min(r.report.find('\n', start), r.report.size());
            put_line(out,
                     "  " + one_line(std::string_view(r.report).substr(start, end - start), 400));
            start = end + 1;
        }
    }
    return out;
}

std::string shrink_view(const std::vector<shrink_result> &results) {
    std::vector<const shrunk_cache *> rows;
    size_t w = 4;
    for (const auto &r : results) {
        for (const auto &c : r.caches) {
            rows.push_back(&c);
            w = std::max(w, shown_name(c.name).size());
        }
    }
    w = std::min<size_t>(w, 64);
    std::string out;
    put_line(out, fmt::format("{:<{}} {:>12} {:>12} {:>8}", "Name", w, "Pages before",
                              "Pages after", "Freed"));
    uint64_t before = 0, after = 0;
    for (const auto *c : rows) {
        put_line(out,
                 fmt::format("{:<{}} {:>12} {:>12} {:>8}", shown_name(c->name), w, c->pages_before,
                             c->pages_after, sub_or_zero(c->pages_before, c->pages_after)));
        before = add_saturating(before, c->pages_before);
        after = add_saturating(after, c->pages_after);
    }
    put_line(out, fmt::format("{:<{}} {:>12} {:>12} {:>8}", "Total", w, before, after,
                              sub_or_zero(before, after)));
    return out;
}

namespace {
// A CPU mask as the kernel prints a list: "0-1,3". Bit 63 stands for CPU 63 and up.
std::string cpu_list(uint64_t mask) {
    std::string out;
    for (unsigned c = 0; c < 64;) {
        if (!(mask >> c & 1)) {
            ++c;
            continue;
        }
        unsigned e = c;
        while (e + 1 < 64 && (mask >> (e + 1) & 1)) ++e;
        if (!out.empty()) out += ',';
        out += e == c ? std::to_string(c) : fmt::format("{}-{}", c, e);
        c = e + 1;
    }
    if (mask >> 63 & 1) out += '+';
    return out.empty() ? "-" : out;
}
// "function+0xoff (module)" of the process's "0x... function+0xoff (module)".
std::string site_text(const std::string &site) {
    if (site.starts_with("0x")) {
        const size_t sp = site.find(' ');
        if (sp != std::string::npos) return one_line(site.substr(sp + 1), 100);
    }
    return one_line(site, 100);
}
} // namespace

std::string traces_view(const std::vector<cache_traces> &caches) {
    std::string out;
    if (caches.empty()) {
        put_line(out, "no cache keeps owner tracks (SLABKIT_DEBUG=U, or a cache made with "
                      "SLABKIT_STORE_USER)");
        return out;
    }
    for (const auto &c : caches) {
        for (const auto *side : {&c.alloc, &c.free}) {
            const bool alloc = side == &c.alloc;
            if (!alloc && !c.free_sites_kept) {
                put_line(out, fmt::format("{}: free sites are not kept (SLOB: a free slot's "
                                          "bytes are SLOB's)",
                                          shown_name(c.name)));
                continue;
            }
            put_line(out, fmt::format("{}: {} objects {}, from {} sites{}", shown_name(c.name),
                                      side->objects, alloc ? "in use" : "free", side->sites.size(),
                                      side->dropped ? fmt::format(" ({} objects of more sites "
                                                                  "not shown)",
                                                                  side->dropped)
                                                    : std::string()));
            for (const auto &e : side->sites) {
                const std::string tids = e.tid_min == e.tid_max
                                             ? std::to_string(e.tid_min)
                                             : fmt::format("{}-{}", e.tid_min, e.tid_max);
                put_line(out, fmt::format("{:>8} {} age={}/{}/{}ms tid={} cpus={}", e.count,
                                          site_text(e.site), e.age_min_ms, e.age_avg_ms,
                                          e.age_max_ms, tids, cpu_list(e.cpus)));
            }
        }
    }
    return out;
}

std::string leaks_view(pid_t pid, const leak_report &r) {
    std::string out;
    if (r.debug_caches == 0) {
        put_line(out, fmt::format("process {}: no debug cache to scan (the scan finds leaks among "
                                  "the objects of caches with SLABKIT_DEBUG)",
                                  pid));
        return out;
    }
    put_line(out,
             fmt::format("process {}: {} of {} objects of {} debug caches referenced by "
                         "nothing ({} bytes); {} bytes of roots scanned{}",
                         pid, r.leaked, r.objects, r.debug_caches, r.leaked_bytes, r.root_bytes,
                         r.roots_listed ? "" : " (the mappings could not be listed)"));
    put_line(out, "(conservative, as kmemleak: a word that looks like a pointer keeps an object)");
    for (const auto &g : r.groups)
        put_line(out,
                 fmt::format("{:>8} objects {:>10} bytes  {}  {} age={}-{}ms", g.count, g.bytes,
                             shown_name(g.cache), site_text(g.site), g.age_min_ms, g.age_max_ms));
    if (r.groups_dropped)
        put_line(out, fmt::format("{} objects of more groups not shown", r.groups_dropped));
    return out;
}

std::string failslab_view(pid_t pid, const failslab_state &st) {
    std::string out;
    if (!st.armed) {
        put_line(out, fmt::format("process {}: fault injection is not armed", pid));
        return out;
    }
    put_line(out, fmt::format("process {}: fault injection armed: probability {}%, interval {}, "
                              "times {}, space {}, caches {}",
                              pid, st.probability, st.interval,
                              st.times < 0 ? std::string("no limit") : std::to_string(st.times),
                              st.space, st.caches.empty() ? "all" : st.caches));
    put_line(out, fmt::format("failed so far: {} allocations ({} of blocks not of a cache)",
                              st.failures, st.block_failures));
    return out;
}

std::string process_list_view(const std::vector<segment_entry> &entries, uint64_t now_ns) {
    if (entries.empty()) return "no process publishes statistics now\n";
    std::string out;
    put_line(out, fmt::format("{:>8}  {:<16} {:<22} {:>8} {:>12} {:>10}", "PID", "Program", "State",
                              "Period", "Published", "Snapshots"));
    bool any_stale = false;
    for (const auto &e : entries) {
        std::string period = "-", published = "-", count = "-";
        if (e.header) {
            period = fmt::format("{} ms", e.header->period_ms);
            published =
                e.header->publish_count ? age_text(e.header->published_ns, now_ns) : "never";
            count = fmt::format("{}", e.header->publish_count);
        }
        put_line(out, fmt::format("{:>8}  {:<16} {:<22} {:>8} {:>12} {:>10}", e.pid,
                                  e.program.empty() ? "?" : e.program, e.status, period, published,
                                  count));
        any_stale = any_stale || e.stale;
    }
    if (any_stale) {
        std::string files;
        for (const auto &e : entries) {
            if (e.stale) files += " " + e.path;
        }
        put_line(out,
                 fmt::format("stale segments (their process is gone) may be removed: rm{}", files));
    }
    return out;
}

std::string watch_title(const snapshot &s, double period_s, uint64_t now_ns) {
    std::string line = fmt::format("slabinfo: process {} ({}), design {}, every {:g} s; snapshot ",
                                   s.pid, one_line(s.program, 40), one_line(s.design, 8), period_s);
    if (s.live) line += fmt::format("{} ", s.live->publish_count);
    line += fmt::format("taken {}", age_text(s.time_ns, now_ns));
    return line + "\n";
}

} // namespace slabinfo
