#include "io/image_reader.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>

#ifdef H3_WITH_IMAGE_CODECS
#include <csetjmp>
// clang-format off
#include <jpeglib.h>
#include <jerror.h>
// clang-format on
#include <png.h>
#endif
#ifdef H3_WITH_WEBP
#include <webp/decode.h>
#endif

namespace h3::io {

namespace {

constexpr uint64_t kMaxImageFileBytes = 1ull << 30;
constexpr double kDeflateMaxRatio = 1032.0; // deflate's largest expansion
// A JPEG codes at least one bit per 8x8 block of the first component (its DC difference), so a file of N
// bytes holds at most 512·N pixels.
constexpr int64_t kJpegMaxPixelsPerByte = 512;

uint16_t rd16(const uint8_t* p, bool le) {
    return le ? static_cast<uint16_t>(p[0] | (p[1] << 8)) : static_cast<uint16_t>((p[0] << 8) | p[1]);
}
uint32_t rd32(const uint8_t* p, bool le) {
    return le ? (uint32_t(p[0]) | (uint32_t(p[1]) << 8) | (uint32_t(p[2]) << 16) | (uint32_t(p[3]) << 24))
              : ((uint32_t(p[0]) << 24) | (uint32_t(p[1]) << 16) | (uint32_t(p[2]) << 8) | uint32_t(p[3]));
}

// The raw Orientation value of IFD0: -1 when the block has no such tag or cannot be parsed, else the value
// (which may lie outside 1..8; PIL then leaves the image as it is).
int64_t exif_orientation_tag(const uint8_t* p, size_t n) {
    if (n >= 6 && std::memcmp(p, "Exif\0\0", 6) == 0) {
        p += 6;
        n -= 6;
    }
    if (n < 8) return -1;
    bool le;
    if (p[0] == 'I' && p[1] == 'I')
        le = true;
    else if (p[0] == 'M' && p[1] == 'M')
        le = false;
    else
        return -1;
    if (rd16(p + 2, le) != 42) return -1;
    const uint64_t ifd = rd32(p + 4, le);
    if (ifd + 2 > n) return -1;
    const uint32_t count = rd16(p + ifd, le);
    for (uint32_t i = 0; i < count; ++i) {
        const uint64_t e = ifd + 2 + 12ull * i;
        if (e + 12 > n) return -1;
        if (rd16(p + e, le) != 0x0112) continue;
        const uint16_t type = rd16(p + e + 2, le);
        const uint32_t cnt = rd32(p + e + 4, le);
        if (cnt != 1) return -1; // PIL reads a tuple, which maps to no transpose
        switch (type) {
        case 1:
            return p[e + 8]; // BYTE
        case 3:
            return rd16(p + e + 8, le); // SHORT
        case 4:
            return rd32(p + e + 8, le); // LONG
        case 8:
            return int16_t(rd16(p + e + 8, le)); // SSHORT
        case 9:
            return int32_t(rd32(p + e + 8, le)); // SLONG
        default:
            return -1;
        }
    }
    return -1;
}

#ifdef H3_WITH_IMAGE_CODECS

// PIL 9.x's Image.getexif() fallback for PNG text: re.search(r'tiff:Orientation(="|>)([0-9])', xmp).
int64_t xmp_orientation(const std::string& xmp) {
    static const std::string key = "tiff:Orientation";
    for (size_t at = xmp.find(key); at != std::string::npos; at = xmp.find(key, at + 1)) {
        size_t i = at + key.size();
        if (i + 1 < xmp.size() && xmp[i] == '=' && xmp[i + 1] == '"')
            i += 2;
        else if (i < xmp.size() && xmp[i] == '>')
            i += 1;
        else
            continue;
        if (i < xmp.size() && xmp[i] >= '0' && xmp[i] <= '9') return xmp[i] - '0';
    }
    return -1;
}

// PNG "Raw profile type exif" text: bytes.fromhex("".join(text.split("\n")[3:])).
std::vector<uint8_t> raw_profile_bytes(const std::string& text) {
    size_t pos = 0;
    for (int skip = 0; skip < 3; ++skip) {
        pos = text.find('\n', pos);
        if (pos == std::string::npos) return {};
        ++pos;
    }
    std::vector<uint8_t> out;
    int hi = -1;
    for (size_t i = pos; i < text.size(); ++i) {
        const char c = text[i];
        int v;
        if (c >= '0' && c <= '9')
            v = c - '0';
        else if (c >= 'a' && c <= 'f')
            v = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F')
            v = c - 'A' + 10;
        else if (c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v')
            continue;
        else
            return {};
        if (hi < 0) {
            hi = v;
        } else {
            out.push_back(static_cast<uint8_t>(hi * 16 + v));
            hi = -1;
        }
    }
    return hi < 0 ? out : std::vector<uint8_t>{};
}

Status too_large(const std::string& label, const char* fmt, int64_t w, int64_t h, const ImageLimits& l) {
    return invalid_argument(label + ": " + fmt + " image is " + std::to_string(w) + "x" + std::to_string(h) +
                            ", larger than the limit of " + std::to_string(l.max_side) + " px per side and " +
                            std::to_string(l.max_pixels) + " pixels");
}

Status check_dims(const std::string& label, const char* fmt, int64_t w, int64_t h, const ImageLimits& l) {
    if (w <= 0 || h <= 0)
        return bad_input(label + ": " + fmt + " header gives an empty image (" + std::to_string(w) + "x" +
                         std::to_string(h) + ")");
    if (w > l.max_side || h > l.max_side || w * h > l.max_pixels) return too_large(label, fmt, w, h, l);
    return ok_status();
}

// Samples of the decoded buffer → RGB, per PIL's convert("RGB") of the source mode.
struct Raw {
    int width = 0, height = 0;
    int channels = 0;    // 1 gray, 2 gray+alpha, 3 RGB, 4 RGBA or CMYK
    bool gray16 = false; // 1 channel, big-endian 16-bit samples (PIL mode I): clipped to 255
    bool cmyk = false;   // 4 channels of libjpeg CMYK (Adobe-inverted)
    std::vector<uint8_t> data;
};

RgbImage to_rgb(Raw&& r) {
    if (r.channels == 3 && !r.gray16 && !r.cmyk) { // already RGB: take the buffer, no second copy
        RgbImage out;
        out.width = r.width;
        out.height = r.height;
        out.pixels = std::move(r.data);
        return out;
    }
    RgbImage out(r.width, r.height);
    const size_t n = static_cast<size_t>(r.width) * r.height;
    uint8_t* o = out.pixels.data();
    const uint8_t* s = r.data.data();
    if (r.gray16) {
        for (size_t i = 0; i < n; ++i) {
            const unsigned v = (unsigned(s[2 * i]) << 8) | s[2 * i + 1];
            o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = static_cast<uint8_t>(std::min(v, 255u));
        }
    } else if (r.cmyk) {
        // PIL: "CMYK;I" unpacker (x → 255 − x), then cmyk2rgb: nk = 255 − k, out = clip(nk − nk·c/255).
        for (size_t i = 0; i < n; ++i) {
            const int c = 255 - s[4 * i], m = 255 - s[4 * i + 1], y = 255 - s[4 * i + 2],
                      k = 255 - s[4 * i + 3];
            const int nk = 255 - k;
            auto muldiv255 = [](int a, int b) {
                const int t = a * b + 128;
                return ((t >> 8) + t) >> 8;
            };
            o[3 * i] = static_cast<uint8_t>(std::clamp(nk - muldiv255(c, nk), 0, 255));
            o[3 * i + 1] = static_cast<uint8_t>(std::clamp(nk - muldiv255(m, nk), 0, 255));
            o[3 * i + 2] = static_cast<uint8_t>(std::clamp(nk - muldiv255(y, nk), 0, 255));
        }
    } else if (r.channels == 1 || r.channels == 2) {
        for (size_t i = 0; i < n; ++i) o[3 * i] = o[3 * i + 1] = o[3 * i + 2] = s[r.channels * i];
    } else if (r.channels == 3) {
        std::memcpy(o, s, n * 3);
    } else {
        for (size_t i = 0; i < n; ++i) {
            o[3 * i] = s[4 * i];
            o[3 * i + 1] = s[4 * i + 1];
            o[3 * i + 2] = s[4 * i + 2];
        }
    }
    return out;
}

// ---- PNG ------------------------------------------------------------------------------------------------
struct PngState {
    const uint8_t* data = nullptr;
    size_t size = 0, pos = 0;
    std::string error;
    bool truncated = false;
    bool in_read_end = false;
    png_structp png = nullptr;
    png_infop info = nullptr;
    std::vector<png_bytep> rows;
    Raw raw;
    std::string mode;
    std::vector<uint8_t> exif;
    std::string raw_profile_exif, xmp;
    bool has_exif = false, has_raw_profile = false;
};

[[noreturn]] void png_on_error(png_structp png, png_const_charp msg) {
    auto* st = static_cast<PngState*>(png_get_error_ptr(png));
    st->error.assign(msg ? msg : "unknown libpng error");
    png_longjmp(png, 1);
}
void png_on_warning(png_structp, png_const_charp) {}
void png_on_read(png_structp png, png_bytep out, size_t n) {
    auto* st = static_cast<PngState*>(png_get_io_ptr(png));
    if (n > st->size - st->pos) {
        st->truncated = true;
        png_error(png, "unexpected end of data");
    }
    std::memcpy(out, st->data + st->pos, n);
    st->pos += n;
}

void png_collect_metadata(PngState& st) {
#ifdef PNG_eXIf_SUPPORTED
    png_uint_32 n = 0;
    png_bytep exif = nullptr;
    if (png_get_eXIf_1(st.png, st.info, &n, &exif) != 0 && exif && n > 0) {
        st.has_exif = true;
        st.exif.assign(exif, exif + n);
    }
#endif
    png_textp text = nullptr;
    int num = 0;
    if (png_get_text(st.png, st.info, &text, &num) > 0) {
        for (int i = 0; i < num; ++i) {
            if (!text[i].key || !text[i].text) continue;
            const size_t len =
                text[i].compression >= PNG_ITXT_COMPRESSION_NONE ? text[i].itxt_length : text[i].text_length;
            const std::string key = text[i].key;
            if (key == "Raw profile type exif" && !st.has_raw_profile) {
                st.has_raw_profile = true;
                st.raw_profile_exif.assign(text[i].text, len);
            } else if (key == "XML:com.adobe.xmp" && st.xmp.empty()) {
                st.xmp.assign(text[i].text, len);
            }
        }
    }
}

// Runs libpng; everything it touches lives in `st` (setjmp-safe). False with st.error on failure.
bool png_run(PngState& st) {
    st.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &st, png_on_error, png_on_warning);
    if (!st.png) {
        st.error = "libpng could not allocate its state";
        return false;
    }
    st.info = png_create_info_struct(st.png);
    if (!st.info) {
        png_destroy_read_struct(&st.png, nullptr, nullptr);
        st.error = "libpng could not allocate its state";
        return false;
    }
    if (setjmp(png_jmpbuf(st.png))) {
        // A problem after the last image row (a missing IEND, a bad trailing chunk) loses nothing: PIL stops
        // reading there too.
        const bool ok = st.in_read_end;
        if (ok) png_collect_metadata(st);
        png_destroy_read_struct(&st.png, &st.info, nullptr);
        return ok;
    }
    png_set_read_fn(st.png, &st, png_on_read);
    png_set_user_limits(st.png, 0x7fffffffU, 0x7fffffffU); // our own limits were checked on the IHDR
    png_read_info(st.png, st.info);
    png_uint_32 w = 0, h = 0;
    int depth = 0, ctype = 0;
    png_get_IHDR(st.png, st.info, &w, &h, &depth, &ctype, nullptr, nullptr, nullptr);
    switch (ctype) {
    case PNG_COLOR_TYPE_GRAY:
        st.mode = depth == 1 ? "1" : depth == 16 ? "I" : "L";
        break;
    case PNG_COLOR_TYPE_GRAY_ALPHA:
        st.mode = "LA";
        break;
    case PNG_COLOR_TYPE_PALETTE:
        st.mode = "P";
        break;
    case PNG_COLOR_TYPE_RGB:
        st.mode = "RGB";
        break;
    case PNG_COLOR_TYPE_RGB_ALPHA:
        st.mode = "RGBA";
        break;
    default:
        st.mode = "?";
    }
    if (ctype == PNG_COLOR_TYPE_PALETTE) png_set_palette_to_rgb(st.png);
    if (ctype == PNG_COLOR_TYPE_GRAY && depth < 8) png_set_expand_gray_1_2_4_to_8(st.png);
    st.raw.gray16 = ctype == PNG_COLOR_TYPE_GRAY && depth == 16;
    if (depth == 16 && !st.raw.gray16)
        png_set_strip_16(st.png); // keeps the high byte, as PIL's ;16B unpackers
    png_set_interlace_handling(st.png);
    png_read_update_info(st.png, st.info);
    st.raw.width = static_cast<int>(w);
    st.raw.height = static_cast<int>(h);
    st.raw.channels = png_get_channels(st.png, st.info);
    const size_t rowbytes = png_get_rowbytes(st.png, st.info);
    const size_t expect = static_cast<size_t>(w) * st.raw.channels * (st.raw.gray16 ? 2 : 1);
    if (rowbytes != expect || st.raw.channels < 1 || st.raw.channels > 4 ||
        png_get_bit_depth(st.png, st.info) != (st.raw.gray16 ? 16 : 8))
        png_error(st.png, "unsupported PNG sample layout");
    st.raw.data.resize(rowbytes * h);
    st.rows.resize(h);
    for (png_uint_32 y = 0; y < h; ++y) st.rows[y] = st.raw.data.data() + rowbytes * y;
    png_read_image(st.png, st.rows.data());
    st.in_read_end = true;
    png_read_end(st.png, st.info);
    png_collect_metadata(st);
    png_destroy_read_struct(&st.png, &st.info, nullptr);
    return true;
}

Result<DecodedImage> decode_png(const uint8_t* data, size_t size, const std::string& label,
                                const ImageLimits& limits, int64_t& orientation) {
    // IHDR: signature(8) length(4) "IHDR" width(4) height(4).
    if (size < 33) return bad_input(label + ": truncated PNG (" + std::to_string(size) + " bytes)");
    if (std::memcmp(data + 12, "IHDR", 4) != 0) return bad_input(label + ": PNG without an IHDR chunk first");
    const uint32_t width = rd32(data + 16, false), height = rd32(data + 20, false);
    H3_TRY(check_dims(label, "PNG", width, height, limits));
    // Deflate expands at most 1032:1, so the filtered rows (1 + ceil(width·samples·depth / 8) bytes each)
    // cannot be larger than that times the file: a header declaring more is refused before libpng reads a
    // pixel or anything is allocated for it.
    const int depth = data[24], ctype = data[25];
    const int samples = ctype == 2 ? 3 : ctype == 4 ? 2 : ctype == 6 ? 4 : 1;
    const double row = 1.0 + std::ceil(static_cast<double>(width) * samples * std::max(depth, 1) / 8.0);
    if (row * height > kDeflateMaxRatio * static_cast<double>(size) + 65536.0)
        return bad_input(label + ": PNG header declares " + std::to_string(width) + "x" +
                         std::to_string(height) + " pixels, more than its " + std::to_string(size) +
                         " bytes can hold (truncated or forged)");
    PngState st;
    st.data = data;
    st.size = size;
    if (!png_run(st)) {
        if (st.truncated) return bad_input(label + ": truncated PNG (the data ends inside the image)");
        return bad_input(label + ": bad PNG: " + st.error);
    }
    DecodedImage out;
    out.format = ImageFormat::kPng;
    out.source_mode = st.mode;
    out.image = to_rgb(std::move(st.raw));
    orientation = -1;
    if (st.has_exif)
        orientation = exif_orientation_tag(st.exif.data(), st.exif.size());
    else if (st.has_raw_profile) {
        auto bytes = raw_profile_bytes(st.raw_profile_exif);
        orientation = exif_orientation_tag(bytes.data(), bytes.size());
    }
    if (orientation < 0 && !st.xmp.empty()) orientation = xmp_orientation(st.xmp);
    return out;
}

// ---- JPEG -----------------------------------------------------------------------------------------------
struct JpegState {
    jpeg_decompress_struct cinfo;
    struct Err {
        jpeg_error_mgr pub;
        std::jmp_buf jump;
        struct JpegState* st;
    } err;
    const uint8_t* data = nullptr;
    size_t size = 0;
    std::string error;
    bool hit_eof = false;
    bool dims_rejected = false;
    ImageLimits limits;
    std::string label;
    Status dims_status;
    Raw raw;
    std::string mode;
    std::vector<uint8_t> exif;
    bool has_exif = false;
};

[[noreturn]] void jpeg_on_error(j_common_ptr cinfo) {
    auto* err = reinterpret_cast<JpegState::Err*>(cinfo->err);
    char buf[JMSG_LENGTH_MAX];
    (*cinfo->err->format_message)(cinfo, buf);
    err->st->error.assign(buf);
    std::longjmp(err->jump, 1);
}
void jpeg_on_message(j_common_ptr cinfo, int level) {
    if (level >= 0) return; // trace messages
    auto* err = reinterpret_cast<JpegState::Err*>(cinfo->err);
    if (cinfo->err->msg_code == JWRN_JPEG_EOF) err->st->hit_eof = true;
    cinfo->err->num_warnings++; // other corrupt-data warnings are ignored, as PIL ignores them
}

bool jpeg_run(JpegState& st) {
    st.cinfo.err = jpeg_std_error(&st.err.pub);
    st.err.pub.error_exit = jpeg_on_error;
    st.err.pub.emit_message = jpeg_on_message;
    st.err.st = &st;
    if (setjmp(st.err.jump)) {
        jpeg_destroy_decompress(&st.cinfo);
        return false;
    }
    jpeg_create_decompress(&st.cinfo);
    jpeg_mem_src(&st.cinfo, st.data, static_cast<unsigned long>(st.size));
    jpeg_save_markers(&st.cinfo, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&st.cinfo, TRUE);
    st.dims_status = check_dims(st.label, "JPEG", st.cinfo.image_width, st.cinfo.image_height, st.limits);
    if (st.dims_status.ok() && static_cast<int64_t>(st.cinfo.image_width) * st.cinfo.image_height >
                                   kJpegMaxPixelsPerByte * static_cast<int64_t>(st.size) + 4096)
        st.dims_status =
            bad_input(st.label + ": JPEG header declares " + std::to_string(st.cinfo.image_width) + "x" +
                      std::to_string(st.cinfo.image_height) + " pixels, more than its " +
                      std::to_string(st.size) + " bytes can hold (truncated or forged)");
    if (!st.dims_status.ok()) {
        jpeg_destroy_decompress(&st.cinfo);
        st.dims_rejected = true;
        return false;
    }
    for (jpeg_saved_marker_ptr m = st.cinfo.marker_list; m; m = m->next) {
        // PIL keeps the first APP1 that starts with "Exif\0".
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 5 && std::memcmp(m->data, "Exif\0", 5) == 0) {
            st.exif.assign(m->data, m->data + m->data_length);
            st.has_exif = true;
            break;
        }
    }
    switch (st.cinfo.num_components) {
    case 1:
        st.cinfo.out_color_space = JCS_GRAYSCALE;
        st.mode = "L";
        break;
    case 3:
        st.cinfo.out_color_space = JCS_RGB;
        st.mode = "RGB";
        break;
    case 4:
        st.cinfo.out_color_space = JCS_CMYK; // libjpeg turns YCCK into CMYK
        st.mode = "CMYK";
        st.raw.cmyk = true;
        break;
    default:
        st.error = "unsupported JPEG with " + std::to_string(st.cinfo.num_components) + " components";
        jpeg_destroy_decompress(&st.cinfo);
        return false;
    }
    jpeg_start_decompress(&st.cinfo);
    st.raw.width = static_cast<int>(st.cinfo.output_width);
    st.raw.height = static_cast<int>(st.cinfo.output_height);
    st.raw.channels = st.cinfo.output_components;
    const size_t stride = static_cast<size_t>(st.raw.width) * st.raw.channels;
    // Rows are stored as they decode (grown 64 at a time), and a file that ends early stops there: libjpeg
    // would otherwise go on producing gray rows for the whole declared size.
    while (st.cinfo.output_scanline < st.cinfo.output_height && !st.hit_eof) {
        const size_t y = st.cinfo.output_scanline;
        if (st.raw.data.size() < stride * (y + 1))
            st.raw.data.resize(stride * std::min<size_t>(st.raw.height, y + 64));
        JSAMPROW row = st.raw.data.data() + stride * y;
        jpeg_read_scanlines(&st.cinfo, &row, 1);
    }
    const bool truncated = st.hit_eof; // a missing EOI after the last scan is tolerated, as PIL does
    if (truncated && st.cinfo.output_scanline < st.cinfo.output_height) {
        jpeg_destroy_decompress(&st.cinfo);
        return false;
    }
    jpeg_finish_decompress(&st.cinfo);
    jpeg_destroy_decompress(&st.cinfo);
    return !truncated;
}

Result<DecodedImage> decode_jpeg(const uint8_t* data, size_t size, const std::string& label,
                                 const ImageLimits& limits, int64_t& orientation) {
    auto st = std::make_unique<JpegState>();
    st->data = data;
    st->size = size;
    st->limits = limits;
    st->label = label;
    if (!jpeg_run(*st)) {
        if (st->dims_rejected) return st->dims_status;
        if (st->hit_eof)
            return bad_input(label + ": truncated JPEG (the data ends before the image is complete" +
                             (st->error.empty() ? std::string() : "; libjpeg: " + st->error) + ")");
        return bad_input(label + ": bad JPEG: " + st->error);
    }
    DecodedImage out;
    out.format = ImageFormat::kJpeg;
    out.source_mode = st->mode;
    out.image = to_rgb(std::move(st->raw));
    orientation = st->has_exif ? exif_orientation_tag(st->exif.data(), st->exif.size()) : -1;
    return out;
}

// ---- WebP -----------------------------------------------------------------------------------------------
#ifdef H3_WITH_WEBP
const char* vp8_status_name(VP8StatusCode s) {
    switch (s) {
    case VP8_STATUS_OK:
        return "ok";
    case VP8_STATUS_OUT_OF_MEMORY:
        return "out of memory";
    case VP8_STATUS_INVALID_PARAM:
        return "invalid parameter";
    case VP8_STATUS_BITSTREAM_ERROR:
        return "bitstream error";
    case VP8_STATUS_UNSUPPORTED_FEATURE:
        return "unsupported feature";
    case VP8_STATUS_SUSPENDED:
        return "suspended";
    case VP8_STATUS_USER_ABORT:
        return "aborted";
    case VP8_STATUS_NOT_ENOUGH_DATA:
        return "not enough data";
    }
    return "unknown status";
}

Result<DecodedImage> decode_webp(const uint8_t* data, size_t size, const std::string& label,
                                 const ImageLimits& limits, int64_t& orientation) {
    WebPBitstreamFeatures f;
    VP8StatusCode s = WebPGetFeatures(data, size, &f);
    if (s == VP8_STATUS_NOT_ENOUGH_DATA) return bad_input(label + ": truncated WebP (header incomplete)");
    if (s != VP8_STATUS_OK) return bad_input(label + ": bad WebP header: " + vp8_status_name(s));
    if (f.has_animation)
        return unimplemented(label + ": animated WebP is not supported; give a still image (one frame)");
    H3_TRY(check_dims(label, "WebP", f.width, f.height, limits));
    // The RIFF header says how long the file is: a shorter buffer is refused before the pixels are allocated.
    if (const uint64_t riff = rd32(data + 4, true); riff + 8 > size)
        return bad_input(label + ": truncated WebP (its RIFF header declares " + std::to_string(riff + 8) +
                         " bytes, " + std::to_string(size) + " given)");
    const int channels = f.has_alpha ? 4 : 3;
    Raw raw;
    raw.width = f.width;
    raw.height = f.height;
    raw.channels = channels;
    raw.data.resize(static_cast<size_t>(f.width) * f.height * channels);
    WebPDecoderConfig config;
    if (!WebPInitDecoderConfig(&config)) return internal_error("libwebp version mismatch");
    config.output.colorspace = f.has_alpha ? MODE_RGBA : MODE_RGB;
    config.output.is_external_memory = 1;
    config.output.u.RGBA.rgba = raw.data.data();
    config.output.u.RGBA.stride = f.width * channels;
    config.output.u.RGBA.size = raw.data.size();
    s = WebPDecode(data, size, &config);
    WebPFreeDecBuffer(&config.output);
    if (s == VP8_STATUS_NOT_ENOUGH_DATA) return bad_input(label + ": truncated WebP (the data ends early)");
    if (s != VP8_STATUS_OK) return bad_input(label + ": bad WebP: " + vp8_status_name(s));
    DecodedImage out;
    out.format = ImageFormat::kWebp;
    out.source_mode = f.has_alpha ? "RGBA" : "RGB";
    out.image = to_rgb(std::move(raw));
    // RIFF chunks after "RIFF" size "WEBP": fourcc, u32 LE size, payload padded to even.
    orientation = -1;
    size_t pos = 12;
    while (pos + 8 <= size) {
        const uint64_t len = rd32(data + pos + 4, true);
        if (std::memcmp(data + pos, "EXIF", 4) == 0) {
            if (pos + 8 + len <= size) orientation = exif_orientation_tag(data + pos + 8, len);
            break;
        }
        pos += 8 + len + (len & 1);
    }
    return out;
}
#endif // H3_WITH_WEBP

#endif // H3_WITH_IMAGE_CODECS

} // namespace

const char* image_format_name(ImageFormat format) {
    switch (format) {
    case ImageFormat::kPng:
        return "png";
    case ImageFormat::kJpeg:
        return "jpeg";
    case ImageFormat::kWebp:
        return "webp";
    case ImageFormat::kUnknown:
        break;
    }
    return "unknown";
}

ImageFormat detect_image_format(const uint8_t* d, size_t n) {
    static const uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && std::memcmp(d, kPngSig, 8) == 0) return ImageFormat::kPng;
    if (n >= 3 && d[0] == 0xFF && d[1] == 0xD8 && d[2] == 0xFF) return ImageFormat::kJpeg;
    if (n >= 12 && std::memcmp(d, "RIFF", 4) == 0 && std::memcmp(d + 8, "WEBP", 4) == 0)
        return ImageFormat::kWebp;
    return ImageFormat::kUnknown;
}

bool image_format_available(ImageFormat format) {
    switch (format) {
#ifdef H3_WITH_IMAGE_CODECS
    case ImageFormat::kPng:
    case ImageFormat::kJpeg:
        return true;
#endif
#ifdef H3_WITH_WEBP
    case ImageFormat::kWebp:
        return true;
#endif
    default:
        return false;
    }
}

bool image_codecs_available() {
    return image_format_available(ImageFormat::kPng) && image_format_available(ImageFormat::kJpeg) &&
           image_format_available(ImageFormat::kWebp);
}

int exif_orientation(const uint8_t* data, size_t size) {
    const int64_t v = exif_orientation_tag(data, size);
    return v >= 1 && v <= 8 ? static_cast<int>(v) : 0;
}

RgbImage apply_orientation(const RgbImage& in, int orientation) {
    if (orientation < 2 || orientation > 8) return in;
    const int W = in.width, H = in.height;
    const bool swap = orientation >= 5;
    RgbImage out(swap ? H : W, swap ? W : H);
    for (int y = 0; y < out.height; ++y) {
        uint8_t* o = out.row(y);
        for (int x = 0; x < out.width; ++x) {
            int sx = x, sy = y;
            switch (orientation) {
            case 2:
                sx = W - 1 - x;
                break; // FLIP_LEFT_RIGHT
            case 3:
                sx = W - 1 - x, sy = H - 1 - y;
                break; // ROTATE_180
            case 4:
                sy = H - 1 - y;
                break; // FLIP_TOP_BOTTOM
            case 5:
                sx = y, sy = x;
                break; // TRANSPOSE
            case 6:
                sx = y, sy = H - 1 - x;
                break; // ROTATE_270 (90° clockwise)
            case 7:
                sx = W - 1 - y, sy = H - 1 - x;
                break; // TRANSVERSE
            case 8:
                sx = W - 1 - y, sy = x;
                break; // ROTATE_90 (90° counter-clockwise)
            }
            const uint8_t* s = in.row(sy) + 3 * sx;
            o[3 * x] = s[0];
            o[3 * x + 1] = s[1];
            o[3 * x + 2] = s[2];
        }
    }
    return out;
}

Result<DecodedImage> decode_image(const uint8_t* data, size_t size, const std::string& label,
                                  const ImageLimits& limits) {
    if (size == 0 || data == nullptr) return bad_input(label + ": empty image data (0 bytes)");
    const ImageFormat format = detect_image_format(data, size);
    if (format == ImageFormat::kUnknown) {
        std::string what = "unrecognised data";
        if (size >= 4 && std::memcmp(data, "GIF8", 4) == 0)
            what = "GIF";
        else if (size >= 2 && data[0] == 'B' && data[1] == 'M')
            what = "BMP";
        else if (size >= 4 && (std::memcmp(data, "II*\0", 4) == 0 || std::memcmp(data, "MM\0*", 4) == 0))
            what = "TIFF";
        else if (size >= 12 && std::memcmp(data + 4, "ftyp", 4) == 0)
            what = "HEIF/AVIF";
        else if (size < 12)
            what = "only " + std::to_string(size) + " bytes";
        return bad_input(label + ": unsupported image format (" + what + "); expected PNG, JPEG or WebP");
    }
    if (!image_format_available(format))
        return unimplemented(label + ": this build has no " + image_format_name(format) +
                             " decoder; rebuild with libpng-dev, libjpeg-dev and libwebp-dev installed");
#ifdef H3_WITH_IMAGE_CODECS
    int64_t orientation = -1;
    Result<DecodedImage> r = internal_error("no decoder");
    if (format == ImageFormat::kPng)
        r = decode_png(data, size, label, limits, orientation);
    else if (format == ImageFormat::kJpeg)
        r = decode_jpeg(data, size, label, limits, orientation);
#ifdef H3_WITH_WEBP
    else
        r = decode_webp(data, size, label, limits, orientation);
#endif
    if (!r.ok()) return r.status();
    DecodedImage out = std::move(r).value();
    out.stored_width = out.image.width;
    out.stored_height = out.image.height;
    if (orientation >= 2 && orientation <= 8) {
        out.image = apply_orientation(out.image, static_cast<int>(orientation));
        out.orientation = static_cast<int>(orientation);
    }
    return out;
#else
    (void)limits;
    return internal_error("unreachable");
#endif
}

Result<DecodedImage> decode_image(const std::vector<uint8_t>& bytes, const std::string& label,
                                  const ImageLimits& limits) {
    return decode_image(bytes.data(), bytes.size(), label, limits);
}

Result<DecodedImage> read_image(const std::string& path, const ImageLimits& limits,
                                const std::string& label) {
    const std::string name = label.empty() ? "image file '" + path + "'" : label;
    std::error_code ec;
    if (!std::filesystem::exists(path, ec)) return not_found(name + " does not exist");
    if (std::filesystem::is_directory(path, ec)) return bad_input(name + " is a directory");
    if (!std::filesystem::is_regular_file(path, ec)) // a device (/dev/zero), a FIFO: never read
        return bad_input(name + " is not a regular file");
    const auto bytes = std::filesystem::file_size(path, ec);
    if (ec) return io_error(name + ": cannot read its size: " + ec.message());
    if (bytes > kMaxImageFileBytes)
        return invalid_argument(name + " is " + std::to_string(bytes) + " bytes, more than the 1 GiB limit");
    std::ifstream f(path, std::ios::binary);
    if (!f) return io_error(name + " cannot be opened");
    std::vector<uint8_t> data(bytes);
    if (bytes > 0 && !f.read(reinterpret_cast<char*>(data.data()), static_cast<std::streamsize>(bytes)))
        return io_error(name + ": read failed");
    return decode_image(data, name, limits);
}

} // namespace h3::io
