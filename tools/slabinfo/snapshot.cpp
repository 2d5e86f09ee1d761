// snapshot.cpp - reading, checking and writing the JSON snapshot (docs/slabinfo.md).
#include "slabinfo/snapshot.hpp"

#include <bit>
#include <limits>
#include <optional>
#include <type_traits>

#include <fmt/format.h>

namespace slabinfo {

namespace {

using json = nlohmann::ordered_json;

struct field_probe {
    template <class T>
    void operator()(const char *, T &) const {}
};
// A struct that lists its fields (snapshot.hpp).
template <class T>
concept record = requires(T &t) {
    T::fields(t, field_probe{});
};

template <class T>
struct is_optional : std::false_type {};
template <class T>
struct is_optional<std::optional<T>> : std::true_type {};

// A value as a message may show it: its JSON text, cut short.
std::string shown(const json &j) {
    std::string text = j.dump();
    if (text.size() > 40) text = text.substr(0, 37) + "...";
    return one_line(text);
}

// Reads the fields of the records, naming each by its path (caches[2].activity.allocs) in errors.
class reader {
  public:
    explicit reader(std::string_view source) : source_(source) {}

    [[noreturn]] void fail(const std::string &what) const {
        throw slabinfo_error(fmt::format("{}: {}", source_, what));
    }
    [[noreturn]] void wrong_type(const std::string &path, const json &j, const char *want) const {
        fail(fmt::format("field {} is {}, not {}", path, shown(j), want));
    }

    template <record T>
    void read_record(const json &obj, const std::string &path, T &out) const {
        if (!obj.is_object()) wrong_type(path, obj, "an object");
        T::fields(out, [&](const char *key, auto &field) { read_field(obj, path, key, field); });
    }

    template <class T>
    void read_field(const json &obj, const std::string &path, const char *key, T &out) const {
        const std::string p = path.empty() ? std::string(key) : path + "." + key;
        auto it = obj.find(key);
        if constexpr (is_optional<T>::value) {
            if (it == obj.end()) {
                out.reset();
                return;
            }
            out.emplace();
            read_value(*it, p, *out);
        } else {
            if (it == obj.end()) fail(fmt::format("field {} is missing", p));
            read_value(*it, p, out);
        }
    }

    void read_value(const json &j, const std::string &path, uint64_t &out) const {
        if (j.is_number_unsigned()) {
            out = j.get<uint64_t>();
        } else if (j.is_number_integer() && j.get<int64_t>() >= 0) {
            out = static_cast<uint64_t>(j.get<int64_t>());
        } else {
            wrong_type(path, j, "an unsigned integer");
        }
    }
    void read_value(const json &j, const std::string &path, int64_t &out) const {
        if (!j.is_number_integer()) wrong_type(path, j, "an integer");
        out = j.get<int64_t>();
    }
    void read_value(const json &j, const std::string &path, double &out) const {
        if (!j.is_number()) wrong_type(path, j, "a number");
        out = j.get<double>();
    }
    void read_value(const json &j, const std::string &path, bool &out) const {
        if (!j.is_boolean()) wrong_type(path, j, "true or false");
        out = j.get<bool>();
    }
    void read_value(const json &j, const std::string &path, std::string &out) const {
        if (!j.is_string()) wrong_type(path, j, "a string");
        out = j.get<std::string>();
    }
    void read_value(const json &j, const std::string &path, std::array<uint64_t, 3> &out) const {
        if (!j.is_array() || j.size() != out.size()) wrong_type(path, j, "an array of 3 numbers");
        for (size_t i = 0; i < out.size(); i++)
            read_value(j[i], fmt::format("{}[{}]", path, i), out[i]);
    }
    void read_value(const json &j, const std::string &path, std::vector<uint64_t> &out) const {
        if (!j.is_array()) wrong_type(path, j, "an array");
        out.assign(j.size(), 0);
        for (size_t i = 0; i < out.size(); i++)
            read_value(j[i], fmt::format("{}[{}]", path, i), out[i]);
    }
    void read_value(const json &j, const std::string &path, named_values &out) const {
        if (!j.is_object()) wrong_type(path, j, "an object");
        out.clear();
        for (const auto &[name, value] : j.items()) {
            named_value nv{name, 0};
            read_value(value, path + "." + name, nv.value);
            out.push_back(std::move(nv));
        }
    }
    template <record T>
    void read_value(const json &j, const std::string &path, T &out) const {
        read_record(j, path, out);
    }
    template <record T>
    void read_value(const json &j, const std::string &path, std::vector<T> &out) const {
        if (!j.is_array()) wrong_type(path, j, "an array");
        out.assign(j.size(), T{});
        for (size_t i = 0; i < out.size(); i++)
            read_record(j[i], fmt::format("{}[{}]", path, i), out[i]);
    }

  private:
    std::string_view source_;
};

json write_value(uint64_t v) {
    return json(v);
}
json write_value(int64_t v) {
    return json(v);
}
json write_value(double v) {
    return json(v);
}
json write_value(bool v) {
    return json(v);
}
json write_value(const std::string &v) {
    return json(v);
}
json write_value(const std::array<uint64_t, 3> &v) {
    return json::array({v[0], v[1], v[2]});
}
json write_value(const std::vector<uint64_t> &v) {
    json a = json::array();
    for (uint64_t x : v) a.push_back(x);
    return a;
}
json write_value(const named_values &v) {
    json o = json::object();
    for (const auto &nv : v) o[nv.name] = nv.value;
    return o;
}
template <record T>
json write_value(const T &r);
template <record T>
json write_value(const std::vector<T> &v) {
    json a = json::array();
    for (const auto &r : v) a.push_back(write_value(r));
    return a;
}
template <record T>
json write_value(const T &r) {
    json o = json::object();
    T::fields(r, [&](const char *key, const auto &field) {
        using F = std::remove_cvref_t<decltype(field)>;
        if constexpr (is_optional<F>::value) {
            if (field) o[key] = write_value(*field);
        } else {
            o[key] = write_value(field);
        }
    });
    return o;
}

// What the schema does not say with types: sizes the views compute with.
void check_values(const reader &r, const snapshot &s) {
    if (s.page_size == 0 || !std::has_single_bit(s.page_size) || s.page_size > (uint64_t{1} << 30))
        r.fail(fmt::format("field page_size is {}, not a power of two up to 1 GiB", s.page_size));
    for (size_t i = 0; i < s.caches.size(); i++) {
        if (s.caches[i].order > 30)
            r.fail(fmt::format("field caches[{}].order is {}, more than 30", i, s.caches[i].order));
    }
    for (size_t i = 0; i < s.pages.nodes.size(); i++) {
        if (s.pages.nodes[i].free_blocks.size() > 64)
            r.fail(fmt::format("field pages.nodes[{}].free_blocks has {} orders, more than 64", i,
                               s.pages.nodes[i].free_blocks.size()));
    }
}

uint64_t saturating_mul(uint64_t a, uint64_t b) {
    uint64_t out = 0;
    if (__builtin_mul_overflow(a, b, &out)) return std::numeric_limits<uint64_t>::max();
    return out;
}

} // namespace

std::string one_line(std::string_view text, size_t max) {
    std::string out;
    out.reserve(std::min(text.size(), max));
    for (char ch : text) {
        if (out.size() >= max) break;
        const auto u = static_cast<unsigned char>(ch);
        out.push_back(u < 0x20 || u == 0x7f ? '?' : ch);
    }
    if (text.size() > max && max >= 3) out.replace(max - 3, 3, "...");
    return out;
}

snapshot snapshot_from_json(const json &j, std::string_view source) {
    reader r(source);
    if (!j.is_object())
        r.fail(fmt::format("not a slabkit snapshot (the JSON is {} {}, not an object)",
                           j.is_array() || j.is_object() ? "an" : "a", j.type_name()));
    auto format = j.find("format");
    if (format == j.end()) r.fail("not a slabkit snapshot (no \"format\" field)");
    if (!format->is_string() || format->get<std::string>() != kSnapshotFormat)
        r.fail(fmt::format("not a slabkit snapshot (format is {}, not \"{}\")", shown(*format),
                           kSnapshotFormat));
    auto version = j.find("version");
    if (version == j.end()) r.fail("field version is missing");
    if (!version->is_number_unsigned())
        r.fail(fmt::format("field version is {}, not {}", shown(*version), kSnapshotVersion));
    if (version->get<uint64_t>() != kSnapshotVersion)
        r.fail(fmt::format("a version {} snapshot; this slabinfo reads version {}",
                           version->get<uint64_t>(), kSnapshotVersion));
    // A publisher that could not write its snapshot says why instead.
    if (auto error = j.find("error"); error != j.end() && error->is_string())
        r.fail(one_line(error->get<std::string>()));
    snapshot s;
    r.read_record(j, "", s);
    check_values(r, s);
    return s;
}

snapshot parse_snapshot(std::string_view text, std::string_view source) {
    json j;
    try {
        j = json::parse(text.begin(), text.end());
    } catch (const json::parse_error &e) {
        // "[json.exception.parse_error.101] parse error at line 1, column 1: ..." without the tag.
        std::string_view what = e.what();
        if (auto end = what.find("] "); what.starts_with("[json.exception") && end != what.npos)
            what.remove_prefix(end + 2);
        throw slabinfo_error(fmt::format("{}: not JSON ({})", source, one_line(what)));
    }
    return snapshot_from_json(j, source);
}

json to_json_value(const snapshot &s) {
    json o = json::object();
    o["format"] = kSnapshotFormat;
    o["version"] = kSnapshotVersion;
    json fields = write_value(s);
    for (auto &[key, value] : fields.items()) o[key] = std::move(value);
    return o;
}

std::string to_json(const snapshot &s, int indent) {
    return to_json_value(s).dump(indent);
}

uint64_t slab_bytes(const snapshot &s, const cache_stats &c) {
    return saturating_mul(s.page_size, c.order < 64 ? uint64_t{1} << c.order : 0);
}

uint64_t space_bytes(const snapshot &s, const cache_stats &c) {
    return saturating_mul(c.slabs, slab_bytes(s, c));
}

uint64_t used_bytes(const cache_stats &c) {
    return saturating_mul(c.active_objects, c.object_size);
}

} // namespace slabinfo
