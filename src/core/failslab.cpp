// failslab.cpp - fault injection's settings, their parsing, and the decision (failslab.hpp).
#include "core/failslab.hpp"

#include "base/glob.hpp"
#include "base/name_text.hpp"
#include "platform/lock.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstring>

namespace slabkit::failslab {

std::atomic<int> detail::g_armed{-1};
using detail::g_armed;

namespace {

// Probability in millionths of a percent: 100% is 10^8.
constexpr uint64_t kWhole = 100'000'000;

struct parsed {
    uint64_t probability = 0; // millionths of a percent
    uint64_t interval = 1;
    int64_t times = -1;
    int64_t space = 0;
};

platform::mutex g_lock; // orders set() and the first reading
std::atomic<uint64_t> g_probability{0};
std::atomic<uint64_t> g_interval{1};
std::atomic<int64_t> g_times{-1};
std::atomic<int64_t> g_space{0};
std::atomic<uint64_t> g_count{0};  // calls that reached the interval test
std::atomic<uint64_t> g_random{0}; // splitmix64's state
std::atomic<uint64_t> g_failures{0};
std::atomic<uint64_t> g_block_failures{0};
char g_caches[128]; // under g_lock; read by filter_passes under it too
std::atomic<uint32_t> g_filter_gen{1};
std::atomic<bool> g_filter_all{true};

// What injection keeps of a cache made for users (arm_cache), beside it: cache descriptors are
// not extended (the public header's inline paths name offsets in the designs' caches), so a
// table of them, by address, open addressing. An entry is never freed: a cache made at the
// address of a destroyed one takes its entry over, counts reset. 4096 entries hold the kmalloc
// and malloc classes of every design and thousands of caches of the API; a cache made when the
// table is full is never failed (caches_untracked counts them).
struct cache_entry {
    std::atomic<cache *> c{nullptr};
    std::atomic<uint32_t> filter{0}; // generation << 1 | passes; 0: not asked yet
    std::atomic<uint64_t> failures{0};
};
constexpr unsigned kTableSize = 4096;
cache_entry g_table[kTableSize];
std::atomic<uint64_t> g_untracked{0};

unsigned slot_of(const cache *c) {
    return static_cast<unsigned>((reinterpret_cast<uintptr_t>(c) >> 6) * 0x9e3779b1u) % kTableSize;
}

// c's entry, or nullptr; with insert, made (or taken over) when there is none.
cache_entry *entry_of(cache *c, bool insert) {
    for (unsigned i = 0, k = slot_of(c); i < kTableSize; ++i, k = (k + 1) % kTableSize) {
        cache *have = g_table[k].c.load(std::memory_order_acquire);
        if (have == c) return &g_table[k];
        if (have == nullptr) {
            if (!insert) return nullptr;
            if (g_table[k].c.compare_exchange_strong(have, c, std::memory_order_acq_rel))
                return &g_table[k];
            if (have == c) return &g_table[k];
        }
    }
    if (insert) g_untracked.fetch_add(1, std::memory_order_relaxed);
    return nullptr;
}

// An unsigned decimal at *p (digits, then for the probability an optional fraction of up to six
// digits); false when there is none or it is too large.
bool parse_number(const char *&p, uint64_t *out, bool fraction, uint64_t max) {
    if (*p < '0' || *p > '9') return false;
    uint64_t v = 0;
    while (*p >= '0' && *p <= '9') {
        v = v * 10 + static_cast<uint64_t>(*p++ - '0');
        if (v > max) return false;
    }
    if (fraction) {
        uint64_t scale = 1'000'000;
        v *= scale;
        if (*p == '.') {
            ++p;
            if (*p < '0' || *p > '9') return false;
            while (*p >= '0' && *p <= '9') {
                scale /= 10;
                if (scale == 0) return false; // more than six decimals
                v += static_cast<uint64_t>(*p++ - '0') * scale;
            }
        }
        if (v > max * 1'000'000) return false;
    }
    *out = v;
    return true;
}

bool parse_spec(const char *spec, parsed *out, const char **why) {
    parsed r;
    if (strcmp(spec, "off") == 0) {
        r.probability = 0;
        *out = r;
        return true;
    }
    const char *p = spec;
    if (!parse_number(p, &r.probability, true, 100)) {
        *why = "the probability must be a percentage from 0 to 100 (up to six decimals), "
               "then optionally :interval[:times[:space]]";
        return false;
    }
    if (*p == ':') {
        ++p;
        if (!parse_number(p, &r.interval, false, uint64_t{1} << 62) || r.interval == 0) {
            *why = "the interval (after the first ':') must be a whole number of 1 or more";
            return false;
        }
    }
    if (*p == ':') {
        ++p;
        uint64_t t;
        if (p[0] == '-' && p[1] == '1' && (p[2] == ':' || p[2] == '\0')) {
            r.times = -1;
            p += 2;
        } else if (parse_number(p, &t, false, uint64_t{1} << 62)) {
            r.times = static_cast<int64_t>(t);
        } else {
            *why = "times (after the second ':') must be -1 (no limit) or a whole number";
            return false;
        }
    }
    if (*p == ':') {
        ++p;
        uint64_t s;
        if (!parse_number(p, &s, false, uint64_t{1} << 62)) {
            *why = "space (after the third ':') must be a whole number of bytes";
            return false;
        }
        r.space = static_cast<int64_t>(s);
    }
    if (*p != '\0') {
        *why = "unexpected text after the settings (probability[:interval[:times[:space]]])";
        return false;
    }
    *out = r;
    return true;
}

bool valid_filter(const char *caches, const char **why) {
    if (strlen(caches) >= sizeof g_caches) {
        *why = "the cache list is longer than 127 characters";
        return false;
    }
    for (const char *p = caches; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? static_cast<size_t>(end - p) : strlen(p);
        if (n == 0 || n >= kNameMax) {
            *why = "each cache name in the list must have 1 to 31 characters";
            return false;
        }
        p += n + (end ? 1 : 0);
    }
    return true;
}

// Whether `name` matches one of the filter's comma-separated patterns. Under g_lock.
bool filter_matches(const char *name) {
    for (const char *p = g_caches; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? static_cast<size_t>(end - p) : strlen(p);
        char pat[kNameMax];
        memcpy(pat, p, n);
        pat[n] = '\0';
        if (glob_match(pat, name)) return true;
        p += n + (end ? 1 : 0);
    }
    return false;
}

void apply(const parsed &r) {
    g_probability.store(r.probability, std::memory_order_relaxed);
    g_interval.store(r.interval, std::memory_order_relaxed);
    g_times.store(r.times, std::memory_order_relaxed);
    g_space.store(r.space, std::memory_order_relaxed);
    g_count.store(0, std::memory_order_relaxed);
}

// Arms cache c, made for users: its entry, and the init bit.
void arm(cache *c) {
    cache_entry *e = entry_of(c, true);
    if (!e) return;
    e->filter.store(0, std::memory_order_relaxed);
    c->init.store(static_cast<uint8_t>(c->init.load() | kInitBit));
}

// A registered cache after set(): armed if it was made for users, its filter answer asked again.
void rearm_registered(cache *c, void *) {
    if (c->flags & kFailslabEligible) arm(c);
}

// A registered cache after "off": its gated fast paths open again (where nothing else closes
// them). Another thread's allocation that read the bit before may still ask should_fail once,
// and finds the probability 0.
void disarm_registered(cache *c, void *) {
    if (c->flags & kFailslabEligible)
        c->init.store(static_cast<uint8_t>(c->init.load() & ~kInitBit));
}

int read_env_once() {
    int a = g_armed.load(std::memory_order_acquire);
    if (a >= 0) return a;
    platform::lock_guard guard(g_lock);
    a = g_armed.load(std::memory_order_relaxed);
    if (a >= 0) return a;
    const char *spec = platform::env("SLABKIT_FAILSLAB");
    const char *caches = platform::env("SLABKIT_FAILSLAB_CACHES");
    a = 0;
    if (spec && *spec) {
        parsed r;
        const char *why = nullptr;
        if (!parse_spec(spec, &r, &why))
            platform::exit_with_error(1, "slabkit: SLABKIT_FAILSLAB=%s: %s\n", spec, why);
        if (caches && !valid_filter(caches, &why))
            platform::exit_with_error(1, "slabkit: SLABKIT_FAILSLAB_CACHES=%s: %s\n", caches, why);
        apply(r);
        if (caches) strcpy(g_caches, caches);
        g_filter_all.store(g_caches[0] == '\0', std::memory_order_relaxed);
        g_random.store(platform::random_u64(), std::memory_order_relaxed);
        a = 1;
    }
    g_armed.store(a, std::memory_order_release);
    return a;
}

// Whether cache c (or a block of that name) passes the filter; a cache remembers its answer
// until the filter changes.
bool passes(cache *c, const char *name) {
    if (g_filter_all.load(std::memory_order_relaxed)) return true;
    const uint32_t gen = g_filter_gen.load(std::memory_order_acquire);
    cache_entry *e = c ? entry_of(c, false) : nullptr;
    if (e) {
        const uint32_t f = e->filter.load(std::memory_order_relaxed);
        if (f >> 1 == gen) return f & 1;
    }
    bool ok;
    {
        platform::lock_guard guard(g_lock);
        ok = filter_matches(c ? c->name : name) || (c && (c->flags & kFailslab));
    }
    if (e) e->filter.store(gen << 1 | (ok ? 1u : 0u), std::memory_order_relaxed);
    return ok;
}

uint64_t next_random() {
    // splitmix64 over a shared counter: one atomic add, on armed paths only.
    uint64_t z = g_random.fetch_add(0x9e3779b97f4a7c15ull, std::memory_order_relaxed) +
                 0x9e3779b97f4a7c15ull;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

// Millionths of a percent as decimal text: "12.5", "0.000001", "100".
void format_probability(uint64_t v, char (&out)[24]) {
    char digits[24];
    name_text t(digits, sizeof digits);
    t.add(v / 1'000'000);
    uint64_t frac = v % 1'000'000;
    if (frac) {
        char f[8] = {'.', 0, 0, 0, 0, 0, 0, 0};
        for (int i = 6; i >= 1; --i) {
            f[i] = static_cast<char>('0' + frac % 10);
            frac /= 10;
        }
        int end = 6;
        while (f[end] == '0') f[end--] = '\0';
        t.add(f);
    }
    memcpy(out, digits, sizeof out);
}

} // namespace

bool armed() {
    return read_env_once() == 1;
}

void arm_cache(cache *c) {
    if (!armed() || !(c->flags & kFailslabEligible)) return;
    // A new cache at a destroyed one's address starts from no failures.
    if (cache_entry *e = entry_of(c, true)) e->failures.store(0, std::memory_order_relaxed);
    arm(c);
}

uint64_t failures_of(cache *c) {
    cache_entry *e = entry_of(c, false);
    return e ? e->failures.load(std::memory_order_relaxed) : 0;
}

bool should_fail(cache *c, size_t size, const char *block_name) {
    if (!passes(c, block_name)) return false;
    // The kernel's order: no failures left; the space budget; the interval; the probability.
    if (g_times.load(std::memory_order_relaxed) == 0) return false;
    if (g_space.load(std::memory_order_relaxed) > static_cast<int64_t>(size)) {
        g_space.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
        return false;
    }
    const uint64_t interval = g_interval.load(std::memory_order_relaxed);
    if (interval > 1 && (g_count.fetch_add(1, std::memory_order_relaxed) + 1) % interval != 0)
        return false;
    const uint64_t probability = g_probability.load(std::memory_order_relaxed);
    if (probability == 0 || (probability < kWhole && next_random() % kWhole >= probability))
        return false;
    // Fail, taking one of the failures left (none taken past zero, when several race for it).
    int64_t t = g_times.load(std::memory_order_relaxed);
    while (t != -1) {
        if (t == 0) return false;
        if (g_times.compare_exchange_weak(t, t - 1, std::memory_order_relaxed)) break;
    }
    g_failures.fetch_add(1, std::memory_order_relaxed);
    if (cache_entry *e = c ? entry_of(c, false) : nullptr)
        e->failures.fetch_add(1, std::memory_order_relaxed);
    else if (!c)
        g_block_failures.fetch_add(1, std::memory_order_relaxed);
    return true;
}

bool detail::block_fails_slow(size_t size, const char *block_name) {
    return read_env_once() == 1 && should_fail(nullptr, size, block_name);
}

bool set(const char *spec, const char *caches, const char **why) {
    const char *dummy;
    if (!why) why = &dummy;
    if (!spec) {
        *why = "no settings given (probability[:interval[:times[:space]]], or off)";
        return false;
    }
    parsed r;
    if (!parse_spec(spec, &r, why)) return false;
    if (caches && !valid_filter(caches, why)) return false;
    const bool was_armed = armed();
    const bool off = strcmp(spec, "off") == 0;
    {
        platform::lock_guard guard(g_lock);
        apply(r);
        if (caches) strcpy(g_caches, caches);
        g_filter_all.store(g_caches[0] == '\0', std::memory_order_relaxed);
        g_filter_gen.fetch_add(1, std::memory_order_release);
        if (!was_armed) g_random.store(platform::random_u64(), std::memory_order_relaxed);
        g_armed.store(off ? 0 : 1, std::memory_order_release);
    }
    // Outside g_lock: the registry's lock is taken by paths that may ask should_fail.
    registry::for_each(off ? disarm_registered : rearm_registered, nullptr);
    return true;
}

void get_status(status *out) {
    *out = status{};
    out->armed = armed();
    format_probability(g_probability.load(std::memory_order_relaxed), out->probability);
    out->interval = g_interval.load(std::memory_order_relaxed);
    out->times = g_times.load(std::memory_order_relaxed);
    out->space = g_space.load(std::memory_order_relaxed);
    {
        platform::lock_guard guard(g_lock);
        strcpy(out->caches, g_caches);
    }
    out->failures = g_failures.load(std::memory_order_relaxed);
    out->block_failures = g_block_failures.load(std::memory_order_relaxed);
    out->caches_untracked = g_untracked.load(std::memory_order_relaxed);
}

} // namespace slabkit::failslab
