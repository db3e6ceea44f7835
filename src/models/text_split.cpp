#include "models/text_split.h"

#include <algorithm>
#include <array>
#include <span>

namespace switchyard::text {
namespace {

struct CodepointRange {
  char32_t first;
  char32_t last;
};

#include "models/unicode_classes.inc"

bool in_ranges(std::span<const CodepointRange> ranges, char32_t cp) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), cp,
                             [](char32_t c, const CodepointRange& r) { return c < r.first; });
  return it != ranges.begin() && cp <= std::prev(it)->last;
}

// The White_Space property: few enough to list.
bool is_white_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

CharClass classify(char32_t cp) {
  if (is_white_space(cp)) return CharClass::kSpace;
  if (in_ranges(kLetterRanges, cp)) return CharClass::kLetter;
  if (in_ranges(kNumberRanges, cp)) return CharClass::kNumber;
  return CharClass::kOther;
}

// ASCII, the common case, without a search.
const std::array<CharClass, 128> kAsciiClasses = [] {
  std::array<CharClass, 128> classes{};
  for (char32_t c = 0; c < 128; ++c) classes[c] = classify(c);
  return classes;
}();

bool is_line_break(char32_t cp) { return cp == '\r' || cp == '\n'; }

char32_t ascii_lower(char32_t cp) { return cp >= 'A' && cp <= 'Z' ? cp + ('a' - 'A') : cp; }

}  // namespace

Utf8Char next_utf8(std::string_view text, std::size_t at) {
  const auto byte = [&](std::size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  if (lead < 0x80) return {lead, 1};
  std::uint32_t size = 0;
  char32_t cp = 0;
  char32_t min = 0;
  if ((lead & 0xE0) == 0xC0) {
    size = 2, cp = lead & 0x1F, min = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    size = 3, cp = lead & 0x0F, min = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    size = 4, cp = lead & 0x07, min = 0x10000;
  } else {
    return {kInvalidCodepoint, 1};
  }
  if (at + size > text.size()) return {kInvalidCodepoint, 1};
  for (std::uint32_t k = 1; k < size; ++k) {
    if ((byte(at + k) & 0xC0) != 0x80) return {kInvalidCodepoint, 1};
    cp = (cp << 6) | (byte(at + k) & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {kInvalidCodepoint, 1};
  return {cp, size};
}

void append_utf8(char32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

std::size_t complete_utf8_prefix(std::string_view bytes) {
  // Only the last three bytes can hold the start of an unfinished sequence: find
  // the last byte that is not a continuation byte and see whether its sequence
  // runs past the end. (A sequence that is already invalid is held back too, at
  // most three bytes, until more bytes or the end of the stream decide it.)
  const std::size_t n = bytes.size();
  for (std::size_t back = 1; back <= std::min<std::size_t>(3, n); ++back) {
    const auto b = static_cast<unsigned char>(bytes[n - back]);
    if ((b & 0xC0) == 0x80) continue;
    std::size_t size = 1;
    if (b >= 0xC2 && b <= 0xDF)
      size = 2;
    else if (b >= 0xE0 && b <= 0xEF)
      size = 3;
    else if (b >= 0xF0 && b <= 0xF4)
      size = 4;
    return size > back ? n - back : n;
  }
  return n;
}

CharClass char_class(char32_t cp) { return cp < 128 ? kAsciiClasses[cp] : classify(cp); }

// Note [Pre-tokenizer patterns as scanners]
// The three patterns are alternations tried left to right at each position, the
// first alternative that matches giving the word:
//   GPT-2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   Llama 3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}
//            | ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   Qwen2:   Llama 3's with \p{N} in place of \p{N}{1,3}.
//   SmolLM:  two splits in turn: every number character apart (\p{N}), then
//            GPT-2's pattern on each stretch between them, each stretch's end
//            acting as the end of the text.
// Every character is a letter, a number, whitespace or other, and each class has
// an alternative that matches it, so the words cover the text. Two alternatives
// need backtracking spelled out:
//   \s+(?!\S)   a whitespace run that ends the text matches whole; one followed
//               by a non-space gives up its last character (which then starts the
//               next word, " word"), unless it is a single character;
//   \s*[\r\n]+  matches up to and including the run's last line break.
std::size_t WordSplitter::contraction_end(std::size_t i, bool any_case) const {
  const std::size_t n = limit_;
  if (codepoints_[i] != '\'' || i + 1 >= n) return i;
  const auto at = [&](std::size_t k) {
    return any_case ? ascii_lower(codepoints_[k]) : codepoints_[k];
  };
  const char32_t c1 = at(i + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return i + 2;
  if (i + 2 < n) {
    const char32_t c2 = at(i + 2);
    if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) {
      return i + 3;
    }
  }
  return i;
}

std::size_t WordSplitter::run_end(std::size_t i, CharClass c) const {
  const std::size_t n = limit_;
  while (i < n && classes_[i] == c) ++i;
  return i;
}

std::size_t WordSplitter::word_end(std::size_t i) const {
  const std::size_t n = limit_;
  const auto is = [&](std::size_t k, CharClass c) { return k < n && classes_[k] == c; };
  const CharClass here = classes_[i];
  const bool gpt2 = pattern_ == SplitPattern::kGpt2 || pattern_ == SplitPattern::kSmolLM;

  if (std::size_t end = contraction_end(i, /*any_case=*/!gpt2); end != i) return end;
  // One optional space before a run (GPT-2's letters, numbers and other; the
  // others' other).
  const std::size_t after_space = codepoints_[i] == ' ' ? i + 1 : i;
  if (gpt2) {
    for (CharClass c : {CharClass::kLetter, CharClass::kNumber, CharClass::kOther}) {
      if (is(after_space, c)) return run_end(after_space, c);
    }
  } else {
    if (here == CharClass::kLetter) return run_end(i, CharClass::kLetter);
    if (here != CharClass::kNumber && !is_line_break(codepoints_[i]) &&
        is(i + 1, CharClass::kLetter)) {
      return run_end(i + 1, CharClass::kLetter);
    }
    if (here == CharClass::kNumber) {
      const std::size_t group = pattern_ == SplitPattern::kLlama3 ? 3 : 1;
      return std::min(run_end(i, CharClass::kNumber), i + group);
    }
    if (is(after_space, CharClass::kOther)) {
      std::size_t end = run_end(after_space, CharClass::kOther);
      while (end < n && is_line_break(codepoints_[end])) ++end;
      return end;
    }
  }
  if (here == CharClass::kSpace) {
    const std::size_t end = run_end(i, CharClass::kSpace);
    if (!gpt2) {
      for (std::size_t k = end; k > i; --k) {
        if (is_line_break(codepoints_[k - 1])) return k;
      }
    }
    if (end == n || end - i == 1) return end;
    return end - 1;
  }
  return i + 1;  // unreachable: every class has its alternative above
}

void WordSplitter::split(std::string_view text, std::vector<std::size_t>& ends) {
  codepoints_.clear();
  classes_.clear();
  offsets_.clear();
  for (std::size_t at = 0; at < text.size();) {
    const Utf8Char c = next_utf8(text, at);
    codepoints_.push_back(c.codepoint);
    classes_.push_back(char_class(c.codepoint));
    offsets_.push_back(at);
    at += c.size;
  }
  const std::size_t n = codepoints_.size();
  limit_ = n;
  std::size_t next_number = 0;
  for (std::size_t i = 0; i < n;) {
    std::size_t end = 0;
    if (pattern_ != SplitPattern::kSmolLM) {
      end = word_end(i);
    } else if (classes_[i] == CharClass::kNumber) {
      end = i + 1;  // every number character a word of its own
    } else {
      // GPT-2's pattern within the stretch up to the next number character, as
      // if the text ended there.
      if (next_number <= i) {
        next_number = i;
        while (next_number < n && classes_[next_number] != CharClass::kNumber) ++next_number;
      }
      limit_ = next_number;
      end = word_end(i);
    }
    ends.push_back(end == n ? text.size() : offsets_[end]);
    i = end;
  }
}

}  // namespace switchyard::text
