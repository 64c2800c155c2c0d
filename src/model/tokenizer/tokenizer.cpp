#include "model/tokenizer/tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "io/json_file.h"
#include "model/tokenizer/unicode.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <unordered_map>

namespace h3::model::tokenizer {

const char* const kH3ExtraTokens[7] = {"<d>",
                                       "</d>",
                                       "<|cutoff|>",
                                       "<|lyrics_start|>",
                                       "<|lyrics_end|>",
                                       "<|caption_start|>",
                                       "<|caption_end|>"};

namespace {

// Unicode White_Space, as the reference's regex engine reads \s.
constexpr const char* kWs = "\\t\\n\\x{0B}\\f\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}"
                            "\\x{202F}\\x{205F}\\x{3000}";

struct Pcre2CodeDeleter {
    void operator()(pcre2_code* c) const { pcre2_code_free(c); }
};

} // namespace

struct Tokenizer::Impl {
    std::unordered_map<std::string, int32_t> vocab; // byte-level token string → id
    std::vector<std::string> id_to_token;           // "" where an id is unused
    std::vector<bool> id_is_added;
    std::unordered_map<uint64_t, std::pair<int32_t, int32_t>> merges; // (a,b) → (rank, merged id)
    size_t merge_count = 0;
    int32_t byte_id[256] = {};
    std::vector<AddedToken> added; // sorted by id
    std::unique_ptr<pcre2_code, Pcre2CodeDeleter> split;
    mutable std::mutex cache_mutex;
    mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

    void bpe(const std::string& piece, std::vector<int32_t>& out) const;
    Status encode_segment(std::string_view text, std::vector<int32_t>& out) const;
};

char32_t byte_to_unicode(uint8_t b) {
    if ((b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE)) return b;
    // The other 68 bytes map to 256, 257, … in byte order.
    int n = 0;
    for (int c = 0; c < b; ++c) {
        const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE);
        if (!printable) ++n;
    }
    return 256 + n;
}

std::string qwen2_split_pattern() {
    const std::string ws = kWs;
    return "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^" + ws +
           "\\p{L}\\p{N}]+[\\r\\n]*|[" + ws + "]*[\\r\\n]+|[" + ws + "]+(?![^" + ws + "])|[" + ws + "]+";
}

namespace {

Status read_text_file(const std::string& path, std::string& out) {
    std::ifstream f(path, std::ios::binary);
    if (!f) return not_found("cannot open '" + path + "'");
    std::ostringstream ss;
    ss << f.rdbuf();
    out = ss.str();
    return ok_status();
}

Status load_vocab(const std::string& path, Tokenizer::Impl& t) {
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(path));
    if (!j.is_object()) return bad_input(path + ": expected a JSON object {token: id}");
    if (j.empty()) return bad_input(path + ": the vocabulary is empty");
    int32_t max_id = -1;
    for (auto it = j.begin(); it != j.end(); ++it) {
        if (!it.value().is_number_integer())
            return bad_input(path + ": token '" + it.key() + "': id must be an integer, got " +
                             it.value().dump());
        const int64_t id = it.value().get<int64_t>();
        if (id < 0 || id > 100000000)
            return bad_input(path + ": token '" + it.key() + "': id " + std::to_string(id) + " out of range");
        max_id = std::max<int32_t>(max_id, static_cast<int32_t>(id));
    }
    t.id_to_token.assign(max_id + 1, std::string());
    t.id_is_added.assign(max_id + 1, false);
    for (auto it = j.begin(); it != j.end(); ++it) {
        const auto id = static_cast<int32_t>(it.value().get<int64_t>());
        if (!t.id_to_token[id].empty())
            return bad_input(path + ": id " + std::to_string(id) + " is used by both '" + t.id_to_token[id] +
                             "' and '" + it.key() + "'");
        if (it.key().empty()) return bad_input(path + ": empty token string (id " + std::to_string(id) + ")");
        t.id_to_token[id] = it.key();
        t.vocab.emplace(it.key(), id);
    }
    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8_append(s, byte_to_unicode(static_cast<uint8_t>(b)));
        auto it = t.vocab.find(s);
        if (it == t.vocab.end())
            return bad_input(path + ": byte-level vocabulary lacks the symbol for byte " + std::to_string(b) +
                             " ('" + s + "')");
        t.byte_id[b] = it->second;
    }
    return ok_status();
}

Status load_merges(const std::string& path, Tokenizer::Impl& t) {
    std::string text;
    H3_TRY(read_text_file(path, text));
    size_t line_no = 0, pos = 0;
    int32_t rank = 0;
    while (pos < text.size()) {
        size_t end = text.find('\n', pos);
        if (end == std::string::npos) end = text.size();
        std::string line = text.substr(pos, end - pos);
        pos = end + 1;
        ++line_no;
        if (!line.empty() && line.back() == '\r') line.pop_back();
        if (line.empty()) continue;
        if (line_no == 1 && line.rfind("#version", 0) == 0) continue;
        const std::string where = path + ":" + std::to_string(line_no) + ": ";
        const size_t sp = line.find(' ');
        if (sp == std::string::npos || sp == 0 || sp + 1 == line.size() ||
            line.find(' ', sp + 1) != std::string::npos)
            return bad_input(where + "expected two tokens separated by one space, got '" + line + "'");
        const std::string a = line.substr(0, sp), b = line.substr(sp + 1);
        auto ia = t.vocab.find(a), ib = t.vocab.find(b), im = t.vocab.find(a + b);
        if (ia == t.vocab.end()) return bad_input(where + "token '" + a + "' is not in the vocabulary");
        if (ib == t.vocab.end()) return bad_input(where + "token '" + b + "' is not in the vocabulary");
        if (im == t.vocab.end())
            return bad_input(where + "merged token '" + a + b + "' is not in the vocabulary");
        const uint64_t key = (uint64_t(uint32_t(ia->second)) << 32) | uint32_t(ib->second);
        t.merges.emplace(key, std::make_pair(rank, im->second)); // a repeated pair keeps its first rank
        ++rank;
    }
    t.merge_count = static_cast<size_t>(rank);
    return ok_status();
}

Status add_token(Tokenizer::Impl& t, const std::string& where, const std::string& content, int32_t id,
                 bool special) {
    if (content.empty()) return bad_input(where + ": empty added token");
    if (id >= static_cast<int32_t>(t.id_to_token.size())) {
        t.id_to_token.resize(id + 1);
        t.id_is_added.resize(id + 1, false);
    }
    const std::string& prev = t.id_to_token[id];
    if (!prev.empty() && prev != content && !t.id_is_added[id] && t.vocab.count(prev))
        t.vocab.erase(prev); // an added token overrides a vocabulary entry with the same id
    else if (!prev.empty() && prev != content)
        return bad_input(where + ": id " + std::to_string(id) + " is given to both '" + prev + "' and '" +
                         content + "'");
    t.id_to_token[id] = content;
    t.id_is_added[id] = true;
    t.vocab[content] = id;
    t.added.push_back({content, id, special});
    return ok_status();
}

Status load_config(const std::string& path, Tokenizer::Impl& t) {
    H3_ASSIGN_OR_RETURN(nlohmann::json j, io::read_json_file(path));
    if (!j.is_object()) return bad_input(path + ": expected a JSON object");
    if (j.contains("added_tokens_decoder")) {
        const auto& d = j["added_tokens_decoder"];
        if (!d.is_object()) return bad_input(path + ": added_tokens_decoder must be an object {id: token}");
        for (auto it = d.begin(); it != d.end(); ++it) {
            const std::string where = path + ": added_tokens_decoder[" + it.key() + "]";
            int64_t id = -1;
            try {
                size_t used = 0;
                id = std::stoll(it.key(), &used);
                if (used != it.key().size()) id = -1;
            } catch (...) {
                id = -1;
            }
            if (id < 0 || id > 100000000) return bad_input(where + ": the key must be a token id");
            const auto& e = it.value();
            if (!e.is_object() || !e.contains("content") || !e["content"].is_string())
                return bad_input(where + ": expected an object with a string 'content'");
            for (const char* flag : {"lstrip", "rstrip", "single_word"})
                if (e.contains(flag) && e[flag].is_boolean() && e[flag].get<bool>())
                    return unimplemented(where + ": '" + std::string(flag) + ": true' is not supported");
            const bool special = e.value("special", true);
            H3_TRY(add_token(t, where, e["content"].get<std::string>(), static_cast<int32_t>(id), special));
        }
    }
    if (j.contains("additional_special_tokens")) {
        const auto& a = j["additional_special_tokens"];
        if (!a.is_array()) return bad_input(path + ": additional_special_tokens must be an array");
        for (size_t i = 0; i < a.size(); ++i) {
            const std::string where = path + ": additional_special_tokens[" + std::to_string(i) + "]";
            std::string content;
            if (a[i].is_string())
                content = a[i].get<std::string>();
            else if (a[i].is_object() && a[i].contains("content") && a[i]["content"].is_string())
                content = a[i]["content"].get<std::string>();
            else
                return bad_input(where + ": expected a string or an object with 'content'");
            auto it = t.vocab.find(content);
            if (it != t.vocab.end()) {
                // Already an added token: nothing to do. A plain vocabulary entry becomes an added token.
                if (!t.id_is_added[it->second]) H3_TRY(add_token(t, where, content, it->second, true));
                continue;
            }
            H3_TRY(add_token(t, where, content, static_cast<int32_t>(t.id_to_token.size()), true));
        }
    }
    std::sort(t.added.begin(), t.added.end(),
              [](const AddedToken& x, const AddedToken& y) { return x.id < y.id; });
    return ok_status();
}

} // namespace

Result<Tokenizer> Tokenizer::load(const std::string& dir) {
    namespace fs = std::filesystem;
    TokenizerFiles f{(fs::path(dir) / "vocab.json").string(), (fs::path(dir) / "merges.txt").string(),
                     (fs::path(dir) / "tokenizer_config.json").string()};
    if (!fs::exists(f.config)) f.config.clear();
    return load(f);
}

Result<Tokenizer> Tokenizer::load(const TokenizerFiles& files) {
    auto impl = std::make_shared<Impl>();
    H3_TRY(load_vocab(files.vocab, *impl));
    H3_TRY(load_merges(files.merges, *impl));
    if (!files.config.empty()) H3_TRY(load_config(files.config, *impl));

    const std::string pattern = qwen2_split_pattern();
    int err = 0;
    PCRE2_SIZE err_off = 0;
    pcre2_code* code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                                     PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK, &err, &err_off, nullptr);
    if (!code) {
        PCRE2_UCHAR buf[256];
        pcre2_get_error_message(err, buf, sizeof(buf));
        return internal_error("PCRE2 cannot compile the split pattern at offset " + std::to_string(err_off) +
                              ": " + reinterpret_cast<const char*>(buf));
    }
    pcre2_jit_compile(code, PCRE2_JIT_COMPLETE); // optional speed-up; the interpreter is used without it
    impl->split.reset(code);
    Tokenizer t;
    t.impl_ = std::move(impl);
    return t;
}

void Tokenizer::Impl::bpe(const std::string& piece, std::vector<int32_t>& out) const {
    {
        std::lock_guard<std::mutex> lock(cache_mutex);
        auto it = cache.find(piece);
        if (it != cache.end()) {
            out.insert(out.end(), it->second.begin(), it->second.end());
            return;
        }
    }
    std::vector<int32_t> word;
    word.reserve(piece.size());
    for (unsigned char c : piece) word.push_back(byte_id[c]);
    while (word.size() > 1) {
        int32_t best_rank = INT32_MAX, best_id = -1;
        size_t best_pos = 0;
        for (size_t i = 0; i + 1 < word.size(); ++i) {
            auto it = merges.find((uint64_t(uint32_t(word[i])) << 32) | uint32_t(word[i + 1]));
            if (it != merges.end() && it->second.first < best_rank) {
                best_rank = it->second.first;
                best_id = it->second.second;
                best_pos = i;
            }
        }
        if (best_id < 0) break;
        word[best_pos] = best_id;
        word.erase(word.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
    }
    out.insert(out.end(), word.begin(), word.end());
    std::lock_guard<std::mutex> lock(cache_mutex);
    if (cache.size() > 100000) cache.clear();
    cache.emplace(piece, std::move(word));
}

Status Tokenizer::Impl::encode_segment(std::string_view raw, std::vector<int32_t>& out) const {
    const std::string text = nfc(raw);
    pcre2_match_data* md = pcre2_match_data_create_from_pattern(split.get(), nullptr);
    if (!md) return out_of_memory("PCRE2 match data");
    size_t pos = 0;
    auto emit = [&](size_t b, size_t e) {
        if (e > b) bpe(std::string(text.data() + b, e - b), out);
    };
    Status st;
    while (pos < text.size()) {
        const int rc = pcre2_match(split.get(), reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), pos,
                                   PCRE2_NO_UTF_CHECK, md, nullptr);
        if (rc == PCRE2_ERROR_NOMATCH) {
            emit(pos, text.size());
            break;
        }
        if (rc < 0) {
            PCRE2_UCHAR buf[256];
            pcre2_get_error_message(rc, buf, sizeof(buf));
            st = internal_error(std::string("PCRE2 match failed: ") + reinterpret_cast<const char*>(buf));
            break;
        }
        const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
        size_t b = ov[0], e = ov[1];
        emit(pos, b); // a gap between matches is its own piece (split behaviour "isolated")
        if (e == b) {
            // Empty match (the pattern has none, but never loop): step over one code point.
            e = b + 1;
            while (e < text.size() && (static_cast<unsigned char>(text[e]) & 0xC0) == 0x80) ++e;
            emit(b, e);
        } else {
            emit(b, e);
        }
        pos = e;
    }
    pcre2_match_data_free(md);
    return st;
}

Result<std::vector<int32_t>> Tokenizer::encode(std::string_view text) const {
    std::vector<char32_t> cps;
    size_t bad = 0;
    if (!utf8_decode(text, cps, &bad))
        return invalid_argument("prompt is not valid UTF-8 (byte offset " + std::to_string(bad) + ")");
    const Impl& t = *impl_;
    std::vector<int32_t> out;
    size_t seg = 0, i = 0;
    while (i < text.size()) {
        // Leftmost-longest match of an added token at i.
        const AddedToken* best = nullptr;
        for (const AddedToken& a : t.added)
            if (a.content.size() <= text.size() - i && text.compare(i, a.content.size(), a.content) == 0 &&
                (!best || a.content.size() > best->content.size()))
                best = &a;
        if (!best) {
            ++i;
            continue;
        }
        H3_TRY(t.encode_segment(text.substr(seg, i - seg), out));
        out.push_back(best->id);
        i += best->content.size();
        seg = i;
    }
    H3_TRY(t.encode_segment(text.substr(seg), out));
    return out;
}

namespace {

// Byte-level symbol (code point) → byte, -1 for code points outside the map.
int unicode_to_byte(char32_t cp) {
    static const std::vector<int> table = [] {
        std::vector<int> v(512, -1);
        for (int b = 0; b < 256; ++b) v[byte_to_unicode(static_cast<uint8_t>(b))] = b;
        return v;
    }();
    return cp < table.size() ? table[cp] : -1;
}

// Replaces each invalid UTF-8 byte with U+FFFD.
std::string utf8_lossy(const std::string& bytes) {
    std::string out;
    std::vector<char32_t> cps;
    size_t i = 0;
    while (i < bytes.size()) {
        size_t bad = 0;
        if (utf8_decode(std::string_view(bytes).substr(i), cps, &bad)) {
            out.append(bytes, i, std::string::npos);
            break;
        }
        out.append(bytes, i, bad);
        out += "\xEF\xBF\xBD";
        i += bad + 1;
        while (i < bytes.size() && (static_cast<unsigned char>(bytes[i]) & 0xC0) == 0x80) ++i;
    }
    return out;
}

} // namespace

Result<std::string> Tokenizer::decode(const std::vector<int32_t>& ids) const {
    const Impl& t = *impl_;
    std::string out, bytes;
    std::vector<char32_t> cps;
    for (int32_t id : ids) {
        if (id < 0 || id >= static_cast<int32_t>(t.id_to_token.size()) || t.id_to_token[id].empty())
            return invalid_argument("token id " + std::to_string(id) + " is not in the vocabulary");
        const std::string& tok = t.id_to_token[id];
        if (t.id_is_added[id]) {
            out += utf8_lossy(bytes);
            bytes.clear();
            out += tok;
            continue;
        }
        utf8_decode(tok, cps);
        for (char32_t cp : cps) {
            const int b = unicode_to_byte(cp);
            if (b >= 0)
                bytes += static_cast<char>(b);
            else
                utf8_append(bytes, cp);
        }
    }
    out += utf8_lossy(bytes);
    return out;
}

int32_t Tokenizer::token_to_id(std::string_view token) const {
    auto it = impl_->vocab.find(std::string(token));
    return it == impl_->vocab.end() ? -1 : it->second;
}

int32_t Tokenizer::size() const {
    return static_cast<int32_t>(impl_->id_to_token.size());
}

const std::vector<AddedToken>& Tokenizer::added_tokens() const {
    return impl_->added;
}

size_t Tokenizer::merge_count() const {
    return impl_->merge_count;
}

} // namespace h3::model::tokenizer
