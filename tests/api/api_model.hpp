// api_model.hpp - a model of the public C API's state, shared by the randomized model test
// (tests/api/model_test.cpp, driven by a seeded generator) and the libFuzzer target
// (tests/fuzz/api_fuzz.cpp, driven by the input bytes).
//
// The model keeps every live block (cache object or kmalloc block) with its size and an id; each
// block holds the pattern of its id (pattern.hpp), checked before it is freed or resized and by
// check_all(). Objects of caches with a constructor hold the constructed state when allocated,
// and are put back in it before they are freed. Every operation checks what the API promises
// (non-NULL, alignment, usable sizes, no block handed out twice, zeroing, contents kept by
// krealloc, shrink of an idle cache == 0) and reports a broken promise through `fail`.
//
// No GoogleTest here: the fuzz target aborts on a failure, the model test records it.
#pragma once

#include "api/pattern.hpp"

#include <slabkit/slabkit.h>

#include <cinttypes>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

namespace slabkit::apitest {

// Constructors that fill N bytes with a byte of their own.
template <size_t N>
void model_ctor(void *p) {
    std::memset(p, static_cast<int>(0x80 | (N % 127)), N);
}

struct ctor_kind {
    size_t size;
    void (*fn)(void *);
    unsigned char byte;
};

inline constexpr ctor_kind kModelCtors[] = {
    {8, model_ctor<8>, 0x80 | (8 % 127)},          {24, model_ctor<24>, 0x80 | (24 % 127)},
    {64, model_ctor<64>, 0x80 | (64 % 127)},       {72, model_ctor<72>, 0x80 | (72 % 127)},
    {200, model_ctor<200>, 0x80 | (200 % 127)},    {1000, model_ctor<1000>, 0x80 | (1000 % 127)},
    {4000, model_ctor<4000>, 0x80 | (4000 % 127)},
};
inline constexpr int kNrModelCtors = sizeof kModelCtors / sizeof kModelCtors[0];

class api_model {
  public:
    static constexpr size_t kMaxCaches = 12;
    static constexpr size_t kMaxBlocks = 4096;
    static constexpr size_t kMaxLiveBytes = size_t{96} << 20;

    // `design`: the design of the caches made (kmalloc is the process's); `tag` makes cache
    // names unique to this model; fail(message) is called on every broken promise.
    api_model(std::string design, std::string tag, std::function<void(const std::string &)> fail)
        : design_(std::move(design)), tag_(std::move(tag)), fail_(std::move(fail)) {}
    ~api_model() { clear(); }
    api_model(const api_model &) = delete;
    api_model &operator=(const api_model &) = delete;

    size_t live_blocks() const { return blocks_.size(); }
    size_t live_caches() const {
        size_t n = 0;
        for (const cache_rec &c : caches_) n += c.c != nullptr;
        return n;
    }
    uint64_t operations() const { return ops_; }

    // ---- caches ----------------------------------------------------------------------------

    // ctor: -1 for none, else an index into kModelCtors (which then sets the size).
    void create_cache(size_t size, size_t align, unsigned flags, int ctor) {
        ++ops_;
        if (live_caches() >= kMaxCaches) return;
        if (ctor >= kNrModelCtors) ctor = -1;
        if (ctor >= 0) size = kModelCtors[ctor].size;
        char name[32];
        snprintf(name, sizeof name, "m%s-%u", tag_.c_str(), name_seq_++ % 100000);
        slabkit_cache *c = slabkit_cache_create_in(design_.c_str(), name, size, align, flags,
                                                   ctor >= 0 ? kModelCtors[ctor].fn : nullptr);
        if (!c) {
            fail("create_in(%s, %s, size %zu, align %zu, flags %#x) failed", design_.c_str(), name,
                 size, align, flags);
            return;
        }
        if (std::strcmp(slabkit_cache_name(c), name) != 0) fail("cache name mismatch: %s", name);
        size_t usable = slabkit_cache_object_size(c);
        if (usable < size) fail("cache %s: object size %zu < %zu", name, usable, size);
        cache_rec rec;
        rec.c = c;
        rec.size = size;
        rec.align = align < 8 ? 8 : align;
        rec.ctor = ctor;
        rec.name = name;
        for (cache_rec &slot : caches_)
            if (!slot.c) {
                slot = rec;
                return;
            }
        caches_.push_back(rec);
    }

    // Frees the cache's blocks, then destroys it.
    void destroy_cache(size_t which) {
        ++ops_;
        int ci = pick_cache(which);
        if (ci >= 0) destroy_cache_at(ci);
    }

    void shrink_cache(size_t which) {
        ++ops_;
        int ci = pick_cache(which);
        if (ci < 0) return;
        size_t pages = slabkit_cache_shrink(caches_[ci].c);
        if (caches_[ci].live == 0 && pages != 0)
            fail("cache %s: shrink with no live objects returned %zu pages",
                 caches_[ci].name.c_str(), pages);
        if (caches_[ci].live != 0 && pages == 0)
            fail("cache %s: shrink with %zu live objects returned 0 pages",
                 caches_[ci].name.c_str(), caches_[ci].live);
    }

    // node: 0 plain alloc, 1 alloc_node(ANY), 2 alloc_node(0), 3 alloc_node(nonexistent) -> NULL
    void cache_alloc(size_t which, bool zero, unsigned node) {
        ++ops_;
        int ci = pick_cache(which);
        if (ci < 0 || blocks_.size() >= kMaxBlocks) return;
        cache_rec &cr = caches_[ci];
        if (cr.ctor >= 0) zero = false; // zeroing would break the constructed state
        unsigned gfp = zero ? SLABKIT_GFP_ZERO : 0;
        void *p;
        switch (node % 4) {
        case 1:
            p = slabkit_cache_alloc_node(cr.c, gfp, SLABKIT_ANY_NODE);
            break;
        case 2:
            p = slabkit_cache_alloc_node(cr.c, gfp, 0);
            break;
        case 3:
            p = slabkit_cache_alloc_node(cr.c, gfp, 1 << 20);
            if (p) {
                fail("cache %s: alloc_node of a nonexistent node gave %p", cr.name.c_str(), p);
                slabkit_cache_free(cr.c, p);
            }
            return;
        default:
            p = slabkit_cache_alloc(cr.c, gfp);
            break;
        }
        took_object(ci, p, zero);
    }

    void bulk_alloc(size_t which, size_t n, bool zero) {
        ++ops_;
        int ci = pick_cache(which);
        if (ci < 0) return;
        if (blocks_.size() + n > kMaxBlocks) n = kMaxBlocks - blocks_.size();
        if (n == 0) return;
        cache_rec &cr = caches_[ci];
        if (cr.ctor >= 0) zero = false;
        std::vector<void *> p(n, nullptr);
        size_t got = slabkit_cache_alloc_bulk(cr.c, zero ? SLABKIT_GFP_ZERO : 0, n, p.data());
        if (got != n) {
            fail("cache %s: alloc_bulk(%zu) returned %zu", cr.name.c_str(), n, got);
            return;
        }
        for (void *q : p) took_object(ci, q, zero);
    }

    // Frees up to n live objects of one cache in one bulk call.
    void bulk_free(size_t which, size_t n) {
        ++ops_;
        int ci = pick_cache(which);
        if (ci < 0) return;
        std::vector<void *> p;
        for (size_t i = blocks_.size(); i-- > 0 && p.size() < n;) {
            if (blocks_[i].cache != ci) continue;
            release_checked(i);
            p.push_back(blocks_[i].p);
            forget_at(i);
        }
        slabkit_cache_free_bulk(caches_[ci].c, p.size(), p.data());
    }

    // ---- kmalloc ----------------------------------------------------------------------------

    // kind: 0 kmalloc, 1 kzalloc, 2 kmalloc(GFP_ZERO), 3 kmalloc_node(ANY), 4 kmalloc_node(0),
    // 5 kcalloc(size / 8 + 1, 8)
    void kmalloc(size_t size, unsigned kind) {
        ++ops_;
        if (blocks_.size() >= kMaxBlocks || live_bytes_ + size > kMaxLiveBytes) return;
        bool zero = false;
        void *p;
        switch (kind % 6) {
        case 1:
            p = slabkit_kzalloc(size, 0);
            zero = true;
            break;
        case 2:
            p = slabkit_kmalloc(size, SLABKIT_GFP_ZERO);
            zero = true;
            break;
        case 3:
            p = slabkit_kmalloc_node(size, 0, SLABKIT_ANY_NODE);
            break;
        case 4:
            p = slabkit_kmalloc_node(size, 0, 0);
            break;
        case 5:
            size = (size / 8 + 1) * 8;
            p = slabkit_kcalloc(size / 8, 8, 0);
            zero = true;
            break;
        default:
            p = slabkit_kmalloc(size, 0);
            break;
        }
        took_kmalloc(p, size, zero);
    }

    // Resizes the live kmalloc block picked by `which` (if there is one).
    void krealloc(size_t which, size_t new_size) {
        ++ops_;
        int bi = pick_block(which, true);
        if (bi < 0) return;
        block &b = blocks_[bi];
        if (live_bytes_ - b.size + new_size > kMaxLiveBytes) return;
        if (!check(b, "krealloc")) return;
        size_t old_ks = slabkit_ksize(b.p);
        void *q = slabkit_krealloc(b.p, new_size, 0);
        if (new_size == 0) {
            if (q != SLABKIT_ZERO_SIZE_PTR) fail("krealloc(%p, 0) returned %p", b.p, q);
            forget_at(static_cast<size_t>(bi));
            return;
        }
        if (!q) {
            fail("krealloc(%p, %zu) returned NULL", b.p, new_size);
            return;
        }
        if (new_size <= old_ks && q != b.p)
            fail("krealloc(%p (ksize %zu), %zu) moved to %p", b.p, old_ks, new_size, q);
        size_t kept = new_size < b.size ? new_size : b.size;
        if (first_mismatch(q, kept, b.id) != kept)
            fail("krealloc(%p, %zu) -> %p: contents of %zu bytes not kept", b.p, new_size, q, kept);
        size_t ks = slabkit_ksize(q);
        if (ks < new_size) fail("ksize(%p) = %zu < %zu after krealloc", q, ks, new_size);
        if (q != b.p) {
            ptrs_.erase(b.p);
            if (!ptrs_.emplace(q, b.id).second) fail("krealloc returned a live block %p", q);
        }
        live_bytes_ = live_bytes_ - b.size + new_size;
        b.p = q;
        b.size = new_size;
        fill(q, new_size, b.id);
    }

    // ---- any block ----------------------------------------------------------------------------

    // Frees the live block picked by `which` (cache object or kmalloc block).
    void free_block(size_t which) {
        ++ops_;
        int bi = pick_block(which, false);
        if (bi < 0) return;
        free_at(static_cast<size_t>(bi));
    }

    // Checks every live block (large ones sampled; every block is checked whole when freed or
    // resized).
    void check_all() {
        for (const block &b : blocks_) check(b, "check", true);
    }

    // Frees everything and destroys every cache.
    void clear() {
        while (!blocks_.empty()) free_at(blocks_.size() - 1);
        for (size_t i = 0; i < caches_.size(); ++i)
            if (caches_[i].c) destroy_cache_at(static_cast<int>(i));
        caches_.clear();
    }

  private:
    void destroy_cache_at(int ci) {
        for (size_t i = blocks_.size(); i-- > 0;)
            if (blocks_[i].cache == ci) free_at(i);
        if (slabkit_cache_shrink(caches_[ci].c) != 0)
            fail("cache %s: shrink with no live objects != 0", caches_[ci].name.c_str());
        slabkit_cache_destroy(caches_[ci].c);
        caches_[ci].c = nullptr;
    }

    struct block {
        void *p;
        size_t size; // created size (cache) or requested size (kmalloc)
        int cache;   // index into caches_, -1 for kmalloc
        uint64_t id;
    };
    struct cache_rec {
        slabkit_cache *c = nullptr;
        size_t size = 0;
        size_t align = 8;
        int ctor = -1;
        size_t live = 0;
        std::string name;
    };

    void fail(const char *fmt, ...) __attribute__((format(printf, 2, 3))) {
        char buf[512];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof buf, fmt, ap);
        va_end(ap);
        fail_(buf);
    }

    // The live cache picked by `which` (modulo), or -1 when there is none.
    int pick_cache(size_t which) const {
        size_t n = live_caches();
        if (n == 0) return -1;
        size_t k = which % n;
        for (size_t i = 0; i < caches_.size(); ++i)
            if (caches_[i].c && k-- == 0) return static_cast<int>(i);
        return -1;
    }

    int pick_block(size_t which, bool kmalloc_only) const {
        if (blocks_.empty()) return -1;
        size_t start = which % blocks_.size();
        if (!kmalloc_only) return static_cast<int>(start);
        for (size_t k = 0; k < blocks_.size(); ++k) {
            size_t i = (start + k) % blocks_.size();
            if (blocks_[i].cache < 0) return static_cast<int>(i);
        }
        return -1;
    }

    bool check(const block &b, const char *when, bool sampled = false) {
        size_t at =
            sampled ? first_mismatch_sampled(b.p, b.size, b.id) : first_mismatch(b.p, b.size, b.id);
        if (at != b.size) {
            fail("%s: block %p (%s %s, %zu bytes, id %" PRIu64 ") changed at byte %zu", when, b.p,
                 b.cache < 0 ? "kmalloc" : "cache",
                 b.cache < 0 ? "" : caches_[static_cast<size_t>(b.cache)].name.c_str(), b.size,
                 b.id, at);
            return false;
        }
        return true;
    }

    void took_object(int ci, void *p, bool zero) {
        cache_rec &cr = caches_[static_cast<size_t>(ci)];
        if (!p) {
            fail("cache %s: alloc returned NULL", cr.name.c_str());
            return;
        }
        if (reinterpret_cast<uintptr_t>(p) % cr.align != 0)
            fail("cache %s: object %p not %zu-aligned", cr.name.c_str(), p, cr.align);
        if (cr.ctor >= 0 && !all_bytes_are(p, cr.size, kModelCtors[cr.ctor].byte))
            fail("cache %s: object %p is not in its constructed state", cr.name.c_str(), p);
        if (zero && !all_bytes_are(p, cr.size, 0))
            fail("cache %s: GFP_ZERO object %p not zeroed", cr.name.c_str(), p);
        add(p, cr.size, ci);
        ++cr.live;
    }

    void took_kmalloc(void *p, size_t size, bool zero) {
        if (size == 0) {
            if (p != SLABKIT_ZERO_SIZE_PTR) fail("kmalloc(0) returned %p", p);
            return;
        }
        if (!p || p == SLABKIT_ZERO_SIZE_PTR) {
            fail("kmalloc(%zu) returned %p", size, p);
            return;
        }
        uintptr_t a = reinterpret_cast<uintptr_t>(p);
        size_t want = size >= 16 ? 16 : 8;
        if ((size & (size - 1)) == 0 && size <= (size_t{4} << 20)) want = size > want ? size : want;
        if (a % want != 0) fail("kmalloc(%zu) = %p, not %zu-aligned", size, p, want);
        size_t ks = slabkit_ksize(p);
        if (ks < size) fail("ksize(kmalloc(%zu)) = %zu", size, ks);
        if (zero && !all_bytes_are(p, size, 0)) fail("zeroed kmalloc(%zu) = %p not zero", size, p);
        add(p, size, -1);
        live_bytes_ += size;
    }

    void add(void *p, size_t size, int cache) {
        uint64_t id = ++next_id_;
        if (!ptrs_.emplace(p, id).second) {
            fail("%p handed out while live", p);
            return; // never free it twice
        }
        fill(p, size, id);
        blocks_.push_back(block{p, size, cache, id});
    }

    // Checks block i and puts a constructed object back in its constructed state.
    void release_checked(size_t i) {
        block &b = blocks_[i];
        check(b, "free");
        if (b.cache >= 0) {
            const cache_rec &cr = caches_[static_cast<size_t>(b.cache)];
            if (cr.ctor >= 0) std::memset(b.p, kModelCtors[cr.ctor].byte, cr.size);
        }
    }

    void forget_at(size_t i) {
        block &b = blocks_[i];
        ptrs_.erase(b.p);
        if (b.cache >= 0)
            --caches_[static_cast<size_t>(b.cache)].live;
        else
            live_bytes_ -= b.size;
        blocks_[i] = blocks_.back();
        blocks_.pop_back();
    }

    void free_at(size_t i) {
        release_checked(i);
        block b = blocks_[i];
        forget_at(i);
        if (b.cache >= 0)
            slabkit_cache_free(caches_[static_cast<size_t>(b.cache)].c, b.p);
        else
            slabkit_kfree(b.p);
    }

    std::string design_;
    std::string tag_;
    std::function<void(const std::string &)> fail_;
    std::vector<cache_rec> caches_;
    std::vector<block> blocks_;
    std::unordered_map<void *, uint64_t> ptrs_;
    size_t live_bytes_ = 0;
    uint64_t next_id_ = 0;
    uint64_t ops_ = 0;
    unsigned name_seq_ = 0;
};

} // namespace slabkit::apitest
