// Text to token ids and back, as a GGUF file's `tokenizer.ggml.*` metadata
// describes its tokenizer.
//
// Two kinds, by `tokenizer.ggml.model`:
//   "llama"  SentencePiece-style BPE over piece scores. Spaces become U+2581,
//            the text gets one leading space (`tokenizer.ggml.add_space_prefix`,
//            default true), then adjacent pieces merge, the pair whose merge has
//            the highest score first (the leftmost among equals), while the
//            merged piece is in the vocabulary. A piece left outside it becomes
//            its bytes' <0xXX> tokens, or the unknown token where those are
//            missing.
//   "gpt2"   byte-level BPE over ranked merges. The text is split into words by
//            the pattern that `tokenizer.ggml.pre` names ("default", "llama-bpe",
//            "qwen2", "smollm" and their aliases; see pattern_for in
//            tokenizer.cpp), each
//            word's bytes become characters of the byte-level alphabet, and
//            adjacent symbols merge, lowest rank first (the leftmost among
//            equals). For Llama 3's pattern a word that is a token whole is that
//            token, merges or not.
// Both are checked against the reference implementations (sentencepiece and
// tokenizers) in tests/models/tokenizer_test.cpp.
//
// Special tokens: tokens of type control (BOS, EOS, chat markers) are text like
// any other unless EncodeOptions::parse_special says to find them in the text;
// user-defined tokens are always found. Found tokens split the text into pieces
// that are encoded on their own; with "llama", each piece that starts the text or
// follows a special token gets the leading space.
//
// Decoding: a token's text is its piece with U+2581 as a space ("llama"), its
// bytes through the byte-level alphabet ("gpt2"), its byte (<0xXX> tokens), or
// nothing for control tokens unless DecodeOptions::render_special. Tokens may end
// inside a UTF-8 character; TextStream holds such bytes back until a later token
// completes them.
//
// Cost: encoding is linear in the text and n log n in a word's length; see
// docs/benchmarks.md for MB/s. Encoding and decoding are const and safe to call
// from several threads at once.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(Tokenizer tokenizer, Tokenizer::from_metadata(file.metadata()));
//   std::vector<std::int32_t> ids = tokenizer.encode("Hello, world");   // BOS first
//   SWITCHYARD_ASSIGN_OR_RETURN(std::string text, tokenizer.decode(ids));
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/gguf.h"
#include "switchyard/status.h"

namespace switchyard {

// `tokenizer.ggml.token_type` values.
enum class TokenType : std::int32_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct EncodeOptions {
  // Add BOS / EOS where the metadata asks for them (add_bos_token, add_eos_token).
  bool add_special = true;
  // Find control tokens written in the text ("<|begin_of_text|>" becomes that
  // token instead of its characters' tokens).
  bool parse_special = false;
};

struct DecodeOptions {
  // Control tokens decode to their text instead of nothing.
  bool render_special = false;
  // The tokens start the text: with "llama", the leading space the encoder
  // added is removed again.
  bool at_start = true;
};

class Tokenizer {
 public:
  enum class Kind : std::uint8_t { kSentencePiece, kByteLevelBpe };

  // Reads `tokenizer.ggml.model`, `.tokens`, `.token_type` (default: all normal),
  // `.scores` ("llama"; default 0), `.merges` ("gpt2", required), `.pre`
  // ("gpt2"; default "default"), `.bos_token_id`, `.eos_token_id`,
  // `.unknown_token_id`, `.add_bos_token` (default true for "llama", false for
  // "gpt2"), `.add_eos_token` (default false), `.add_space_prefix`. Errors:
  // kNotFound when the file has no tokenizer (`tokenizer.ggml.model` or
  // `.tokens` absent); kInvalidArgument naming the key for a model or pre
  // pattern this build does not know, arrays of another length than the
  // vocabulary, a token type or special id out of range, or a merge whose parts
  // or result are not tokens.
  [[nodiscard]] static Result<Tokenizer> from_metadata(const GgufMetadata& metadata);

  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;
  ~Tokenizer();

  // Never fails: bytes that are not UTF-8 are encoded as bytes (the byte tokens,
  // or the unknown token where the vocabulary has neither).
  [[nodiscard]] std::vector<std::int32_t> encode(std::string_view text,
                                                 const EncodeOptions& options = {}) const;
  // kOutOfRange naming an id outside the vocabulary.
  [[nodiscard]] Result<std::string> decode(std::span<const std::int32_t> ids,
                                           const DecodeOptions& options = {}) const;
  // The bytes token `id` contributes to text (`id` in range), as decode sees it.
  [[nodiscard]] std::string_view token_text(std::int32_t id, bool render_special = false) const;

  [[nodiscard]] Kind kind() const;
  [[nodiscard]] std::int64_t vocab_size() const;
  [[nodiscard]] std::string_view token(std::int32_t id) const;  // the raw piece
  [[nodiscard]] TokenType token_type(std::int32_t id) const;
  // -1 where the metadata names none.
  [[nodiscard]] std::int32_t bos() const;
  [[nodiscard]] std::int32_t eos() const;
  [[nodiscard]] bool adds_bos() const;
  // "llama" with add_space_prefix: encoding puts a space before the text, and
  // decoding from the start (DecodeOptions::at_start) takes it off.
  [[nodiscard]] bool adds_space_prefix() const;
  // "llama", or "gpt2 (llama-bpe)": for messages.
  [[nodiscard]] std::string describe() const;

 private:
  struct State;
  explicit Tokenizer(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

// Learns a small byte-level BPE tokenizer from `text` and writes it as the
// `tokenizer.ggml.*` keys of `metadata` ("gpt2" with Llama 3's pre-tokenizer): the
// 256 byte tokens (id = byte), then merges, most frequent pair first (ties: the
// lowest ids), until the vocabulary is `vocab_size` less two or no pair occurs
// twice, then BOS and EOS, then reserved control tokens up to `vocab_size`. For
// models whose weights carry no language (the embedded synthetic ones), so that
// the text path runs on them. kInvalidArgument for a vocab_size below 258.
[[nodiscard]] Status add_trained_tokenizer(std::string_view text, std::int64_t vocab_size,
                                           GgufMetadata& metadata);

// Decoding one token at a time, for printing text as it is generated: push()
// returns the text that is complete so far, holding back the bytes of a UTF-8
// character that a later token may finish; finish() returns what is held back,
// as it is. The concatenation of everything returned is decode()'s text, byte for
// byte.
//
//   TextStream stream(tokenizer, {.at_start = false});
//   for (id : generated) std::cout << *stream.push(id) << std::flush;
//   std::cout << stream.finish();
class TextStream {
 public:
  explicit TextStream(const Tokenizer& tokenizer, const DecodeOptions& options = {});
  // kOutOfRange for an id outside the vocabulary (nothing changes).
  [[nodiscard]] Result<std::string> push(std::int32_t id);
  [[nodiscard]] std::string finish();

 private:
  const Tokenizer* tokenizer_;
  DecodeOptions options_;
  std::string pending_;
};

}  // namespace switchyard
