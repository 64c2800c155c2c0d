#include "serve/body_decoder.h"

#include <brotli/decode.h>
#include <zlib.h>

#include <algorithm>
#include <cctype>

namespace h3::serve {

namespace {

std::string lower_trimmed(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return std::tolower(c); });
    return out;
}

Status too_large(size_t max) {
    return out_of_memory("body: larger than " + std::to_string(max) + " bytes (decoded)");
}

class IdentityDecoder final : public BodyDecoder {
public:
    explicit IdentityDecoder(size_t max) : BodyDecoder(max) {}
    Status feed(std::string_view chunk) override { return append(chunk.data(), chunk.size()); }
    Status finish() override { return ok_status(); }
};

constexpr size_t kOut = 16384;

class ZlibDecoder final : public BodyDecoder {
public:
    ZlibDecoder(size_t max, bool gzip) : BodyDecoder(max) {
        // gzip: 16 + MAX_WBITS; deflate: 32 + MAX_WBITS detects zlib or gzip headers (raw deflate is not
        // what HTTP's "deflate" means)
        ok_ = inflateInit2(&z_, gzip ? 16 + MAX_WBITS : 32 + MAX_WBITS) == Z_OK;
    }
    ~ZlibDecoder() override {
        if (ok_) inflateEnd(&z_);
    }
    Status feed(std::string_view chunk) override {
        if (!ok_) return internal_error("body: zlib could not start");
        if (ended_)
            return chunk.empty() ? ok_status() : bad_input("body: data after the end of the gzip stream");
        z_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(chunk.data()));
        z_.avail_in = static_cast<uInt>(chunk.size());
        char out[kOut];
        while (z_.avail_in > 0 || z_.avail_out == 0) {
            z_.next_out = reinterpret_cast<Bytef*>(out);
            z_.avail_out = sizeof out;
            const int r = inflate(&z_, Z_NO_FLUSH);
            if (r != Z_OK && r != Z_STREAM_END && r != Z_BUF_ERROR)
                return bad_input(std::string("body: corrupt compressed data (zlib: ") +
                                 (z_.msg ? z_.msg : "?") + ")");
            H3_TRY(append(out, sizeof out - z_.avail_out));
            if (r == Z_STREAM_END) {
                ended_ = true;
                if (z_.avail_in > 0) return bad_input("body: data after the end of the gzip stream");
                break;
            }
            if (r == Z_BUF_ERROR) break; // needs more input
        }
        return ok_status();
    }
    Status finish() override {
        if (!ended_) return bad_input("body: the compressed stream ends early");
        return ok_status();
    }

private:
    z_stream z_{};
    bool ok_ = false, ended_ = false;
};

class BrotliBodyDecoder final : public BodyDecoder {
public:
    explicit BrotliBodyDecoder(size_t max)
        : BodyDecoder(max), st_(BrotliDecoderCreateInstance(nullptr, nullptr, nullptr)) {}
    ~BrotliBodyDecoder() override {
        if (st_) BrotliDecoderDestroyInstance(st_);
    }
    Status feed(std::string_view chunk) override {
        if (!st_) return internal_error("body: brotli could not start");
        if (ended_)
            return chunk.empty() ? ok_status() : bad_input("body: data after the end of the br stream");
        size_t avail_in = chunk.size();
        const auto* next_in = reinterpret_cast<const uint8_t*>(chunk.data());
        uint8_t out[kOut];
        for (;;) {
            size_t avail_out = sizeof out;
            uint8_t* next_out = out;
            const BrotliDecoderResult r =
                BrotliDecoderDecompressStream(st_, &avail_in, &next_in, &avail_out, &next_out, nullptr);
            H3_TRY(append(reinterpret_cast<const char*>(out), sizeof out - avail_out));
            if (r == BROTLI_DECODER_RESULT_ERROR)
                return bad_input(std::string("body: corrupt compressed data (brotli: ") +
                                 BrotliDecoderErrorString(BrotliDecoderGetErrorCode(st_)) + ")");
            if (r == BROTLI_DECODER_RESULT_SUCCESS) {
                ended_ = true;
                if (avail_in > 0) return bad_input("body: data after the end of the br stream");
                return ok_status();
            }
            if (r == BROTLI_DECODER_RESULT_NEEDS_MORE_INPUT) return ok_status();
            // NEEDS_MORE_OUTPUT: loop
        }
    }
    Status finish() override {
        if (!ended_) return bad_input("body: the compressed stream ends early");
        return ok_status();
    }

private:
    BrotliDecoderState* st_;
    bool ended_ = false;
};

} // namespace

Status BodyDecoder::append(const char* data, size_t n) {
    if (n > max_ - body_.size()) return too_large(max_);
    body_.append(data, n);
    return ok_status();
}

Result<std::unique_ptr<BodyDecoder>> BodyDecoder::create(std::string_view encoding, size_t max_bytes) {
    const std::string e = lower_trimmed(encoding);
    if (e.empty() || e == "identity") return std::unique_ptr<BodyDecoder>(new IdentityDecoder(max_bytes));
    if (e == "gzip" || e == "x-gzip") return std::unique_ptr<BodyDecoder>(new ZlibDecoder(max_bytes, true));
    if (e == "deflate") return std::unique_ptr<BodyDecoder>(new ZlibDecoder(max_bytes, false));
    if (e == "br") return std::unique_ptr<BodyDecoder>(new BrotliBodyDecoder(max_bytes));
    return unimplemented("Content-Encoding '" + std::string(encoding.substr(0, 64)) +
                         "' is not accepted (identity, gzip, deflate or br, one of them)");
}

} // namespace h3::serve
