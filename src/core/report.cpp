// report.cpp - misuse reports of the slab layer.
#include "core/report.hpp"

#include "core/cache.hpp"
#include "page/page_allocator.hpp"
#include "platform/platform.hpp"

#include <atomic>
#include <cstdarg>
#include <cstdio>

namespace slabkit {

namespace {
std::atomic<uint64_t> g_errors{0};
}

namespace {
std::atomic<void (*)(const char *)> g_error_hook{nullptr};
}

bool continue_on_error() {
    return g_error_hook.load(std::memory_order_acquire) != nullptr ||
           page_allocator::global().settings().continue_on_error;
}

uint64_t slab_errors() {
    return g_errors.load(std::memory_order_relaxed);
}

void note_slab_error() {
    g_errors.fetch_add(1, std::memory_order_relaxed);
}

void set_error_hook(void (*hook)(const char *report)) {
    g_error_hook.store(hook, std::memory_order_release);
}

bool call_error_hook(const char *text) {
    void (*hook)(const char *) = g_error_hook.load(std::memory_order_acquire);
    if (hook) hook(text);
    return hook != nullptr;
}

void report(const char *fmt, ...) {
    char line[512];
    int n = snprintf(line, sizeof line, "slabkit: ");
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, fmt, ap);
    va_end(ap);
    size_t len = static_cast<size_t>(n) + (m < 0 ? 0 : static_cast<size_t>(m));
    if (len > sizeof line - 2) len = sizeof line - 2;
    line[len++] = '\n';
    platform::write_stderr(line, len);
}

const char *diagnose_free(const cache *c, const void *addr, char *buf, unsigned size) {
    if (!in_arena(addr)) {
        snprintf(buf, size, "the address is not in slabkit's arena: never handed out by slabkit");
        return buf;
    }
    page *pg = virt_to_page(addr);
    if (!pg) {
        snprintf(buf, size, "the address is page allocator metadata, never an object");
        return buf;
    }
    page *head = virt_to_head_page(addr);
    uint32_t st = head->flags();
    if (!(st & PG_head)) {
        snprintf(buf, size, "the address is in free pages: already freed, or never allocated");
        return buf;
    }
    if (!(st & PG_slab)) {
        snprintf(buf, size, "the address is in a page block of order %u at %p, not in a slab",
                 st & PG_order_mask, page_to_virt(head));
        return buf;
    }
    const cache *owner = slab_cache(head);
    if (c && owner != c) {
        snprintf(buf, size, "the object belongs to cache '%s', not '%s'", owner ? owner->name : "?",
                 c->name);
        return buf;
    }
    uintptr_t p = reinterpret_cast<uintptr_t>(addr);
    uintptr_t base = slab_base(head);
    if (owner && p >= base) {
        uintptr_t off = p - base;
        uintptr_t index = off / owner->size;
        if (index < owner->objects && owner->debug) {
            long into = static_cast<long>(off - index * owner->size) -
                        static_cast<long>(owner->debug_offset);
            snprintf(buf, size,
                     "the address is %ld bytes %s object %p of cache '%s' (objects of %u bytes), "
                     "not an object start",
                     into < 0 ? -into : into, into < 0 ? "before" : "into",
                     reinterpret_cast<void *>(base + index * owner->size + owner->debug_offset),
                     owner->name, owner->object_size);
            return buf;
        }
        if (index < owner->objects) {
            snprintf(buf, size,
                     "the address is %zu bytes into object %zu of a slab of cache '%s' (objects "
                     "of %u bytes), not an object start",
                     static_cast<size_t>(off - index * owner->size), static_cast<size_t>(index),
                     owner->name, owner->size);
            return buf;
        }
    }
    snprintf(buf, size, "the address is in the unused tail or colour of a slab of cache '%s'",
             owner ? owner->name : "?");
    return buf;
}

void report_double_free(const cache *c, const void *obj) {
    report_bad_free("kmem_cache_free", c, obj,
                    "double free: the object is already the first free object of its list");
}

void report_bad_free(const char *op, const cache *c, const void *addr, const char *what) {
    g_errors.fetch_add(1, std::memory_order_relaxed);
    report("%s(%s%s%p): %s", op, c ? c->name : "", c ? ", " : "", addr, what);
    char line[512];
    snprintf(line, sizeof line, "bad free: %s(%s%s%p): %s", op, c ? c->name : "", c ? ", " : "",
             addr, what);
    call_error_hook(line);
    if (!continue_on_error()) {
        platform::fatal("slabkit: aborting on a bad free (SLABKIT_CONTINUE_ON_ERROR=1 reports "
                        "and ignores instead)\n");
    }
}

} // namespace slabkit
