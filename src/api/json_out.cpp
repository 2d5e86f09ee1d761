// json_out.cpp - string escaping of the JSON writer.
#include "api/json_out.hpp"

namespace slabkit::api {

json_out &json_out::string_n(const char *s, size_t n) {
    separate();
    write_string_n(s ? s : "", n);
    return *this;
}

void json_out::write_string_n(const char *s, size_t n) {
    out_.append("\"", 1);
    size_t run = 0; // bytes since the last escape, written in one piece
    size_t i = 0;
    auto flush = [&] {
        if (run) out_.append(s + i - run, run);
        run = 0;
    };
    for (; i < n && s[i]; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        const char *esc = nullptr;
        char hex[8];
        switch (c) {
        case '"':
            esc = "\\\"";
            break;
        case '\\':
            esc = "\\\\";
            break;
        case '\n':
            esc = "\\n";
            break;
        case '\t':
            esc = "\\t";
            break;
        case '\r':
            esc = "\\r";
            break;
        default:
            if (c < 0x20) {
                static constexpr char kHex[] = "0123456789abcdef";
                hex[0] = '\\', hex[1] = 'u', hex[2] = '0', hex[3] = '0';
                hex[4] = kHex[c >> 4], hex[5] = kHex[c & 15], hex[6] = '\0';
                esc = hex;
            }
        }
        if (!esc) {
            ++run;
            continue;
        }
        flush();
        size_t len = 0;
        while (esc[len]) ++len;
        out_.append(esc, len);
    }
    flush();
    out_.append("\"", 1);
}

void json_out::write_decimal(uint64_t v, bool minus) {
    char digits[24];
    size_t n = sizeof digits;
    do {
        digits[--n] = static_cast<char>('0' + v % 10);
        v /= 10;
    } while (v);
    if (minus) digits[--n] = '-';
    out_.append(digits + n, sizeof digits - n);
}

} // namespace slabkit::api
