/* Kernel-style C (C11) over slabkit/kernel.h: every wrapper, used the way kernel code uses it. */
#include "kernel_c_test.h"

#include <slabkit/kernel.h>

#include <stdint.h>
#include <string.h>

#define STR2(x) #x
#define STR(x) STR2(x)
#define CHECK(e)                                                                                   \
    do {                                                                                           \
        if (!(e)) return STR(__LINE__) ": " #e;                                                    \
    } while (0)

static int is_aligned(const void *p, uintptr_t a) {
    return ((uintptr_t)p & (a - 1)) == 0;
}

static int all_bytes(const void *p, size_t n, unsigned char v) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; ++i)
        if (b[i] != v) return 0;
    return 1;
}

struct item {
    unsigned long id;
    char payload[40];
};

const char *kernel_c_cache_basics(void) {
    struct kmem_cache *items =
        kmem_cache_create("kc-items", sizeof(struct item), 0, SLAB_HWCACHE_ALIGN, NULL);
    CHECK(items != NULL);
    CHECK(kmem_cache_size(items) == sizeof(struct item));

    enum { N = 300 };
    struct item *objs[N];
    for (int i = 0; i < N; ++i) {
        objs[i] = kmem_cache_alloc(items, GFP_KERNEL);
        CHECK(objs[i] != NULL);
        CHECK(is_aligned(objs[i], 8));
        objs[i]->id = (unsigned long)i;
        memset(objs[i]->payload, i & 0xff, sizeof objs[i]->payload);
    }
    for (int i = 0; i < N; ++i) {
        CHECK(objs[i]->id == (unsigned long)i);
        CHECK(all_bytes(objs[i]->payload, sizeof objs[i]->payload, (unsigned char)(i & 0xff)));
    }
    for (int i = 0; i < N; i += 2) kmem_cache_free(items, objs[i]);
    for (int i = 0; i < N; i += 2) {
        objs[i] = kmem_cache_alloc(items, GFP_ATOMIC);
        CHECK(objs[i] != NULL);
    }
    for (int i = 0; i < N; ++i) kmem_cache_free(items, objs[i]);

    /* __GFP_ZERO through every path that takes it */
    struct item *z = kmem_cache_alloc(items, GFP_KERNEL);
    CHECK(z != NULL);
    memset(z, 0xa5, sizeof *z);
    kmem_cache_free(items, z);
    z = kmem_cache_zalloc(items, GFP_KERNEL);
    CHECK(z != NULL && all_bytes(z, sizeof *z, 0));
    memset(z, 0xa5, sizeof *z);
    kmem_cache_free(items, z);
    z = kmem_cache_alloc(items, GFP_NOWAIT | __GFP_ZERO);
    CHECK(z != NULL && all_bytes(z, sizeof *z, 0));
    kmem_cache_free(items, z);

    z = kmem_cache_alloc_node(items, GFP_KERNEL, NUMA_NO_NODE);
    CHECK(z != NULL);
    z->id = 7;
    kmem_cache_free(items, z);
    z = kmem_cache_alloc_node(items, GFP_KERNEL | __GFP_ZERO, 0);
    CHECK(z != NULL && all_bytes(z, sizeof *z, 0));
    kmem_cache_free(items, z);

    kmem_cache_destroy(items);
    kmem_cache_destroy(NULL);
    return NULL;
}

static int ctor_runs;

static void item_ctor(void *obj) {
    struct item *it = obj;
    it->id = 0xc0ffee;
    memset(it->payload, 'c', sizeof it->payload);
    ++ctor_runs;
}

const char *kernel_c_cache_ctor(void) {
    ctor_runs = 0;
    struct kmem_cache *items = kmem_cache_create("kc-ctor", sizeof(struct item), 64, 0, item_ctor);
    CHECK(items != NULL);
    enum { N = 100 };
    struct item *objs[N];
    for (int i = 0; i < N; ++i) {
        objs[i] = kmem_cache_alloc(items, GFP_KERNEL);
        CHECK(objs[i] != NULL);
        CHECK(is_aligned(objs[i], 64));
        CHECK(objs[i]->id == 0xc0ffee);
        CHECK(all_bytes(objs[i]->payload, sizeof objs[i]->payload, 'c'));
    }
    /* once per object when its slab is built: at least N runs, never one per allocation after;
     * SLOB has no slabs and runs it on every allocation, as the kernel's SLOB did */
    CHECK(ctor_runs >= N);
    struct slabkit_cache_stats st;
    slabkit_get_cache_stats(items, &st);
    const int per_allocation = strcmp(st.design, "slob") == 0;
    int runs = ctor_runs;
    /* objects go back in their constructed state and come out in it again */
    for (int i = 0; i < N; ++i) kmem_cache_free(items, objs[i]);
    for (int i = 0; i < N; ++i) {
        objs[i] = kmem_cache_alloc(items, GFP_KERNEL);
        CHECK(objs[i] != NULL && objs[i]->id == 0xc0ffee);
    }
    CHECK(ctor_runs == (per_allocation ? runs + N : runs));
    for (int i = 0; i < N; ++i) kmem_cache_free(items, objs[i]);
    kmem_cache_destroy(items);
    return NULL;
}

const char *kernel_c_cache_bulk_and_shrink(void) {
    struct kmem_cache *c = kmem_cache_create("kc-bulk", 24, 8, 0, NULL);
    CHECK(c != NULL);
    enum { N = 500 };
    void *objs[N];
    int got = kmem_cache_alloc_bulk(c, GFP_KERNEL, N, objs);
    CHECK(got == N);
    for (int i = 0; i < N; ++i) {
        CHECK(objs[i] != NULL);
        memset(objs[i], i & 0xff, 24);
    }
    for (int i = 0; i < N; ++i) CHECK(all_bytes(objs[i], 24, (unsigned char)(i & 0xff)));
    kmem_cache_free_bulk(c, N, objs);

    CHECK(kmem_cache_alloc_bulk(c, GFP_KERNEL | __GFP_ZERO, 10, objs) == 10);
    for (int i = 0; i < 10; ++i) CHECK(all_bytes(objs[i], 24, 0));
    /* a cache with live objects keeps pages */
    CHECK(kmem_cache_shrink(c) == 1);
    kmem_cache_free_bulk(c, 10, objs);
    /* every object freed on this (only) thread: shrink gives every page back */
    CHECK(kmem_cache_shrink(c) == 0);
    kmem_cache_free_bulk(c, 0, objs);
    kmem_cache_destroy(c);
    return NULL;
}

struct kc_macro_obj {
    long long a;
    double b;
    char c;
};

const char *kernel_c_kmem_cache_macro(void) {
    struct kmem_cache *c = KMEM_CACHE(kc_macro_obj, SLAB_ACCOUNT);
    CHECK(c != NULL);
    CHECK(kmem_cache_size(c) == sizeof(struct kc_macro_obj));
    CHECK(strcmp(slabkit_cache_name(c), "kc_macro_obj") == 0);
    struct kc_macro_obj *o = kmem_cache_alloc(c, GFP_KERNEL);
    CHECK(o != NULL && is_aligned(o, _Alignof(struct kc_macro_obj)));
    o->c = 'x';
    kmem_cache_free(c, o);
    kmem_cache_destroy(c);
    return NULL;
}

const char *kernel_c_kmalloc_sizes(void) {
    static const size_t sizes[] = {
        1,    7,    8,    9,    16,   17,   31,    64,    95,      96,
        100,  128,  129,  192,  250,  256,  511,   512,   1000,    1024,
        2048, 3000, 4096, 5000, 8192, 8193, 12288, 65536, 1 << 20, (5u << 20) + 3};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        size_t n = sizes[i];
        unsigned char *p = kmalloc(n, GFP_KERNEL);
        CHECK(p != NULL && !ZERO_OR_NULL_PTR(p));
        CHECK(ksize(p) >= n);
        CHECK(is_aligned(p, 8)); /* the kernel's minimum (SLOB's blocks have no more) */
        if ((n & (n - 1)) == 0 && n <= KMALLOC_MAX_CACHE_SIZE) CHECK(is_aligned(p, n));
        p[0] = 1;
        p[n - 1] = 2;
        kfree(p);

        p = kmalloc_node(n, GFP_KERNEL, NUMA_NO_NODE);
        CHECK(p != NULL && ksize(p) >= n);
        p[n - 1] = 3;
        kfree(p);
    }
    /* impossible sizes fail cleanly */
    CHECK(kmalloc(SIZE_MAX, GFP_KERNEL) == NULL);
    CHECK(kmalloc(SIZE_MAX / 2, GFP_KERNEL) == NULL);
    return NULL;
}

const char *kernel_c_kmalloc_zero_and_null(void) {
    void *z = kmalloc(0, GFP_KERNEL);
    CHECK(z == ZERO_SIZE_PTR);
    CHECK(ZERO_OR_NULL_PTR(z));
    CHECK(ZERO_OR_NULL_PTR(NULL));
    CHECK(ksize(z) == 0);
    CHECK(ksize(NULL) == 0);
    kfree(z);
    kfree(NULL);
    CHECK(kzalloc(0, GFP_KERNEL) == ZERO_SIZE_PTR);
    CHECK(kcalloc(0, 8, GFP_KERNEL) == ZERO_SIZE_PTR);
    CHECK(kcalloc(8, 0, GFP_KERNEL) == ZERO_SIZE_PTR);
    void *p = kmalloc(8, GFP_KERNEL);
    CHECK(p != NULL && !ZERO_OR_NULL_PTR(p));
    kfree(p);
    return NULL;
}

const char *kernel_c_kzalloc_kcalloc(void) {
    /* dirty a few blocks of each size first, so that zeroing is really checked */
    static const size_t sizes[] = {8, 40, 96, 200, 1024, 4000, 8192, 20000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        size_t n = sizes[i];
        void *dirty[4];
        for (int j = 0; j < 4; ++j) {
            dirty[j] = kmalloc(n, GFP_KERNEL);
            CHECK(dirty[j] != NULL);
            memset(dirty[j], 0xee, n);
        }
        for (int j = 0; j < 4; ++j) kfree(dirty[j]);

        void *a = kzalloc(n, GFP_KERNEL);
        CHECK(a != NULL && all_bytes(a, n, 0));
        void *b = kmalloc(n, GFP_KERNEL | __GFP_ZERO);
        CHECK(b != NULL && all_bytes(b, n, 0));
        void *c = kcalloc(n / 8, 8, GFP_KERNEL);
        CHECK(c != NULL && all_bytes(c, n, 0));
        void *d = kzalloc_node(n, GFP_KERNEL, NUMA_NO_NODE);
        CHECK(d != NULL && all_bytes(d, n, 0));
        void *e = kmalloc_array(n / 8, 8, GFP_KERNEL | __GFP_ZERO);
        CHECK(e != NULL && all_bytes(e, n, 0));
        kfree(a);
        kfree(b);
        kfree(c);
        kfree(d);
        kfree(e);
    }
    /* n * size overflow: NULL, nothing allocated */
    CHECK(kcalloc(SIZE_MAX / 2 + 1, 2, GFP_KERNEL) == NULL);
    CHECK(kcalloc(2, SIZE_MAX / 2 + 1, GFP_KERNEL) == NULL);
    CHECK(kcalloc(SIZE_MAX, SIZE_MAX, GFP_KERNEL) == NULL);
    CHECK(kmalloc_array(SIZE_MAX / 4 + 1, 4, GFP_KERNEL) == NULL);
    void *arr = kmalloc_array(10, 12, GFP_KERNEL);
    CHECK(arr != NULL && ksize(arr) >= 120);
    kfree(arr);
    return NULL;
}

const char *kernel_c_krealloc(void) {
    char *p = krealloc(NULL, 10, GFP_KERNEL); /* krealloc(NULL, n) is kmalloc(n) */
    CHECK(p != NULL);
    memcpy(p, "123456789", 10);
    size_t sizes[] = {20, 100, 1000, 5000, 9000, 70000, 50, 12};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
        char *q = krealloc(p, sizes[i], GFP_KERNEL);
        CHECK(q != NULL);
        CHECK(ksize(q) >= sizes[i]);
        CHECK(memcmp(q, "123456789", 10) == 0);
        p = q;
    }
    /* shrinking within the block stays in place */
    char *same = krealloc(p, 11, GFP_KERNEL);
    CHECK(same == p);
    p = same;
    /* impossible size: NULL, and p untouched */
    CHECK(krealloc(p, SIZE_MAX, GFP_KERNEL) == NULL);
    CHECK(memcmp(p, "123456789", 10) == 0);
    /* zero size frees */
    CHECK(krealloc(p, 0, GFP_KERNEL) == ZERO_SIZE_PTR);
    const char *cp = kmalloc(32, GFP_KERNEL); /* the kernel's krealloc and kfree take const */
    CHECK(cp != NULL);
    cp = krealloc(cp, 64, GFP_KERNEL);
    CHECK(cp != NULL);
    kfree(cp);
    return NULL;
}

const char *kernel_c_flags(void) {
    CHECK(__GFP_ZERO == SLABKIT_GFP_ZERO);
    CHECK((GFP_KERNEL & __GFP_ZERO) == 0);
    CHECK((GFP_ATOMIC & __GFP_ZERO) == 0);
    CHECK((GFP_NOWAIT & __GFP_ZERO) == 0);
    CHECK((GFP_NOFS & __GFP_ZERO) == 0);
    CHECK((GFP_NOIO & __GFP_ZERO) == 0);
    CHECK(GFP_KERNEL != GFP_ATOMIC);
    CHECK(SLAB_HWCACHE_ALIGN == SLABKIT_HWCACHE_ALIGN);
    CHECK(SLAB_PANIC == SLABKIT_PANIC);
    CHECK(SLAB_POISON == SLABKIT_POISON);
    CHECK(SLAB_RED_ZONE == SLABKIT_RED_ZONE);
    CHECK(SLAB_STORE_USER == SLABKIT_STORE_USER);
    CHECK(NUMA_NO_NODE == -1);
    CHECK(ZERO_SIZE_PTR == SLABKIT_ZERO_SIZE_PTR);
    gfp_t gfp = GFP_KERNEL | __GFP_NOWARN;
    slab_flags_t flags = SLAB_HWCACHE_ALIGN | SLAB_RECLAIM_ACCOUNT;
    struct kmem_cache *c = kmem_cache_create("kc-flags", 100, 0, flags, NULL);
    CHECK(c != NULL);
    void *o = kmem_cache_alloc(c, gfp);
    CHECK(o != NULL);
    kmem_cache_free(c, o);
    kmem_cache_destroy(c);
    return NULL;
}

/* kmem_cache_create_args and the prefilled sheaves: a sheaf of at least the size asked for,
 * every object once (zeroed with __GFP_ZERO), NULL once empty, refilled past its size, -EINVAL
 * for no sheaf, and everything given back. */
const char *kernel_c_sheaves(void) {
    struct kmem_cache_args args = {.align = 0, .ctor = NULL, .sheaf_capacity = 100};
    struct kmem_cache *c = kmem_cache_create_args("kc-sheaves", sizeof(struct item), &args, 0);
    CHECK(c != NULL);
    CHECK(kmem_cache_prefill_sheaf(c, GFP_KERNEL, 0) == NULL);
    struct slab_sheaf *sh = kmem_cache_prefill_sheaf(c, GFP_KERNEL, 20);
    CHECK(sh != NULL);
    unsigned int n = kmem_cache_sheaf_size(sh);
    CHECK(n >= 20);

    enum { MAX = 400 };
    struct item *objs[MAX];
    unsigned int nobj = 0;
    while (kmem_cache_sheaf_size(sh) > 0) {
        struct item *it = kmem_cache_alloc_from_sheaf(c, GFP_KERNEL | __GFP_ZERO, sh);
        CHECK(it != NULL && all_bytes(it, sizeof *it, 0));
        CHECK(nobj < MAX);
        it->id = nobj;
        memset(it->payload, 0x5c, sizeof it->payload);
        objs[nobj++] = it;
    }
    CHECK(nobj == n);
    CHECK(kmem_cache_alloc_from_sheaf(c, GFP_KERNEL, sh) == NULL);

    CHECK(kmem_cache_refill_sheaf(c, GFP_KERNEL, &sh, 150) == 0);
    CHECK(sh != NULL && kmem_cache_sheaf_size(sh) >= 150);
    for (int i = 0; i < 100; ++i) {
        struct item *it = kmem_cache_alloc_from_sheaf(c, GFP_KERNEL, sh);
        CHECK(it != NULL && nobj < MAX);
        it->id = nobj;
        memset(it->payload, 0x5c, sizeof it->payload);
        objs[nobj++] = it;
    }
    struct slab_sheaf *none = NULL;
    CHECK(kmem_cache_refill_sheaf(c, GFP_KERNEL, &none, 4) == -22);
    CHECK(kmem_cache_refill_sheaf(c, GFP_KERNEL, NULL, 4) == -22);
    kmem_cache_return_sheaf(c, GFP_KERNEL, sh);

    for (unsigned int i = 0; i < nobj; ++i) {
        CHECK(objs[i]->id == i);
        CHECK(all_bytes(objs[i]->payload, sizeof objs[i]->payload, 0x5c));
        for (unsigned int j = i + 1; j < nobj && j < i + 8; ++j) CHECK(objs[i] != objs[j]);
    }
    for (unsigned int i = 0; i < nobj; ++i) kmem_cache_free(c, objs[i]);
    CHECK(kmem_cache_shrink(c) == 0);
    kmem_cache_destroy(c);
    return NULL;
}
