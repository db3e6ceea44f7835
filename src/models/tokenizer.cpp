#include "switchyard/tokenizer.h"

#include <algorithm>
#include <array>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "models/text_split.h"

namespace switchyard {
namespace {

// U+2581, which SentencePiece writes in place of a space.
constexpr std::string_view kSpaceMark = "\xE2\x96\x81";
constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Note [The byte-level alphabet]
// Byte-level BPE writes each byte as one printable character so that tokens are
// text: the printable bytes '!'..'~', 0xA1..0xAC and 0xAE..0xFF stand for
// themselves (as code points), and the other 68 bytes, in increasing order, for
// U+0100, U+0101, ... So a space is U+0120 'Ġ' and a line feed U+010A 'Ċ'.
std::array<char32_t, 256> byte_alphabet() {
  std::array<char32_t, 256> chars{};
  char32_t next = 256;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    chars[b] = printable ? static_cast<char32_t>(b) : next++;
  }
  return chars;
}

// "<0x41>" -> 0x41; nullopt for anything else.
std::optional<std::uint8_t> byte_piece_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  int value = 0;
  for (char c : piece.substr(3, 2)) {
    int digit = 0;
    if (c >= '0' && c <= '9')
      digit = c - '0';
    else if (c >= 'A' && c <= 'F')
      digit = c - 'A' + 10;
    else if (c >= 'a' && c <= 'f')
      digit = c - 'a' + 10;
    else
      return std::nullopt;
    value = value * 16 + digit;
  }
  return static_cast<std::uint8_t>(value);
}

std::string replace_all(std::string_view text, std::string_view from, std::string_view to) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t at = 0;;) {
    const std::size_t hit = text.find(from, at);
    if (hit == std::string_view::npos) {
      out.append(text.substr(at));
      return out;
    }
    out.append(text.substr(at, hit - at)).append(to);
    at = hit + from.size();
  }
}

// Note [Merging symbols]
// Both kinds of tokenizer merge a word's symbols pair by pair, best pair first
// (highest score, or lowest rank), the leftmost among equals, until no adjacent
// pair merges into a token. The candidates wait in a heap; a merge leaves the
// candidates that involved its two symbols stale, and a candidate is checked
// when it comes out: still neighbours, still the sizes it was made from (a
// symbol only grows, and a dead one has size 0). This is n log n in the word's
// symbols, where rescanning every pair after each merge would be n^2, which a
// long whitespace run would make visible.
struct Symbol {
  std::size_t begin = 0;  // bytes of the word
  std::size_t end = 0;
  std::ptrdiff_t prev = -1;
  std::ptrdiff_t next = -1;
  std::int32_t id = -1;  // -1: not (yet) a token
  [[nodiscard]] std::size_t size() const { return end - begin; }
};

struct Candidate {
  double priority = 0;  // higher merges first
  std::size_t begin = 0;
  std::ptrdiff_t left = 0;
  std::ptrdiff_t right = 0;
  std::size_t size = 0;
  std::int32_t merged = 0;
};

struct LaterCandidate {
  bool operator()(const Candidate& a, const Candidate& b) const {
    return a.priority < b.priority || (a.priority == b.priority && a.begin > b.begin);
  }
};

struct Merge {
  double priority = 0;
  std::int32_t merged = -1;
};

// Merges `symbols` (a word, in order, linked) in place. `find(left, right)`
// returns the merge of two adjacent symbols, merged = -1 for none.
template <typename FindMerge>
void merge_symbols(std::vector<Symbol>& symbols, std::vector<Candidate>& heap, FindMerge find) {
  heap.clear();
  const auto consider = [&](std::ptrdiff_t left, std::ptrdiff_t right) {
    if (left < 0 || right < 0) return;
    const Merge m = find(symbols[left], symbols[right]);
    if (m.merged < 0) return;
    heap.push_back({m.priority, symbols[left].begin, left, right,
                    symbols[left].size() + symbols[right].size(), m.merged});
    std::push_heap(heap.begin(), heap.end(), LaterCandidate{});
  };
  for (std::size_t i = 0; i + 1 < symbols.size(); ++i) {
    consider(static_cast<std::ptrdiff_t>(i), static_cast<std::ptrdiff_t>(i + 1));
  }
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), LaterCandidate{});
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    if (left.next != c.right || left.size() + right.size() != c.size || left.size() == 0 ||
        right.size() == 0) {
      continue;  // stale
    }
    left.end = right.end;
    left.id = c.merged;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = c.left;
    right.end = right.begin;  // dead
    consider(left.prev, c.left);
    consider(c.left, left.next);
  }
}

// Note [Where SentencePiece merges cannot reach]
// SentencePiece-style encoding does not split the text into words first: any
// two adjacent symbols may merge, so in principle a whole text is one sequence.
// But a merge only makes a piece of the vocabulary, so where no piece could span
// a point of the text, the two sides are independent. Vocabularies trained to
// split at whitespace have no piece with a space mark after another character
// (marks start pieces, or make runs of marks), so the point before each mark
// that follows another character is such a point; the tokenizer checks this of
// its vocabulary at load and, when it holds, encodes those segments one by one:
// the same tokens, but small heaps instead of one as long as the text.

// Tokens that encoding finds in the text by their spelling. At a position, the
// longest one spelled there: one hash lookup per distinct length of the
// spellings that start with the byte there (a vocabulary of many thousand
// reserved tokens has a few dozen lengths), none at all for other bytes.
struct SpecialTokens {
  std::unordered_map<std::string_view, std::int32_t> ids;
  std::array<std::vector<std::uint32_t>, 256> lengths;  // per first byte, longest first

  void add(std::string_view spelling, std::int32_t id) {
    if (spelling.empty() || !ids.emplace(spelling, id).second) return;
    std::vector<std::uint32_t>& l = lengths[static_cast<unsigned char>(spelling[0])];
    const auto n = static_cast<std::uint32_t>(spelling.size());
    const auto at = std::lower_bound(l.begin(), l.end(), n, std::greater<>());
    if (at == l.end() || *at != n) l.insert(at, n);
  }
  [[nodiscard]] bool empty() const { return ids.empty(); }
  // The longest token spelled at the start of `rest` (not empty), or -1.
  [[nodiscard]] std::int32_t longest_at(std::string_view rest) const {
    for (std::uint32_t n : lengths[static_cast<unsigned char>(rest[0])]) {
      if (n > rest.size()) continue;
      auto it = ids.find(rest.substr(0, n));
      if (it != ids.end()) return it->second;
    }
    return -1;
  }
};

// Reused buffers of one encode call.
struct Scratch {
  explicit Scratch(text::SplitPattern pattern) : splitter(pattern) {}
  text::WordSplitter splitter;
  std::vector<Symbol> symbols;
  std::vector<Candidate> heap;
  std::vector<std::size_t> word_ends;
  std::string word;
};

}  // namespace

struct Tokenizer::State {
  Kind kind = Kind::kSentencePiece;
  std::string model_name;
  std::string pre_name;
  text::SplitPattern pattern = text::SplitPattern::kGpt2;
  bool ignore_merges = false;

  std::vector<std::string> tokens;
  std::vector<TokenType> types;
  std::vector<float> scores;
  // What each token decodes to (control tokens: nothing; see special text).
  std::vector<std::string> texts;
  // Tokens by piece: the pieces merges may produce ("llama": normal and
  // user-defined; "gpt2": all but control).
  std::unordered_map<std::string_view, std::int32_t> piece_ids;
  // The token of each single byte (<0xXX>, or the byte-level character); -1 none.
  std::array<std::int32_t, 256> byte_tokens{};
  // "gpt2": the byte-level character of each byte, as UTF-8.
  std::array<std::string, 256> byte_chars;
  // "gpt2": (left id << 32 | right id) -> rank and merged id.
  std::unordered_map<std::uint64_t, std::pair<std::int32_t, std::int32_t>> merges;
  // Tokens found in text by their spelling: user-defined (always) and control
  // (with parse_special).
  SpecialTokens user_defined;
  SpecialTokens control;

  std::int32_t bos = -1;
  std::int32_t eos = -1;
  std::int32_t unk = -1;
  bool add_bos = false;
  bool add_eos = false;
  bool add_space_prefix = true;
  // "llama": no piece holds a space mark right after another character, so
  // encoding may cut the text before each such mark (Note [Where SentencePiece
  // merges cannot reach]).
  bool space_marks_split = false;

  void encode_piece(std::string_view text, bool prefix_space, Scratch& s,
                    std::vector<std::int32_t>& out) const;
  void encode_sentencepiece(std::string_view text, bool prefix_space, Scratch& s,
                            std::vector<std::int32_t>& out) const;
  // Merges and emits word[begin, end).
  void encode_segment(std::string_view word, std::size_t begin, std::size_t end, Scratch& s,
                      std::vector<std::int32_t>& out) const;
  void encode_byte_level(std::string_view text, Scratch& s, std::vector<std::int32_t>& out) const;
  void encode_word_bytes(std::string_view word, Scratch& s, std::vector<std::int32_t>& out) const;
  // The longest special token spelled at text[at], or -1.
  [[nodiscard]] std::int32_t special_at(std::string_view text, std::size_t at,
                                        bool parse_control) const;
};

namespace {

Status key_error(std::string_view key, std::string_view what) {
  return invalid_argument_error(fmt::format("tokenizer: metadata key '{}' {}", key, what));
}

Result<std::int32_t> optional_id(const GgufMetadata& md, std::string_view key, std::size_t n) {
  if (md.find(key) == nullptr) return -1;
  SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t id, md.get_integer(key));
  if (id < 0 || static_cast<std::size_t>(id) >= n) {
    return key_error(key, fmt::format("is {}, not a token of the {}-token vocabulary", id, n));
  }
  return static_cast<std::int32_t>(id);
}

Result<bool> optional_bool(const GgufMetadata& md, std::string_view key, bool fallback) {
  if (md.find(key) == nullptr) return fallback;
  return md.get_bool(key);
}

Result<text::SplitPattern> pattern_for(std::string_view pre) {
  // The names converters write for the three patterns.
  if (pre == "default" || pre == "gpt-2" || pre == "gpt2") return text::SplitPattern::kGpt2;
  if (pre == "llama-bpe" || pre == "llama3" || pre == "llama-v3")
    return text::SplitPattern::kLlama3;
  if (pre == "qwen2") return text::SplitPattern::kQwen2;
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "command-r" ||
      pre == "codeshell" || pre == "exaone") {
    return text::SplitPattern::kSmolLM;
  }
  return key_error("tokenizer.ggml.pre",
                   fmt::format("is \"{}\", a pre-tokenizer this build does not know (known: "
                               "default, gpt-2, llama-bpe, llama3, llama-v3, qwen2, smollm, "
                               "starcoder, refact, command-r, codeshell, exaone)",
                               pre));
}

}  // namespace

Result<Tokenizer> Tokenizer::from_metadata(const GgufMetadata& md) {
  if (md.find("tokenizer.ggml.model") == nullptr || md.find("tokenizer.ggml.tokens") == nullptr) {
    return not_found_error(
        "tokenizer: the file has no tokenizer (metadata keys 'tokenizer.ggml.model' and "
        "'tokenizer.ggml.tokens' are needed)");
  }
  auto s = std::make_unique<State>();
  SWITCHYARD_ASSIGN_OR_RETURN(std::string_view model, md.get_string("tokenizer.ggml.model"));
  s->model_name = std::string(model);
  if (model == "llama") {
    s->kind = Kind::kSentencePiece;
  } else if (model == "gpt2") {
    s->kind = Kind::kByteLevelBpe;
  } else {
    return key_error("tokenizer.ggml.model",
                     fmt::format("is \"{}\", a tokenizer this build does not know (known: llama, "
                                 "gpt2)",
                                 model));
  }

  SWITCHYARD_ASSIGN_OR_RETURN(GgufStrings tokens, md.get_strings("tokenizer.ggml.tokens"));
  const std::size_t n = tokens.size();
  if (n == 0 || n > static_cast<std::size_t>(INT32_MAX)) {
    return key_error("tokenizer.ggml.tokens", fmt::format("holds {} tokens", n));
  }
  s->tokens.reserve(n);
  for (std::string_view t : tokens) s->tokens.emplace_back(t);

  s->types.assign(n, TokenType::kNormal);
  if (md.find("tokenizer.ggml.token_type") != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(GgufArray a, md.get_array("tokenizer.ggml.token_type"));
    Result<std::span<const std::int32_t>> types = a.as_i32s();
    if (!types.is_ok() || types->size() != n) {
      return key_error("tokenizer.ggml.token_type",
                       fmt::format("must be an i32 array of {} elements, one per token", n));
    }
    for (std::size_t i = 0; i < n; ++i) {
      const std::int32_t t = (*types)[i];
      if (t < 0 || t > static_cast<std::int32_t>(TokenType::kByte)) {
        return key_error("tokenizer.ggml.token_type",
                         fmt::format("has type {} for token {}; types are 0 to 6", t, i));
      }
      s->types[i] = t == 0 ? TokenType::kNormal : static_cast<TokenType>(t);
    }
  }
  s->scores.assign(n, 0.0f);
  if (md.find("tokenizer.ggml.scores") != nullptr) {
    SWITCHYARD_ASSIGN_OR_RETURN(GgufArray a, md.get_array("tokenizer.ggml.scores"));
    Result<std::span<const float>> scores = a.as_f32s();
    if (!scores.is_ok() || scores->size() != n) {
      return key_error("tokenizer.ggml.scores",
                       fmt::format("must be an f32 array of {} elements, one per token", n));
    }
    std::copy(scores->begin(), scores->end(), s->scores.begin());
  }

  SWITCHYARD_ASSIGN_OR_RETURN(s->bos, optional_id(md, "tokenizer.ggml.bos_token_id", n));
  SWITCHYARD_ASSIGN_OR_RETURN(s->eos, optional_id(md, "tokenizer.ggml.eos_token_id", n));
  SWITCHYARD_ASSIGN_OR_RETURN(s->unk, optional_id(md, "tokenizer.ggml.unknown_token_id", n));
  if (s->unk < 0) {
    auto it = std::find(s->types.begin(), s->types.end(), TokenType::kUnknown);
    if (it != s->types.end()) s->unk = static_cast<std::int32_t>(it - s->types.begin());
  }
  const bool spm = s->kind == Kind::kSentencePiece;
  SWITCHYARD_ASSIGN_OR_RETURN(s->add_bos, optional_bool(md, "tokenizer.ggml.add_bos_token", spm));
  SWITCHYARD_ASSIGN_OR_RETURN(s->add_eos, optional_bool(md, "tokenizer.ggml.add_eos_token", false));
  SWITCHYARD_ASSIGN_OR_RETURN(s->add_space_prefix,
                              optional_bool(md, "tokenizer.ggml.add_space_prefix", spm));

  s->byte_tokens.fill(-1);
  const std::array<char32_t, 256> alphabet = byte_alphabet();
  std::unordered_map<char32_t, std::uint8_t> alphabet_bytes;
  if (!spm) {
    for (int b = 0; b < 256; ++b) {
      text::append_utf8(alphabet[b], s->byte_chars[b]);
      alphabet_bytes.emplace(alphabet[b], static_cast<std::uint8_t>(b));
    }
    if (md.find("tokenizer.ggml.pre") != nullptr) {
      SWITCHYARD_ASSIGN_OR_RETURN(std::string_view pre, md.get_string("tokenizer.ggml.pre"));
      s->pre_name = std::string(pre);
    } else {
      s->pre_name = "default";
    }
    SWITCHYARD_ASSIGN_OR_RETURN(s->pattern, pattern_for(s->pre_name));
    // Llama 3's tokenizer takes a word that is a token whole without merging.
    s->ignore_merges = s->pattern == text::SplitPattern::kLlama3;
  }

  s->texts.resize(n);
  s->piece_ids.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    const auto id = static_cast<std::int32_t>(i);
    const std::string& piece = s->tokens[i];
    const TokenType type = s->types[i];
    switch (type) {
      case TokenType::kControl: s->control.add(piece, id); break;
      case TokenType::kUserDefined:
        s->user_defined.add(piece, id);
        s->texts[i] = piece;
        break;
      case TokenType::kUnknown: s->texts[i] = std::string(kReplacement); break;
      case TokenType::kByte:
        if (spm) {
          if (std::optional<std::uint8_t> b = byte_piece_value(piece)) {
            s->texts[i] = std::string(1, static_cast<char>(*b));
            if (s->byte_tokens[*b] < 0) s->byte_tokens[*b] = id;
            break;
          }
        }
        [[fallthrough]];
      default:
        if (spm) {
          s->texts[i] = replace_all(piece, kSpaceMark, " ");
        } else {
          // Back through the byte-level alphabet; a character outside it is
          // kept as it is.
          std::string& bytes = s->texts[i];
          for (std::size_t at = 0; at < piece.size();) {
            const text::Utf8Char c = text::next_utf8(piece, at);
            auto it = alphabet_bytes.find(c.codepoint);
            if (it != alphabet_bytes.end())
              bytes += static_cast<char>(it->second);
            else
              bytes.append(piece, at, c.size);
            at += c.size;
          }
        }
        break;
    }
    const bool mergeable = spm ? (type == TokenType::kNormal || type == TokenType::kUserDefined)
                               : type != TokenType::kControl;
    if (mergeable) s->piece_ids.emplace(piece, id);
  }
  if (spm) {
    s->space_marks_split =
        std::none_of(s->piece_ids.begin(), s->piece_ids.end(), [](const auto& p) {
          const std::string_view piece = p.first;
          for (std::size_t at = piece.find(kSpaceMark, 1); at != std::string_view::npos;
               at = piece.find(kSpaceMark, at + 1)) {
            if (at < kSpaceMark.size() ||
                piece.substr(at - kSpaceMark.size(), kSpaceMark.size()) != kSpaceMark) {
              return true;
            }
          }
          return false;
        });
  }
  if (!spm) {
    for (int b = 0; b < 256; ++b) {
      auto it = s->piece_ids.find(s->byte_chars[b]);
      if (it != s->piece_ids.end()) s->byte_tokens[b] = it->second;
    }
    if (md.find("tokenizer.ggml.merges") == nullptr) {
      return not_found_error(
          "tokenizer: metadata key 'tokenizer.ggml.merges' is missing (a gpt2 tokenizer needs "
          "its merges)");
    }
    SWITCHYARD_ASSIGN_OR_RETURN(GgufStrings merges, md.get_strings("tokenizer.ggml.merges"));
    s->merges.reserve(merges.size());
    for (std::size_t r = 0; r < merges.size(); ++r) {
      const std::string_view merge = merges[r];
      const std::size_t space = merge.find(' ', 1);
      const auto bad = [&](std::string_view what) {
        return key_error("tokenizer.ggml.merges",
                         fmt::format("entry {} \"{}\": {}", r, merge, what));
      };
      if (space == std::string_view::npos) return bad("not two tokens separated by a space");
      const std::string_view left = merge.substr(0, space);
      const std::string_view right = merge.substr(space + 1);
      auto l = s->piece_ids.find(left);
      auto rt = s->piece_ids.find(right);
      auto m = s->piece_ids.find(std::string(left) + std::string(right));
      if (l == s->piece_ids.end()) return bad(fmt::format("\"{}\" is not a token", left));
      if (rt == s->piece_ids.end()) return bad(fmt::format("\"{}\" is not a token", right));
      if (m == s->piece_ids.end()) return bad("the merged piece is not a token");
      const std::uint64_t key =
          (static_cast<std::uint64_t>(l->second) << 32) | static_cast<std::uint32_t>(rt->second);
      s->merges.emplace(key, std::make_pair(static_cast<std::int32_t>(r), m->second));
    }
  }
  return Tokenizer(std::move(s));
}

Tokenizer::Tokenizer(std::unique_ptr<State> state) : state_(std::move(state)) {}
Tokenizer::Tokenizer(Tokenizer&&) noexcept = default;
Tokenizer& Tokenizer::operator=(Tokenizer&&) noexcept = default;
Tokenizer::~Tokenizer() = default;

std::int32_t Tokenizer::State::special_at(std::string_view text, std::size_t at,
                                          bool parse_control) const {
  const std::string_view rest = text.substr(at);
  const std::int32_t a = user_defined.longest_at(rest);
  const std::int32_t b = parse_control ? control.longest_at(rest) : -1;
  if (a < 0 || b < 0) return a < 0 ? b : a;
  return tokens[b].size() > tokens[a].size() ? b : a;
}

void Tokenizer::State::encode_sentencepiece(std::string_view text, bool prefix_space, Scratch& s,
                                            std::vector<std::int32_t>& out) const {
  if (text.empty()) return;
  std::string& word = s.word;
  word.clear();
  if (prefix_space) word.append(kSpaceMark);
  for (char c : text) {
    if (c == ' ')
      word.append(kSpaceMark);
    else
      word += c;
  }
  // Note [Where SentencePiece merges cannot reach]: a space mark that follows
  // another character starts a segment of its own when no piece spans one.
  std::size_t begin = 0;
  if (space_marks_split) {
    for (std::size_t at = word.find(kSpaceMark, 1); at != std::string::npos;
         at = word.find(kSpaceMark, at + kSpaceMark.size())) {
      if (at >= kSpaceMark.size() &&
          std::string_view(word).substr(at - kSpaceMark.size(), kSpaceMark.size()) == kSpaceMark) {
        continue;  // a run of spaces stays together
      }
      encode_segment(word, begin, at, s, out);
      begin = at;
    }
  }
  encode_segment(word, begin, word.size(), s, out);
}

void Tokenizer::State::encode_segment(std::string_view word, std::size_t begin, std::size_t end,
                                      Scratch& s, std::vector<std::int32_t>& out) const {
  std::vector<Symbol>& symbols = s.symbols;
  symbols.clear();
  for (std::size_t at = begin; at < end;) {
    const std::size_t size = text::next_utf8(word.substr(0, end), at).size;
    const auto i = static_cast<std::ptrdiff_t>(symbols.size());
    symbols.push_back({at, at + size, i - 1, i + 1, -1});
    at += size;
  }
  if (symbols.empty()) return;
  symbols.back().next = -1;
  merge_symbols(symbols, s.heap, [&](const Symbol& left, const Symbol& right) {
    auto it = piece_ids.find(word.substr(left.begin, right.end - left.begin));
    if (it == piece_ids.end()) return Merge{};
    return Merge{scores[it->second], it->second};
  });
  for (std::ptrdiff_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    const Symbol& sym = symbols[i];
    const std::string_view bytes = word.substr(sym.begin, sym.size());
    std::int32_t id = sym.id;
    if (id < 0) {  // a single character: a token, or its bytes
      auto it = piece_ids.find(bytes);
      if (it != piece_ids.end()) id = it->second;
    }
    if (id >= 0) {
      out.push_back(id);
    } else if (std::all_of(bytes.begin(), bytes.end(), [&](char c) {
                 return byte_tokens[static_cast<unsigned char>(c)] >= 0;
               })) {
      for (char c : bytes) out.push_back(byte_tokens[static_cast<unsigned char>(c)]);
    } else if (unk >= 0) {
      out.push_back(unk);  // the whole character, as one unknown
    }
  }
}

void Tokenizer::State::encode_word_bytes(std::string_view word, Scratch& s,
                                         std::vector<std::int32_t>& out) const {
  if (ignore_merges) {
    s.word.clear();
    for (char c : word) s.word.append(byte_chars[static_cast<unsigned char>(c)]);
    auto it = piece_ids.find(s.word);
    if (it != piece_ids.end()) {
      out.push_back(it->second);
      return;
    }
  }
  std::vector<Symbol>& symbols = s.symbols;
  symbols.clear();
  for (std::size_t k = 0; k < word.size(); ++k) {
    const auto i = static_cast<std::ptrdiff_t>(k);
    symbols.push_back({k, k + 1, i - 1, i + 1, byte_tokens[static_cast<unsigned char>(word[k])]});
  }
  symbols.back().next = -1;
  merge_symbols(symbols, s.heap, [&](const Symbol& left, const Symbol& right) {
    if (left.id < 0 || right.id < 0) return Merge{};
    auto it = merges.find((static_cast<std::uint64_t>(left.id) << 32) |
                          static_cast<std::uint32_t>(right.id));
    if (it == merges.end()) return Merge{};
    return Merge{-static_cast<double>(it->second.first), it->second.second};
  });
  for (std::ptrdiff_t i = 0; i >= 0; i = symbols[static_cast<std::size_t>(i)].next) {
    if (symbols[i].id >= 0)
      out.push_back(symbols[i].id);
    else if (unk >= 0)
      out.push_back(unk);
  }
}

void Tokenizer::State::encode_byte_level(std::string_view text, Scratch& s,
                                         std::vector<std::int32_t>& out) const {
  s.word_ends.clear();
  s.splitter.split(text, s.word_ends);
  std::size_t begin = 0;
  for (std::size_t end : s.word_ends) {
    encode_word_bytes(text.substr(begin, end - begin), s, out);
    begin = end;
  }
}

void Tokenizer::State::encode_piece(std::string_view text, bool prefix_space, Scratch& s,
                                    std::vector<std::int32_t>& out) const {
  if (kind == Kind::kSentencePiece)
    encode_sentencepiece(text, prefix_space, s, out);
  else
    encode_byte_level(text, s, out);
}

std::vector<std::int32_t> Tokenizer::encode(std::string_view text,
                                            const EncodeOptions& options) const {
  const State& st = *state_;
  std::vector<std::int32_t> out;
  out.reserve(text.size() / 3 + 2);
  if (options.add_special && st.add_bos && st.bos >= 0) out.push_back(st.bos);
  Scratch scratch(st.pattern);
  // Special tokens split the text into pieces; each piece that starts the text
  // or follows a special token gets the SentencePiece leading space.
  bool after_special = true;
  std::size_t piece = 0;
  const bool find_specials =
      !st.user_defined.empty() || (options.parse_special && !st.control.empty());
  for (std::size_t at = 0; find_specials && at < text.size();) {
    const std::int32_t special = st.special_at(text, at, options.parse_special);
    if (special < 0) {
      ++at;
      continue;
    }
    if (at > piece) {
      st.encode_piece(text.substr(piece, at - piece), st.add_space_prefix && after_special, scratch,
                      out);
    }
    out.push_back(special);
    after_special = true;
    at += st.tokens[special].size();
    piece = at;
  }
  if (piece < text.size()) {
    st.encode_piece(text.substr(piece), st.add_space_prefix && after_special, scratch, out);
  }
  if (options.add_special && st.add_eos && st.eos >= 0) out.push_back(st.eos);
  return out;
}

std::string_view Tokenizer::token_text(std::int32_t id, bool render_special) const {
  if (render_special && state_->types[id] == TokenType::kControl) return state_->tokens[id];
  return state_->texts[id];
}

Result<std::string> Tokenizer::decode(std::span<const std::int32_t> ids,
                                      const DecodeOptions& options) const {
  TextStream stream(*this, options);
  std::string out;
  for (std::int32_t id : ids) {
    SWITCHYARD_ASSIGN_OR_RETURN(std::string text, stream.push(id));
    out += text;
  }
  return out + stream.finish();
}

Tokenizer::Kind Tokenizer::kind() const { return state_->kind; }
std::int64_t Tokenizer::vocab_size() const {
  return static_cast<std::int64_t>(state_->tokens.size());
}
std::string_view Tokenizer::token(std::int32_t id) const { return state_->tokens[id]; }
TokenType Tokenizer::token_type(std::int32_t id) const { return state_->types[id]; }
std::int32_t Tokenizer::bos() const { return state_->bos; }
std::int32_t Tokenizer::eos() const { return state_->eos; }
bool Tokenizer::adds_bos() const { return state_->add_bos; }
bool Tokenizer::adds_space_prefix() const {
  return state_->kind == Kind::kSentencePiece && state_->add_space_prefix;
}
std::string Tokenizer::describe() const {
  if (state_->kind == Kind::kSentencePiece) return state_->model_name;
  return fmt::format("{} ({})", state_->model_name, state_->pre_name);
}

TextStream::TextStream(const Tokenizer& tokenizer, const DecodeOptions& options)
    : tokenizer_(&tokenizer), options_(options) {}

Result<std::string> TextStream::push(std::int32_t id) {
  if (id < 0 || id >= tokenizer_->vocab_size()) {
    return out_of_range_error(
        fmt::format("tokenizer: token id {} is outside the {}-token "
                    "vocabulary",
                    id, tokenizer_->vocab_size()));
  }
  std::string_view text = tokenizer_->token_text(id, options_.render_special);
  if (options_.at_start && tokenizer_->token_type(id) != TokenType::kControl) {
    // The first token with text: the encoder's leading space comes off.
    options_.at_start = false;
    if (tokenizer_->adds_space_prefix() && text.starts_with(' ')) {
      text.remove_prefix(1);
    }
  }
  pending_.append(text);
  const std::size_t ready = text::complete_utf8_prefix(pending_);
  std::string out = pending_.substr(0, ready);
  pending_.erase(0, ready);
  return out;
}

Status add_trained_tokenizer(std::string_view text, std::int64_t vocab_size, GgufMetadata& md) {
  if (vocab_size < 258 || vocab_size > INT32_MAX) {
    return invalid_argument_error(fmt::format(
        "tokenizer: a trained byte-level vocabulary needs 258 to 2^31-1 tokens (256 bytes, BOS, "
        "EOS), not {}",
        vocab_size));
  }
  const std::array<char32_t, 256> alphabet = byte_alphabet();
  std::vector<std::string> tokens(256);
  for (int b = 0; b < 256; ++b) text::append_utf8(alphabet[b], tokens[b]);
  // The distinct words and how often each occurs, as symbol sequences.
  std::map<std::string, std::int64_t, std::less<>> counts;
  text::WordSplitter splitter(text::SplitPattern::kLlama3);
  std::vector<std::size_t> ends;
  splitter.split(text, ends);
  for (std::size_t begin = 0; std::size_t end : ends) {
    ++counts[std::string(text.substr(begin, end - begin))];
    begin = end;
  }
  std::vector<std::pair<std::vector<std::int32_t>, std::int64_t>> words;
  for (const auto& [word, n] : counts) {
    std::vector<std::int32_t> symbols;
    for (char c : word) symbols.push_back(static_cast<unsigned char>(c));
    words.emplace_back(std::move(symbols), n);
  }
  std::vector<std::string> merges;
  std::map<std::string, std::int32_t, std::less<>> ids;
  for (std::size_t i = 0; i < tokens.size(); ++i)
    ids.emplace(tokens[i], static_cast<std::int32_t>(i));
  while (static_cast<std::int64_t>(tokens.size()) < vocab_size - 2) {
    std::map<std::pair<std::int32_t, std::int32_t>, std::int64_t> pairs;
    for (const auto& [symbols, n] : words) {
      for (std::size_t i = 0; i + 1 < symbols.size(); ++i) pairs[{symbols[i], symbols[i + 1]}] += n;
    }
    // The most frequent pair; the map's order makes ties go to the lowest ids.
    auto best = pairs.end();
    for (auto it = pairs.begin(); it != pairs.end(); ++it) {
      if (best == pairs.end() || it->second > best->second) best = it;
    }
    if (best == pairs.end() || best->second < 2) break;
    const auto [left, right] = best->first;
    // Two merges may spell the same piece ("ab c", "a bc"): one token for both.
    const auto [at, added] =
        ids.emplace(tokens[left] + tokens[right], static_cast<std::int32_t>(tokens.size()));
    if (added) tokens.push_back(at->first);
    const std::int32_t merged = at->second;
    merges.push_back(tokens[left] + " " + tokens[right]);
    for (auto& [symbols, n] : words) {
      std::vector<std::int32_t> out;
      for (std::size_t i = 0; i < symbols.size(); ++i) {
        if (i + 1 < symbols.size() && symbols[i] == left && symbols[i + 1] == right) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(symbols[i]);
        }
      }
      symbols = std::move(out);
    }
  }
  std::vector<std::int32_t> types(tokens.size(), static_cast<std::int32_t>(TokenType::kNormal));
  const auto bos = static_cast<std::uint32_t>(tokens.size());
  tokens.emplace_back("<|begin_of_text|>");
  tokens.emplace_back("<|end_of_text|>");
  while (static_cast<std::int64_t>(tokens.size()) < vocab_size) {
    tokens.push_back(fmt::format("<|reserved_{}|>", tokens.size() - bos - 2));
  }
  types.resize(tokens.size(), static_cast<std::int32_t>(TokenType::kControl));
  md.set("tokenizer.ggml.model", GgufValue::string("gpt2"));
  md.set("tokenizer.ggml.pre", GgufValue::string("llama-bpe"));
  md.set("tokenizer.ggml.tokens", GgufValue::string_array(tokens));
  md.set("tokenizer.ggml.token_type", GgufValue::i32_array(std::move(types)));
  md.set("tokenizer.ggml.merges", GgufValue::string_array(merges));
  md.set("tokenizer.ggml.bos_token_id", GgufValue::u32(bos));
  md.set("tokenizer.ggml.eos_token_id", GgufValue::u32(bos + 1));
  md.set("tokenizer.ggml.add_bos_token", GgufValue::boolean(true));
  return Status::ok();
}

std::string TextStream::finish() { return std::exchange(pending_, {}); }

}  // namespace switchyard
