// Status and Result<T>: how every fallible Switchyard call reports failure.
//
// Overview
//   No exception crosses the public API. A call that can fail returns `Status` (no
//   value) or `Result<T>` (a value or a Status). A Status carries a canonical code,
//   a human-readable message and, optionally, a typed payload that callers can
//   inspect without parsing the message (for example the `NoBackendForOp` payload of
//   a binding-table miss, which lists what *is* registered).
//
//   Programmer errors (a broken invariant, not bad input) abort through
//   SWITCHYARD_CHECK; they are not reported as a Status.
//
// Example
//   Result<int> parse_count(std::string_view text);
//
//   Status load(std::string_view text) {
//     SWITCHYARD_ASSIGN_OR_RETURN(int count, parse_count(text));
//     if (count < 0) return invalid_argument_error("count must be >= 0");
//     return Status::ok();
//   }
#pragma once

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <variant>

namespace switchyard {

// Canonical error codes. Each has one meaning; pick the one that tells the caller
// what to do next.
enum class StatusCode : int {
  kOk = 0,
  // The caller passed something malformed (bad shape, unknown name, bad file).
  kInvalidArgument,
  // Something asked for does not exist (a kernel binding, a tensor, a file).
  kNotFound,
  // Something being created exists already (a duplicate registration).
  kAlreadyExists,
  // The system is not in a state where the call can run (table not finalized,
  // strict mode refused a slow path).
  kFailedPrecondition,
  // A value is outside the range the operation accepts (index, dimension).
  kOutOfRange,
  // The request is understood but this build does not support it.
  kUnimplemented,
  // Input data is truncated or corrupt.
  kDataLoss,
  // Memory or another resource ran out.
  kResourceExhausted,
  // A device or service is not available (no GPU present).
  kUnavailable,
  // An invariant the library itself should have kept was broken.
  kInternal,
};

// The lower-case name of a code ("invalid_argument"); never null.
[[nodiscard]] std::string_view status_code_name(StatusCode code) noexcept;

// Base class of typed error payloads. A payload is immutable once attached.
class StatusPayload {
 public:
  virtual ~StatusPayload() = default;
};

// The outcome of a call that returns no value. Cheap to copy; `ok()` is a null
// pointer, so success costs nothing beyond a pointer-sized return.
class [[nodiscard]] Status {
 public:
  // Success.
  Status() noexcept = default;
  // A failure. `code` must not be kOk.
  Status(StatusCode code, std::string message,
         std::shared_ptr<const StatusPayload> payload = nullptr);

  static Status ok() noexcept { return Status(); }

  [[nodiscard]] bool is_ok() const noexcept { return rep_ == nullptr; }
  [[nodiscard]] StatusCode code() const noexcept { return rep_ ? rep_->code : StatusCode::kOk; }
  // The message; empty for success.
  [[nodiscard]] std::string_view message() const noexcept {
    return rep_ ? std::string_view(rep_->message) : std::string_view();
  }
  // The payload of type P, or null when there is none or it has another type.
  template <typename P>
  [[nodiscard]] const P* payload() const noexcept {
    return rep_ ? dynamic_cast<const P*>(rep_->payload.get()) : nullptr;
  }
  // "code: message", or "ok".
  [[nodiscard]] std::string to_string() const;

  // Returns a copy whose message is `context + ": " + message`; payload kept.
  [[nodiscard]] Status with_context(std::string_view context) const;

 private:
  struct Rep {
    StatusCode code;
    std::string message;
    std::shared_ptr<const StatusPayload> payload;
  };
  std::shared_ptr<const Rep> rep_;
};

// Constructors for the canonical codes.
[[nodiscard]] Status invalid_argument_error(std::string message);
[[nodiscard]] Status not_found_error(std::string message);
[[nodiscard]] Status already_exists_error(std::string message);
[[nodiscard]] Status failed_precondition_error(std::string message);
[[nodiscard]] Status out_of_range_error(std::string message);
[[nodiscard]] Status unimplemented_error(std::string message);
[[nodiscard]] Status data_loss_error(std::string message);
[[nodiscard]] Status resource_exhausted_error(std::string message);
[[nodiscard]] Status unavailable_error(std::string message);
[[nodiscard]] Status internal_error(std::string message);

// `text` made safe to put in a one-line message: printable ASCII is kept, every
// other byte (newlines, escape sequences, UTF-8) is written as \xNN, and what is
// longer than `max_bytes` after escaping is cut with "..." and the input's length.
// For anything a message takes from a file, the command line or the environment.
[[nodiscard]] std::string printable(std::string_view text, std::size_t max_bytes = 96);

namespace detail {
[[noreturn]] void check_failed(const char* condition, const char* file, int line,
                               std::string_view message);
}  // namespace detail

// A value of type T, or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Result {
  static_assert(!std::is_same_v<std::remove_cv_t<T>, Status>,
                "Result<Status> is meaningless; return Status");

 public:
  // NOLINTBEGIN(google-explicit-constructor): implicit by design, as in StatusOr.
  Result(const T& value) : state_(value) {}
  Result(T&& value) : state_(std::move(value)) {}
  // `status` must be a failure; an ok Status here is a programmer error.
  Result(Status status) : state_(std::move(status)) {
    if (std::get<Status>(state_).is_ok()) {
      detail::check_failed("!status.is_ok()", __FILE__, __LINE__,
                           "Result constructed from an ok Status");
    }
  }
  // NOLINTEND(google-explicit-constructor)

  [[nodiscard]] bool is_ok() const noexcept { return state_.index() == 0; }
  // The failure, or ok() when there is a value.
  [[nodiscard]] Status status() const { return is_ok() ? Status::ok() : std::get<Status>(state_); }

  // The value. Calling these on a failure aborts with the failure's message.
  [[nodiscard]] T& value() & {
    ensure_value();
    return std::get<0>(state_);
  }
  [[nodiscard]] const T& value() const& {
    ensure_value();
    return std::get<0>(state_);
  }
  [[nodiscard]] T&& value() && {
    ensure_value();
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  void ensure_value() const {
    if (!is_ok()) {
      detail::check_failed("result.is_ok()", __FILE__, __LINE__,
                           std::get<Status>(state_).to_string());
    }
  }
  std::variant<T, Status> state_;
};

}  // namespace switchyard

// Aborts with a message when `cond` is false. For programmer errors only.
#define SWITCHYARD_CHECK(cond)                                           \
  do {                                                                   \
    if (!(cond)) [[unlikely]] {                                          \
      ::switchyard::detail::check_failed(#cond, __FILE__, __LINE__, {}); \
    }                                                                    \
  } while (false)

#define SWITCHYARD_CHECK_MSG(cond, msg)                                     \
  do {                                                                      \
    if (!(cond)) [[unlikely]] {                                             \
      ::switchyard::detail::check_failed(#cond, __FILE__, __LINE__, (msg)); \
    }                                                                       \
  } while (false)

// Returns the Status of `expr` from the enclosing function when it is a failure.
#define SWITCHYARD_RETURN_IF_ERROR(expr)              \
  do {                                                \
    ::switchyard::Status switchyard_status_ = (expr); \
    if (!switchyard_status_.is_ok()) [[unlikely]]     \
      return switchyard_status_;                      \
  } while (false)

#define SWITCHYARD_CONCAT_INNER_(a, b) a##b
#define SWITCHYARD_CONCAT_(a, b) SWITCHYARD_CONCAT_INNER_(a, b)

// Evaluates `rexpr` (a Result<T>); on failure returns its Status, otherwise moves
// the value into `lhs` (which may be a declaration: `auto x`, `int n`).
#define SWITCHYARD_ASSIGN_OR_RETURN(lhs, rexpr) \
  SWITCHYARD_ASSIGN_OR_RETURN_IMPL_(SWITCHYARD_CONCAT_(switchyard_result_, __LINE__), lhs, rexpr)
#define SWITCHYARD_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                      \
  if (!tmp.is_ok()) [[unlikely]]                           \
    return tmp.status();                                   \
  lhs = std::move(tmp).value()
