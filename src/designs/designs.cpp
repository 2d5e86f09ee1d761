// designs.cpp - what is written once over the design interface: bootstrap, create, destroy,
// shrink, statistics, the trimmer's handler, slabkit_trim, and the fork hooks.
#include "designs/designs.hpp"

#include "core/debug.hpp"
#include "core/failslab.hpp"
#include "core/slab_release.hpp"
#include "core/trimmer.hpp"
#include "platform/platform.hpp"
#include "slot/slot.hpp"

#include <cstring>

namespace slabkit::designs {

void bootstrap_process_design() {
    visit(process_design(), [](auto ops) { ops.bootstrap(); });
}

cache *create(design d, const cache_args &args, const char **why) {
    return visit(d, [&](auto ops) -> cache * {
        ops.bootstrap();
        if (const char *bad = cache_args_invalid(args)) {
            *why = bad;
            return nullptr;
        }
        // SLABKIT_DEBUG (or slabkit_set_debug) may ask for debugging of this cache by name.
        cache_args with_debug = args;
        with_debug.flags |= debug::spec_flags(args.name) | kFailslabEligible;
        auto *c = ops.create(with_debug, why);
        // Fault injection may fail its allocations (SLABKIT_FAILSLAB).
        if (c) failslab::arm_cache(c);
        return c;
    });
}

void destroy(cache *c) {
    if (!c) return;
    // Its quarantined objects go back first, checked: they are free, not leaks.
    if (c->debug) debug::drain_quarantine(c);
    visit(c, [](auto ops, auto *s) { ops.destroy(s); });
}

unsigned validate(cache *c, char *buf, size_t size) {
    if (buf && size) buf[0] = '\0';
    unsigned problems = visit(c, [&](auto ops, auto *s) { return ops.validate(s, buf, size); });
    size_t used = buf ? strlen(buf) : 0;
    if (c->debug) problems += debug::validate(c, buf ? buf + used : nullptr, buf ? size - used : 0);
    return problems;
}

void statistics(cache *c, design_stats *out) {
    *out = design_stats{};
    visit(c, [&](auto ops, auto *s) { ops.statistics(s, out); });
}

namespace {

struct slot_visit {
    unsigned slot;
    bool release;
};

// Under the cache registry lock: the slot's share of cache c.
void flush_slot_of_cache(cache *c, void *arg) {
    const slot_visit &v = *static_cast<slot_visit *>(arg);
    visit(c, [&](auto ops, auto *s) { ops.flush_slot(s, v.slot, v.release); });
}

// An idle slot (visited under the slot registry lock), in every cache.
void flush_idle_slot(unsigned slot, void *release) {
    slot_visit v{slot, release != nullptr};
    registry::for_each(flush_slot_of_cache, &v);
}

int g_release_tag;
void *const kRelease = &g_release_tag;

void reclaim_cache(cache *c, void *) {
    visit(c, [](auto ops, auto *s) { (void)ops.reclaim(s); });
}

void trim_cache(cache *c, void *) {
    visit(c, [](auto ops, auto *s) { ops.trim(s); });
}

struct matching_visit {
    bool (*match)(const cache *, void *);
    void *arg;
    unsigned slot;
};

void flush_idle_slot_matching(unsigned slot, void *arg) {
    auto *m = static_cast<matching_visit *>(arg);
    m->slot = slot;
    registry::for_each(
        [](cache *c, void *a) {
            auto *mv = static_cast<matching_visit *>(a);
            if (!mv->match(c, mv->arg)) return;
            visit(c, [&](auto ops, auto *s) {
                if (!s->dead) ops.flush_slot(s, mv->slot, false);
            });
        },
        m);
}

// The trimmer (core/trimmer.hpp): slots idle since before_ms give back everything and their
// empty structures are freed; every cache trims its shared lists.
void trim_idle(uint64_t before_ms, bool force) {
    deferred_release defer;
    if (force)
        slots::for_each_idle_since(before_ms, flush_idle_slot, kRelease);
    else
        slots::try_for_each_idle_since(before_ms, flush_idle_slot, kRelease);
    registry::for_each(trim_cache, nullptr);
}

} // namespace

size_t shrink(cache *c) {
    if (!c) return 0;
    if (c->debug) debug::drain_quarantine(c); // shrink wants the memory back
    return visit(c, [](auto ops, auto *s) -> size_t {
        if (s->dead) return 0;
        {
            // Idle slots first (the slot registry ranks before the design's locks).
            deferred_release defer;
            slots::for_each_idle(
                [](unsigned slot, void *arg) {
                    decltype(ops)::flush_slot(static_cast<decltype(s)>(arg), slot, false);
                },
                s);
        }
        return ops.reclaim(s) << s->order;
    });
}

void shrink_matching(bool (*match)(const cache *c, void *arg), void *arg) {
    bootstrap_process_design();
    matching_visit m{match, arg, 0};
    {
        // Idle slots first, as shrink() (the slot registry ranks before the design's locks).
        deferred_release defer;
        slots::for_each_idle(flush_idle_slot_matching, &m);
    }
    registry::for_each(
        [](cache *c, void *a) {
            auto *mv = static_cast<matching_visit *>(a);
            if (!mv->match(c, mv->arg)) return;
            if (c->debug) debug::drain_quarantine(c);
            visit(c, [](auto ops, auto *s) {
                if (!s->dead) (void)ops.reclaim(s);
            });
        },
        &m);
}

void trim_all() {
    bootstrap_process_design();
    // The idle slots of every cache first (slot registry, then cache registry: the lock order),
    // then the caller's slot and each cache's shared lists under the cache registry lock, so no
    // cache is destroyed meanwhile. An idle slot's structure can only be freed once nothing
    // refers to it, which may take the other slots' flushes and the shared lists' (their objects
    // of its slabs); so flush everything first, then free the idle slots' empty structures, then
    // flush again what that gave back.
    debug::drain_quarantine(nullptr); // a trim wants memory back
    deferred_release defer;
    slots::for_each_idle(flush_idle_slot, nullptr);
    slot_visit mine{slots::current_if_any(), false};
    if (mine.slot != kNoSlot) registry::for_each(flush_slot_of_cache, &mine);
    registry::for_each(reclaim_cache, nullptr);
    slots::for_each_idle(flush_idle_slot, kRelease);
    if (mine.slot != kNoSlot) registry::for_each(flush_slot_of_cache, &mine);
    registry::for_each(reclaim_cache, nullptr);
}

// ---- fork ----------------------------------------------------------------------------------
//
// Every design's locks are taken before fork in the lock order: the designs' bootstrap locks at
// platform::kForkRankSlabBoot (before the slot registry: bootstraps allocate pages under them),
// then the cache registry and every cache's own locks at kForkRankCaches (after the slot
// registry, whose idle-slot flushes take them). The parent unlocks them after fork, the child
// resets them.

namespace {

void boot_locks(fork_op op) {
#define SLABKIT_DESIGN_FORK(name) name::ops::fork_boot(op);
    SLABKIT_DESIGN_LIST(SLABKIT_DESIGN_FORK)
#undef SLABKIT_DESIGN_FORK
}

void cache_locks(cache *c, void *arg) {
    fork_op op = *static_cast<fork_op *>(arg);
    visit(c, [&](auto ops, auto *s) { ops.fork_cache(s, op); });
}

void caches_prepare() {
    registry::lock().lock();
    fork_op op = fork_op::lock;
    registry::for_each_locked(cache_locks, &op);
}

void caches_parent() {
    fork_op op = fork_op::unlock;
    registry::for_each_locked(cache_locks, &op);
    registry::lock().unlock();
}

void caches_child() {
    fork_op op = fork_op::reset;
    registry::for_each_locked(cache_locks, &op);
    registry::lock().reset_after_fork();
}

__attribute__((constructor)) void install_hooks() {
    if (!trimmer::add_handler(trim_idle))
        platform::fatal("slabkit: cannot install the designs' trimmer\n");
    if (!platform::add_fork_hooks({platform::kForkRankSlabBoot, [] { boot_locks(fork_op::lock); },
                                   [] { boot_locks(fork_op::unlock); },
                                   [] { boot_locks(fork_op::reset); }}) ||
        !platform::add_fork_hooks(
            {platform::kForkRankCaches, caches_prepare, caches_parent, caches_child}))
        platform::fatal("slabkit: cannot register the slab designs' fork hooks\n");
}

} // namespace

} // namespace slabkit::designs
