#include "io/safetensors.h"

#include "io/json_file.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <set>
#include <unistd.h>

namespace h3::io {

namespace {

using OrderedJson = nlohmann::ordered_json; // the writer keeps the tensors' order
// The reader parses into std::map objects (O(log n) per key) and records the header order itself (KeyScan);
// ordered_json's vector-backed object makes every insertion a linear search.
using Json = nlohmann::json;

// The SAX pass over a header: every object's keys (for duplicates), the top-level keys in order, the tensor
// count (the parse stops past `max_tensors`). nlohmann's callback parser is not used: after every entry it
// walks its parent object looking for discarded values, so a flat header of n entries cost O(n^2) — 60,000
// tensors took minutes.
struct KeyScan {
    using number_integer_t = Json::number_integer_t;
    using number_unsigned_t = Json::number_unsigned_t;
    using number_float_t = Json::number_float_t;
    using string_t = Json::string_t;
    using binary_t = Json::binary_t;

    explicit KeyScan(size_t max_tensors) : max_tensors(max_tensors) {}
    bool null() { return true; }
    bool boolean(bool) { return true; }
    bool number_integer(number_integer_t) { return true; }
    bool number_unsigned(number_unsigned_t) { return true; }
    bool number_float(number_float_t, const string_t&) { return true; }
    bool string(string_t&) { return true; }
    bool binary(binary_t&) { return true; }
    bool start_object(size_t) {
        open.emplace_back();
        return true;
    }
    bool end_object() {
        if (!open.empty()) open.pop_back();
        return true;
    }
    bool start_array(size_t) {
        open.emplace_back(); // arrays hold no keys; an entry keeps the depth right
        return true;
    }
    bool end_array() {
        if (!open.empty()) open.pop_back();
        return true;
    }
    bool key(string_t& k) {
        if (open.size() == 1) {
            if (k != "__metadata__" && tensors++ >= max_tensors) {
                too_many = true;
                return false;
            }
            top_keys.push_back(k);
        }
        if (!open.empty() && duplicate.empty() && !open.back().insert(k).second) duplicate = k;
        return true;
    }
    bool parse_error(size_t, const std::string&, const nlohmann::json::exception& e) {
        error = e.what();
        return false;
    }

    const size_t max_tensors;
    size_t tensors = 0;
    bool too_many = false;
    std::vector<std::set<std::string>> open;
    std::vector<std::string> top_keys;
    std::string duplicate, error;
};

// A valid header nests at most three levels (object -> entry -> shape list); anything much deeper is
// rejected before parsing so hostile input cannot exhaust the stack.
constexpr int kMaxHeaderNesting = 16;

struct ParsedHeader {
    uint64_t data_start = 0;
    uint64_t data_bytes = 0;
    std::vector<TensorInfo> infos;
    std::map<std::string, std::string> metadata;
};

const char* json_type_name(const Json& j) {
    if (j.is_number_unsigned() || j.is_number_integer()) return "an integer";
    return j.type_name();
}

std::string supported_dtype_list() {
    std::string s;
    for (DType t : {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kI8, DType::kU8,
                    DType::kI32, DType::kI64, DType::kBool, DType::kF64}) {
        if (!s.empty()) s += ", ";
        s += dtype_safetensors_name(t);
    }
    return s;
}

// Reads a non-negative integer that fits in int64 (shape dims, offsets).
bool json_to_u63(const Json& j, uint64_t* out) {
    if (j.is_number_unsigned()) {
        uint64_t v = j.get<uint64_t>();
        if (v > static_cast<uint64_t>(INT64_MAX)) return false;
        *out = v;
        return true;
    }
    if (j.is_number_integer()) {
        int64_t v = j.get<int64_t>();
        if (v < 0) return false;
        *out = static_cast<uint64_t>(v);
        return true;
    }
    return false;
}

Status parse_entry(const std::string& label, const std::string& name, const Json& entry, TensorInfo* info) {
    auto fail = [&](const std::string& what) {
        return bad_input("file " + label + ": tensor '" + name + "': " + what);
    };
    if (!entry.is_object())
        return fail(std::string("entry is ") + json_type_name(entry) +
                    ", expected an object with dtype, shape and data_offsets");
    info->name = name;

    auto dt = entry.find("dtype");
    if (dt == entry.end()) return fail("missing 'dtype', expected one of " + supported_dtype_list());
    if (!dt->is_string())
        return fail(std::string("'dtype' is ") + json_type_name(*dt) +
                    ", expected a string such as \"BF16\"");
    const std::string& dtype_str = dt->get_ref<const std::string&>();
    auto dtype = parse_safetensors_dtype(dtype_str);
    if (!dtype) return fail("unknown dtype '" + dtype_str + "', expected one of " + supported_dtype_list());
    info->dtype = *dtype;

    auto sh = entry.find("shape");
    if (sh == entry.end()) return fail("missing 'shape', expected a list of non-negative integers");
    if (!sh->is_array())
        return fail(std::string("'shape' is ") + json_type_name(*sh) +
                    ", expected a list of non-negative integers");
    if (sh->size() > static_cast<size_t>(kMaxDims))
        return fail("shape has rank " + std::to_string(sh->size()) +
                    ", expected rank <= " + std::to_string(kMaxDims));
    // Partial products are kept within int64 (as Shape::numel computes them), whatever a zero dim would give.
    int64_t numel = 1;
    bool overflow = false;
    info->shape.clear();
    for (size_t i = 0; i < sh->size(); ++i) {
        uint64_t d = 0;
        if (!json_to_u63((*sh)[i], &d))
            return fail("shape[" + std::to_string(i) + "] is " + (*sh)[i].dump() +
                        ", expected a non-negative integer");
        info->shape.push_back(static_cast<int64_t>(d));
        if (!overflow && __builtin_mul_overflow(numel, static_cast<int64_t>(d), &numel)) overflow = true;
    }
    uint64_t nbytes = 0;
    if (!overflow && __builtin_mul_overflow(static_cast<uint64_t>(numel),
                                            static_cast<uint64_t>(dtype_size(*dtype)), &nbytes))
        overflow = true;

    auto off = entry.find("data_offsets");
    if (off == entry.end()) return fail("missing 'data_offsets', expected [begin, end]");
    if (!off->is_array() || off->size() != 2)
        return fail("'data_offsets' is " + off->dump() + ", expected two integers [begin, end]");
    uint64_t begin = 0, end = 0;
    if (!json_to_u63((*off)[0], &begin) || !json_to_u63((*off)[1], &end))
        return fail("'data_offsets' is " + off->dump() + ", expected two non-negative integers [begin, end]");
    if (end < begin)
        return fail("data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                    "] are out of order, expected begin <= end");
    info->begin = begin;
    info->end = end;

    std::string shape_str = "[";
    for (size_t i = 0; i < info->shape.size(); ++i)
        shape_str += (i ? ", " : "") + std::to_string(info->shape[i]);
    shape_str += "]";
    if (overflow)
        return fail("shape " + shape_str + " of " + dtype_str + " overflows a 64-bit byte count, expected " +
                    std::to_string(end - begin) + " bytes from data_offsets");
    if (nbytes != end - begin)
        return fail("shape " + shape_str + " of " + dtype_str + " needs " + std::to_string(nbytes) +
                    " bytes but data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
                    "] span " + std::to_string(end - begin) + " bytes");
    return ok_status();
}

Status parse_header(const uint8_t* data, size_t size, const std::string& label,
                    const SafetensorsLimits& limits, ParsedHeader* out) {
    if (data == nullptr && size != 0) return invalid_argument("file " + label + ": null buffer");
    if (size < 8)
        return bad_input("file " + label + ": truncated: " + std::to_string(size) +
                         " bytes, expected at least 8 (the u64 header length)");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | data[i];
    const uint64_t max_header = std::min(limits.max_header_bytes, kMaxSafetensorsHeaderBytes);
    if (n > max_header)
        return bad_input("file " + label + ": header length " + std::to_string(n) + " exceeds the limit of " +
                         std::to_string(max_header) + " bytes");
    if (n > size - 8)
        return bad_input("file " + label + ": header length " + std::to_string(n) +
                         " runs past the end of the " + std::to_string(size) +
                         "-byte file, expected at most " + std::to_string(size - 8));
    if (n == 0) return bad_input("file " + label + ": header is empty, expected a JSON object");
    const char* text = reinterpret_cast<const char*>(data + 8);
    if (io::json_nesting_depth(text, n, kMaxHeaderNesting) > kMaxHeaderNesting)
        return bad_input("file " + label + ": header JSON nests deeper than " +
                         std::to_string(kMaxHeaderNesting) +
                         " levels, expected a flat object of tensor entries");

    // A first pass over the text (SAX, nothing built): the syntax, duplicate keys (which would silently
    // replace each other in the parsed object), the header order (the top-level keys as they come) and the
    // tensor bound, which stops it. Then the plain parse into std::map objects.
    KeyScan scan(limits.max_tensors);
    const bool scanned = Json::sax_parse(text, text + n, &scan);
    if (scan.too_many)
        return bad_input("file " + label + ": the header lists more than " +
                         std::to_string(limits.max_tensors) + " tensors, the limit for this file");
    if (!scanned) return bad_input("file " + label + ": header is not valid JSON: " + scan.error);
    Json header;
    try {
        header = Json::parse(text, text + n);
    } catch (const nlohmann::json::exception& e) {
        return bad_input("file " + label + ": header is not valid JSON: " + e.what());
    }
    const std::string& duplicate = scan.duplicate;
    const std::vector<std::string>& keys_in_order = scan.top_keys;
    if (!header.is_object())
        return bad_input(std::string("file ") + label + ": header is " + json_type_name(header) +
                         ", expected a JSON object");

    out->data_start = 8 + n;
    out->data_bytes = size - 8 - n;
    out->infos.clear();
    out->metadata.clear();
    if (!duplicate.empty())
        return bad_input("file " + label + ": tensor '" + duplicate +
                         "': key appears twice in the header, expected unique names");
    for (const std::string& key : keys_in_order) {
        const Json& value = header.at(key);
        if (key == "__metadata__") {
            if (!value.is_object())
                return bad_input("file " + label + ": '__metadata__' is " + json_type_name(value) +
                                 ", expected an object of string values");
            for (const auto& [mk, mv] : value.items()) {
                if (!mv.is_string())
                    return bad_input("file " + label + ": '__metadata__' entry '" + mk + "' is " +
                                     json_type_name(mv) + ", expected a string");
                out->metadata[mk] = mv.get<std::string>();
            }
            continue;
        }
        TensorInfo info;
        H3_TRY(parse_entry(label, key, value, &info));
        if (info.end > out->data_bytes)
            return bad_input("file " + label + ": tensor '" + key + "': data_offsets [" +
                             std::to_string(info.begin) + ", " + std::to_string(info.end) +
                             "] fall outside the data section of " + std::to_string(out->data_bytes) +
                             " bytes");
        out->infos.push_back(std::move(info));
    }

    // Overlap check over non-empty ranges, sorted by begin.
    std::vector<size_t> order;
    for (size_t i = 0; i < out->infos.size(); ++i)
        if (out->infos[i].end > out->infos[i].begin) order.push_back(i);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
        const auto &x = out->infos[a], &y = out->infos[b];
        return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
    });
    for (size_t k = 1; k < order.size(); ++k) {
        const TensorInfo& prev = out->infos[order[k - 1]];
        const TensorInfo& cur = out->infos[order[k]];
        if (cur.begin < prev.end)
            return bad_input("file " + label + ": tensor '" + cur.name + "': data_offsets [" +
                             std::to_string(cur.begin) + ", " + std::to_string(cur.end) +
                             "] overlap tensor '" + prev.name + "' at [" + std::to_string(prev.begin) + ", " +
                             std::to_string(prev.end) + "], expected disjoint ranges");
    }
    return ok_status();
}

// Read-only host copy, used when a tensor in the mapping is not aligned for its element type.
class ReadOnlyCopy final : public Storage {
public:
    ReadOnlyCopy(const void* src, size_t n) {
        buffer_ = std::make_unique<uint64_t[]>(n / 8 + 1);
        if (n) std::memcpy(buffer_.get(), src, n);
        data_ = buffer_.get();
        bytes_ = n;
        read_only_ = true;
    }

private:
    std::unique_ptr<uint64_t[]> buffer_;
};

} // namespace

Status SafetensorsFile::validate_buffer(const uint8_t* data, size_t size, const std::string& label,
                                        const SafetensorsLimits& limits) {
    ParsedHeader header;
    return parse_header(data, size, label, limits, &header);
}

Result<SafetensorsFile> SafetensorsFile::open(const std::string& path, const SafetensorsLimits& limits) {
    H3_ASSIGN_OR_RETURN(auto mapped, MappedFile::open(path));
    ParsedHeader header;
    H3_TRY(parse_header(mapped->data(), mapped->size(), path, limits, &header));
    SafetensorsFile f;
    f.path_ = path;
    f.file_ = std::move(mapped);
    f.data_start_ = header.data_start;
    f.infos_ = std::move(header.infos);
    f.metadata_ = std::move(header.metadata);
    for (size_t i = 0; i < f.infos_.size(); ++i) f.index_[f.infos_[i].name] = i;
    return f;
}

bool SafetensorsFile::contains(const std::string& name) const {
    return index_.count(name) != 0;
}

const TensorInfo* SafetensorsFile::find(const std::string& name) const {
    auto it = index_.find(name);
    return it == index_.end() ? nullptr : &infos_[it->second];
}

Result<Tensor> SafetensorsFile::tensor(const std::string& name) const {
    const TensorInfo* info = find(name);
    if (!info) return not_found("file " + path_ + ": no tensor named '" + name + "'");
    if (!file_) return internal_error("file " + path_ + ": not open");
    size_t offset = static_cast<size_t>(data_start_ + info->begin);
    size_t bytes = static_cast<size_t>(info->end - info->begin);
    Shape shape(info->shape);
    if (offset % dtype_size(info->dtype) != 0) {
        auto storage = std::make_shared<ReadOnlyCopy>(file_->data() + offset, bytes);
        return Tensor::from_storage(std::move(storage), 0, shape, info->dtype);
    }
    return Tensor::from_storage(map_view(file_, offset, bytes), 0, shape, info->dtype);
}

// ---- writer
// -------------------------------------------------------------------------------------------------

namespace {

Status write_all(std::FILE* f, const void* p, size_t n, const std::string& path) {
    if (n == 0) return ok_status();
    if (std::fwrite(p, 1, n, f) != n)
        return io_error("write to " + path + " failed: " + std::strerror(errno));
    return ok_status();
}

Status write_file_body(std::FILE* f, const std::string& tmp, const std::string& header,
                       const std::vector<Tensor>& host) {
    uint8_t len[8];
    uint64_t n = header.size();
    for (int i = 0; i < 8; ++i) len[i] = static_cast<uint8_t>(n >> (8 * i));
    H3_TRY(write_all(f, len, 8, tmp));
    H3_TRY(write_all(f, header.data(), header.size(), tmp));
    for (const Tensor& t : host) H3_TRY(write_all(f, t.numel() ? t.data() : nullptr, t.nbytes(), tmp));
    if (std::fflush(f) != 0) return io_error("flush of " + tmp + " failed: " + std::strerror(errno));
    return ok_status();
}

} // namespace

Status write_safetensors(const std::string& path, const std::vector<NamedTensor>& tensors,
                         const std::map<std::string, std::string>& metadata) {
    OrderedJson header = OrderedJson::object();
    if (!metadata.empty()) {
        OrderedJson meta = OrderedJson::object();
        for (const auto& [k, v] : metadata) meta[k] = v;
        header["__metadata__"] = std::move(meta);
    }
    std::vector<Tensor> host;
    host.reserve(tensors.size());
    std::set<std::string> names;
    uint64_t offset = 0;
    for (const NamedTensor& nt : tensors) {
        std::string where = "writing " + path + ": tensor '" + nt.name + "'";
        if (nt.name.empty()) return invalid_argument("writing " + path + ": a tensor has an empty name");
        if (nt.name == "__metadata__") return invalid_argument(where + ": the name is reserved");
        if (!names.insert(nt.name).second) return invalid_argument(where + ": the name appears twice");
        if (!nt.tensor.defined()) return invalid_argument(where + ": undefined tensor");
        Tensor t = nt.tensor;
        if (!t.device().is_cpu() || !t.is_contiguous()) {
            auto r = t.to(Device::cpu());
            if (!r.ok()) return r.status().with_context(where);
            t = std::move(r).value();
        }
        OrderedJson entry = OrderedJson::object();
        entry["dtype"] = dtype_safetensors_name(t.dtype());
        entry["shape"] = t.shape().to_vector();
        entry["data_offsets"] = {offset, offset + t.nbytes()};
        offset += t.nbytes();
        header[nt.name] = std::move(entry);
        host.push_back(std::move(t));
    }
    std::string text = header.dump();
    // Pad with spaces so the data section starts on an 8-byte boundary (8 + len is a multiple of 8).
    text.append((8 - text.size() % 8) % 8, ' ');

    std::string tmp = path + ".tmp." + std::to_string(::getpid());
    std::FILE* f = std::fopen(tmp.c_str(), "wb");
    if (!f) return io_error("cannot create " + tmp + ": " + std::strerror(errno));
    Status st = write_file_body(f, tmp, text, host);
    if (std::fclose(f) != 0 && st.ok()) st = io_error("close of " + tmp + " failed: " + std::strerror(errno));
    if (st.ok() && std::rename(tmp.c_str(), path.c_str()) != 0)
        st = io_error("cannot rename " + tmp + " to " + path + ": " + std::strerror(errno));
    if (!st.ok()) std::remove(tmp.c_str());
    return st;
}

} // namespace h3::io
