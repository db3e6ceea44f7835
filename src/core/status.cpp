#include "switchyard/status.h"

#include <algorithm>

#include <fmt/format.h>

namespace switchyard {

std::string_view status_code_name(StatusCode code) noexcept {
  switch (code) {
    case StatusCode::kOk: return "ok";
    case StatusCode::kInvalidArgument: return "invalid_argument";
    case StatusCode::kNotFound: return "not_found";
    case StatusCode::kAlreadyExists: return "already_exists";
    case StatusCode::kFailedPrecondition: return "failed_precondition";
    case StatusCode::kOutOfRange: return "out_of_range";
    case StatusCode::kUnimplemented: return "unimplemented";
    case StatusCode::kDataLoss: return "data_loss";
    case StatusCode::kResourceExhausted: return "resource_exhausted";
    case StatusCode::kUnavailable: return "unavailable";
    case StatusCode::kInternal: return "internal";
  }
  return "unknown";
}

Status::Status(StatusCode code, std::string message, std::shared_ptr<const StatusPayload> payload) {
  SWITCHYARD_CHECK_MSG(code != StatusCode::kOk, "a failure Status needs a non-ok code");
  rep_ = std::make_shared<const Rep>(Rep{code, std::move(message), std::move(payload)});
}

std::string Status::to_string() const {
  if (is_ok()) return "ok";
  return fmt::format("{}: {}", status_code_name(rep_->code), rep_->message);
}

Status Status::with_context(std::string_view context) const {
  if (is_ok()) return *this;
  return Status(rep_->code, fmt::format("{}: {}", context, rep_->message), rep_->payload);
}

std::string printable(std::string_view text, std::size_t max_bytes) {
  std::string out;
  out.reserve(std::min(text.size(), max_bytes) + 8);
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    const std::size_t width = (byte >= 0x20 && byte < 0x7f && byte != '\\') ? 1 : 4;
    if (out.size() + width > max_bytes) {
      return fmt::format("{}... ({} bytes)", out, text.size());
    }
    if (width == 1) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", byte);
    }
  }
  return out;
}

Status invalid_argument_error(std::string message) {
  return {StatusCode::kInvalidArgument, std::move(message)};
}
Status not_found_error(std::string message) { return {StatusCode::kNotFound, std::move(message)}; }
Status already_exists_error(std::string message) {
  return {StatusCode::kAlreadyExists, std::move(message)};
}
Status failed_precondition_error(std::string message) {
  return {StatusCode::kFailedPrecondition, std::move(message)};
}
Status out_of_range_error(std::string message) {
  return {StatusCode::kOutOfRange, std::move(message)};
}
Status unimplemented_error(std::string message) {
  return {StatusCode::kUnimplemented, std::move(message)};
}
Status data_loss_error(std::string message) { return {StatusCode::kDataLoss, std::move(message)}; }
Status resource_exhausted_error(std::string message) {
  return {StatusCode::kResourceExhausted, std::move(message)};
}
Status unavailable_error(std::string message) {
  return {StatusCode::kUnavailable, std::move(message)};
}
Status internal_error(std::string message) { return {StatusCode::kInternal, std::move(message)}; }

namespace detail {
void check_failed(const char* condition, const char* file, int line, std::string_view message) {
  std::fprintf(stderr, "switchyard: check failed at %s:%d: %s%s%.*s\n", file, line, condition,
               message.empty() ? "" : ": ", static_cast<int>(message.size()), message.data());
  std::abort();
}
}  // namespace detail

}  // namespace switchyard
