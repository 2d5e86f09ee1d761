// thread_mode.cpp - the internal layers' unit tests look inside slots (a thread's own slot, its
// per-slot structures, idle slots left by exited threads): they run in thread mode unless
// SLABKIT_SLOTS says otherwise (ctest's slabkit_tests_cpu runs the tests that hold in both
// modes again in CPU mode).
#include "slot/slot.hpp"

#include <cstdio>
#include <cstdlib>

namespace {
__attribute__((constructor)) void choose_thread_mode() {
    if (getenv("SLABKIT_SLOTS") != nullptr) return;
    const char *why = nullptr;
    if (!slabkit::slots::set_mode(slabkit::slots::mode::thread, &why)) {
        fprintf(stderr, "slabkit_tests: cannot choose thread mode: %s\n", why);
        abort();
    }
}
} // namespace
