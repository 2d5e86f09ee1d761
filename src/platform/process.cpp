// process.cpp - what the live statistics need of the OS: who this process is, the wall clock,
// POSIX shared memory, and an in-memory file to print a report into.
#include "platform/platform.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace slabkit::platform {

int process_id() {
    return static_cast<int>(getpid());
}

uint64_t process_start_ticks() {
    char buf[1024];
    if (!read_small_file("/proc/self/stat", buf, sizeof buf)) return 0;
    // The program's name (field 2) is in parentheses and may hold spaces and parentheses: the
    // fields after it start past the last ')'. Field 3 comes first there; 22 is the 20th.
    const char *p = strrchr(buf, ')');
    if (!p) return 0;
    ++p;
    for (int field = 3; field < 22 && *p; ++field) {
        while (*p == ' ') ++p;
        while (*p && *p != ' ') ++p;
    }
    unsigned long long ticks = 0;
    if (sscanf(p, " %llu", &ticks) != 1) return 0;
    return ticks;
}

void program_name(char *buf, size_t size) {
    if (!size) return;
    char comm[64];
    size_t n = read_small_file("/proc/self/comm", comm, sizeof comm) ? strlen(comm) : 0;
    while (n && (comm[n - 1] == '\n' || comm[n - 1] == ' ')) comm[--n] = '\0';
    snprintf(buf, size, "%s", n ? comm : "?");
}

uint64_t realtime_ns() {
    timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

void *shared_memory_create(const char *name, size_t size, os_status *status) {
    int fd = -1;
    for (int attempt = 0; attempt < 2 && fd < 0; ++attempt) {
        fd = shm_open(name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        // A name left by a process that died with our pid: it is ours to replace.
        if (fd < 0 && errno == EEXIST) shm_unlink(name);
    }
    if (fd < 0) {
        *status = {"shm_open", errno};
        return nullptr;
    }
    if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
        *status = {"ftruncate", errno};
        close(fd);
        shm_unlink(name);
        return nullptr;
    }
    void *p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int err = errno;
    close(fd);
    if (p == MAP_FAILED) {
        *status = {"mmap", err};
        shm_unlink(name);
        return nullptr;
    }
    *status = {};
    return p;
}

void shared_memory_close(const char *name, void *addr, size_t size, bool remove) {
    if (addr) munmap(addr, size);
    if (remove) shm_unlink(name);
}

bool for_each_writable_mapping(void (*fn)(uintptr_t start, uintptr_t end, void *arg), void *arg) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return false;
    // Lines are read through a window: a line is "start-end perms offset dev inode [path]".
    static char buf[16384];
    size_t have = 0;
    bool ok = true;
    for (;;) {
        ssize_t n = read(fd, buf + have, sizeof buf - 1 - have);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            ok = false;
            break;
        }
        have += static_cast<size_t>(n);
        buf[have] = '\0';
        char *line = buf;
        for (char *nl; (nl = strchr(line, '\n')) != nullptr; line = nl + 1) {
            *nl = '\0';
            unsigned long start = 0, end = 0;
            char perms[8] = {};
            if (sscanf(line, "%lx-%lx %7s", &start, &end, perms) == 3 && perms[0] == 'r' &&
                perms[1] == 'w' && perms[3] == 'p')
                fn(start, end, arg);
        }
        // Keep the unfinished line for the next read.
        const size_t rest = have - static_cast<size_t>(line - buf);
        memmove(buf, line, rest);
        have = rest;
        if (n == 0) break;
        if (have == sizeof buf - 1) have = 0; // a line longer than the window: dropped
    }
    close(fd);
    return ok;
}

int temp_fd() {
    return memfd_create("slabkit-report", MFD_CLOEXEC);
}

size_t read_back(int fd, char *buf, size_t size) {
    size_t got = 0;
    while (got < size) {
        ssize_t n = pread(fd, buf + got, size - got, static_cast<off_t>(got));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        got += static_cast<size_t>(n);
    }
    return got;
}

void close_fd(int fd) {
    if (fd >= 0) close(fd);
}

} // namespace slabkit::platform
