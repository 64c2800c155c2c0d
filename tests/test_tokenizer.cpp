// The Qwen2 tokenizer against goldens from the HF reference (tools/reference/make_tokenizer_goldens.py,
// transformers Qwen2Tokenizer over the official files; versions in tests/data/tokenizer/goldens.meta.json),
// round trips, the H3 special tokens, NFC, and the errors for malformed files.
#include "io/json_file.h"
#include "model/tokenizer/tokenizer.h"
#include "model/tokenizer/unicode.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

using namespace h3;
using namespace h3::model::tokenizer;
namespace fs = std::filesystem;

namespace {

const std::string kOfficial = std::string(H3_SOURCE_DIR) + "/../shared/h3-official/tokenizer";
const std::string kData = std::string(H3_SOURCE_DIR) + "/tests/data/tokenizer";

const Tokenizer* official() {
    static Result<Tokenizer> t = fs::exists(kOfficial)
                                     ? Tokenizer::load(kOfficial)
                                     : Result<Tokenizer>(not_found("no official tokenizer"));
    return t.ok() ? &t.value() : nullptr;
}

#define REQUIRE_OFFICIAL()                                                                                   \
    const Tokenizer* tok = official();                                                                       \
    if (!fs::exists(kOfficial)) GTEST_SKIP() << "official tokenizer files not present at " << kOfficial;     \
    ASSERT_NE(tok, nullptr) << Tokenizer::load(kOfficial).status().to_string()

std::string write_file(const std::string& name, const std::string& text) {
    const fs::path dir = fs::path(H3_BINARY_DIR) / "tokenizer_test";
    fs::create_directories(dir);
    const std::string path = (dir / name).string();
    std::ofstream(path, std::ios::binary) << text;
    return path;
}

// A small byte-level vocabulary: the 256 byte symbols + "ab", "abc".
std::string tiny_vocab_json(const std::string& extra = "") {
    nlohmann::json v = nlohmann::json::object();
    for (int b = 0; b < 256; ++b) {
        std::string s;
        utf8_append(s, byte_to_unicode(static_cast<uint8_t>(b)));
        v[s] = b;
    }
    v["ab"] = 256;
    v["abc"] = 257;
    return v.dump() + extra;
}

} // namespace

TEST(Tokenizer, OfficialGoldens) {
    REQUIRE_OFFICIAL();
    auto goldens = io::read_json_file(kData + "/goldens.json");
    ASSERT_TRUE(goldens.ok()) << goldens.status().to_string();
    auto corpus = io::read_json_file(kData + "/corpus.json");
    ASSERT_TRUE(corpus.ok());
    ASSERT_GE(corpus->size(), 200u);
    ASSERT_EQ(goldens->size(), corpus->size());
    int failures = 0;
    for (const auto& p : *corpus) {
        const std::string prompt = p.get<std::string>();
        ASSERT_TRUE(goldens->contains(prompt)) << prompt;
        const auto want = (*goldens)[prompt].get<std::vector<int32_t>>();
        auto got = tok->encode(prompt);
        ASSERT_TRUE(got.ok()) << got.status().to_string();
        if (*got != want && ++failures <= 10) {
            ADD_FAILURE() << "prompt " << nlohmann::json(prompt).dump() << "\n  got  "
                          << nlohmann::json(*got).dump() << "\n  want " << nlohmann::json(want).dump();
        }
    }
    EXPECT_EQ(failures, 0);
}

TEST(Tokenizer, OfficialDecodeMatchesReference) {
    REQUIRE_OFFICIAL();
    auto goldens = io::read_json_file(kData + "/goldens.json");
    auto meta = io::read_json_file(kData + "/goldens.meta.json");
    ASSERT_TRUE(goldens.ok() && meta.ok());
    int nfc_changed = 0;
    for (auto it = goldens->begin(); it != goldens->end(); ++it) {
        auto text = tok->decode(it.value().get<std::vector<int32_t>>());
        ASSERT_TRUE(text.ok()) << text.status().to_string();
        const std::string want = (*meta)["decoded"][it.key()].get<std::string>();
        EXPECT_EQ(*text, want) << nlohmann::json(it.key()).dump();
        // decode(encode(x)) == x exactly for NFC text; otherwise it is NFC(x).
        if (nfc(it.key()) == it.key())
            EXPECT_EQ(*text, it.key());
        else {
            ++nfc_changed;
            EXPECT_EQ(*text, nfc(it.key()));
        }
    }
    EXPECT_GE(nfc_changed, 10); // the corpus has decomposed and singleton-mapped prompts
}

TEST(Tokenizer, OfficialSpecialTokens) {
    REQUIRE_OFFICIAL();
    EXPECT_EQ(tok->size(), 151676);
    auto meta = io::read_json_file(kData + "/goldens.meta.json");
    ASSERT_TRUE(meta.ok());
    EXPECT_EQ(tok->size(), (*meta)["len"].get<int32_t>());
    for (auto it = (*meta)["special_ids"].begin(); it != (*meta)["special_ids"].end(); ++it)
        EXPECT_EQ(tok->token_to_id(it.key()), it.value().get<int32_t>()) << it.key();
    for (int i = 0; i < 7; ++i) EXPECT_EQ(tok->token_to_id(kH3ExtraTokens[i]), 151669 + i);
    EXPECT_EQ(tok->token_to_id("<|vision_start|>"), 151652);
    EXPECT_EQ(tok->token_to_id("<|image_pad|>"), 151655);
    auto ids = tok->encode("<d>x</d><|cutoff|>");
    ASSERT_TRUE(ids.ok());
    ASSERT_EQ(ids->size(), 4u);
    EXPECT_EQ((*ids)[0], 151669);
    EXPECT_EQ((*ids)[2], 151670);
    EXPECT_EQ((*ids)[3], 151671);
    // Near misses are ordinary text.
    auto near = tok->encode("<D>");
    ASSERT_TRUE(near.ok());
    for (int32_t id : *near) EXPECT_LT(id, 151643);
}

TEST(Tokenizer, OfficialRoundTripExtra) {
    REQUIRE_OFFICIAL();
    for (std::string s : {"", "a", "  \n\t x", "多语言 text 🙂 <d>tag</d> [Shot 3]",
                          "\xF0\x9F\x98\x80\xF0\x9F\x98\x80"}) {
        auto ids = tok->encode(s);
        ASSERT_TRUE(ids.ok());
        auto back = tok->decode(*ids);
        ASSERT_TRUE(back.ok());
        EXPECT_EQ(*back, s);
    }
    EXPECT_TRUE(tok->encode("").value().empty());
}

TEST(Tokenizer, InvalidUtf8AndIds) {
    REQUIRE_OFFICIAL();
    auto r = tok->encode(std::string("ok\xC3(", 4));
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("byte offset 2"), std::string::npos) << r.status().message();
    EXPECT_FALSE(tok->encode("\xED\xA0\x80").ok()); // surrogate
    EXPECT_FALSE(tok->decode({-1}).ok());
    EXPECT_FALSE(tok->decode({151676}).ok());
    // A lone partial byte token decodes to U+FFFD.
    auto half = tok->decode({tok->token_to_id("\xC3\xA3")}); // 'ã' is the byte-level symbol of 0xE3
    ASSERT_TRUE(half.ok());
    EXPECT_EQ(*half, "\xEF\xBF\xBD");
}

TEST(Tokenizer, Nfc) {
    EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");             // e + U+0301 → é
    EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");          // Angstrom sign → Å (singleton)
    EXPECT_EQ(nfc("a\xCC\x82\xCC\xA3"), "\xE1\xBA\xAD"); // a + ^ + dot below → ậ (reordered)
    EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81"); // Hangul jamo → 각
    EXPECT_EQ(nfc("plain ascii"), "plain ascii");
    EXPECT_EQ(combining_class(0x301), 230);
    EXPECT_EQ(combining_class('a'), 0);
}

TEST(Tokenizer, TinyFilesAndMergeOrder) {
    const std::string v = write_file("vocab.json", tiny_vocab_json());
    const std::string m = write_file("merges.txt", "#version: 0.2\na b\nab c\n");
    const std::string c =
        write_file("tokenizer_config.json",
                   R"({"added_tokens_decoder": {"258": {"content": "<|end|>", "special": true}},
                                        "additional_special_tokens": ["<|end|>", "<d>", "</d>"]})");
    auto t = Tokenizer::load(TokenizerFiles{v, m, c});
    ASSERT_TRUE(t.ok()) << t.status().to_string();
    EXPECT_EQ(t->size(), 261);
    EXPECT_EQ(t->merge_count(), 2u);
    EXPECT_EQ(t->token_to_id("<d>"), 259);
    EXPECT_EQ(t->token_to_id("</d>"), 260);
    auto ids = t->encode("abc ab<d>abd</d><|end|>");
    ASSERT_TRUE(ids.ok());
    // "abc" → [abc]; " ab" → [' ', ab] ("Ġa" is no merge here); <d>; "abd" → [ab, d]; </d>; <|end|>
    const std::vector<int32_t> expect = {257, 32, 256, 259, 256, 'd', 260, 258};
    EXPECT_EQ(t->token_to_id("\xC4\xA0"), 32); // the byte-level symbol of ' ' ('Ġ')
    EXPECT_EQ(*ids, expect);
    auto back = t->decode(*ids);
    ASSERT_TRUE(back.ok());
    EXPECT_EQ(*back, "abc ab<d>abd</d><|end|>");
}

TEST(Tokenizer, MalformedFiles) {
    const std::string good_vocab = write_file("v_good.json", tiny_vocab_json());
    const std::string good_merges = write_file("m_good.txt", "a b\n");
    auto expect_error = [](const TokenizerFiles& f, const std::string& needle) {
        auto t = Tokenizer::load(f);
        ASSERT_FALSE(t.ok()) << "expected an error containing '" << needle << "'";
        EXPECT_NE(t.status().message().find(needle), std::string::npos) << t.status().to_string();
    };
    expect_error({write_file("v_trunc.json", "{\"a\": 1, "), good_merges, ""}, "v_trunc.json");
    expect_error({write_file("v_arr.json", "[1, 2]"), good_merges, ""}, "expected a JSON object");
    expect_error({write_file("v_str.json", R"({"a": "x"})"), good_merges, ""}, "id must be an integer");
    expect_error({write_file("v_neg.json", R"({"a": -3})"), good_merges, ""}, "out of range");
    expect_error({write_file("v_dup.json", R"({"a": 1, "b": 1})"), good_merges, ""}, "is used by both");
    expect_error({write_file("v_nobytes.json", R"({"a": 0})"), good_merges, ""}, "lacks the symbol for byte");
    expect_error({good_vocab, write_file("m_one.txt", "a b\nabc\n"), ""}, "m_one.txt:2: expected two tokens");
    expect_error({good_vocab, write_file("m_three.txt", "a b c\n"), ""},
                 "m_three.txt:1: expected two tokens");
    expect_error({good_vocab, write_file("m_oov.txt", "a b\nab x\n"), ""}, "m_oov.txt:2: merged token 'abx'");
    expect_error({good_vocab, write_file("m_oov2.txt", "\xE4\xB8\xAD b\n"), ""}, "m_oov2.txt:1: token");
    expect_error({good_vocab, write_file("m_missing.txt", "") + ".nope", ""}, "cannot open");
    expect_error({good_vocab, good_merges,
                  write_file("c_bad.json", R"({"added_tokens_decoder": {"x": {"content": "a"}}})")},
                 "the key must be a token id");
    expect_error(
        {good_vocab, good_merges, write_file("c_bad2.json", R"({"additional_special_tokens": [3]})")},
        "additional_special_tokens[0]");
    expect_error({good_vocab, good_merges,
                  write_file("c_bad3.json",
                             R"({"added_tokens_decoder": {"300": {"content": "<x>", "lstrip": true}}})")},
                 "lstrip");
}
