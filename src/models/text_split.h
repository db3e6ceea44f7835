// Text as the tokenizers see it: UTF-8 decoding that never fails, the Unicode
// classes the byte-level pre-tokenizer patterns name, and the patterns themselves.
//
// The byte-level BPE tokenizers split text into words before merging bytes, each
// with a regular expression that `tokenizer.ggml.pre` names. Switchyard does not
// carry a regular expression engine: each pattern is scanned by hand here (Note
// [Pre-tokenizer patterns as scanners] in text_split.cpp), which is also what
// makes the split fast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace switchyard::text {

// A byte that starts no valid UTF-8 sequence decodes as this code point (one
// byte long): outside Unicode, so no class but kOther claims it.
inline constexpr char32_t kInvalidCodepoint = 0x110000;

struct Utf8Char {
  char32_t codepoint = 0;
  std::uint32_t size = 1;  // bytes, 1 to 4
};

// The character that starts at text[at] (at < text.size()). An invalid, overlong,
// surrogate or truncated sequence is one byte long with kInvalidCodepoint, so
// every byte of any input belongs to exactly one character.
[[nodiscard]] Utf8Char next_utf8(std::string_view text, std::size_t at);

// Appends the UTF-8 encoding of `codepoint` (at most U+10FFFF).
void append_utf8(char32_t codepoint, std::string& out);

// Bytes of the longest prefix of `bytes` that does not end inside a UTF-8
// sequence that a later byte could still complete.
[[nodiscard]] std::size_t complete_utf8_prefix(std::string_view bytes);

enum class CharClass : std::uint8_t {
  kLetter,  // general category L
  kNumber,  // general category N
  kSpace,   // the White_Space property
  kOther,   // everything else, combining marks and invalid bytes included
};

[[nodiscard]] CharClass char_class(char32_t codepoint);

// The pre-tokenizer patterns of the byte-level BPE tokenizers.
enum class SplitPattern : std::uint8_t {
  // GPT-2's: contractions, then runs of letters, of numbers, of other characters
  // (each after an optional space), then whitespace.
  kGpt2,
  // Llama 3's: case-insensitive contractions, letter runs after one optional
  // non-letter, numbers in groups of up to three, punctuation runs with their
  // trailing line breaks, whitespace up to its last line break.
  kLlama3,
  // Qwen2's: Llama 3's with numbers one digit at a time.
  kQwen2,
  // SmolLM's (and several code models'): each number character a word, GPT-2's
  // pattern between them.
  kSmolLM,
};

// Splits text into the words that `pattern` matches, back to back: appends each
// word's end offset in bytes (the last is text.size(); none for empty text). The
// scratch vectors are reused between calls.
class WordSplitter {
 public:
  explicit WordSplitter(SplitPattern pattern) : pattern_(pattern) {}
  void split(std::string_view text, std::vector<std::size_t>& ends);

 private:
  // The end (in characters) of the word that starts at character i.
  [[nodiscard]] std::size_t word_end(std::size_t i) const;
  [[nodiscard]] std::size_t contraction_end(std::size_t i, bool any_case) const;
  [[nodiscard]] std::size_t run_end(std::size_t i, CharClass c) const;

  SplitPattern pattern_;
  // Where the scan of the current word stops: the text's end, or (kSmolLM) the
  // next number character.
  std::size_t limit_ = 0;
  std::vector<char32_t> codepoints_;
  std::vector<CharClass> classes_;
  std::vector<std::size_t> offsets_;  // byte offset of each character
};

}  // namespace switchyard::text
