#include "runtime/checkpoint_defaults.h"

#include "io/json_file.h"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <set>

namespace fs = std::filesystem;

namespace h3::runtime {

namespace {

bool whole_pixels(const std::string& s) {
    return !s.empty() && s.size() <= 6 && s.find_first_not_of("0123456789") == std::string::npos;
}

bool word_byte(unsigned char c) {
    return std::isalnum(c) || c == '\'' || c >= 0x80;
}

} // namespace

std::string CheckpointDefaults::describe() const {
    std::string d;
    const auto add = [&](const std::string& part) { d += (d.empty() ? "" : ", ") + part; };
    if (size) add(*size);
    if (frames) add(std::to_string(*frames) + " frames");
    if (num_inference_steps) add(std::to_string(*num_inference_steps) + " steps");
    return d.empty() ? "no geometry or steps" : d;
}

nlohmann::json CheckpointDefaults::to_json() const {
    const auto or_null = [](const auto& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
    return {{"size", or_null(size)},
            {"frames", or_null(frames)},
            {"num_inference_steps", or_null(num_inference_steps)}};
}

Result<CheckpointDefaults> parse_checkpoint_defaults(const nlohmann::json& j, const std::string& origin) {
    if (!j.is_object()) return bad_input(origin + ": must be a JSON object");
    static const std::set<std::string> known = {
        "what", "size", "frames", "num_inference_steps", "reference_image_edge", "vocabulary"};
    for (const auto& [key, value] : j.items())
        if (!known.count(key))
            return bad_input(origin + ": unknown field '" + key +
                             "' (known: what, size, frames, num_inference_steps, reference_image_edge, "
                             "vocabulary)");
    CheckpointDefaults d;
    d.path = origin;
    if (j.contains("size")) {
        const nlohmann::json& v = j.at("size");
        const std::string s = v.is_string() ? v.get<std::string>() : std::string();
        const auto x = s.find('x');
        if (x == std::string::npos || !whole_pixels(s.substr(0, x)) || !whole_pixels(s.substr(x + 1)))
            return bad_input(origin + ": size must be a string \"WxH\" in whole pixels, got " + v.dump());
        d.size = s;
    }
    if (j.contains("frames")) {
        H3_ASSIGN_OR_RETURN(d.frames, io::json_integer(j.at("frames"), origin + ": frames", 1, 1 << 20));
    }
    if (j.contains("num_inference_steps")) {
        H3_ASSIGN_OR_RETURN(d.num_inference_steps,
                            io::json_integer(j.at("num_inference_steps"), origin + ": num_inference_steps", 2,
                                             kMaxInferenceSteps));
    }
    if (j.contains("reference_image_edge")) {
        int edge = 0;
        H3_TRY(
            io::json_int(j.at("reference_image_edge"), origin + ": reference_image_edge", edge, 1, 1 << 16));
        d.reference_image_edge = edge;
    }
    if (j.contains("vocabulary")) {
        const nlohmann::json& v = j.at("vocabulary");
        if (!v.is_array()) return bad_input(origin + ": vocabulary must be an array of words");
        for (size_t i = 0; i < v.size(); ++i) {
            const std::string w = v[i].is_string() ? v[i].get<std::string>() : std::string();
            if (w.empty() || !std::all_of(w.begin(), w.end(), [](char c) {
                    const auto u = static_cast<unsigned char>(c);
                    return word_byte(u) && !std::isupper(u);
                }))
                return bad_input(origin + ": vocabulary[" + std::to_string(i) +
                                 "] must be one lower-case word, got " + v[i].dump());
            d.vocabulary.push_back(w);
        }
        std::sort(d.vocabulary.begin(), d.vocabulary.end());
        d.vocabulary.erase(std::unique(d.vocabulary.begin(), d.vocabulary.end()), d.vocabulary.end());
    }
    return d;
}

Result<std::optional<CheckpointDefaults>> read_checkpoint_defaults(const std::string& root) {
    std::error_code ec;
    fs::path p = fs::path(root) / kCheckpointDefaultsFile;
    if (!fs::is_regular_file(p, ec)) { // a bare transformer folder: the root above it
        p = fs::path(root).lexically_normal().parent_path();
        if (p.filename().empty()) p = p.parent_path();
        p = p / kCheckpointDefaultsFile;
        if (!fs::is_regular_file(fs::path(root) / "config.json", ec) || !fs::is_regular_file(p, ec))
            return std::optional<CheckpointDefaults>();
    }
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(p.string()));
    H3_ASSIGN_OR_RETURN(CheckpointDefaults d, parse_checkpoint_defaults(j, p.string()));
    return std::optional<CheckpointDefaults>(std::move(d));
}

std::vector<std::string> words_outside_vocabulary(const std::string& prompt,
                                                  const std::vector<std::string>& vocabulary) {
    std::vector<std::string> out;
    if (vocabulary.empty()) return out;
    const std::set<std::string> known(vocabulary.begin(), vocabulary.end());
    std::set<std::string> seen;
    std::string word;
    const auto flush = [&] {
        // a leading or trailing apostrophe is quoting, not part of the word
        while (!word.empty() && word.front() == '\'') word.erase(word.begin());
        while (!word.empty() && word.back() == '\'') word.pop_back();
        if (!word.empty() && !known.count(word) && seen.insert(word).second) out.push_back(word);
        word.clear();
    };
    bool in_placeholder = false;
    for (char ch : prompt) {
        const auto c = static_cast<unsigned char>(ch);
        if (in_placeholder) {
            in_placeholder = c != '>';
            continue;
        }
        if (c == '<') {
            flush();
            in_placeholder = true;
            continue;
        }
        if (word_byte(c))
            word += c < 0x80 ? static_cast<char>(std::tolower(c)) : ch;
        else
            flush();
    }
    flush();
    return out;
}

} // namespace h3::runtime
