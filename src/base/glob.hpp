// glob.hpp - cache-name patterns with '*' wildcards, as the kernel's slub_debug and failslab
// cache lists take them (SLABKIT_DEBUG, SLABKIT_FAILSLAB_CACHES).
#pragma once

namespace slabkit {

// Whether `s` matches `pat`, where '*' stands for any run of characters (none included).
inline bool glob_match(const char *pat, const char *s) {
    if (*pat == '\0') return *s == '\0';
    if (*pat == '*') {
        for (;; ++s) {
            if (glob_match(pat + 1, s)) return true;
            if (*s == '\0') return false;
        }
    }
    return *pat == *s && glob_match(pat + 1, s + 1);
}

} // namespace slabkit
