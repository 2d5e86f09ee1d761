// vm_flags.hpp - what the kernel says of a mapping: the VmFlags line of /proc/self/smaps for the
// mapping that holds an address ("hg": MADV_HUGEPAGE asked, "nh": MADV_NOHUGEPAGE).
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>

namespace slabkit::test {

// The VmFlags line (after "VmFlags:") of the mapping holding p; "" if no mapping holds it.
inline std::string vm_flags_of(const void *p) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return "";
    const auto a = reinterpret_cast<uintptr_t>(p);
    char line[512];
    bool inside = false;
    std::string flags;
    while (fgets(line, sizeof line, f)) {
        unsigned long lo = 0, hi = 0;
        // Mapping header lines start "start-end perms ..."; field lines ("Rss:") do not.
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            inside = a >= lo && a < hi;
            continue;
        }
        if (inside && strncmp(line, "VmFlags:", 8) == 0) {
            flags = line + 8;
            break;
        }
    }
    fclose(f);
    return flags;
}

// True when the mapping holding p carries the two-letter VmFlags flag `flag` ("hg", "nh").
inline bool has_vm_flag(const void *p, const char *flag) {
    return vm_flags_of(p).find(std::string(" ") + flag) != std::string::npos;
}

} // namespace slabkit::test
