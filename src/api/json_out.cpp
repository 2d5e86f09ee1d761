// json_out.cpp - string escaping of the JSON writer.
#include "api/json_out.hpp"

namespace slabkit::api {

json_out &json_out::string_n(const char *s, size_t n) {
    separate();
    write_string_n(s ? s : "", n);
    return *this;
}

void json_out::write_string_n(const char *s, size_t n) {
    out_.printf("\"");
    for (size_t i = 0; i < n && s[i]; ++i) {
        const auto c = static_cast<unsigned char>(s[i]);
        switch (c) {
        case '"':
            out_.printf("\\\"");
            break;
        case '\\':
            out_.printf("\\\\");
            break;
        case '\n':
            out_.printf("\\n");
            break;
        case '\t':
            out_.printf("\\t");
            break;
        case '\r':
            out_.printf("\\r");
            break;
        default:
            if (c < 0x20)
                out_.printf("\\u%04x", c);
            else
                out_.printf("%c", c);
        }
    }
    out_.printf("\"");
}

} // namespace slabkit::api
