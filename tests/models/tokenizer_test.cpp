// The tokenizer: both kinds on small hand-made vocabularies (merge order, byte
// fallback, the leading space, special tokens, the pre-tokenizer patterns, text
// that is not UTF-8), the metadata's failure paths, streaming decode, concurrent
// use; then both kinds against the reference implementations (sentencepiece and
// tokenizers, trained on tests/data/text) over the held-apart text.
#include "switchyard/tokenizer.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "models/text_split.h"

namespace switchyard {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// --- SentencePiece-style ("llama") ---------------------------------------------

constexpr std::int32_t kFirstByte = 3;  // <0x00> is token 3

// <unk>, <s>, </s>, the 256 byte tokens, then scored pieces.
GgufMetadata spm_metadata(bool with_bytes = true,
                          const std::vector<std::pair<std::string, float>>& extra = {}) {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<std::int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  if (with_bytes) {
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(fmt::format("<0x{:02X}>", b));
      types.push_back(6);
      scores.push_back(0);
    }
  }
  const std::vector<std::pair<std::string, float>> pieces = {
      {"\u2581", -0.5f},
      {"h", -9},
      {"e", -9},
      {"l", -9},
      {"o", -9},
      {"w", -9},
      {"r", -9},
      {"d", -9},
      {"a", -9},
      {"\u2581h", -1},
      {"ll", -2},
      {"\u2581he", -3},
      {"llo", -4},
      {"\u2581hello", -5},
      {"\u2581w", -1.5f},
      {"or", -2.5f},
      {"\u2581wor", -3.5f},
      {"ld", -2.2f},
      {"\u2581world", -5.5f},
      {"aa", -1},
  };
  for (const auto& [piece, score] : extra) {
    tokens.push_back(piece);
    types.push_back(1);
    scores.push_back(score);
  }
  for (const auto& [piece, score] : pieces) {
    tokens.push_back(piece);
    types.push_back(1);
    scores.push_back(score);
  }
  GgufMetadata md;
  md.set("tokenizer.ggml.model", GgufValue::string("llama"));
  md.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  md.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  md.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::u32(2));
  return md;
}

Tokenizer load(const GgufMetadata& md) {
  Result<Tokenizer> t = Tokenizer::from_metadata(md);
  EXPECT_TRUE(t.is_ok()) << t.status().to_string();
  return std::move(t).value();
}

std::int32_t id_of(const Tokenizer& t, std::string_view piece) {
  for (std::int32_t i = 0; i < t.vocab_size(); ++i) {
    if (t.token(i) == piece) return i;
  }
  ADD_FAILURE() << "no token " << piece;
  return -1;
}

std::string decoded(const Tokenizer& t, const std::vector<std::int32_t>& ids,
                    const DecodeOptions& options = {}) {
  Result<std::string> text = t.decode(ids, options);
  EXPECT_TRUE(text.is_ok()) << text.status().to_string();
  return text.is_ok() ? *text : "";
}

TEST(SentencePieceTokenizerTest, MergesTheBestScoredPairFirst) {
  Tokenizer t = load(spm_metadata());
  EXPECT_EQ(t.kind(), Tokenizer::Kind::kSentencePiece);
  EXPECT_THAT(t.encode("hello world"),
              ElementsAre(1, id_of(t, "\u2581hello"), id_of(t, "\u2581world")));
  // Equal scores: the leftmost pair first.
  EXPECT_THAT(t.encode("aaa", {.add_special = false}),
              ElementsAre(id_of(t, "\u2581"), id_of(t, "aa"), id_of(t, "a")));
  EXPECT_THAT(t.encode(""), ElementsAre(1));
  EXPECT_THAT(t.encode("", {.add_special = false}), ElementsAre());
}

// A vocabulary with a piece across a space: merges reach across it (the encoder
// cuts the text at spaces only for vocabularies where no piece does).
TEST(SentencePieceTokenizerTest, APieceAcrossASpaceStillMerges) {
  const GgufMetadata md = spm_metadata(true, {{"o\u2581", 10.0f}, {"o\u2581w", 10.0f}});
  Tokenizer t = load(md);
  const std::vector<std::int32_t> ids = t.encode("hello world", {.add_special = false});
  EXPECT_THAT(ids, ::testing::Contains(id_of(t, "o\u2581w")));
  EXPECT_EQ(decoded(t, ids), "hello world");
}

TEST(SentencePieceTokenizerTest, CharactersOutsideTheVocabularyBecomeTheirBytes) {
  Tokenizer t = load(spm_metadata());
  EXPECT_THAT(t.encode("h\xC3\xA9", {.add_special = false}),
              ElementsAre(id_of(t, "\u2581h"), kFirstByte + 0xC3, kFirstByte + 0xA9));
  // Bytes that are not UTF-8 at all.
  EXPECT_THAT(t.encode("\xFF", {.add_special = false}),
              ElementsAre(id_of(t, "\u2581"), kFirstByte + 0xFF));
  // Without byte tokens, the unknown token.
  Tokenizer no_bytes = load(spm_metadata(/*with_bytes=*/false));
  EXPECT_THAT(no_bytes.encode("h\xC3\xA9", {.add_special = false}),
              ElementsAre(id_of(no_bytes, "\u2581h"), 0));
}

TEST(SentencePieceTokenizerTest, DecodingRemovesTheLeadingSpaceOnlyAtTheStart) {
  Tokenizer t = load(spm_metadata());
  const std::vector<std::int32_t> ids = t.encode("hello world");
  EXPECT_EQ(decoded(t, ids), "hello world");
  EXPECT_EQ(decoded(t, ids, {.at_start = false}), " hello world");
  EXPECT_EQ(decoded(t, ids, {.render_special = true}), "<s>hello world");
  // Every space the text had survives, the leading ones included.
  EXPECT_EQ(decoded(t, t.encode("  hello   world ")), "  hello   world ");
}

TEST(SentencePieceTokenizerTest, WithoutTheSpacePrefixTheTextStartsAsIs) {
  GgufMetadata md = spm_metadata();
  md.set("tokenizer.ggml.add_space_prefix", GgufValue::boolean(false));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(false));
  md.set("tokenizer.ggml.add_eos_token", GgufValue::boolean(true));
  Tokenizer t = load(md);
  EXPECT_THAT(t.encode("hello"), ElementsAre(id_of(t, "h"), id_of(t, "e"), id_of(t, "llo"), 2));
  EXPECT_EQ(decoded(t, t.encode(" hello")), " hello");
}

// --- byte-level BPE ("gpt2") ---------------------------------------------------

// The byte-level character of a byte (Note [The byte-level alphabet]).
std::string byte_char(int b) {
  int next = 256;
  for (int c = 0; c < 256; ++c) {
    const bool printable = (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || c >= 0xAE;
    const int cp = printable ? c : next++;
    if (c == b) {
      std::string out;
      text::append_utf8(static_cast<char32_t>(cp), out);
      return out;
    }
  }
  return {};
}

// The 256 byte characters (id = byte), merged pieces, then two special tokens.
GgufMetadata bpe_metadata(std::string_view pre = "default") {
  std::vector<std::string> tokens;
  for (int b = 0; b < 256; ++b) tokens.push_back(byte_char(b));
  const std::string space = byte_char(' ');
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {"l", "l"},          {"he", "ll"}, {"hell", "o"},         {space, "w"},
      {"o", "r"}, {space + "w", "or"}, {"l", "d"},   {space + "wor", "ld"},
  };
  std::vector<std::string> merge_text;
  for (const auto& [a, b] : merges) {
    tokens.push_back(a + b);
    merge_text.push_back(a + " " + b);
  }
  tokens.push_back("xyz");  // a token no merge reaches
  tokens.push_back("<|bos|>");
  tokens.push_back("<tool>");
  std::vector<std::int32_t> types(tokens.size(), 1);
  types[types.size() - 2] = 3;
  types[types.size() - 1] = 4;
  GgufMetadata md;
  md.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  md.set("tokenizer.ggml.pre", GgufValue::string(std::string(pre)));
  md.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  md.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  md.set("tokenizer.ggml.merges", GgufValue::string_array(merge_text));
  md.set("tokenizer.ggml.bos_token_id",
         GgufValue::u32(static_cast<std::uint32_t>(tokens.size() - 2)));
  return md;
}

TEST(ByteLevelTokenizerTest, MergesTheLowestRankFirstWithinEachWord) {
  Tokenizer t = load(bpe_metadata());
  EXPECT_EQ(t.kind(), Tokenizer::Kind::kByteLevelBpe);
  EXPECT_FALSE(t.adds_bos());  // gpt2's default
  const std::string space = byte_char(' ');
  EXPECT_THAT(t.encode("hello world"), ElementsAre(id_of(t, "hello"), id_of(t, space + "world")));
  // Equal ranks: the leftmost pair first.
  EXPECT_THAT(t.encode("lll"), ElementsAre(id_of(t, "ll"), 'l'));
  // Merges stay inside a word: "o" and "r" of "o r" are two words' bytes.
  EXPECT_THAT(t.encode("o.r"), ElementsAre('o', '.', 'r'));
  EXPECT_EQ(decoded(t, t.encode("hello world\n\t\xC3\xA9")), "hello world\n\t\xC3\xA9");
}

TEST(ByteLevelTokenizerTest, Llama3TakesAWholeWordTokenWithoutMerges) {
  EXPECT_THAT(load(bpe_metadata("default")).encode("xyz"), ElementsAre('x', 'y', 'z'));
  Tokenizer llama3 = load(bpe_metadata("llama-bpe"));
  EXPECT_THAT(llama3.encode("xyz"), ElementsAre(id_of(llama3, "xyz")));
  EXPECT_EQ(llama3.describe(), "gpt2 (llama-bpe)");
}

TEST(ByteLevelTokenizerTest, ControlTokensAreFoundOnlyWhenAskedUserDefinedAlways) {
  Tokenizer t = load(bpe_metadata());
  const std::int32_t bos = t.bos();
  const std::int32_t tool = id_of(t, "<tool>");
  EXPECT_THAT(t.encode("<|bos|>hello", {.parse_special = true}),
              ElementsAre(bos, id_of(t, "hello")));
  EXPECT_THAT(t.encode("<|bos|>hello"), ::testing::Not(::testing::Contains(bos)));
  EXPECT_THAT(t.encode("he<tool>ll"), ElementsAre(id_of(t, "he"), tool, id_of(t, "ll")));
  // Control tokens decode to nothing unless rendered; user-defined ones to text.
  EXPECT_EQ(decoded(t, {bos, tool}), "<tool>");
  EXPECT_EQ(decoded(t, {bos, tool}, {.render_special = true}), "<|bos|><tool>");
}

TEST(ByteLevelTokenizerTest, AnyBytesRoundTrip) {
  std::mt19937 rng(7);
  const std::vector<Tokenizer> tokenizers = [] {
    std::vector<Tokenizer> v;
    v.push_back(load(bpe_metadata("default")));
    v.push_back(load(bpe_metadata("llama-bpe")));
    v.push_back(load(bpe_metadata("qwen2")));
    v.push_back(load(spm_metadata()));
    return v;
  }();
  const std::string alphabet = "he lowrd\n\r\t'0123.<|>\xC3\xA9\xE2\x96\x81\xF0\x9F\x98\x80";
  for (int trial = 0; trial < 500; ++trial) {
    std::string text;
    const int n = static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      // Mostly characters from the alphabet, sometimes any byte at all.
      text += rng() % 8 == 0 ? static_cast<char>(rng() % 256) : alphabet[rng() % alphabet.size()];
    }
    for (const Tokenizer& t : tokenizers) {
      ASSERT_EQ(decoded(t, t.encode(text)), text) << t.describe() << " on trial " << trial;
    }
  }
}

// --- the pre-tokenizer patterns ----------------------------------------------

std::vector<std::string> words(text::SplitPattern pattern, std::string_view s) {
  text::WordSplitter splitter(pattern);
  std::vector<std::size_t> ends;
  splitter.split(s, ends);
  std::vector<std::string> out;
  std::size_t begin = 0;
  for (std::size_t end : ends) {
    out.emplace_back(s.substr(begin, end - begin));
    begin = end;
  }
  return out;
}

// Each expectation is what the reference implementation's pattern gives.
TEST(WordSplitterTest, SplitsAsTheReferencePatterns) {
  using text::SplitPattern;
  EXPECT_THAT(words(SplitPattern::kGpt2, "Hello world's  end\n"),
              ElementsAre("Hello", " world", "'s", " ", " end", "\n"));
  EXPECT_THAT(words(SplitPattern::kLlama3, "I'LL pay 12345 now!!\n\nok"),
              ElementsAre("I", "'LL", " pay", " ", "123", "45", " now", "!!\n\n", "ok"));
  // Llama 3's contractions ignore case, GPT-2's do not.
  EXPECT_THAT(words(SplitPattern::kLlama3, "you'REady"), ElementsAre("you", "'RE", "ady"));
  EXPECT_THAT(words(SplitPattern::kGpt2, "you'REady"), ElementsAre("you", "'", "REady"));
  EXPECT_THAT(words(SplitPattern::kQwen2, "12345 x"), ElementsAre("1", "2", "3", "4", "5", " x"));
  // SmolLM's: digits apart first, so the spaces before them stay one word.
  EXPECT_THAT(words(SplitPattern::kSmolLM, "a   12 b"), ElementsAre("a", "   ", "1", "2", " b"));
  EXPECT_THAT(words(SplitPattern::kGpt2, "a   12 b"), ElementsAre("a", "  ", " 12", " b"));
  EXPECT_THAT(words(SplitPattern::kLlama3, "a  \n\n  b"), ElementsAre("a", "  \n\n", " ", " b"));
  // Devanagari vowel signs are marks, neither letters nor numbers.
  EXPECT_THAT(
      words(SplitPattern::kLlama3, "\u0928\u092E\u0938\u094D\u0924\u0947\t\tx '1 ..."),
      ElementsAre("\u0928\u092E\u0938", "\u094D\u0924", "\u0947", "\t", "\tx", " '", "1", " ..."));
  EXPECT_THAT(words(SplitPattern::kGpt2, ""), ElementsAre());
  // A byte that is not UTF-8 is a character of its own, of class other.
  EXPECT_THAT(words(SplitPattern::kGpt2, "a\xFF\xFE b"), ElementsAre("a", "\xFF\xFE", " b"));
}

TEST(Utf8Test, CompletePrefixHoldsBackOnlyUnfinishedCharacters) {
  EXPECT_EQ(text::complete_utf8_prefix("ab"), 2u);
  EXPECT_EQ(text::complete_utf8_prefix("a\xC3"), 1u);
  EXPECT_EQ(text::complete_utf8_prefix("a\xF0\x9F\x98"), 1u);
  EXPECT_EQ(text::complete_utf8_prefix("a\xF0\x9F\x98\x80"), 5u);
  EXPECT_EQ(text::complete_utf8_prefix("a\xFF"), 2u);  // never a character: not held
  EXPECT_EQ(text::complete_utf8_prefix("\x80\x80"), 2u);
}

TEST(TextStreamTest, HoldsBackACharacterSplitAcrossTokens) {
  Tokenizer t = load(spm_metadata());
  TextStream stream(t, {.at_start = false});
  Result<std::string> a = stream.push(kFirstByte + 0xC3);
  ASSERT_TRUE(a.is_ok());
  EXPECT_EQ(*a, "");
  Result<std::string> b = stream.push(kFirstByte + 0xA9);
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(*b, "\xC3\xA9");
  // An unfinished character at the end comes out of finish() as it is.
  ASSERT_TRUE(stream.push(kFirstByte + 0xE2).is_ok());
  EXPECT_EQ(stream.finish(), "\xE2");
  EXPECT_EQ(stream.finish(), "");
  Result<std::string> bad = stream.push(static_cast<std::int32_t>(t.vocab_size()));
  EXPECT_EQ(bad.status().code(), StatusCode::kOutOfRange);
  EXPECT_EQ(t.decode(std::vector<std::int32_t>{-1}).status().code(), StatusCode::kOutOfRange);
}

// --- metadata failure paths --------------------------------------------------

Status load_error(const GgufMetadata& md) { return Tokenizer::from_metadata(md).status(); }

TEST(TokenizerMetadataTest, RejectsWhatItCannotUseNamingTheKey) {
  EXPECT_EQ(load_error(GgufMetadata{}).code(), StatusCode::kNotFound);
  {
    GgufMetadata md = spm_metadata();
    md.set("tokenizer.ggml.model", GgufValue::string("bert"));
    EXPECT_EQ(load_error(md).code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(load_error(md).message(), HasSubstr("bert"));
  }
  {
    GgufMetadata md = spm_metadata();
    md.set("tokenizer.ggml.token_type", GgufValue::i32_array({1, 1}));
    EXPECT_THAT(load_error(md).message(), HasSubstr("tokenizer.ggml.token_type"));
  }
  {
    GgufMetadata md = spm_metadata();
    md.set("tokenizer.ggml.scores", GgufValue::f32_array({0.0f}));
    EXPECT_THAT(load_error(md).message(), HasSubstr("tokenizer.ggml.scores"));
  }
  {
    GgufMetadata md = spm_metadata();
    md.set("tokenizer.ggml.bos_token_id", GgufValue::u32(100000));
    EXPECT_EQ(load_error(md).code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(load_error(md).message(), HasSubstr("bos_token_id"));
  }
  {
    GgufMetadata md = spm_metadata();
    std::vector<std::int32_t> types(
        spm_metadata().find("tokenizer.ggml.tokens")->as_array()->size(), 1);
    types[5] = 9;
    md.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
    EXPECT_THAT(load_error(md).message(), HasSubstr("type 9"));
  }
  {
    GgufMetadata md = bpe_metadata();
    md.set("tokenizer.ggml.pre", GgufValue::string("mystery"));
    EXPECT_THAT(load_error(md).message(), HasSubstr("mystery"));
  }
  {
    GgufMetadata md = bpe_metadata();
    md.set("tokenizer.ggml.merges", GgufValue::string_array(std::vector<std::string>{"q z"}));
    EXPECT_THAT(load_error(md).message(), HasSubstr("entry 0 \"q z\""));
    md.set("tokenizer.ggml.merges", GgufValue::string_array(std::vector<std::string>{"qz"}));
    EXPECT_THAT(load_error(md).message(), HasSubstr("separated by a space"));
  }
  {
    GgufMetadata md;
    md.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
    md.set("tokenizer.ggml.tokens", GgufValue::string_array(std::vector<std::string>{"a"}));
    EXPECT_EQ(load_error(md).code(), StatusCode::kNotFound);
    EXPECT_THAT(load_error(md).message(), HasSubstr("merges"));
  }
}

// *Concurrent*, so that scripts/test.sh runs it under ThreadSanitizer too.
TEST(TokenizerTest, ConcurrentEncodingMatchesSerial) {
  const Tokenizer spm = load(spm_metadata());
  const Tokenizer bpe = load(bpe_metadata("llama-bpe"));
  const std::vector<std::string> texts = {"hello world", "  hello\n\nworld's 12345 <tool>",
                                          "h\xC3\xA9llo \xF0\x9F\x98\x80!", ""};
  std::vector<std::vector<std::int32_t>> serial;
  for (const std::string& s : texts) {
    serial.push_back(spm.encode(s));
    serial.push_back(bpe.encode(s));
  }
  std::vector<std::thread> threads;
  std::vector<int> mismatches(4, 0);
  for (int w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      for (int round = 0; round < 200; ++round) {
        for (std::size_t i = 0; i < texts.size(); ++i) {
          if (spm.encode(texts[i]) != serial[2 * i]) ++mismatches[w];
          if (bpe.encode(texts[i]) != serial[2 * i + 1]) ++mismatches[w];
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// --- against the reference implementations -----------------------------------

const std::filesystem::path kDataDir =
    std::filesystem::path(SWITCHYARD_TEST_SOURCE_DIR) / "data" / "text";
const std::filesystem::path kScript =
    std::filesystem::path(SWITCHYARD_TEST_SOURCE_DIR) / "models" / "tokenizer_reference.py";

std::string python() {
  const char* env = std::getenv("SWITCHYARD_PYTHON");
  return env != nullptr && *env != '\0' ? "'" + std::string(env) + "'" : "python3";
}

class TokenizerReferenceTest : public ::testing::TestWithParam<std::string> {};

// The reference library trains a tokenizer on tests/data/text/train.txt and
// encodes every line of heldout.txt (and multi-line documents made of them);
// Switchyard, loading the GGUF metadata the script wrote, must give the same ids
// for every text and decode them back to the text.
TEST_P(TokenizerReferenceTest, EncodesTheHeldApartTextAsTheReferenceDoes) {
  const std::string probe =
      python() + " -c 'import gguf, sentencepiece, tokenizers' >/dev/null 2>&1";
  if (std::system(probe.c_str()) != 0) {
    GTEST_SKIP() << "python3 with gguf, sentencepiece and tokenizers is not installed";
  }
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      fmt::format("switchyard_tokenizer_{}_{}", GetParam(), ::getpid());
  std::filesystem::create_directories(dir);
  const std::string command = fmt::format("{} '{}' {} '{}' '{}' '{}'", python(), kScript.string(),
                                          GetParam(), (kDataDir / "train.txt").string(),
                                          (kDataDir / "heldout.txt").string(), dir.string());
  ASSERT_EQ(std::system(command.c_str()), 0) << command;

  Result<GgufFile> file = GgufFile::open(dir / "tokenizer.gguf");
  ASSERT_TRUE(file.is_ok()) << file.status().to_string();
  Result<Tokenizer> tokenizer = Tokenizer::from_metadata(file->metadata());
  ASSERT_TRUE(tokenizer.is_ok()) << tokenizer.status().to_string();
  std::ifstream in(dir / "reference.json");
  const nlohmann::json reference = nlohmann::json::parse(in);
  std::filesystem::remove_all(dir);
  const auto& texts = reference.at("texts");
  const auto& ids = reference.at("ids");
  ASSERT_EQ(texts.size(), ids.size());
  ASSERT_GE(texts.size(), 5000u);

  int mismatches = 0;
  int round_trip_failures = 0;
  for (std::size_t i = 0; i < texts.size(); ++i) {
    const std::string text = texts[i].get<std::string>();
    const std::vector<std::int32_t> expected = ids[i].get<std::vector<std::int32_t>>();
    const std::vector<std::int32_t> got = tokenizer->encode(text, {.add_special = false});
    if (got != expected && ++mismatches <= 5) {
      ADD_FAILURE() << "text " << i << " \"" << text
                    << "\"\n  reference: " << fmt::format("{}", fmt::join(expected, " "))
                    << "\n  switchyard: " << fmt::format("{}", fmt::join(got, " "));
    }
    Result<std::string> back = tokenizer->decode(got);
    if ((!back.is_ok() || *back != text) && ++round_trip_failures <= 5) {
      ADD_FAILURE() << "text " << i << " \"" << text << "\" decodes to \""
                    << (back.is_ok() ? *back : back.status().to_string()) << "\"";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << texts.size() << " texts";
  EXPECT_EQ(round_trip_failures, 0) << "of " << texts.size() << " texts";

  // Control tokens written in the text: tokenizers finds its special tokens in
  // any text, as Switchyard does with parse_special; sentencepiece never does.
  const bool parse_special = GetParam() != "spm";
  const auto& special_texts = reference.at("special_texts");
  const auto& special_ids = reference.at("special_ids");
  ASSERT_EQ(special_texts.size(), special_ids.size());
  for (std::size_t i = 0; i < special_texts.size(); ++i) {
    const std::string text = special_texts[i].get<std::string>();
    EXPECT_EQ(tokenizer->encode(text, {.add_special = false, .parse_special = parse_special}),
              special_ids[i].get<std::vector<std::int32_t>>())
        << "\"" << text << "\"";
  }
}

INSTANTIATE_TEST_SUITE_P(Kinds, TokenizerReferenceTest,
                         ::testing::Values("spm", "bpe-default", "bpe-llama", "bpe-qwen2",
                                           "bpe-smollm"),
                         [](const ::testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           std::erase(name, '-');
                           return name;
                         });

}  // namespace
}  // namespace switchyard
