// Fuzz target: the tokenizers on arbitrary text. Three vocabularies are built once
// (a byte-level BPE learned by add_trained_tokenizer, under Llama 3's and SmolLM's
// pre-tokenizers, and a SentencePiece-style one over the same sample's pieces);
// every input is encoded by each, with and without control tokens parsed, and
// must decode back to itself byte for byte, in one call and through TextStream.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "switchyard/gguf.h"
#include "switchyard/tokenizer.h"

namespace {

using namespace switchyard;

constexpr std::string_view kSample =
    "The tokenizer turns text into tokens and tokens back into text. It's 2026; "
    "numbers like 1234567 and 3.14 appear, as do tabs\tand  runs   of spaces.\n"
    "Unicode too: caf\xC3\xA9, \xD0\xBF\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82, "
    "\xE4\xBD\xA0\xE5\xA5\xBD, \xF0\x9F\x98\x80.\n";

// The fixed vocabularies must build: a failure is a bug of the target itself.
void check(const Status& st) {
  if (st.is_ok()) return;
  fmt::print(stderr, "tokenizer_fuzz: {}\n", st.to_string());
  std::abort();
}

Tokenizer must(Result<Tokenizer> t) {
  check(t.status());
  return std::move(*t);
}

// <unk>, <s>, </s>, the 256 byte tokens, then every 2- and 3-character piece of
// the sample (spaces as U+2581), the most frequent scored highest.
GgufMetadata sentencepiece_metadata() {
  std::string marked;
  for (char c : kSample) marked += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
  std::vector<std::size_t> starts;  // character starts
  for (std::size_t i = 0; i < marked.size(); ++i) {
    if ((static_cast<unsigned char>(marked[i]) & 0xC0) != 0x80) starts.push_back(i);
  }
  starts.push_back(marked.size());
  std::map<std::string, int> counts;
  for (std::size_t i = 0; i + 1 < starts.size(); ++i) {
    ++counts[marked.substr(starts[i], starts[i + 1] - starts[i])];
    for (std::size_t len = 2; len <= 3 && i + len < starts.size(); ++len) {
      ++counts[marked.substr(starts[i], starts[i + len] - starts[i])];
    }
  }
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<std::int32_t> types = {2, 3, 3};
  std::vector<float> scores = {0, 0, 0};
  for (int b = 0; b < 256; ++b) {
    tokens.push_back(fmt::format("<0x{:02X}>", b));
    types.push_back(6);
    scores.push_back(0);
  }
  for (const auto& [piece, n] : counts) {
    tokens.push_back(piece);
    types.push_back(1);
    scores.push_back(static_cast<float>(n) - static_cast<float>(piece.size()) * 0.01f);
  }
  GgufMetadata md;
  md.set("tokenizer.ggml.model", GgufValue::string("llama"));
  md.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  md.set("tokenizer.ggml.token_type", GgufValue::i32_array(types));
  md.set("tokenizer.ggml.scores", GgufValue::f32_array(scores));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::u32(1));
  return md;
}

std::vector<Tokenizer> make_tokenizers() {
  std::vector<Tokenizer> out;
  GgufMetadata bpe;
  check(add_trained_tokenizer(kSample, 600, bpe));
  out.push_back(must(Tokenizer::from_metadata(bpe)));
  bpe.set("tokenizer.ggml.pre", GgufValue::string("smollm"));
  out.push_back(must(Tokenizer::from_metadata(bpe)));
  out.push_back(must(Tokenizer::from_metadata(sentencepiece_metadata())));
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const std::vector<Tokenizer> tokenizers = make_tokenizers();
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const Tokenizer& t : tokenizers) {
    for (bool parse_special : {false, true}) {
      // BOS where the tokenizer adds one, then the text's own tokens.
      const std::vector<std::int32_t> with_bos = t.encode(text, {.parse_special = parse_special});
      for (std::int32_t id : with_bos) {
        if (id < 0 || id >= t.vocab_size()) std::abort();
      }
      const std::vector<std::int32_t> ids =
          t.encode(text, {.add_special = false, .parse_special = parse_special});
      Result<std::string> back = t.decode(ids, {.render_special = parse_special});
      if (!back.is_ok()) std::abort();
      // Control tokens rendered give their text back, so either way the text
      // returns whole.
      if (*back != text) std::abort();
      TextStream stream(t, {.render_special = parse_special});
      std::string streamed;
      for (std::int32_t id : ids) streamed += *stream.push(id);
      streamed += stream.finish();
      if (streamed != *back) std::abort();
    }
  }
  return 0;
}
