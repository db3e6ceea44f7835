// Parsing and size arithmetic for the generated vocabularies (dtype, op, backend).
#include <algorithm>
#include <cctype>
#include <limits>
#include <string>

#include <fmt/format.h>

#include "switchyard/backend.h"
#include "switchyard/dtype.h"
#include "switchyard/op.h"

namespace switchyard {
namespace {

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// Finds `text` among the names of `all`; the error lists every valid spelling so a
// typo on the command line is answered with the menu.
template <typename T, std::size_t N>
Result<T> parse_among(const std::array<T, N>& all, std::string_view text, std::string_view what) {
  for (T value : all) {
    if (iequals(name(value), text)) return value;
  }
  std::string valid;
  for (T value : all) {
    if (!valid.empty()) valid += ", ";
    valid += name(value);
  }
  return invalid_argument_error(
      fmt::format("unknown {} '{}'; valid: {}", what, printable(text, 40), valid));
}

}  // namespace

Result<DType> parse_dtype(std::string_view text) { return parse_among(kAllDTypes, text, "dtype"); }
Result<OpKind> parse_op(std::string_view text) { return parse_among(kAllOps, text, "op"); }
Result<OpFamily> parse_op_family(std::string_view text) {
  return parse_among(kAllOpFamilies, text, "op family");
}
Result<BackendId> parse_backend(std::string_view text) {
  return parse_among(kAllBackends, text, "backend");
}

std::int32_t dense_bytes(DType t) {
  SWITCHYARD_CHECK_MSG(!is_quantized(t), "a quantized dtype has no element size");
  return block_bytes(t);
}

std::optional<DType> dtype_from_gguf(int gguf_type_id) {
  if (gguf_type_id < 0) return std::nullopt;
  for (DType t : kAllDTypes) {
    if (info(t).gguf_type_id == gguf_type_id) return t;
  }
  return std::nullopt;
}

Result<std::int64_t> row_bytes(DType t, std::int64_t elems) {
  if (elems < 0) {
    return invalid_argument_error(fmt::format("negative element count {}", elems));
  }
  const std::int64_t per_block = block_elems(t);
  if (elems % per_block != 0) {
    return invalid_argument_error(
        fmt::format("a row of {} {} elements is not a whole number of {}-element blocks", elems,
                    name(t), per_block));
  }
  const std::int64_t blocks = elems / per_block;
  if (blocks > std::numeric_limits<std::int64_t>::max() / block_bytes(t)) {
    return out_of_range_error(
        fmt::format("{} {} elements overflow a 64-bit byte count", elems, name(t)));
  }
  return blocks * block_bytes(t);
}

}  // namespace switchyard
