#include "switchyard/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <array>
#include <atomic>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>
#include <mutex>
#include <utility>

#include <fmt/format.h>

namespace switchyard {
namespace {

// Note [Temporary files and signals]
// A writer's temporary file must not outlive an interrupted run: a SIGINT,
// SIGTERM or SIGHUP that arrives while a file is being written unlinks every
// temporary in flight and then takes the signal's default action (the process
// still dies of the signal, so a shell sees what happened). The paths sit in a
// fixed table of slots, published with a release store, because a handler may
// not allocate or lock. The handler is installed once, and only over the default
// disposition: a program that handles these signals itself keeps its handler (and
// its own cleanup duty).
struct TempSlot {
  std::atomic<bool> used{false};
  char path[PATH_MAX] = {};
};
constexpr int kTempSlots = 16;
std::array<TempSlot, kTempSlots> g_temp_slots;
std::mutex g_temp_claim;  // serialises claiming a slot (never taken in the handler)
constexpr std::array kCleanupSignals = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_temporaries_and_reraise(int sig) {
  for (TempSlot& slot : g_temp_slots) {
    if (slot.used.load(std::memory_order_acquire)) ::unlink(slot.path);
  }
  ::signal(sig, SIG_DFL);
  ::raise(sig);
}

void install_cleanup_handlers() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (int sig : kCleanupSignals) {
      struct sigaction old {};
      if (::sigaction(sig, nullptr, &old) != 0 || old.sa_handler != SIG_DFL) continue;
      struct sigaction action {};
      action.sa_handler = &remove_temporaries_and_reraise;
      sigemptyset(&action.sa_mask);
      ::sigaction(sig, &action, nullptr);
    }
  });
}

// Holds a temporary file's path in a slot for as long as the file may exist.
class TemporaryGuard {
 public:
  explicit TemporaryGuard(const std::string& path) {
    if (path.size() >= PATH_MAX) return;
    install_cleanup_handlers();
    std::lock_guard lock(g_temp_claim);
    for (TempSlot& slot : g_temp_slots) {
      if (slot.used.load(std::memory_order_relaxed)) continue;
      std::memcpy(slot.path, path.c_str(), path.size() + 1);
      slot.used.store(true, std::memory_order_release);
      slot_ = &slot;
      return;
    }
  }
  ~TemporaryGuard() {
    if (slot_ != nullptr) slot_->used.store(false, std::memory_order_release);
  }
  TemporaryGuard(const TemporaryGuard&) = delete;
  TemporaryGuard& operator=(const TemporaryGuard&) = delete;

 private:
  TempSlot* slot_ = nullptr;
};

// What lives at `path` now, for a refusal: "a directory", "a symbolic link", ...
const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISLNK(mode)) return "a symbolic link";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode) || S_ISBLK(mode)) return "a device";
  return "not a regular file";
}

Status write_all(int fd, std::span<const std::byte> bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return unavailable_error(fmt::format("cannot write '{}': {}", path, std::strerror(errno)));
    }
    bytes = bytes.subspan(static_cast<std::size_t>(n));
  }
  return Status::ok();
}

}  // namespace

struct AtomicFileWriter::State {
  explicit State(std::string temp_path) : temp(std::move(temp_path)), guard(temp) {}
  ~State() { discard(); }
  // Closes and removes the temporary, if it is still open.
  void discard() {
    if (fd < 0) return;
    ::close(fd);
    ::unlink(temp.c_str());
    fd = -1;
  }
  Status closed() const {
    return failed_precondition_error(fmt::format("'{}' is already committed or abandoned", shown));
  }

  std::string path, shown, temp;
  int fd = -1;
  TemporaryGuard guard;
};

AtomicFileWriter::AtomicFileWriter(std::unique_ptr<State> state) : state_(std::move(state)) {}
AtomicFileWriter::AtomicFileWriter(AtomicFileWriter&& other) noexcept = default;
AtomicFileWriter& AtomicFileWriter::operator=(AtomicFileWriter&& other) noexcept = default;
AtomicFileWriter::~AtomicFileWriter() = default;

Result<AtomicFileWriter> AtomicFileWriter::create(const std::string& path) {
  const std::string shown = printable(path, 200);
  // Only a regular file is ever replaced: the rename in commit() would put a file
  // in place of a directory entry of any kind (a device node, a FIFO, a link).
  // Nothing at the path is opened, so a FIFO there cannot block.
  struct stat existing {};
  if (::lstat(path.c_str(), &existing) == 0 && !S_ISREG(existing.st_mode)) {
    return invalid_argument_error(
        fmt::format("'{}' is {}; only a regular file is replaced by a written file", shown,
                    file_kind(existing.st_mode)));
  }
  // The temporary lives beside the target so that the rename stays on one file
  // system and is atomic.
  std::string temp = path + ".tmp.XXXXXX";
  const int fd = mkstemp(temp.data());
  if (fd < 0) {
    const int error = errno;
    std::string message =
        fmt::format("cannot create a temporary file for '{}': {}", shown, std::strerror(error));
    if (error == ENOENT || error == ENOTDIR) return not_found_error(std::move(message));
    if (error == EACCES || error == EROFS || error == ENAMETOOLONG) {
      return invalid_argument_error(std::move(message));
    }
    return unavailable_error(std::move(message));
  }
  auto state = std::make_unique<State>(std::move(temp));
  state->fd = fd;
  state->path = path;
  state->shown = shown;
  // mkstemp creates the file private to its owner; a written file is ordinary data.
  if (fchmod(fd, 0644) != 0) {
    return unavailable_error(fmt::format("cannot set permissions of '{}': {}",
                                         printable(state->temp, 200), std::strerror(errno)));
  }
  return AtomicFileWriter(std::move(state));
}

Status AtomicFileWriter::write(std::span<const std::byte> bytes) {
  if (state_ == nullptr || state_->fd < 0) {
    return state_ ? state_->closed() : failed_precondition_error("a moved-from file writer");
  }
  Status written = write_all(state_->fd, bytes, state_->shown);
  if (!written.is_ok()) state_->discard();
  return written;
}

Status AtomicFileWriter::commit() {
  if (state_ == nullptr || state_->fd < 0) {
    return state_ ? state_->closed() : failed_precondition_error("a moved-from file writer");
  }
  State& s = *state_;
  if (fsync(s.fd) != 0) {
    const int error = errno;
    s.discard();
    return unavailable_error(fmt::format("cannot flush '{}': {}", s.shown, std::strerror(error)));
  }
  const int fd = std::exchange(s.fd, -1);
  if (::close(fd) != 0) {
    const int error = errno;
    ::unlink(s.temp.c_str());
    return unavailable_error(fmt::format("cannot close '{}': {}", s.shown, std::strerror(error)));
  }
  if (std::rename(s.temp.c_str(), s.path.c_str()) != 0) {
    const int error = errno;
    ::unlink(s.temp.c_str());
    return unavailable_error(
        fmt::format("cannot rename the new file to '{}': {}", s.shown, std::strerror(error)));
  }
  return Status::ok();
}

void AtomicFileWriter::abandon() {
  if (state_ != nullptr) state_->discard();
}

Status write_file_atomically(const std::string& path,
                             const std::function<Status(const ByteSink&)>& produce) {
  SWITCHYARD_ASSIGN_OR_RETURN(AtomicFileWriter out, AtomicFileWriter::create(path));
  SWITCHYARD_RETURN_IF_ERROR(
      produce([&](std::span<const std::byte> chunk) { return out.write(chunk); }));
  return out.commit();
}

Status write_file_atomically(const std::string& path, std::string_view contents,
                             std::string_view what) {
  return write_file_atomically(
             path, [&](const ByteSink& sink) { return sink(std::as_bytes(std::span(contents))); })
      .with_context(fmt::format("writing {}", what));
}

}  // namespace switchyard
