// debug.cpp - the debug layer: SLABKIT_DEBUG's grammar, the debug slot layout, the checks at
// alloc, free and validation, the quarantine, and the reports.
#include "core/debug.hpp"

#include "base/bits.hpp"
#include "base/glob.hpp"
#include "core/leak_scan.hpp"

#include "core/hardening.hpp"

#include "core/report.hpp"
#include "page/page.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>
#include <cstring>

namespace slabkit::debug {

namespace {

// ---- the specification ------------------------------------------------------------------------
//
// slub_debug's grammar: groups separated by ';', each "<letters>[,<name>[,<name>...]]". Letters
// F Z P U T, or '-' for none; a group without names applies to every cache no later group names.
// An empty value or "1" is FZPU for every cache. A name may hold '*' (any run of characters).

constexpr unsigned kMaxGroups = 16;
constexpr unsigned kMaxNames = 32;
constexpr size_t kTextMax = 1024;

struct group {
    unsigned flags = 0;
    unsigned first_name = 0, nr_names = 0;
};
struct spec {
    bool any = false; // some group gives flags
    unsigned nr_groups = 0;
    group groups[kMaxGroups] = {};
    unsigned nr_names = 0;
    const char *names[kMaxNames] = {};
    bool matched[kMaxNames] = {};
    char text[kTextMax] = {};
};

// Constant-initialised, every one: the malloc replacement may use them before the library's
// own static initialisers run, which would otherwise reset them.
constinit spec g_spec;
constinit platform::mutex g_spec_lock;
constinit std::atomic<bool> g_spec_read{false};

bool parse_letters(const char *s, size_t n, unsigned *out, char *bad) {
    unsigned f = 0;
    for (size_t i = 0; i < n; ++i) {
        switch (s[i]) {
        case 'F':
        case 'f':
            f |= kConsistencyChecks;
            break;
        case 'Z':
        case 'z':
            f |= kRedZone;
            break;
        case 'P':
        case 'p':
            f |= kPoison;
            break;
        case 'U':
        case 'u':
            f |= kStoreUser;
            break;
        case 'T':
        case 't':
            f |= kTrace;
            break;
        case '-':
            break;
        default:
            *bad = s[i];
            return false;
        }
    }
    *out = f;
    return true;
}

// Parses text into *out (whose text buffer then holds the names); false with *why set.
bool parse_spec(const char *text, spec *out, const char **why) {
    static char message[160];
    *out = spec{};
    if (strlen(text) >= kTextMax) {
        *why = "the value is longer than 1023 characters";
        return false;
    }
    if (text[0] == '\0' || strcmp(text, "1") == 0) {
        out->any = true;
        out->nr_groups = 1;
        out->groups[0] = group{kConsistencyChecks | kRedZone | kPoison | kStoreUser, 0, 0};
        return true;
    }
    strcpy(out->text, text);
    char *p = out->text;
    while (*p) {
        if (out->nr_groups == kMaxGroups) {
            *why = "more than 16 ';'-separated groups";
            return false;
        }
        char *end = strchr(p, ';');
        if (end) *end = '\0';
        char *comma = strchr(p, ',');
        size_t letters = comma ? static_cast<size_t>(comma - p) : strlen(p);
        group g{0, out->nr_names, 0};
        char bad = 0;
        if (letters == 0) {
            snprintf(message, sizeof message, "the group '%.60s' has no letters (F Z P U T, or -)",
                     p);
            *why = message;
            return false;
        }
        if (!parse_letters(p, letters, &g.flags, &bad)) {
            snprintf(message, sizeof message,
                     "unknown letter '%c' (letters: F sanity checks, Z red zones, P poisoning, "
                     "U owner tracking, T trace; - for none)",
                     bad);
            *why = message;
            return false;
        }
        for (char *name = comma; name;) {
            *name++ = '\0';
            char *next = strchr(name, ',');
            if (next) *next = '\0';
            if (*name == '\0') {
                *why = "an empty cache name (two commas, or a comma at the end of a group)";
                return false;
            }
            if (strlen(name) >= kNameMax) {
                snprintf(message, sizeof message,
                         "the cache name '%.40s' is longer than 31 characters", name);
                *why = message;
                return false;
            }
            if (out->nr_names == kMaxNames) {
                *why = "more than 32 cache names";
                return false;
            }
            out->names[out->nr_names++] = name;
            ++g.nr_names;
            name = next;
        }
        out->any |= g.flags != 0;
        out->groups[out->nr_groups++] = g;
        if (!end) break;
        p = end + 1;
    }
    return true;
}

void read_spec_once() {
    if (g_spec_read.load(std::memory_order_acquire)) return;
    platform::lock_guard guard(g_spec_lock);
    if (g_spec_read.load(std::memory_order_relaxed)) return;
    const char *v = platform::env("SLABKIT_DEBUG");
    if (v) {
        const char *why = nullptr;
        if (!parse_spec(v, &g_spec, &why))
            platform::exit_with_error(1, "slabkit: SLABKIT_DEBUG=%s: %s\n", v, why);
    }
    g_spec_read.store(true, std::memory_order_release);
}

// ---- settings ---------------------------------------------------------------------------------

constinit std::atomic<uint64_t> g_quarantine_budget{~0ull}; // ~0: not read yet
uint64_t quarantine_budget() {
    uint64_t b = g_quarantine_budget.load(std::memory_order_relaxed);
    if (SLABKIT_LIKELY(b != ~0ull)) return b;
    b = platform::env_uint("SLABKIT_QUARANTINE_MB", 16, 0, 1u << 20) << 20;
    g_quarantine_budget.store(b, std::memory_order_relaxed);
    return b;
}

constinit std::atomic<uint64_t> g_errors{0};

// ---- reports ------------------------------------------------------------------------------------

// A report, built in a buffer and written at once.
struct text {
    char buf[8192];
    size_t len = 0;
    void add(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        if (len >= sizeof buf - 1) return;
        va_list ap;
        va_start(ap, fmt);
        int n = vsnprintf(buf + len, sizeof buf - len, fmt, ap);
        va_end(ap);
        if (n > 0)
            len += static_cast<size_t>(n) < sizeof buf - len ? static_cast<size_t>(n)
                                                             : sizeof buf - len - 1;
    }
};

// The metadata words after the right red zone: the state, and with red zones the size asked
// for (request_of); the tracks follow them.
size_t meta_words_bytes(const cache *c) {
    return (c->flags & kRedZone) ? 16 : 8;
}
track *tracks_of(const cache *c, char *slot) {
    return reinterpret_cast<track *>(slot + c->debug_meta + meta_words_bytes(c));
}
uint64_t &state_of(const cache *c, char *slot) {
    return *reinterpret_cast<uint64_t *>(slot + c->debug_meta);
}
// With red zones: the bytes of the object its caller asked for (object_size unless kmalloc or
// the malloc family said less, set_request); the rest up to object_size is red zone too.
// Its top byte holds the origin (set_origin); size_asked() is the rest.
uint64_t &request_of(const cache *c, char *slot) {
    return *reinterpret_cast<uint64_t *>(slot + c->debug_meta + 8);
}
constexpr unsigned kOriginShift = 56;
uint64_t size_asked(const cache *c, char *slot) {
    return request_of(c, slot) & ((uint64_t{1} << kOriginShift) - 1);
}
origin origin_of(const cache *c, char *slot) {
    return static_cast<origin>(request_of(c, slot) >> kOriginShift);
}
} // namespace

uint64_t *state_word(const cache *c, void *slot) {
    return &state_of(c, static_cast<char *>(slot));
}
const track *owner_tracks(const cache *c, void *slot) {
    return (c->flags & kStoreUser) ? tracks_of(c, static_cast<char *>(slot)) : nullptr;
}

const char *mismatched_delete(const char *op, origin o) {
    if (!op || strncmp(op, "operator delete", 15) != 0) return nullptr;
    const bool array_delete = op[15] == '[';
    if (array_delete && o == origin::new_object)
        return "operator delete[] of a block made by operator new (not new[]): mismatched delete";
    if (!array_delete && o == origin::new_array)
        return "operator delete of a block made by operator new[] (needs delete[]): mismatched "
               "delete";
    return nullptr;
}

namespace {

void add_track(text &t, const char *what, const track &tr) {
    if (tr.tid == 0) {
        t.add("  %s: not recorded\n", what);
        return;
    }
    t.add("  %s by thread %u on CPU %u at %llu ms:\n", what, tr.tid, tr.cpu,
          static_cast<unsigned long long>(tr.when_ms));
    for (unsigned i = 0; i < kTrackDepth && tr.addrs[i]; ++i) {
        char where[256];
        platform::describe_address(tr.addrs[i], where, sizeof where);
        t.add("    #%u %s\n", i, where);
    }
}

void add_bytes(text &t, const char *label, const uint8_t *p, size_t n) {
    t.add("  %-9s", label);
    for (size_t i = 0; i < n; ++i) t.add(" %02x", p[i]);
    t.add("\n");
}

// Ends a report: counts it, writes it, then aborts unless the process asked to go on.
void finish(text &t) {
    g_errors.fetch_add(1, std::memory_order_relaxed);
    note_slab_error();
    t.add("==============================================================================\n");
    platform::write_stderr(t.buf, t.len);
    // The hook gets the report from its "BUG" line on.
    const char *bug = strstr(t.buf, "BUG ");
    call_error_hook(bug ? bug : t.buf);
    if (!continue_on_error())
        platform::fatal("slabkit: aborting on heap corruption (SLABKIT_CONTINUE_ON_ERROR=1 "
                        "reports and goes on)\n");
}

void begin(text &t, const cache *c, const char *kind) {
    t.add("==============================================================================\n");
    t.add("slabkit: BUG %s (%s): %s\n", c->name, design_name(c->kind), kind);
    t.add("------------------------------------------------------------------------------\n");
}

// The report of one object: which bytes are wrong (`bad` bytes from `off` in the slot, against
// `expected`), and its history.
void report_object(const cache *c, char *slot, const char *kind, const char *where, size_t off,
                   size_t bad_len, uint8_t expected, const char *op) {
    text t;
    begin(t, c, kind);
    char *obj = slot + c->debug_offset;
    t.add("  object %p (%u bytes) in slot %p%s%s\n", static_cast<void *>(obj), c->object_size,
          static_cast<void *>(slot), op ? ", found by " : "", op ? op : "");
    if (where) {
        long rel = static_cast<long>(off) - static_cast<long>(c->debug_offset);
        t.add("  first bad byte at object offset %ld (%s), %zu byte%s wrong\n", rel, where, bad_len,
              bad_len == 1 ? "" : "s");
        size_t from = off;
        size_t n = bad_len < 16 ? bad_len : 16;
        add_bytes(t, "found:", reinterpret_cast<uint8_t *>(slot + from), n);
        uint8_t want[16];
        memset(want, expected, sizeof want);
        add_bytes(t, "expected:", want, n);
    }
    if (c->flags & kStoreUser) {
        track *tr = tracks_of(c, slot);
        add_track(t, "allocated", tr[0]);
        add_track(t, "freed", tr[1]);
    }
    finish(t);
}

// The first byte of [from, from + n) of slot that is not `value`: its offset, or n when none;
// *bad_len counts the wrong bytes from there to the end of the run.
size_t find_bad(const char *slot, size_t from, size_t n, uint8_t value, size_t *bad_len) {
    const uint8_t *p = reinterpret_cast<const uint8_t *>(slot + from);
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != value) {
            size_t j = i;
            while (j < n && p[j] != value) ++j;
            *bad_len = j - i;
            return from + i;
        }
    }
    return SIZE_MAX;
}

// ---- slot contents
// --------------------------------------------------------------------------------

size_t left_zone_from() {
    return 8; // after the design's word
}

void set_red(const cache *c, char *slot, uint8_t v) {
    if (!(c->flags & kRedZone)) return;
    memset(slot + left_zone_from(), v, c->debug_offset - left_zone_from());
    size_t end = c->debug_offset + c->object_size;
    memset(slot + end, v, c->debug_meta - end);
}

// Checks both red zones against v; reports (naming op) and repairs them on a mismatch. False
// when one was wrong.
bool check_red(const cache *c, char *slot, uint8_t v, const char *op, const char *kind) {
    if (!(c->flags & kRedZone)) return true;
    size_t len = 0;
    size_t left = find_bad(slot, left_zone_from(), c->debug_offset - left_zone_from(), v, &len);
    if (left != SIZE_MAX) {
        report_object(c, slot, kind ? kind : "red zone before the object overwritten (underflow)",
                      "left red zone", left, len, v, op);
        set_red(c, slot, v);
        return false;
    }
    // An allocated object asked for less than its class: the slack after the size asked for is
    // red zone too (the kernel's SLUB does the same for kmalloc caches since 6.2, orig_size).
    if (v == kRedActive) {
        const uint64_t asked = size_asked(c, slot);
        if (asked < c->object_size) {
            const size_t from = c->debug_offset + asked;
            size_t bad = find_bad(slot, from, c->object_size - asked, v, &len);
            if (bad != SIZE_MAX) {
                report_object(c, slot,
                              kind ? kind : "red zone after the object overwritten (overflow)",
                              "past the size asked for", bad, len, v, op);
                memset(slot + from, v, c->object_size - asked);
                return false;
            }
        }
    }
    size_t end = c->debug_offset + c->object_size;
    size_t right = find_bad(slot, end, c->debug_meta - end, v, &len);
    if (right != SIZE_MAX) {
        report_object(c, slot, kind ? kind : "red zone after the object overwritten (overflow)",
                      "right red zone", right, len, v, op);
        set_red(c, slot, v);
        return false;
    }
    return true;
}

// SLABKIT_INIT (core/hardening.hpp): debug caches zero new objects instead of filling them with
// 0x5a, and freed ones instead of poisoning them (their zeros are then what the write-after-free
// checks expect). Caches with a constructor keep their constructed state.
using hardening::init_mode;
constexpr unsigned kInitAlloc = hardening::kInitOnAlloc;
constexpr unsigned kInitFree = hardening::kInitOnFree;

// Whether c's free objects hold a known pattern (poison, or zeros with SLABKIT_INIT=free).
bool fills_free(const cache *c) {
    return (c->flags & kPoison) || (!c->ctor && (init_mode() & kInitFree));
}
bool zero_free(const cache *c) {
    return !c->ctor && (init_mode() & kInitFree);
}

void poison(const cache *c, char *slot) {
    char *obj = slot + c->debug_offset;
    const bool zero = zero_free(c);
    memset(obj, zero ? 0 : kPoisonFree, c->object_size - 1);
    obj[c->object_size - 1] = static_cast<char>(zero ? 0 : kPoisonEnd);
}

bool check_poison(const cache *c, char *slot, const char *op) {
    if (!fills_free(c)) return true;
    const bool zero = zero_free(c);
    const uint8_t body = zero ? 0 : kPoisonFree, last = zero ? 0 : kPoisonEnd;
    size_t len = 0;
    size_t bad = find_bad(slot, c->debug_offset, c->object_size - 1, body, &len);
    uint8_t expected = body;
    if (bad == SIZE_MAX &&
        static_cast<uint8_t>(slot[c->debug_offset + c->object_size - 1]) != last) {
        bad = c->debug_offset + c->object_size - 1;
        len = 1;
        expected = last;
    }
    if (bad == SIZE_MAX) return true;
    report_object(c, slot, "write after free (poison overwritten)", "the freed object", bad, len,
                  expected, op);
    poison(c, slot);
    return false;
}

// Out of line, so that the frames it skips are the same in every build: itself only. The next
// is the debug hook's (alloc or free); the design's slow path and the API's entry are usually
// tail calls, with no frame; then come the caller's.
SLABKIT_NOINLINE void record(const cache *c, char *slot, unsigned which) {
    if (!(c->flags & kStoreUser)) return;
    track &tr = tracks_of(c, slot)[which];
    memset(tr.addrs, 0, sizeof tr.addrs);
    platform::capture_stack(tr.addrs, kTrackDepth, 1);
    tr.tid = platform::thread_id();
    tr.cpu = platform::current_cpu();
    tr.when_ms = platform::now_coarse_ms();
}

void trace(const cache *c, const char *what, const void *obj) {
    if (!(c->flags & kTrace)) return;
    uintptr_t at[2] = {0, 0};
    platform::capture_stack(at, 2, 1);
    char where[256];
    platform::describe_address(at[1] ? at[1] : at[0], where, sizeof where);
    report("TRACE %s %s %p (%u bytes) from %s", c->name, what, obj, c->object_size, where);
}

// Checks a free slot handed out by the design; repairs what it reports.
void check_free_slot(const cache *c, char *slot) {
    uint64_t st = state_of(c, slot);
    if (st != kStateFree) {
        report_object(c, slot,
                      st == kStateAllocated
                          ? "an allocated object handed out again (a corrupted free list?)"
                          : "object metadata overwritten (state word)",
                      nullptr, 0, 0, 0, "alloc");
        return;
    }
    check_red(c, slot, kRedInactive, "alloc", nullptr);
    check_poison(c, slot, "alloc");
}

// ---- the quarantine ---------------------------------------------------------------------------

constexpr unsigned kQuarantineMax = 1u << 16; // entries; a power of two

// A debug cache's slot (bytes: the cache's slot size), or a design's own kmalloc block (a
// non-debug cache c, whose debug_free gives it back; bytes: the block's).
struct quarantined {
    cache *c = nullptr;
    char *slot = nullptr;
    size_t bytes = 0;
};
struct quarantine {
    platform::mutex lock;
    quarantined ring[kQuarantineMax] = {};
    uint32_t head = 0, count = 0; // oldest at head
    uint64_t bytes = 0;
};
constinit quarantine g_quarantine;

// Gives one slot leaving the quarantine back to its design, checked for writes after free (a
// block of a design's own kmalloc: the design checks it, block_released).
void release(const quarantined &e) {
    if (e.c->debug) check_poison(e.c, e.slot, "the quarantine's release");
    e.c->debug_free(e.c, e.slot);
}

// Pushes (c, slot) of `bytes`; gives back what the budget no longer holds, oldest first.
void quarantine_push(cache *c, char *slot, size_t bytes) {
    const uint64_t budget = quarantine_budget();
    if (budget == 0) return release(quarantined{c, slot, bytes});
    quarantine &q = g_quarantine;
    for (;;) {
        quarantined out[16];
        unsigned n = 0;
        bool pushed = false;
        {
            platform::lock_guard guard(q.lock);
            while (n < 16 && q.count && (q.count == kQuarantineMax || q.bytes + bytes > budget)) {
                out[n++] = q.ring[q.head];
                q.bytes -= out[n - 1].bytes;
                q.head = (q.head + 1) & (kQuarantineMax - 1);
                --q.count;
            }
            if (q.count < kQuarantineMax && q.bytes + bytes <= budget) {
                q.ring[(q.head + q.count) & (kQuarantineMax - 1)] = quarantined{c, slot, bytes};
                ++q.count;
                q.bytes += bytes;
                pushed = true;
            }
        }
        // Outside the lock: the designs take their own.
        for (unsigned i = 0; i < n; ++i) release(out[i]);
        if (pushed) return;
        if (n == 0) return release(quarantined{c, slot, bytes}); // larger than the whole budget
    }
}

} // namespace

// ---- public -------------------------------------------------------------------------------------

unsigned spec_flags(const char *name) {
    read_spec_once();
    if (!g_spec.any) return 0;
    platform::lock_guard guard(g_spec_lock);
    const spec &sp = g_spec;
    int chosen = -1;
    for (unsigned gi = 0; gi < sp.nr_groups; ++gi) {
        const group &g = sp.groups[gi];
        if (g.nr_names == 0) {
            if (chosen < 0 || sp.groups[chosen].nr_names == 0) chosen = static_cast<int>(gi);
            continue;
        }
        for (unsigned k = 0; k < g.nr_names; ++k) {
            if (glob_match(sp.names[g.first_name + k], name)) {
                g_spec.matched[g.first_name + k] = true;
                chosen = static_cast<int>(gi);
            }
        }
    }
    return chosen < 0 ? 0 : sp.groups[chosen].flags;
}

bool spec_any() {
    read_spec_once();
    return g_spec.any;
}

bool set_spec(const char *text, const char **why) {
    read_spec_once();
    static constinit spec parsed; // under g_spec_lock
    platform::lock_guard guard(g_spec_lock);
    if (!text) text = "-";
    if (!parse_spec(text, &parsed, why)) return false;
    // The names point into the text buffer: fix them up as the copy moves it.
    g_spec = parsed;
    for (unsigned i = 0; i < g_spec.nr_names; ++i)
        g_spec.names[i] = g_spec.text + (parsed.names[i] - parsed.text);
    return true;
}

void unmatched_names(char *buf, size_t size) {
    platform::lock_guard guard(g_spec_lock);
    size_t len = 0;
    buf[0] = '\0';
    for (unsigned i = 0; i < g_spec.nr_names; ++i) {
        if (g_spec.matched[i]) continue;
        int n = snprintf(buf + len, size - len, "%s%s", len ? ", " : "", g_spec.names[i]);
        if (n < 0 || static_cast<size_t>(n) >= size - len) break;
        len += static_cast<size_t>(n);
    }
}

void compute_layout(cache *c, size_t align) {
    if (c->ctor) c->flags &= ~static_cast<unsigned>(kPoison); // constructed state survives free
    c->debug = true;
    // Red zones of 32 bytes at least on each side, so that an overflow or underflow of 32 bytes
    // (a struct's size, a small memcpy past the end) lands in one rather than jumping it into
    // metadata nothing checks (the tracks) or into the neighbour's object.
    const size_t left = (c->flags & kRedZone) ? kRedZoneMin : 0;
    const size_t off = align_up(8 + left, align);
    const size_t end = off + c->object_size;
    size_t meta = align_up(end, 8);
    if (c->flags & kRedZone) meta += kRedZoneMin;
    size_t tail = meta + meta_words_bytes(c) + ((c->flags & kStoreUser) ? 2 * sizeof(track) : 0);
    c->offset = 0; // the design's word
    c->debug_offset = static_cast<uint32_t>(off);
    c->debug_meta = static_cast<uint32_t>(meta);
    c->inuse = static_cast<uint32_t>(meta);
    c->size = static_cast<uint32_t>(align_up(tail, align));
}

void init_slab_objects(cache *c, char *first_slot, uint32_t nr) {
    for (uint32_t i = 0; i < nr; ++i) {
        char *slot = first_slot + size_t{i} * c->size;
        state_of(c, slot) = kStateFree;
        set_red(c, slot, kRedInactive);
        if (fills_free(c)) poison(c, slot);
        if (c->flags & kStoreUser) memset(tracks_of(c, slot), 0, 2 * sizeof(track));
    }
}

namespace {
// The design word of a live slot of a debug_fresh cache (SLOB's): the cache's address, scrambled
// so that no pointer-like data of the program reads as one.
uintptr_t slot_tag(const cache *c) {
    return reinterpret_cast<uintptr_t>(c) ^ 0x51ab1eafc0ffee11ull;
}
} // namespace

void *alloc(cache *c, int node, bool zero) {
    char *slot = static_cast<char *>(c->debug_alloc(c, node));
    if (!slot) return nullptr;
    if (c->debug_fresh) {
        // The design reuses free bytes (SLOB): nothing of the slot's free state is kept. The
        // design word carries the cache's tag while the object is out, so that a walk of the
        // shared pages can find it (is_live_slot).
        if (c->flags & kStoreUser) memset(tracks_of(c, slot), 0, 2 * sizeof(track));
        *reinterpret_cast<uintptr_t *>(slot) = slot_tag(c);
    } else {
        check_free_slot(c, slot);
    }
    state_of(c, slot) = kStateAllocated;
    set_red(c, slot, kRedActive);
    if (c->flags & kRedZone) request_of(c, slot) = c->object_size;
    char *obj = slot + c->debug_offset;
    if (zero) {
        memset(obj, 0, c->object_size);
    } else if (c->ctor) {
        if (c->debug_fresh) c->ctor(obj); // constructed at every allocation (SLOB)
    } else if (init_mode() & kInitAlloc) {
        memset(obj, 0, c->object_size);
    } else if (c->flags & kPoison) {
        memset(obj, kPoisonInUse, c->object_size);
    }
    record(c, slot, 0);
    trace(c, "alloc", obj);
    return obj;
}

bool is_object(const cache *c, const page *pg, const void *obj) {
    uintptr_t p = reinterpret_cast<uintptr_t>(obj);
    if (p < c->debug_offset) return false;
    return is_object_start(c, pg, slot_of(c, obj));
}

void set_request(cache *c, void *obj, size_t size) {
    if (!(c->flags & kRedZone)) return;
    char *slot = static_cast<char *>(slot_of(c, obj));
    if (size > c->object_size) size = c->object_size;
    request_of(c, slot) =
        size | (uint64_t{static_cast<uint8_t>(origin_of(c, slot))} << kOriginShift);
    memset(static_cast<char *>(obj) + size, kRedActive, c->object_size - size);
}

void set_origin(cache *c, void *obj, origin o) {
    if (!(c->flags & kRedZone)) return;
    char *slot = static_cast<char *>(slot_of(c, obj));
    request_of(c, slot) = size_asked(c, slot) | (uint64_t{static_cast<uint8_t>(o)} << kOriginShift);
}

size_t usable(const cache *c, void *obj) {
    char *slot = static_cast<char *>(slot_of(c, obj));
    return (c->flags & kRedZone) ? size_asked(c, slot) : c->object_size;
}

bool is_live(const cache *c, const page *pg, const void *obj) {
    return is_object(c, pg, obj) &&
           state_of(c, static_cast<char *>(slot_of(c, obj))) == kStateAllocated;
}

bool report_if_freed(const void *obj, const char *op) {
    page *pg = slab_page_of(obj);
    cache *c = pg ? slab_cache(pg) : nullptr;
    if (!c || !c->debug || !is_object(c, pg, obj)) return false;
    char *slot = static_cast<char *>(slot_of(c, obj));
    if (state_of(c, slot) != kStateFree) return false;
    report_object(c, slot, "use after free (the object was freed)", nullptr, 0, 0, 0, op);
    return true;
}

void free(cache *c, void *obj, const char *op) {
    if (!obj) return;
    char what[256];
    page *pg = slab_page_of(obj);
    const cache *owner = pg ? slab_cache(pg) : nullptr;
    bool ok;
    if (owner == c) {
        ok = is_object(c, pg, obj);
    } else {
        // SLOB's small objects live on pages its arena owns, shared by every cache.
        const uintptr_t in_page = reinterpret_cast<uintptr_t>(obj) & (kPageSize - 1);
        ok = c->debug_fresh && owner && owner->kind == c->kind &&
             reinterpret_cast<uintptr_t>(obj) % c->align == 0 && in_page >= c->debug_offset &&
             in_page - c->debug_offset + c->size <= kPageSize;
    }
    if (!ok) {
        const char *why = diagnose_free(c, obj, what, sizeof what);
        if (owner == c) why = "not an object start of this debug cache (an interior pointer?)";
        return report_bad_free(op, c, obj, why);
    }
    char *slot = static_cast<char *>(slot_of(c, obj));
    uint64_t st = state_of(c, slot);
    if (st == kStateFree) {
        report_object(c, slot, "double free", nullptr, 0, 0, 0, op);
        return; // going on: the object stays where the first free put it
    }
    if (st != kStateAllocated) {
        // An overflow that ran on into the state word broke the red zone first: say so (with
        // the first bad byte) rather than only that the metadata is gone. Only where the slot
        // is known to be one (a slab's layout said so): SLOB's shared pages cannot tell an
        // interior pointer from an object, and a repair of its "red zones" would write into
        // the real object.
        if (c->debug_fresh || check_red(c, slot, kRedActive, op, nullptr))
            report_object(c, slot,
                          "not an object of this cache, or its metadata overwritten (state word)",
                          nullptr, 0, 0, 0, op);
        return;
    }
    // The array form of delete for a block of the plain new, or the reverse (op names the
    // caller: override/new_delete.cpp passes "operator delete" and "operator delete[]").
    if (c->flags & kRedZone) {
        if (const char *why = mismatched_delete(op, origin_of(c, slot))) {
            report_object(c, slot, why, nullptr, 0, 0, 0, op);
            return; // going on: the block is left alone
        }
    }
    check_red(c, slot, kRedActive, op, nullptr);
    record(c, slot, 1);
    trace(c, "free", obj);
    state_of(c, slot) = kStateFree;
    if (c->debug_fresh) *reinterpret_cast<uintptr_t *>(slot) = 0; // no longer c's live object
    set_red(c, slot, kRedInactive);
    if (fills_free(c)) poison(c, slot);
    quarantine_push(c, slot, c->size);
}

// ---- blocks of a design's own kmalloc -----------------------------------------------------------

namespace {
// Records the caller's stack into tr (one of a block's tracks). Out of line, as record().
SLABKIT_NOINLINE void record_block(track *tr) {
    memset(tr->addrs, 0, sizeof tr->addrs);
    platform::capture_stack(tr->addrs, kTrackDepth, 1);
    tr->tid = platform::thread_id();
    tr->cpu = platform::current_cpu();
    tr->when_ms = platform::now_coarse_ms();
}

// The report of a block: its object, and the bytes that are wrong.
void report_block(const cache *c, char *obj, size_t size, const char *kind, const char *where,
                  ptrdiff_t off, size_t bad_len, uint8_t expected, const char *op,
                  const track *tracks) {
    text t;
    begin(t, c, kind);
    t.add("  block %p (%zu bytes)%s%s\n", static_cast<void *>(obj), size, op ? ", found by " : "",
          op ? op : "");
    if (where) {
        t.add("  first bad byte at object offset %td (%s), %zu byte%s wrong\n", off, where, bad_len,
              bad_len == 1 ? "" : "s");
        size_t n = bad_len < 16 ? bad_len : 16;
        add_bytes(t, "found:", reinterpret_cast<uint8_t *>(obj + off), n);
        uint8_t want[16];
        memset(want, expected, sizeof want);
        add_bytes(t, "expected:", want, n);
    }
    if (tracks) {
        add_track(t, "allocated", tracks[0]);
        add_track(t, "freed", tracks[1]);
    }
    finish(t);
}

void fill_freed_block(char *obj, size_t size) {
    const bool zero = init_mode() & kInitFree;
    memset(obj, zero ? 0 : kPoisonFree, size);
    if (size) obj[size - 1] = static_cast<char>(zero ? 0 : kPoisonEnd);
}
} // namespace

void block_alloc(const cache *, char *obj, size_t size, size_t rz, char *left, size_t left_len,
                 bool zero, track *tracks) {
    if (tracks) {
        record_block(&tracks[0]);
        memset(&tracks[1], 0, sizeof(track));
    }
    memset(obj + size, kRedActive, rz);
    memset(left, kRedActive, left_len);
    if (zero || (init_mode() & kInitAlloc))
        memset(obj, 0, size);
    else
        memset(obj, kPoisonInUse, size);
}

void block_free(cache *c, void *block, char *obj, size_t size, size_t rz, char *left,
                size_t left_len, size_t bytes, const char *op, track *tracks) {
    // The red zones first, before anything else runs: an overflow may have run on over other
    // blocks, the C library's among them (the stack capture below uses the loader's data).
    size_t len = 0;
    size_t bad = find_bad(obj, size, rz, kRedActive, &len);
    if (bad != SIZE_MAX) {
        if (tracks) memset(&tracks[1], 0, sizeof(track)); // this free: not recorded yet
        report_block(c, obj, size, "red zone after the object overwritten (overflow)",
                     "right red zone", static_cast<ptrdiff_t>(bad), len, kRedActive, op, tracks);
        memset(obj + size, kRedActive, rz);
    }
    bad = find_bad(left, 0, left_len, kRedActive, &len);
    if (bad != SIZE_MAX) {
        if (tracks) memset(&tracks[1], 0, sizeof(track));
        report_block(c, obj, size, "red zone before the object overwritten (underflow)",
                     "left red zone", (left + bad) - obj, len, kRedActive, op, tracks);
        memset(left, kRedActive, left_len);
    }
    if (tracks) record_block(&tracks[1]);
    fill_freed_block(obj, size);
    quarantine_push(c, static_cast<char *>(block), bytes);
}

void block_released(const cache *c, char *obj, size_t size, const track *tracks) {
    const bool zero = init_mode() & kInitFree;
    const uint8_t body = zero ? 0 : kPoisonFree, last = zero ? 0 : kPoisonEnd;
    size_t len = 0;
    uint8_t expected = body;
    size_t bad = size ? find_bad(obj, 0, size - 1, body, &len) : SIZE_MAX;
    if (bad == SIZE_MAX && size && static_cast<uint8_t>(obj[size - 1]) != last) {
        bad = size - 1;
        len = 1;
        expected = last;
    }
    if (bad == SIZE_MAX) return;
    report_block(c, obj, size, "write after free (poison overwritten)", "the freed object", bad,
                 len, expected, "the quarantine's release", tracks);
}

void report_guarded_underflow(char *obj, size_t size, ptrdiff_t off, size_t bad_len,
                              const char *op) {
    text t;
    t.add("==============================================================================\n");
    t.add("slabkit: BUG large block (guarded): red zone before the object overwritten "
          "(underflow)\n");
    t.add("------------------------------------------------------------------------------\n");
    t.add("  block %p (%zu bytes), found by %s\n", static_cast<void *>(obj), size, op);
    t.add("  first bad byte at object offset %td (the block's first page before it), %zu byte%s "
          "wrong\n",
          off, bad_len, bad_len == 1 ? "" : "s");
    const size_t n = bad_len < 16 ? bad_len : 16;
    add_bytes(t, "found:", reinterpret_cast<uint8_t *>(obj + off), n);
    uint8_t want[16];
    memset(want, kRedActive, sizeof want);
    add_bytes(t, "expected:", want, n);
    finish(t);
}

void block_mismatched_delete(const cache *c, char *obj, size_t size, const char *why,
                             const char *op, const track *tracks) {
    report_block(c, obj, size, why, nullptr, 0, 0, 0, op, tracks);
}

void block_double_free(const cache *c, char *obj, size_t size, const char *op,
                       const track *tracks) {
    report_block(c, obj, size, "double free", nullptr, 0, 0, 0, op, tracks);
}

void block_use_after_free(const cache *c, char *obj, size_t size, const char *op,
                          const track *tracks) {
    report_block(c, obj, size, "use after free (the block was freed)", nullptr, 0, 0, 0, op,
                 tracks);
}

void block_leak(const cache *c, char *obj, size_t size, const char *op, const track *tracks) {
    text t;
    t.add("slabkit: %s(%s): block %p (%zu bytes) is still allocated\n", op, c->name,
          static_cast<void *>(obj), size);
    if (tracks) add_track(t, "allocated", tracks[0]);
    platform::write_stderr(t.buf, t.len);
}

void drain_quarantine(const cache *c) {
    quarantine &q = g_quarantine;
    for (;;) {
        quarantined out[64];
        unsigned n = 0;
        {
            platform::lock_guard guard(q.lock);
            // Keeps the order of what stays: entries of other caches are moved up.
            uint32_t kept = 0;
            for (uint32_t i = 0; i < q.count; ++i) {
                quarantined e = q.ring[(q.head + i) & (kQuarantineMax - 1)];
                if ((!c || e.c == c) && n < 64) {
                    out[n++] = e;
                    q.bytes -= e.bytes;
                } else {
                    q.ring[(q.head + kept) & (kQuarantineMax - 1)] = e;
                    ++kept;
                }
            }
            q.count = kept;
        }
        for (unsigned i = 0; i < n; ++i) release(out[i]);
        if (n < 64) return;
    }
}

uint64_t quarantine_bytes() {
    platform::lock_guard guard(g_quarantine.lock);
    return g_quarantine.bytes;
}

void report_leak(const cache *c, void *slot, const char *op) {
    text t;
    t.add("slabkit: %s(%s): object %p is still allocated\n", op, c->name,
          static_cast<void *>(static_cast<char *>(slot) + c->debug_offset));
    if (c->flags & kStoreUser)
        add_track(t, "allocated", tracks_of(c, static_cast<char *>(slot))[0]);
    platform::write_stderr(t.buf, t.len);
}

namespace {
struct walk {
    cache *c;
    unsigned problems;
    uint64_t leaks;
    bool leaks_only;
};

void walk_slab(page *pg, void *arg) {
    auto *w = static_cast<walk *>(arg);
    cache *c = w->c;
    char *first = reinterpret_cast<char *>(slab_base(pg));
    const uint64_t before = g_errors.load(std::memory_order_relaxed);
    for (uint32_t i = 0; i < c->objects; ++i) {
        char *slot = first + size_t{i} * c->size;
        uint64_t st = state_of(c, slot);
        if (w->leaks_only) {
            if (st != kStateAllocated) continue;
            ++w->leaks;
            report_leak(c, slot, "leak check");
            continue;
        }
        if (st == kStateAllocated) {
            check_red(c, slot, kRedActive, "validate", nullptr);
        } else if (st == kStateFree) {
            check_red(c, slot, kRedInactive, "validate", nullptr);
            check_poison(c, slot, "validate");
        } else {
            report_object(c, slot, "object metadata overwritten (state word)", nullptr, 0, 0, 0,
                          "validate");
        }
    }
    w->problems += static_cast<unsigned>(g_errors.load(std::memory_order_relaxed) - before);
}
} // namespace

unsigned validate(cache *c, char *buf, size_t size) {
    if (!c->debug) return 0;
    walk w{c, 0, 0, false};
    if (c->debug_fresh) {
        // SLOB: its live slots, found by their tag (a free one's bytes are SLOB's).
        if (!c->debug_walk) return 0;
        const uint64_t before = g_errors.load(std::memory_order_relaxed);
        c->debug_walk(
            c,
            [](cache *cc, char *slot, void *) {
                check_red(cc, slot, kRedActive, "validate", nullptr);
            },
            nullptr);
        // And its freed slots still in the quarantine (the only free ones whose bytes are known).
        {
            platform::lock_guard guard(g_quarantine.lock);
            for (uint32_t i = 0; i < g_quarantine.count; ++i) {
                const quarantined &e =
                    g_quarantine.ring[(g_quarantine.head + i) & (kQuarantineMax - 1)];
                if (e.c != c) continue;
                check_red(c, e.slot, kRedInactive, "validate", nullptr);
                check_poison(c, e.slot, "validate");
            }
        }
        w.problems = static_cast<unsigned>(g_errors.load(std::memory_order_relaxed) - before);
    } else {
        for_each_slab_in_arena(c, walk_slab, &w);
    }
    if (w.problems && buf && size)
        snprintf(buf, size, "%s: %u corrupted debug object%s (reported above)", c->name, w.problems,
                 w.problems == 1 ? "" : "s");
    return w.problems;
}

bool is_live_slot(const cache *c, const void *slot) {
    const auto *s = static_cast<const char *>(slot);
    return *reinterpret_cast<const uintptr_t *>(s) == slot_tag(c) &&
           *reinterpret_cast<const uint64_t *>(s + c->debug_meta) == kStateAllocated;
}

uint64_t report_leaks(cache *c, const char *op) {
    if (!c->debug && c->debug_block_leaks) return c->debug_block_leaks(c, op);
    if (c->debug && c->debug_fresh && c->debug_walk) {
        struct count {
            const char *op;
            uint64_t n;
        } k{op, 0};
        c->debug_walk(
            c,
            [](cache *cc, char *slot, void *arg) {
                auto *kk = static_cast<count *>(arg);
                report_leak(cc, slot, kk->op);
                ++kk->n;
            },
            &k);
        return k.n;
    }
    if (!c->debug || c->debug_fresh) return 0;
    walk w{c, 0, 0, true};
    for_each_slab_in_arena(c, walk_slab, &w);
    return w.leaks;
}

uintptr_t site_of(const track &tr) {
    uintptr_t last = 0;
    for (unsigned i = 0; i < kTrackDepth && tr.addrs[i]; ++i) {
        last = tr.addrs[i];
        if (!platform::in_own_module(last)) return last;
    }
    return last;
}

namespace {

void add_to(trace_table *t, const track &tr, uint64_t now_ms) {
    if (tr.tid == 0) return; // not recorded (an object never freed has no free track)
    ++t->objects;
    const uintptr_t site = site_of(tr);
    const uint64_t age = now_ms > tr.when_ms ? now_ms - tr.when_ms : 0;
    trace_site *e = nullptr;
    for (unsigned i = 0; i < t->n; ++i)
        if (t->sites[i].addr == site) e = &t->sites[i];
    if (!e) {
        if (t->n == kMaxTraceSites) {
            ++t->dropped;
            return;
        }
        e = &t->sites[t->n++];
        *e = trace_site{site, 0, age, age, 0, tr.tid, tr.tid, 0};
    }
    ++e->count;
    e->age_min_ms = age < e->age_min_ms ? age : e->age_min_ms;
    e->age_max_ms = age > e->age_max_ms ? age : e->age_max_ms;
    e->age_sum_ms += age;
    e->tid_min = tr.tid < e->tid_min ? tr.tid : e->tid_min;
    e->tid_max = tr.tid > e->tid_max ? tr.tid : e->tid_max;
    e->cpus |= uint64_t{1} << (tr.cpu < 63 ? tr.cpu : 63);
}

struct trace_walk {
    cache *c;
    trace_table *alloc, *freed;
    uint64_t now_ms;
};

void trace_slot(cache *c, char *slot, trace_walk *w) {
    const uint64_t st = state_of(c, slot);
    const track *tr = tracks_of(c, slot);
    if (st == kStateAllocated)
        add_to(w->alloc, tr[0], w->now_ms);
    else if (st == kStateFree)
        add_to(w->freed, tr[1], w->now_ms);
}

void sort_sites(trace_table *t) {
    // Insertion sort by count, most first: a few hundred sites at most, in a copy of the process.
    for (unsigned i = 1; i < t->n; ++i) {
        trace_site x = t->sites[i];
        unsigned j = i;
        for (; j > 0 && t->sites[j - 1].count < x.count; --j) t->sites[j] = t->sites[j - 1];
        t->sites[j] = x;
    }
}

} // namespace

bool gather_traces(cache *c, trace_table *alloc, trace_table *freed) {
    alloc->n = freed->n = 0;
    alloc->objects = freed->objects = alloc->dropped = freed->dropped = 0;
    if (!c->debug || !(c->flags & kStoreUser)) return false;
    trace_walk w{c, alloc, freed, platform::now_coarse_ms()};
    if (c->debug_fresh) {
        // SLOB: its live slots, by their tag; a free slot's bytes are SLOB's.
        if (c->debug_walk)
            c->debug_walk(
                c,
                [](cache *cc, char *slot, void *arg) {
                    trace_slot(cc, slot, static_cast<trace_walk *>(arg));
                },
                &w);
    } else {
        for_each_slab_in_arena(
            c,
            [](page *pg, void *arg) {
                auto *tw = static_cast<trace_walk *>(arg);
                char *first = reinterpret_cast<char *>(slab_base(pg));
                for (uint32_t i = 0; i < tw->c->objects; ++i)
                    trace_slot(tw->c, first + size_t{i} * tw->c->size, tw);
            },
            &w);
    }
    sort_sites(alloc);
    sort_sites(freed);
    return true;
}

bool gather_block_traces(const cache *owner, trace_table *alloc, trace_table *freed) {
    alloc->n = freed->n = 0;
    alloc->objects = freed->objects = alloc->dropped = freed->dropped = 0;
    const leak_scan::block_source *src = leak_scan::current_block_source();
    if (!src || src->owner != owner) return false;
    struct block_walk {
        trace_table *t;
        uint64_t now_ms;
        bool tracked;
    } w{alloc, platform::now_coarse_ms(), false};
    src->walk(
        [](void *, size_t, const track *tr, void *a) {
            auto *bw = static_cast<block_walk *>(a);
            if (!tr) return;
            bw->tracked = true;
            add_to(bw->t, tr[0], bw->now_ms);
        },
        &w);
    sort_sites(alloc);
    return w.tracked;
}

uint64_t errors() {
    return g_errors.load(std::memory_order_relaxed);
}

namespace {
void fork_prepare() {
    g_spec_lock.lock();
    g_quarantine.lock.lock();
}
void fork_parent() {
    g_quarantine.lock.unlock();
    g_spec_lock.unlock();
}
void fork_child() {
    g_quarantine.lock.reset_after_fork();
    g_spec_lock.reset_after_fork();
}
__attribute__((constructor)) void install_hooks() {
    if (!platform::add_fork_hooks(
            {platform::kForkRankQuarantine, fork_prepare, fork_parent, fork_child}))
        platform::fatal("slabkit: cannot register the quarantine's fork hooks\n");
}
} // namespace

} // namespace slabkit::debug
