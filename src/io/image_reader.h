// Still-image input: PNG (libpng), JPEG (libjpeg-turbo) and WebP (libwebp), from a file or a memory buffer,
// decoded to 8-bit RGB the way the reference loads keyframes (diffusers `load_image`: PIL 9.x's
// `ImageOps.exif_transpose(Image.open(f)).convert("RGB")`):
//   - the format comes from the magic bytes, never the file name;
//   - the EXIF Orientation tag (JPEG APP1 "Exif", PNG eXIf / "Raw profile type exif" text / XMP
//     tiff:Orientation, WebP EXIF chunk) is applied as one of PIL's 8 transposes;
//   - conversion to RGB follows PIL's `convert("RGB")`: L/1-bit/2/4-bit gray replicated, LA and RGBA drop the
//     alpha channel without compositing, palettes are looked up (transparency ignored), 16-bit RGB/RGBA/LA
//     keep the high byte (PIL's "RGB;16B" unpackers), 16-bit grayscale (PIL mode "I") is clipped to 255 as
//     PIL's I→RGB conversion does, CMYK/YCCK JPEGs are read as Adobe-inverted CMYK (PIL always assumes
//     that) and converted with PIL's cmyk2rgb (`nk − c·nk/255`, nk = 255 − k);
//   - JPEG uses libjpeg's defaults, as PIL does (JDCT_ISLOW, fancy upsampling, block smoothing), so the
//   pixels
//     match PIL's decode when both link the same libjpeg-turbo.
// Builds without a codec's -dev package (H3_WITH_IMAGE_CODECS for PNG+JPEG, H3_WITH_WEBP) report
// kUnimplemented for that format.
#pragma once

#include "core/status.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace h3::io {

// 8-bit RGB, row-major [height, width, 3].
struct RgbImage {
    int width = 0, height = 0;
    std::vector<uint8_t> pixels;

    RgbImage() = default;
    RgbImage(int w, int h) : width(w), height(h), pixels(static_cast<size_t>(w) * h * 3) {}
    bool empty() const { return width == 0 || height == 0; }
    uint8_t* row(int y) { return pixels.data() + static_cast<size_t>(y) * width * 3; }
    const uint8_t* row(int y) const { return pixels.data() + static_cast<size_t>(y) * width * 3; }
};

enum class ImageFormat { kUnknown, kPng, kJpeg, kWebp };
const char* image_format_name(ImageFormat format); // "png", "jpeg", "webp", "unknown"
// From the first bytes (PNG signature, JPEG SOI FF D8 FF, RIFF....WEBP).
ImageFormat detect_image_format(const uint8_t* data, size_t size);
// Whether this build decodes the format (PNG and JPEG: H3_WITH_IMAGE_CODECS; WebP: H3_WITH_WEBP).
bool image_format_available(ImageFormat format);
// All three.
bool image_codecs_available();

struct ImageLimits {
    int max_side = 16384;             // per side, before decoding a single pixel
    int64_t max_pixels = 100000000LL; // width·height
};

struct DecodedImage {
    RgbImage image; // oriented, RGB
    ImageFormat format = ImageFormat::kUnknown;
    std::string source_mode; // PIL's mode for what the file held: 1, L, I, LA, P, RGB, RGBA, CMYK
    int stored_width = 0, stored_height = 0; // before the orientation transpose
    int orientation = 1;                     // the EXIF orientation that was applied (1 = none)
};

// `label` names the buffer in errors (a file name, "upload 'first_frame'", ...).
Result<DecodedImage> decode_image(const uint8_t* data, size_t size, const std::string& label = "image",
                                  const ImageLimits& limits = {});
Result<DecodedImage> decode_image(const std::vector<uint8_t>& bytes, const std::string& label = "image",
                                  const ImageLimits& limits = {});
// `label` names the file in errors (an upload's label); "image file 'PATH'" when empty.
Result<DecodedImage> read_image(const std::string& path, const ImageLimits& limits = {},
                                const std::string& label = "");

// The Orientation (tag 0x0112) of IFD0 in a TIFF-structured EXIF block, with or without the "Exif\0\0"
// prefix, either byte order. 0 when absent, malformed or outside 1..8.
int exif_orientation(const uint8_t* data, size_t size);
// PIL's ImageOps.exif_transpose for orientation 1..8 (2 mirror, 3 rotate 180, 4 flip, 5 transpose,
// 6 rotate 90° clockwise, 7 transverse, 8 rotate 90° counter-clockwise); other values return a copy.
RgbImage apply_orientation(const RgbImage& image, int orientation);

} // namespace h3::io
