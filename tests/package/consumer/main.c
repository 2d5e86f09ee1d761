/* A C program built against the installed slabkit: the C API and the kernel names. */
#include <slabkit/kernel.h>
#include <slabkit/slabkit.h>

#include <stdio.h>
#include <string.h>

struct point {
    double x, y;
};

static int fail(const char *what) {
    fprintf(stderr, "consumer_c: %s\n", what);
    return 1;
}

int main(void) {
    struct kmem_cache *points = KMEM_CACHE(point, SLAB_HWCACHE_ALIGN);
    if (points == NULL) return fail("KMEM_CACHE");
    struct point *p = kmem_cache_alloc(points, GFP_KERNEL);
    if (p == NULL) return fail("kmem_cache_alloc");
    p->x = 1.0;
    p->y = 2.0;
    kmem_cache_free(points, p);
    kmem_cache_destroy(points);

    slabkit_cache *c = slabkit_cache_create("consumer-objs", 40, 0, 0, NULL);
    if (c == NULL) return fail("slabkit_cache_create");
    void *o = slabkit_cache_alloc(c, SLABKIT_GFP_ZERO);
    if (o == NULL) return fail("slabkit_cache_alloc");
    slabkit_cache_free(c, o);
    slabkit_cache_destroy(c);

    char *s = kmalloc(100, GFP_KERNEL);
    if (s == NULL || ksize(s) < 100) return fail("kmalloc");
    strcpy(s, "slabkit");
    s = krealloc(s, 5000, GFP_KERNEL);
    if (s == NULL || strcmp(s, "slabkit") != 0) return fail("krealloc");
    kfree(s);
    if (kcalloc((size_t)-1, 2, GFP_KERNEL) != NULL) return fail("kcalloc overflow");

    printf("consumer_c: ok (design %s)\n", slabkit_allocator());
    return 0;
}
