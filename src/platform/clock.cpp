// clock.cpp - the monotonic clocks, read through the kernel's vDSO directly.
//
// glibc's clock_gettime reads the same vDSO, but its wrapper sits on a page of libc's code that a
// small program does not otherwise run; the kernel maps a 64 KiB window of file pages around each
// page it faults in, so every preloaded shell counted 64 KiB more resident memory for that one
// call (bench/start_ratios.py). The vDSO's own clock_gettime is found once, from the ELF image
// the kernel maps into every process (getauxval(AT_SYSINFO_EHDR)); without it, the system call.
#include "platform/platform.hpp"

#include <atomic>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <elf.h>
#include <sys/auxv.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace slabkit::platform {

namespace {

using clock_fn = int (*)(clockid_t, timespec *);

// The vDSO's exported symbol `name` (a defined function), or nullptr.
void *vdso_symbol(const char *name) {
    const auto base = static_cast<uintptr_t>(getauxval(AT_SYSINFO_EHDR));
    if (!base) return nullptr;
    const auto *eh = reinterpret_cast<const Elf64_Ehdr *>(base);
    if (std::memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
        return nullptr;
    // Where the image's addresses land: its first loadable segment is mapped at base.
    const auto *ph = reinterpret_cast<const Elf64_Phdr *>(base + eh->e_phoff);
    uintptr_t load = 0;
    bool have_load = false;
    const Elf64_Dyn *dyn = nullptr;
    for (unsigned i = 0; i < eh->e_phnum; ++i) {
        if (ph[i].p_type == PT_LOAD && !have_load) {
            load = base + ph[i].p_offset - ph[i].p_vaddr;
            have_load = true;
        } else if (ph[i].p_type == PT_DYNAMIC) {
            dyn = reinterpret_cast<const Elf64_Dyn *>(base + ph[i].p_offset);
        }
    }
    if (!have_load || !dyn) return nullptr;
    const Elf64_Sym *symtab = nullptr;
    const char *strtab = nullptr;
    const Elf64_Word *hash = nullptr;
    for (; dyn->d_tag != DT_NULL; ++dyn) {
        if (dyn->d_tag == DT_SYMTAB)
            symtab = reinterpret_cast<const Elf64_Sym *>(load + dyn->d_un.d_ptr);
        if (dyn->d_tag == DT_STRTAB)
            strtab = reinterpret_cast<const char *>(load + dyn->d_un.d_ptr);
        if (dyn->d_tag == DT_HASH)
            hash = reinterpret_cast<const Elf64_Word *>(load + dyn->d_un.d_ptr);
    }
    if (!symtab || !strtab || !hash) return nullptr;
    const Elf64_Word nsyms = hash[1]; // nchain: one entry per symbol
    for (Elf64_Word i = 0; i < nsyms; ++i) {
        const Elf64_Sym &sym = symtab[i];
        if (ELF64_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
        if (std::strcmp(strtab + sym.st_name, name) == 0)
            return reinterpret_cast<void *>(load + sym.st_value);
    }
    return nullptr;
}

// The vDSO's clock_gettime; a value of 1 means "not looked up yet" (races look it up twice and
// store the same answer).
std::atomic<uintptr_t> g_vdso_clock{1};

clock_fn vdso_clock() {
    uintptr_t f = g_vdso_clock.load(std::memory_order_acquire);
    if (__builtin_expect(f == 1, 0)) {
        f = reinterpret_cast<uintptr_t>(vdso_symbol("__vdso_clock_gettime"));
        g_vdso_clock.store(f, std::memory_order_release);
    }
    return reinterpret_cast<clock_fn>(f);
}

void read_clock(clockid_t id, timespec *ts) {
    if (clock_fn f = vdso_clock(); __builtin_expect(f != nullptr, 1) && f(id, ts) == 0) return;
    int saved = errno; // callers may be inside free, which keeps errno
    syscall(SYS_clock_gettime, id, ts);
    errno = saved;
}

} // namespace

uint64_t now_ns() {
    timespec ts;
    read_clock(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t now_coarse_ms() {
    timespec ts;
    read_clock(CLOCK_MONOTONIC_COARSE, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000u + static_cast<uint64_t>(ts.tv_nsec) / 1000000u;
}

bool clock_from_vdso() {
    return vdso_clock() != nullptr;
}

} // namespace slabkit::platform
