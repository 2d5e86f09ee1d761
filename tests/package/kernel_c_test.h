// The C scenarios of kernel_c_test.c: each returns NULL when every check passed, or the first
// failed check ("line: expression").
#ifndef SLABKIT_TESTS_KERNEL_C_TEST_H
#define SLABKIT_TESTS_KERNEL_C_TEST_H

#ifdef __cplusplus
extern "C" {
#endif

const char *kernel_c_cache_basics(void);
const char *kernel_c_cache_ctor(void);
const char *kernel_c_cache_bulk_and_shrink(void);
const char *kernel_c_kmem_cache_macro(void);
const char *kernel_c_kmalloc_sizes(void);
const char *kernel_c_kmalloc_zero_and_null(void);
const char *kernel_c_kzalloc_kcalloc(void);
const char *kernel_c_krealloc(void);
const char *kernel_c_flags(void);
const char *kernel_c_sheaves(void);

#ifdef __cplusplus
}
#endif

#endif
