#include "serve/submission.h"

#include "core/strict_int.h"
#include "core/utf8.h"
#include "io/json_file.h"
#include "serve/multipart.h"

#include <optional>

namespace h3::serve {

namespace {

bool is_multipart(std::string_view content_type) {
    const std::string_view m = "multipart/form-data";
    if (content_type.size() < m.size()) return false;
    for (size_t i = 0; i < m.size(); ++i)
        if (std::tolower(static_cast<unsigned char>(content_type[i])) != m[i]) return false;
    return true;
}

struct FormMedia {
    std::optional<io::DecodedImage> first, last;
    std::vector<pipeline::ReferenceMedia> references; // `reference` parts, in upload order
};

// A part's name or file name as it may appear in a message or a record: valid UTF-8, no control
// characters, at most 64 bytes.
std::string shown(std::string_view s) {
    std::string t = sanitized_utf8(s.substr(0, 64));
    return s.size() > 64 ? t + "..." : t;
}

Result<nlohmann::json> form_to_json(const std::vector<FormPart>& parts, const SubmissionLimits& limits,
                                    FormMedia& media, std::string& bad_field) {
    nlohmann::json j = nlohmann::json::object();
    for (const FormPart& part : parts) {
        const std::string& name = part.name;
        if (!is_valid_utf8(name)) {
            bad_field = shown(name);
            return invalid_argument("form field '" + shown(name) + "': its name is not valid UTF-8");
        }
        if (name == "first_frame" || name == "last_frame") {
            std::optional<io::DecodedImage>& slot = name == "first_frame" ? media.first : media.last;
            bad_field = name;
            if (slot) return invalid_argument(name + ": given more than once");
            auto im = io::decode_image(reinterpret_cast<const uint8_t*>(part.data.data()), part.data.size(),
                                       name, limits.request.image);
            if (!im.ok()) {
                const std::string& m = im.status().message();
                if (m.rfind(name, 0) == 0) return im.status();
                return Status(im.status().code(), name + ": " + m);
            }
            slot = std::move(im).value();
            bad_field.clear();
            continue;
        }
        if (name == "reference") { // repeatable, in upload order
            bad_field = name;
            if (media.references.size() >= static_cast<size_t>(limits.request.max_reference_parts))
                return invalid_argument("reference: more than " +
                                        std::to_string(limits.request.max_reference_parts) + " uploads");
            // the label names the part in messages only; the bytes go to a fresh private temporary file
            const std::string label =
                "reference " + std::to_string(media.references.size() + 1) +
                (part.filename.empty() ? std::string() : " (" + shown(part.filename) + ")");
            auto r = pipeline::decode_reference(part.data, label, {}, limits.reference);
            if (!r.ok()) return r.status();
            media.references.push_back(std::move(r).value());
            bad_field.clear();
            continue;
        }
        if (part.has_filename) {
            bad_field = name;
            return invalid_argument(name + ": file parts are accepted only as first_frame and last_frame "
                                           "(keyframes) and reference (ref2va)");
        }
        const std::string_view v = part.data;
        if (!is_valid_utf8(v)) {
            bad_field = name;
            return invalid_argument(name + ": not valid UTF-8 text");
        }
        if ((name == "seed" || name == "num_inference_steps") && !v.empty() &&
            v.find_first_not_of("0123456789") == std::string_view::npos) {
            auto n = parse_uint64(v, name);
            if (!n.ok()) {
                bad_field = name;
                return n.status();
            }
            j[name] = *n;
        } else if (name == "cache" && !v.empty() && v.front() == '{') {
            auto c = io::parse_json(v, "cache");
            if (!c.ok()) {
                bad_field = "cache";
                return invalid_argument(c.status().message());
            }
            j[name] = std::move(c).value();
        } else {
            j[name] = std::string(v);
        }
    }
    return j;
}

} // namespace

Result<api::WireRequest> read_submission(std::string_view content_type, std::string_view body,
                                         const SubmissionLimits& limits, std::string& bad_field) {
    Result<api::WireRequest> wire = invalid_argument("body: empty");
    if (is_multipart(content_type)) {
        bad_field = "body";
        H3_ASSIGN_OR_RETURN(std::string boundary, multipart_boundary(content_type));
        H3_ASSIGN_OR_RETURN(std::vector<FormPart> parts, parse_multipart(body, boundary, limits.max_parts));
        bad_field.clear();
        FormMedia media;
        H3_ASSIGN_OR_RETURN(nlohmann::json j, form_to_json(parts, limits, media, bad_field));
        wire = api::read_video_body(j, &bad_field);
        if (wire.ok()) {
            wire->input.first_frame = std::move(media.first);
            wire->input.last_frame = std::move(media.last);
            wire->input.references = std::move(media.references);
        }
    } else {
        wire = api::read_video_body_text(body, &bad_field);
    }
    return wire;
}

} // namespace h3::serve
