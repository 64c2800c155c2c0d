#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <unistd.h>

#include "temp_dir.h"

namespace fs = std::filesystem;
using namespace h3;
using namespace h3::io;

namespace {

using test::TempDir;

std::vector<uint8_t> make_buffer(const std::string& header, size_t data_bytes, uint64_t declared_len) {
    std::vector<uint8_t> buf(8 + header.size() + data_bytes, 0);
    for (int i = 0; i < 8; ++i) buf[static_cast<size_t>(i)] = static_cast<uint8_t>(declared_len >> (8 * i));
    std::memcpy(buf.data() + 8, header.data(), header.size());
    for (size_t i = 0; i < data_bytes; ++i) buf[8 + header.size() + i] = static_cast<uint8_t>(i * 7 + 1);
    return buf;
}

std::vector<uint8_t> make_buffer(const std::string& header, size_t data_bytes) {
    return make_buffer(header, data_bytes, header.size());
}

void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
}

std::vector<uint8_t> read_bytes(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Checks that both open() and validate_buffer() reject `bytes` as bad_input, naming the file (or label),
// the tensor (when given) and `what`.
void expect_rejected(const std::vector<uint8_t>& bytes, const std::string& tensor, const std::string& what) {
    TempDir dir("safetensors");
    std::string path = dir.str("bad.safetensors");
    write_bytes(path, bytes);
    auto r = SafetensorsFile::open(path);
    ASSERT_FALSE(r.ok());
    const Status& st = r.status();
    EXPECT_EQ(st.code(), ErrorCode::kBadInput) << st.to_string();
    EXPECT_NE(st.message().find(path), std::string::npos) << st.message();
    if (!tensor.empty()) {
        EXPECT_NE(st.message().find("'" + tensor + "'"), std::string::npos) << st.message();
    }
    EXPECT_NE(st.message().find(what), std::string::npos) << st.message();

    Status vb = SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), "buffer-label");
    EXPECT_EQ(vb.code(), ErrorCode::kBadInput) << vb.to_string();
    EXPECT_NE(vb.message().find("buffer-label"), std::string::npos) << vb.message();
    if (!tensor.empty()) {
        EXPECT_NE(vb.message().find("'" + tensor + "'"), std::string::npos) << vb.message();
    }
}

void expect_rejected(const std::string& header, size_t data_bytes, const std::string& tensor,
                     const std::string& what) {
    expect_rejected(make_buffer(header, data_bytes), tensor, what);
}

Tensor filled(const Shape& shape, DType dtype, int seed) {
    Tensor t = Tensor::host(shape, dtype);
    auto* p = static_cast<uint8_t*>(t.data());
    for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<uint8_t>(i * 31 + seed);
    if (dtype == DType::kBool)
        for (size_t i = 0; i < t.nbytes(); ++i) p[i] &= 1;
    return t;
}

const DType kAllDtypes[] = {DType::kF32, DType::kF16, DType::kBF16, DType::kF8E4M3, DType::kI8,
                            DType::kU8,  DType::kI32, DType::kI64,  DType::kBool,   DType::kF64};

} // namespace

// ---- round trip
// ---------------------------------------------------------------------------------------------

TEST(Safetensors, RoundTripAllDtypes) {
    TempDir dir("safetensors");
    std::string path = dir.str("all.safetensors");
    std::vector<NamedTensor> tensors;
    int seed = 0;
    for (DType t : kAllDtypes)
        tensors.push_back({std::string("t_") + dtype_name(t), filled({3, 5}, t, seed++)});
    tensors.push_back({"scalar", filled({}, DType::kF32, 9)});
    tensors.push_back({"empty", filled({0, 4}, DType::kBF16, 0)});
    tensors.push_back({"rank5", filled({1, 2, 1, 3, 2}, DType::kF16, 3)});
    std::map<std::string, std::string> meta = {{"format", "pt"}, {"note", "round \"trip\" \xc3\xa9"}};
    ASSERT_TRUE(write_safetensors(path, tensors, meta).ok());

    auto bytes = read_bytes(path);
    ASSERT_GE(bytes.size(), 8u);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = (n << 8) | bytes[static_cast<size_t>(i)];
    EXPECT_EQ((8 + n) % 8, 0u) << "header padding";
    EXPECT_TRUE(SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), "rt").ok());

    auto r = SafetensorsFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    const SafetensorsFile& f = r.value();
    EXPECT_EQ(f.path(), path);
    EXPECT_EQ(f.metadata(), meta);
    ASSERT_EQ(f.tensors().size(), tensors.size());
    uint64_t expected_offset = 0;
    for (size_t i = 0; i < tensors.size(); ++i) {
        const Tensor& src = tensors[i].tensor;
        const TensorInfo& info = f.tensors()[i];
        EXPECT_EQ(info.name, tensors[i].name) << "header order";
        EXPECT_EQ(info.begin, expected_offset) << "tensors are contiguous";
        expected_offset = info.end;
        ASSERT_TRUE(f.contains(info.name));
        EXPECT_EQ(f.find(info.name), &info);
        auto t = f.tensor(info.name);
        ASSERT_TRUE(t.ok()) << t.status().to_string();
        EXPECT_EQ(t->dtype(), src.dtype()) << info.name;
        EXPECT_EQ(t->shape(), src.shape()) << info.name;
        EXPECT_TRUE(t->read_only()) << info.name;
        ASSERT_EQ(t->nbytes(), src.nbytes());
        if (src.nbytes()) {
            EXPECT_EQ(std::memcmp(t->data(), src.data(), src.nbytes()), 0) << info.name;
        }
    }
    EXPECT_EQ(bytes.size(), 8 + n + expected_offset);
    EXPECT_FALSE(f.contains("nope"));
    EXPECT_EQ(f.find("nope"), nullptr);
    auto missing = f.tensor("nope");
    ASSERT_FALSE(missing.ok());
    EXPECT_EQ(missing.status().code(), ErrorCode::kNotFound);
}

TEST(Safetensors, ViewsAreReadOnlyAndSurviveTheFileObject) {
    TempDir dir("safetensors");
    std::string path = dir.str("ro.safetensors");
    Tensor src = host_tensor_from({1.5f, -2.0f, 3.25f, 4.0f}, {2, 2});
    ASSERT_TRUE(write_safetensors(path, {{"w", src}}).ok());
    Tensor view;
    {
        auto r = SafetensorsFile::open(path);
        ASSERT_TRUE(r.ok()) << r.status().to_string();
        auto t = r->tensor("w");
        ASSERT_TRUE(t.ok());
        view = t.value();
    }
    EXPECT_TRUE(view.read_only());
    EXPECT_FLOAT_EQ(static_cast<float>(view.get({1, 0})), 3.25f);
    Status st = view.copy_from(src);
    EXPECT_FALSE(st.ok()) << "copy into a mapped view must be refused";
}

TEST(Safetensors, WriterCopiesNonContiguousTensorsAndOverwrites) {
    TempDir dir("safetensors");
    std::string path = dir.str("nc.safetensors");
    Tensor base = host_tensor_from({0, 1, 2, 3, 4, 5}, {2, 3});
    Tensor col = base.slice(1, 1, 3); // [[1,2],[4,5]], not contiguous
    ASSERT_FALSE(col.is_contiguous());
    ASSERT_TRUE(write_safetensors(path, {{"old", base}}).ok());
    ASSERT_TRUE(write_safetensors(path, {{"col", col}}).ok());
    auto r = SafetensorsFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    EXPECT_FALSE(r->contains("old"));
    auto v = to_f32_vector(r->tensor("col").value());
    ASSERT_TRUE(v.ok());
    EXPECT_EQ(v.value(), (std::vector<float>{1, 2, 4, 5}));
    EXPECT_FALSE(fs::exists(path + ".tmp." + std::to_string(::getpid())));
}

TEST(Safetensors, WriterRejectsBadNames) {
    TempDir dir("safetensors");
    Tensor t = host_tensor_from({1}, {1});
    EXPECT_EQ(write_safetensors(dir.str("a.safetensors"), {{"x", t}, {"x", t}}).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(write_safetensors(dir.str("b.safetensors"), {{"__metadata__", t}}).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_EQ(write_safetensors(dir.str("c.safetensors"), {{"", t}}).code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(write_safetensors(dir.str("d.safetensors"), {{"u", Tensor()}}).code(),
              ErrorCode::kInvalidArgument);
    EXPECT_FALSE(fs::exists(dir.str("a.safetensors")));
}

TEST(Safetensors, MisalignedTensorIsCopiedToAReadOnlyBuffer) {
    // Header of odd length puts the f32 data at an address that is not 4-byte aligned.
    std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
    ASSERT_NE((8 + header.size()) % 4, 0u);
    std::vector<uint8_t> bytes = make_buffer(header, 0);
    float vals[2] = {7.5f, -1.25f};
    bytes.insert(bytes.end(), reinterpret_cast<uint8_t*>(vals), reinterpret_cast<uint8_t*>(vals) + 8);
    TempDir dir("safetensors");
    std::string path = dir.str("odd.safetensors");
    write_bytes(path, bytes);
    auto r = SafetensorsFile::open(path);
    ASSERT_TRUE(r.ok()) << r.status().to_string();
    auto t = r->tensor("w");
    ASSERT_TRUE(t.ok());
    EXPECT_TRUE(t->read_only());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t->data()) % 4, 0u);
    EXPECT_FLOAT_EQ(static_cast<float>(t->get({0})), 7.5f);
    EXPECT_FLOAT_EQ(static_cast<float>(t->get({1})), -1.25f);
}

TEST(Safetensors, AcceptsGapsEmptyTensorsAndUnsortedOffsets) {
    std::string header = R"({"b":{"dtype":"U8","shape":[4],"data_offsets":[8,12]},)"
                         R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[9,9]},)"
                         R"("a":{"dtype":"I32","shape":[1],"data_offsets":[0,4]}})";
    auto bytes = make_buffer(header, 16);
    EXPECT_TRUE(SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), "ok").ok());
}

// ---- malformed files: one test per rule
// ----------------------------------------------------------------------

TEST(SafetensorsMalformed, FileShorterThanEightBytes) {
    expect_rejected(std::vector<uint8_t>{1, 2, 3, 4, 5}, "", "truncated");
    expect_rejected(std::vector<uint8_t>{}, "", "truncated");
}

TEST(SafetensorsMalformed, TruncatedFile) {
    TempDir dir("safetensors");
    std::string path = dir.str("full.safetensors");
    ASSERT_TRUE(write_safetensors(path, {{"first", host_tensor_from({1, 2}, {2})},
                                         {"last", host_tensor_from({3, 4, 5, 6}, {4})}})
                    .ok());
    auto bytes = read_bytes(path);
    bytes.resize(bytes.size() - 3);
    expect_rejected(bytes, "last", "outside the data section");
}

TEST(SafetensorsMalformed, HeaderLengthPastEndOfFile) {
    std::string header = R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})";
    expect_rejected(make_buffer(header, 1, header.size() + 100), "", "past the end");
    expect_rejected(make_buffer("", 0, ~0ull), "", "exceeds the limit"); // no wrap-around
}

TEST(SafetensorsMalformed, HeaderLengthAboveLimit) {
    expect_rejected(make_buffer("{}", 0, kMaxSafetensorsHeaderBytes + 1), "", "exceeds the limit");
}

// Issue #42: a header of 60,000 one-byte tensors parses in about linear time (ordered_json's vector-backed
// object made every key a linear search: 26 s), keeps the header order, and a caller's tensor bound stops the
// parse; a caller's header bound is checked before it.
std::string many_tensors_header(size_t n) {
    std::string h = "{";
    for (size_t i = 0; i < n; ++i) {
        // names in descending order, so that the header order is not the sorted one
        h += (i ? ",\"t" : "\"t") + std::to_string(1000000 - i) +
             "\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[" + std::to_string(i) + "," +
             std::to_string(i + 1) + "]}";
    }
    return h + ",\"__metadata__\":{\"format\":\"pt\"}}";
}

TEST(SafetensorsLimits, ManyTensorsParseFastInHeaderOrder) {
    // The growth, not a wall-clock bound (sanitizer builds are several times slower): 4x the tensors cost
    // ~4-5x the time in O(n log n), 16x in the old O(n^2) walk.
    TempDir dir("safetensors");
    auto timed_open = [&](size_t n, Result<SafetensorsFile>* out) {
        const std::string path = dir.str("many" + std::to_string(n) + ".safetensors");
        write_bytes(path, make_buffer(many_tensors_header(n), n));
        const auto t0 = std::chrono::steady_clock::now();
        *out = SafetensorsFile::open(path);
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    };
    Result<SafetensorsFile> small = internal_error("unset"), f = internal_error("unset");
    const double small_seconds = std::min(timed_open(15000, &small), timed_open(15000, &small));
    const double seconds = timed_open(60000, &f);
    ASSERT_TRUE(small.ok()) << small.status().to_string();
    ASSERT_TRUE(f.ok()) << f.status().to_string();
    EXPECT_LT(seconds, 9.0 * std::max(small_seconds, 1e-3)) << "15,000 tensors: " << small_seconds << " s";
    ASSERT_EQ(f->tensors().size(), 60000u);
    EXPECT_EQ(f->tensors().front().name, "t1000000");
    EXPECT_EQ(f->tensors().back().name, "t940001");
    EXPECT_EQ(f->metadata().at("format"), "pt");
}

TEST(SafetensorsLimits, TensorCountAndHeaderBoundsRefuseEarly) {
    const std::vector<uint8_t> bytes = make_buffer(many_tensors_header(60000), 60000);
    const auto t0 = std::chrono::steady_clock::now();
    Status s = SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), "lora", {.max_tensors = 100});
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(1));
    EXPECT_EQ(s.code(), ErrorCode::kBadInput);
    EXPECT_NE(s.message().find("more than 100 tensors"), std::string::npos) << s.message();
    s = SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), "lora", {.max_header_bytes = 1 << 20});
    EXPECT_EQ(s.code(), ErrorCode::kBadInput);
    EXPECT_NE(s.message().find("exceeds the limit of 1048576 bytes"), std::string::npos) << s.message();
    // exactly at the bound is fine (the metadata entry is not a tensor)
    const std::vector<uint8_t> small = make_buffer(many_tensors_header(100), 100);
    EXPECT_TRUE(
        SafetensorsFile::validate_buffer(small.data(), small.size(), "lora", {.max_tensors = 100}).ok());
    std::string first = many_tensors_header(100); // __metadata__ first: still not a tensor
    first = "{\"__metadata__\":{\"format\":\"pt\"}," + first.substr(1, first.rfind(",\"__metadata__\"") - 1) +
            "}";
    const std::vector<uint8_t> meta_first = make_buffer(first, 100);
    EXPECT_TRUE(
        SafetensorsFile::validate_buffer(meta_first.data(), meta_first.size(), "lora", {.max_tensors = 100})
            .ok());
    EXPECT_FALSE(
        SafetensorsFile::validate_buffer(meta_first.data(), meta_first.size(), "lora", {.max_tensors = 99})
            .ok());
}

TEST(SafetensorsMalformed, InvalidJson) {
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]})", 1, "", "not valid JSON");
    expect_rejected(R"({"w":1} trailing)", 0, "", "not valid JSON");
    expect_rejected(std::string(""), 0, "", "empty");
}

TEST(SafetensorsMalformed, DeeplyNestedJson) {
    expect_rejected(std::string(100000, '['), 0, "", "nests deeper");
}

TEST(SafetensorsMalformed, HeaderNotAnObject) {
    expect_rejected(R"([1, 2, 3])", 0, "", "expected a JSON object");
}

TEST(SafetensorsMalformed, EntryNotAnObject) {
    expect_rejected(R"({"w": [0, 4]})", 4, "w", "expected an object");
}

TEST(SafetensorsMalformed, MissingField) {
    expect_rejected(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", 1, "w", "missing 'dtype'");
    expect_rejected(R"({"w":{"dtype":"U8","data_offsets":[0,1]}})", 1, "w", "missing 'shape'");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1]}})", 1, "w", "missing 'data_offsets'");
}

TEST(SafetensorsMalformed, UnknownDtype) {
    expect_rejected(R"({"w":{"dtype":"Q4_K","shape":[2],"data_offsets":[0,2]}})", 2, "w",
                    "unknown dtype 'Q4_K'");
    expect_rejected(R"({"w":{"dtype":7,"shape":[2],"data_offsets":[0,2]}})", 2, "w", "expected a string");
}

TEST(SafetensorsMalformed, ShapeNotAListOfNonNegativeIntegers) {
    expect_rejected(R"({"w":{"dtype":"U8","shape":4,"data_offsets":[0,4]}})", 4, "w", "expected a list");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[-4],"data_offsets":[0,4]}})", 4, "w",
                    "non-negative integer");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[2.0,2],"data_offsets":[0,4]}})", 4, "w",
                    "non-negative integer");
    expect_rejected(R"({"w":{"dtype":"U8","shape":["4"],"data_offsets":[0,4]}})", 4, "w",
                    "non-negative integer");
}

TEST(SafetensorsMalformed, RankAboveFive) {
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1,1,1,1,1,1],"data_offsets":[0,1]}})", 1, "w", "rank 6");
}

TEST(SafetensorsMalformed, DataOffsetsNotTwoOrderedIntegers) {
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0]}})", 1, "w", "two integers");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1,2]}})", 1, "w", "two integers");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":"0-1"}})", 1, "w", "two integers");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[-1,0]}})", 1, "w", "non-negative");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0.5,1.5]}})", 1, "w", "non-negative");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[3,1]}})", 4, "w", "out of order");
}

TEST(SafetensorsMalformed, ShapeDisagreesWithByteRange) {
    expect_rejected(R"({"w":{"dtype":"F32","shape":[2,2],"data_offsets":[0,8]}})", 16, "w", "needs 16 bytes");
    expect_rejected(R"({"w":{"dtype":"BF16","shape":[3],"data_offsets":[0,3]}})", 16, "w", "needs 6 bytes");
}

TEST(SafetensorsMalformed, ShapeProductOverflows) {
    expect_rejected(R"({"w":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,0]}})", 0, "w",
                    "overflows");
    // 2^62 elements fit int64, but not once multiplied by the 4-byte element size.
    expect_rejected(R"({"w":{"dtype":"F32","shape":[4611686018427387904],"data_offsets":[0,0]}})", 0, "w",
                    "overflows");
    // A zero dim does not excuse an intermediate product past int64.
    expect_rejected(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296,0],"data_offsets":[0,0]}})", 0, "w",
                    "overflows");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[18446744073709551615],"data_offsets":[0,0]}})", 0, "w",
                    "non-negative integer");
}

TEST(SafetensorsMalformed, OffsetsOutOfRange) {
    expect_rejected(R"({"w":{"dtype":"U8","shape":[8],"data_offsets":[4,12]}})", 8, "w",
                    "outside the data section");
    expect_rejected(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[9,9]}})", 8, "w",
                    "outside the data section");
}

TEST(SafetensorsMalformed, OverlappingOffsets) {
    std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                         R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
    expect_rejected(header, 12, "b", "overlap tensor 'a'");
    std::string same = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                       R"("b":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}})";
    expect_rejected(same, 4, "b", "overlap");
}

TEST(SafetensorsMalformed, DuplicateTensorName) {
    std::string header = R"({"a":{"dtype":"U8","shape":[4],"data_offsets":[0,4]},)"
                         R"("a":{"dtype":"U8","shape":[4],"data_offsets":[4,8]}})";
    expect_rejected(header, 8, "a", "appears twice");
}

TEST(SafetensorsMalformed, MetadataNotStringToString) {
    expect_rejected(R"({"__metadata__":["pt"]})", 0, "", "'__metadata__'");
    expect_rejected(R"({"__metadata__":{"format":"pt","n":3}})", 0, "", "entry 'n'");
}

// Random corruption of a valid file never crashes the validator and never passes an inconsistent header.
TEST(SafetensorsMalformed, RandomCorruptionIsHandled) {
    TempDir dir("safetensors");
    std::string path = dir.str("seed.safetensors");
    ASSERT_TRUE(
        write_safetensors(path, {{"a", filled({2, 3}, DType::kBF16, 1)}, {"b", filled({4}, DType::kI64, 2)}},
                          {{"k", "v"}})
            .ok());
    const auto good = read_bytes(path);
    std::mt19937 rng(1234);
    int rejected = 0;
    for (int iter = 0; iter < 3000; ++iter) {
        auto bytes = good;
        int edits = 1 + static_cast<int>(rng() % 4);
        for (int e = 0; e < edits; ++e) {
            size_t pos = rng() % bytes.size();
            switch (rng() % 3) {
            case 0:
                bytes[pos] = static_cast<uint8_t>(rng());
                break;
            case 1:
                bytes.resize(pos);
                break;
            default:
                bytes.insert(bytes.begin() + static_cast<long>(pos), static_cast<uint8_t>(rng()));
                break;
            }
            if (bytes.empty()) break;
        }
        Status st = SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), "mutant");
        if (!st.ok()) {
            ++rejected;
            EXPECT_EQ(st.code(), ErrorCode::kBadInput) << st.to_string();
            EXPECT_NE(st.message().find("mutant"), std::string::npos);
        }
    }
    EXPECT_GT(rejected, 1000);
}

// The fuzzer's seed corpus must stay valid so the fuzzer starts from accepted files.
TEST(Safetensors, FuzzSeedCorpusIsValid) {
    fs::path corpus = fs::path(H3_SOURCE_DIR) / "tests" / "fuzz" / "corpus";
    ASSERT_TRUE(fs::is_directory(corpus)) << corpus;
    int seeds = 0;
    for (const auto& e : fs::directory_iterator(corpus)) {
        auto bytes = read_bytes(e.path().string());
        EXPECT_LT(bytes.size(), 1024u) << e.path();
        Status st = SafetensorsFile::validate_buffer(bytes.data(), bytes.size(), e.path().string());
        EXPECT_TRUE(st.ok()) << st.to_string();
        auto f = SafetensorsFile::open(e.path().string());
        ASSERT_TRUE(f.ok()) << f.status().to_string();
        for (const TensorInfo& info : f->tensors()) EXPECT_TRUE(f->tensor(info.name).ok()) << info.name;
        ++seeds;
    }
    EXPECT_GE(seeds, 2);
}
