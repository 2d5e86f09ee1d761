// name_text.hpp - short names (of caches, classes) built without the printf family.
//
// The malloc classes are named when a process first uses them, at start-up; snprintf would
// fault in the printf machinery of libc (tens of KiB of its code) in every preloaded process just
// for that. A name is pieces of text and decimal numbers, always NUL-terminated, cut at the
// buffer's end as snprintf would cut it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace slabkit {

struct name_text {
    char *buf;
    size_t size; // of buf, the NUL included; at least 1
    size_t len = 0;

    name_text(char *b, size_t n) : buf(b), size(n) { buf[0] = '\0'; }

    name_text &add(const char *s) {
        while (*s && len + 1 < size) buf[len++] = *s++;
        buf[len] = '\0';
        return *this;
    }
    name_text &add(uint64_t n) {
        char digits[20];
        unsigned k = 0;
        do {
            digits[k++] = static_cast<char>('0' + n % 10);
            n /= 10;
        } while (n);
        while (k && len + 1 < size) buf[len++] = digits[--k];
        buf[len] = '\0';
        return *this;
    }
};

} // namespace slabkit
