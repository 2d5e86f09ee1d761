// json_out.hpp - a streaming JSON writer into a bounded buffer (core's text_out), for the
// statistics as data (slabkit_stats_json, the live segment's snapshot and replies). It never
// allocates: the library cannot use a JSON library, which would allocate through malloc.
//
// The writer keeps a stack of "first member?" bits so that commas go where they belong:
//   json_out j{out};  j.begin_object();  j.key("a").number(1);  j.key("b").string("x");
//   j.end_object();   ->  {"a":1,"b":"x"}
#pragma once

#include "core/slabinfo.hpp"

#include <cstdint>

namespace slabkit::api {

class json_out {
  public:
    explicit json_out(text_out &out) : out_(out) {}

    json_out &begin_object() { return open('{'); }
    json_out &end_object() { return close('}'); }
    json_out &begin_array() { return open('['); }
    json_out &end_array() { return close(']'); }
    // The next member's name (inside an object).
    json_out &key(const char *name) {
        separate();
        write_string(name);
        out_.append(":", 1);
        after_key_ = true;
        return *this;
    }
    json_out &number(uint64_t v) {
        separate();
        write_decimal(v, false);
        return *this;
    }
    json_out &signed_number(int64_t v) {
        separate();
        if (v < 0)
            write_decimal(uint64_t{0} - static_cast<uint64_t>(v), true);
        else
            write_decimal(static_cast<uint64_t>(v), false);
        return *this;
    }
    // A value already written as JSON text (a decimal fraction; an array another writer made).
    json_out &json_text(const char *text, size_t n) {
        separate();
        out_.append(text, n);
        return *this;
    }
    json_out &number_text(const char *text) { return json_text(text, __builtin_strlen(text)); }
    json_out &boolean(bool v) {
        separate();
        out_.append(v ? "true" : "false", v ? 4 : 5);
        return *this;
    }
    json_out &string(const char *s) {
        separate();
        write_string(s ? s : "");
        return *this;
    }
    // The same with at most n bytes of s (a text that is not NUL-terminated).
    json_out &string_n(const char *s, size_t n);
    // A member in one call.
    json_out &member(const char *name, uint64_t v) { return key(name).number(v); }
    json_out &member(const char *name, const char *s) { return key(name).string(s); }

  private:
    json_out &open(char c) {
        separate();
        out_.append(&c, 1);
        if (depth_ < kMaxDepth) first_[depth_] = true;
        ++depth_;
        return *this;
    }
    json_out &close(char c) {
        if (depth_) --depth_;
        out_.append(&c, 1);
        return *this;
    }
    // A comma before every value but the first of its object or array (a member's value follows
    // its key with none).
    void separate() {
        if (after_key_) {
            after_key_ = false;
            return;
        }
        if (depth_ == 0 || depth_ > kMaxDepth) return;
        if (!first_[depth_ - 1]) out_.append(",", 1);
        first_[depth_ - 1] = false;
    }
    void write_string(const char *s) { write_string_n(s, ~size_t{0}); }
    void write_string_n(const char *s, size_t n);
    void write_decimal(uint64_t v, bool minus);

    static constexpr unsigned kMaxDepth = 16;
    text_out &out_;
    unsigned depth_ = 0;
    bool first_[kMaxDepth] = {};
    bool after_key_ = false;
};

} // namespace slabkit::api
