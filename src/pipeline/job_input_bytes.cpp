#include "pipeline/job_input_bytes.h"

#include "pipeline/byte_codec.h"
#include "pipeline/references.h"

#include <nlohmann/json.hpp>

#include <cstring>
#include <string>

namespace h3::pipeline {

namespace {

constexpr uint32_t kMagic = 0x4833494e; // "H3IN"
constexpr size_t kMaxHeader = size_t{64} << 20;
constexpr size_t kMaxPixels = size_t{1} << 34;

using nlohmann::json;

template <class T> void put(json& j, const char* key, const std::optional<T>& v) {
    if (v) j[key] = *v;
}

template <class T> Status get(const json& j, const char* key, std::optional<T>& v) {
    if (!j.contains(key)) return ok_status();
    try {
        v = j.at(key).get<T>();
    } catch (const std::exception& e) {
        return invalid_argument(std::string("job input: field ") + key + ": " + e.what());
    }
    return ok_status();
}

void put_image(ByteWriter& w, const io::RgbImage& im) {
    w.i64(im.width);
    w.i64(im.height);
    w.bytes(im.pixels.data(), im.pixels.size());
}

Result<io::RgbImage> get_image(ByteReader& rd) {
    H3_ASSIGN_OR_RETURN(int64_t wd, rd.i64());
    H3_ASSIGN_OR_RETURN(int64_t ht, rd.i64());
    if (wd < 0 || ht < 0 || wd > (1 << 20) || ht > (1 << 20))
        return rd.error("an image of " + std::to_string(wd) + "x" + std::to_string(ht));
    io::RgbImage im;
    im.width = static_cast<int>(wd);
    im.height = static_cast<int>(ht);
    H3_ASSIGN_OR_RETURN(im.pixels, rd.bytes(kMaxPixels));
    if (im.pixels.size() != static_cast<size_t>(wd * ht * 3))
        return rd.error("an image of " + std::to_string(wd) + "x" + std::to_string(ht) + " with " +
                        std::to_string(im.pixels.size()) + " bytes");
    return im;
}

json image_meta(const io::DecodedImage& d) {
    return {{"format", static_cast<int>(d.format)},
            {"source_mode", d.source_mode},
            {"stored_width", d.stored_width},
            {"stored_height", d.stored_height},
            {"orientation", d.orientation}};
}

Status read_image_meta(const json& m, io::DecodedImage& d) {
    try {
        const int f = m.at("format").get<int>();
        if (f < 0 || f > static_cast<int>(io::ImageFormat::kWebp))
            return invalid_argument("job input: image format code " + std::to_string(f));
        d.format = static_cast<io::ImageFormat>(f);
        d.source_mode = m.at("source_mode").get<std::string>();
        d.stored_width = m.at("stored_width").get<int>();
        d.stored_height = m.at("stored_height").get<int>();
        d.orientation = m.at("orientation").get<int>();
    } catch (const std::exception& e) {
        return invalid_argument(std::string("job input: keyframe: ") + e.what());
    }
    return ok_status();
}

} // namespace

std::vector<uint8_t> pack_job_input(const JobInput& in) {
    json h;
    put(h, "task", in.task);
    put(h, "prompt", in.prompt);
    h["prompt_embeds"] = in.prompt_embeds.has_value();
    h["prompt_embeds_source"] = in.prompt_embeds_source;
    put(h, "random_prompt_embeds", in.random_prompt_embeds);
    put(h, "size", in.size);
    put(h, "aspect", in.aspect);
    put(h, "seconds", in.seconds);
    put(h, "frames", in.frames);
    put(h, "num_inference_steps", in.num_inference_steps);
    put(h, "seed", in.seed);
    put(h, "cache", in.cache);
    put(h, "quality", in.quality);
    put(h, "attention", in.attention);
    if (in.first_frame) h["first_frame"] = image_meta(*in.first_frame);
    if (in.last_frame) h["last_frame"] = image_meta(*in.last_frame);
    json refs = json::array();
    for (const ReferenceMedia& r : in.references)
        refs.push_back({{"kind", static_cast<int>(r.kind)},
                        {"source", r.source},
                        {"fps", r.fps},
                        {"sample_rate", r.sample_rate},
                        {"truncated", r.truncated}});
    h["references"] = refs;
    h["outputs"] = {{"latents", in.outputs.latents},
                    {"mp4", in.outputs.media.mp4},
                    {"wav", in.outputs.media.wav},
                    {"png_dir", in.outputs.media.png_dir},
                    {"return_media", in.outputs.return_media}};
    json lora = json::array();
    for (const LoraInput& l : in.adapters.lora) lora.push_back({{"path", l.path}, {"scale", l.scale}});
    json ad = {{"lora", lora}};
    put(ad, "lora_mode", in.adapters.lora_mode);
    put(ad, "lora_strict", in.adapters.lora_strict);
    put(ad, "preset", in.adapters.preset);
    put(ad, "video_shift", in.adapters.video_shift);
    put(ad, "audio_shift", in.adapters.audio_shift);
    h["adapters"] = ad;

    ByteWriter w;
    w.u32(kMagic);
    const std::string text = h.dump();
    w.bytes(text.data(), text.size());
    if (in.prompt_embeds) {
        w.tensor(in.prompt_embeds->embeddings);
        w.bytes(in.prompt_embeds->tags.data(), in.prompt_embeds->tags.size() * sizeof(int32_t));
    }
    if (in.first_frame) put_image(w, in.first_frame->image);
    if (in.last_frame) put_image(w, in.last_frame->image);
    for (const ReferenceMedia& r : in.references) {
        put_image(w, r.image);
        w.tensor(r.frames);
        w.tensor(r.audio);
    }
    return std::move(w.out);
}

Result<JobInput> unpack_job_input(const std::vector<uint8_t>& bytes) {
    ByteReader rd(bytes, "job input");
    H3_ASSIGN_OR_RETURN(uint32_t magic, rd.u32());
    if (magic != kMagic) return rd.error("the payload does not start with its tag");
    H3_ASSIGN_OR_RETURN(std::vector<uint8_t> text, rd.bytes(kMaxHeader));
    json h;
    try {
        h = json::parse(text.begin(), text.end());
    } catch (const std::exception& e) {
        return rd.error(std::string("the header: ") + e.what());
    }
    if (!h.is_object()) return rd.error("the header is not an object");
    JobInput in;
    H3_TRY(get(h, "task", in.task));
    H3_TRY(get(h, "prompt", in.prompt));
    H3_TRY(get(h, "random_prompt_embeds", in.random_prompt_embeds));
    H3_TRY(get(h, "size", in.size));
    H3_TRY(get(h, "aspect", in.aspect));
    H3_TRY(get(h, "seconds", in.seconds));
    H3_TRY(get(h, "frames", in.frames));
    H3_TRY(get(h, "num_inference_steps", in.num_inference_steps));
    H3_TRY(get(h, "seed", in.seed));
    H3_TRY(get(h, "cache", in.cache));
    H3_TRY(get(h, "quality", in.quality));
    H3_TRY(get(h, "attention", in.attention));
    try {
        in.prompt_embeds_source = h.at("prompt_embeds_source").get<std::string>();
        const json& o = h.at("outputs");
        in.outputs.latents = o.at("latents").get<std::string>();
        in.outputs.media.mp4 = o.at("mp4").get<std::string>();
        in.outputs.media.wav = o.at("wav").get<std::string>();
        in.outputs.media.png_dir = o.at("png_dir").get<std::string>();
        in.outputs.return_media = o.at("return_media").get<bool>();
        const json& ad = h.at("adapters");
        for (const json& l : ad.at("lora"))
            in.adapters.lora.push_back({l.at("path").get<std::string>(), l.at("scale").get<double>()});
        H3_TRY(get(ad, "lora_mode", in.adapters.lora_mode));
        H3_TRY(get(ad, "lora_strict", in.adapters.lora_strict));
        H3_TRY(get(ad, "preset", in.adapters.preset));
        H3_TRY(get(ad, "video_shift", in.adapters.video_shift));
        H3_TRY(get(ad, "audio_shift", in.adapters.audio_shift));
    } catch (const std::exception& e) {
        return rd.error(std::string("the header: ") + e.what());
    }
    if (h.value("prompt_embeds", false)) {
        Conditioning c;
        H3_ASSIGN_OR_RETURN(c.embeddings, rd.tensor());
        H3_ASSIGN_OR_RETURN(std::vector<uint8_t> tags, rd.bytes(kMaxPixels));
        if (tags.size() != static_cast<size_t>(c.rows()) * sizeof(int32_t))
            return rd.error(std::to_string(tags.size()) + " tag bytes for " + std::to_string(c.rows()) +
                            " prompt rows");
        c.tags.resize(static_cast<size_t>(c.rows()));
        if (!tags.empty()) std::memcpy(c.tags.data(), tags.data(), tags.size());
        in.prompt_embeds = std::move(c);
    }
    for (const char* key : {"first_frame", "last_frame"}) {
        if (!h.contains(key)) continue;
        io::DecodedImage d;
        H3_TRY(read_image_meta(h.at(key), d));
        H3_ASSIGN_OR_RETURN(d.image, get_image(rd));
        (std::string(key) == "first_frame" ? in.first_frame : in.last_frame) = std::move(d);
    }
    if (!h.contains("references") || !h.at("references").is_array())
        return rd.error("the header has no references list");
    for (const json& m : h.at("references")) {
        ReferenceMedia r;
        try {
            const int kind = m.at("kind").get<int>();
            if (kind < 0 || kind > static_cast<int>(ReferenceKind::kAudio))
                return rd.error("reference kind code " + std::to_string(kind));
            r.kind = static_cast<ReferenceKind>(kind);
            r.source = m.at("source").get<std::string>();
            r.fps = m.at("fps").get<double>();
            r.sample_rate = m.at("sample_rate").get<int>();
            r.truncated = m.at("truncated").get<bool>();
        } catch (const std::exception& e) {
            return rd.error(std::string("a reference: ") + e.what());
        }
        H3_ASSIGN_OR_RETURN(r.image, get_image(rd));
        H3_ASSIGN_OR_RETURN(r.frames, rd.tensor());
        H3_ASSIGN_OR_RETURN(r.audio, rd.tensor());
        in.references.push_back(std::move(r));
    }
    if (!rd.done()) return rd.error("bytes left over after the last reference");
    return in;
}

} // namespace h3::pipeline
