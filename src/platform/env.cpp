// env.cpp - environment variables, messages on stderr, fatal errors, random bits.
#include "platform/platform.hpp"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <sys/random.h>
#include <unistd.h>

namespace slabkit::platform {

const char *describe(os_status status, char *buf, size_t size) {
    if (status.ok()) {
        snprintf(buf, size, "ok");
        return buf;
    }
    const char *text = strerrordesc_np(status.err);
    snprintf(buf, size, "%s: %s (errno %d)", status.call, text ? text : "unknown error",
             status.err);
    return buf;
}

const char *env(const char *name) {
    return getenv(name);
}

int env_int(const char *name, int unset, unsigned min, unsigned max) {
    if (!env(name)) return unset;
    return static_cast<int>(env_uint(name, 0, min, max));
}

uint64_t env_uint(const char *name, uint64_t fallback, uint64_t min, uint64_t max) {
    const char *text = env(name);
    if (text == nullptr) return fallback;
    uint64_t value = 0;
    bool ok = *text != '\0';
    for (const char *p = text; ok && *p; ++p) {
        const uint64_t digit = static_cast<uint64_t>(*p - '0');
        if (*p < '0' || *p > '9' || value > (UINT64_MAX - digit) / 10)
            ok = false;
        else
            value = value * 10 + digit;
    }
    if (!ok || value < min || value > max) {
        print_error("slabkit: %s='%s' is not a whole number in %llu..%llu; using %llu\n", name,
                    text, static_cast<unsigned long long>(min),
                    static_cast<unsigned long long>(max),
                    static_cast<unsigned long long>(fallback));
        return fallback;
    }
    return value;
}

void *next_symbol(const char *name) {
    return dlsym(RTLD_NEXT, name);
}

void write_stderr(const char *buf, size_t len) {
    write_fd(STDERR_FILENO, buf, len);
}

void write_fd(int fd, const char *buf, size_t len) {
    int saved = errno;
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        buf += n;
        len -= static_cast<size_t>(n);
    }
    errno = saved;
}

namespace {
void vprint(const char *fmt, va_list ap) {
    char buf[1024];
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    if (n < 0) return;
    size_t len = static_cast<size_t>(n) < sizeof buf ? static_cast<size_t>(n) : sizeof buf - 1;
    write_stderr(buf, len);
}
} // namespace

void print_error(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(fmt, ap);
    va_end(ap);
}

void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(fmt, ap);
    va_end(ap);
    abort();
}

void exit_with_error(int status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vprint(fmt, ap);
    va_end(ap);
    _exit(status);
}

uint64_t random_u64() {
    uint64_t v = 0;
    int saved = errno; // callers may be inside free, which keeps errno
    ssize_t got = getrandom(&v, sizeof v, GRND_NONBLOCK);
    errno = saved;
    if (got == static_cast<ssize_t>(sizeof v)) return v;
    uint64_t x =
        now_ns() ^ (static_cast<uint64_t>(getpid()) << 32) ^ reinterpret_cast<uintptr_t>(&v);
    // splitmix64's finaliser, so that close inputs give unrelated outputs
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

} // namespace slabkit::platform
