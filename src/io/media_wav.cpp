// WAV (RIFF) writer and reader: PCM 16-bit or IEEE float 32-bit, interleaved channels, little-endian.
#include "io/media_writer.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <vector>

namespace h3::io {

namespace {

void put_u32(std::vector<uint8_t>& b, uint32_t v) {
    for (int i = 0; i < 4; ++i) b.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void put_u16(std::vector<uint8_t>& b, uint16_t v) {
    b.push_back(static_cast<uint8_t>(v));
    b.push_back(static_cast<uint8_t>(v >> 8));
}
void put_tag(std::vector<uint8_t>& b, const char* t) {
    b.insert(b.end(), t, t + 4);
}
uint32_t get_u32(const uint8_t* p) {
    return p[0] | (p[1] << 8) | (p[2] << 16) | (static_cast<uint32_t>(p[3]) << 24);
}
uint16_t get_u16(const uint8_t* p) {
    return static_cast<uint16_t>(p[0] | (p[1] << 8));
}

} // namespace

Status write_wav(const std::string& path, const Tensor& audio, int sample_rate, WavFormat format) {
    if (!audio.defined() || audio.rank() != 2 || audio.dtype() != DType::kF32 || !audio.device().is_cpu() ||
        !audio.is_contiguous())
        return invalid_argument("write_wav: audio must be a contiguous host f32 [channels, samples] tensor");
    if (audio.dim(0) < 1 || audio.dim(0) > 8 || sample_rate <= 0)
        return invalid_argument("write_wav: 1..8 channels and a positive sample rate are required");
    const uint16_t ch = static_cast<uint16_t>(audio.dim(0));
    const int64_t n = audio.dim(1);
    const uint16_t bytes = format == WavFormat::kPcm16 ? 2 : 4;
    const uint64_t data_bytes = static_cast<uint64_t>(n) * ch * bytes;
    if (data_bytes > 0xFFFFFF00u) return invalid_argument("write_wav: more than 4 GiB of samples");
    std::vector<uint8_t> b;
    b.reserve(44 + data_bytes);
    put_tag(b, "RIFF");
    put_u32(b, static_cast<uint32_t>(36 + data_bytes));
    put_tag(b, "WAVE");
    put_tag(b, "fmt ");
    put_u32(b, 16);
    put_u16(b, format == WavFormat::kPcm16 ? 1 : 3);
    put_u16(b, ch);
    put_u32(b, static_cast<uint32_t>(sample_rate));
    put_u32(b, static_cast<uint32_t>(sample_rate) * ch * bytes);
    put_u16(b, static_cast<uint16_t>(ch * bytes));
    put_u16(b, static_cast<uint16_t>(bytes * 8));
    put_tag(b, "data");
    put_u32(b, static_cast<uint32_t>(data_bytes));
    const float* s = audio.data_as<const float>();
    for (int64_t i = 0; i < n; ++i)
        for (int c = 0; c < ch; ++c) {
            const float v = s[c * n + i];
            if (format == WavFormat::kPcm16) {
                const long q = std::lround(std::clamp(v, -1.0f, 1.0f) * 32767.0f);
                put_u16(b, static_cast<uint16_t>(static_cast<int16_t>(q)));
            } else {
                uint32_t u;
                std::memcpy(&u, &v, 4);
                put_u32(b, u);
            }
        }
    std::ofstream out(path, std::ios::binary);
    if (!out) return io_error("write_wav: cannot open '" + path + "' for writing");
    out.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    if (!out) return io_error("write_wav: write to '" + path + "' failed");
    return ok_status();
}

Result<WavData> read_wav(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return io_error("read_wav: cannot open '" + path + "'");
    std::vector<uint8_t> b((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (b.size() < 12 || std::memcmp(b.data(), "RIFF", 4) || std::memcmp(b.data() + 8, "WAVE", 4))
        return bad_input("read_wav: '" + path + "' is not a RIFF/WAVE file");
    size_t pos = 12;
    int fmt = 0, ch = 0, bits = 0;
    uint32_t rate = 0;
    WavData w;
    while (pos + 8 <= b.size()) {
        const uint32_t size = get_u32(b.data() + pos + 4);
        const uint8_t* body = b.data() + pos + 8;
        if (pos + 8 + size > b.size()) return bad_input("read_wav: truncated chunk in '" + path + "'");
        if (!std::memcmp(b.data() + pos, "fmt ", 4) && size >= 16) {
            fmt = get_u16(body);
            ch = get_u16(body + 2);
            rate = get_u32(body + 4);
            bits = get_u16(body + 14);
        } else if (!std::memcmp(b.data() + pos, "data", 4)) {
            if (ch < 1) return bad_input("read_wav: data before fmt in '" + path + "'");
            if (rate < 1 || rate > 1536000)
                return bad_input("read_wav: '" + path + "' declares a sample rate of " +
                                 std::to_string(rate) + " Hz, outside [1, 1536000]");
            w.sample_rate = static_cast<int>(rate);
            const bool pcm = fmt == 1 && bits == 16, flt = fmt == 3 && bits == 32;
            if (!pcm && !flt) return bad_input("read_wav: only PCM16 and float32 are supported");
            w.format = pcm ? WavFormat::kPcm16 : WavFormat::kFloat32;
            const int64_t n = size / (ch * (bits / 8));
            w.samples = Tensor::host(Shape{ch, n}, DType::kF32);
            if (pcm) w.pcm16 = Tensor::host(Shape{ch, n}, DType::kF32);
            for (int64_t i = 0; i < n; ++i)
                for (int c = 0; c < ch; ++c) {
                    const uint8_t* p = body + (i * ch + c) * (bits / 8);
                    if (pcm) {
                        const int16_t q = static_cast<int16_t>(get_u16(p));
                        w.pcm16.data_as<float>()[c * n + i] = q;
                        w.samples.data_as<float>()[c * n + i] = q / 32767.0f;
                    } else {
                        uint32_t u = get_u32(p);
                        std::memcpy(w.samples.data_as<float>() + c * n + i, &u, 4);
                    }
                }
            return w;
        }
        pos += 8 + size + (size & 1);
    }
    return bad_input("read_wav: no data chunk in '" + path + "'");
}

} // namespace h3::io
