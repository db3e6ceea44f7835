// Runs a fuzz target without libFuzzer, so that every build tests it: over its
// seed corpus and every input that once failed (fuzz/regressions/), then, with
// --mutate N, over N mutants of each of those inputs. The mutants come from a
// fixed-seed generator, so a run is the same on every machine and a failure
// reproduces by running the same command again; the input that failed is also
// written to the current directory (crash-<target>-<hash>) for fuzz/regressions/.
//
// Usage: fuzz_<target>_replay [--mutate N] [--dict FILE] FILE_OR_DIR...
//
// This is CI's short fuzz run (it needs no clang): a few thousand mutants per
// seed under AddressSanitizer + UndefinedBehaviorSanitizer in the asan stage.
// The long runs that look for new findings use libFuzzer (docs/hostile-input.md).
#include <algorithm>
#include <array>
#include <cctype>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <unistd.h>

// With AddressSanitizer (GCC defines __SANITIZE_ADDRESS__, clang has the feature).
#if defined(__SANITIZE_ADDRESS__)
#define SWITCHYARD_REPLAY_DEATH_CALLBACK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SWITCHYARD_REPLAY_DEATH_CALLBACK 1
#endif
#endif
#if defined(SWITCHYARD_REPLAY_DEATH_CALLBACK)
#include <sanitizer/common_interface_defs.h>
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Bytes = std::vector<std::uint8_t>;

// The input being run, kept where the death handlers can reach it.
const Bytes* g_current = nullptr;
char g_crash_path[256] = "";

// Writes the current input to g_crash_path: async-signal-safe (open, write).
void save_current_input() {
  if (g_current == nullptr || g_crash_path[0] == '\0') return;
  const int fd = ::open(g_crash_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  std::size_t done = 0;
  while (done < g_current->size()) {
    const ssize_t n = ::write(fd, g_current->data() + done, g_current->size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  constexpr char kNote[] = "replay: the failing input was written to ";
  (void)!::write(STDERR_FILENO, kNote, sizeof(kNote) - 1);
  (void)!::write(STDERR_FILENO, g_crash_path, std::strlen(g_crash_path));
  (void)!::write(STDERR_FILENO, "\n", 1);
}

extern "C" void on_fatal_signal(int signal_number) {
  save_current_input();
  std::signal(signal_number, SIG_DFL);
  std::raise(signal_number);
}

void install_death_handlers() {
  for (int s : {SIGABRT, SIGSEGV, SIGBUS, SIGFPE, SIGILL}) std::signal(s, on_fatal_signal);
#if defined(SWITCHYARD_REPLAY_DEATH_CALLBACK)
  // The sanitizers report and exit without a signal.
  __sanitizer_set_death_callback(save_current_input);
#endif
}

std::uint64_t fnv1a(const Bytes& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::uint8_t b : bytes) h = (h ^ b) * 0x100000001b3ull;
  return h;
}

void run_one(const Bytes& input) {
  g_current = &input;
  (void)LLVMFuzzerTestOneInput(input.data(), input.size());
  g_current = nullptr;
}

std::optional<Bytes> read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  return Bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A libFuzzer dictionary: lines `name="value"` with \xNN and \\ \" escapes;
// blank lines and # comments skipped.
std::optional<std::vector<Bytes>> read_dictionary(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  std::vector<Bytes> tokens;
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t open = line.find('"');
    const std::size_t close = line.rfind('"');
    if (line.empty() || line[0] == '#' || open == std::string::npos || close <= open) continue;
    Bytes token;
    for (std::size_t i = open + 1; i < close; ++i) {
      if (line[i] == '\\' && i + 3 < close && line[i + 1] == 'x' &&
          std::isxdigit(static_cast<unsigned char>(line[i + 2])) &&
          std::isxdigit(static_cast<unsigned char>(line[i + 3]))) {
        token.push_back(
            static_cast<std::uint8_t>(std::strtoul(line.substr(i + 2, 2).c_str(), nullptr, 16)));
        i += 3;
      } else if (line[i] == '\\' && i + 1 < close) {
        token.push_back(static_cast<std::uint8_t>(line[++i]));
      } else {
        token.push_back(static_cast<std::uint8_t>(line[i]));
      }
    }
    if (!token.empty()) tokens.push_back(std::move(token));
  }
  return tokens;
}

// splitmix64: small, fast and the same everywhere.
class Random {
 public:
  explicit Random(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n > 0.
  std::size_t below(std::size_t n) { return static_cast<std::size_t>(next() % n); }

 private:
  std::uint64_t state_;
};

// Values that sit on the edges parsers get wrong: zero, one, all ones, the
// signed extremes and lengths just past what 32 bits hold.
constexpr std::array<std::uint64_t, 10> kInteresting = {
    0, 1, 0x7f, 0xff, 0x7fff, 0xffff, 0x7fffffffull, 0xffffffffull, 0x100000000ull, ~0ull};

// One random edit of `b`. Each keeps the result within max_size bytes.
void mutate_once(Bytes& b, Random& rng, const std::vector<Bytes>& dict, std::size_t max_size) {
  const std::size_t kinds = dict.empty() ? 6 : 7;
  switch (rng.below(kinds)) {
    case 0:  // flip one bit
      if (!b.empty()) b[rng.below(b.size())] ^= static_cast<std::uint8_t>(1u << rng.below(8));
      break;
    case 1:  // overwrite one byte
      if (!b.empty()) b[rng.below(b.size())] = static_cast<std::uint8_t>(rng.next());
      break;
    case 2: {  // an edge value as a little-endian integer of 1, 2, 4 or 8 bytes
      const std::size_t width = std::size_t{1} << rng.below(4);
      if (b.size() < width) break;
      const std::uint64_t v = kInteresting[rng.below(kInteresting.size())];
      const std::size_t at = rng.below(b.size() - width + 1);
      for (std::size_t i = 0; i < width; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
      break;
    }
    case 3: {  // erase a range
      if (b.empty()) break;
      const std::size_t at = rng.below(b.size());
      const std::size_t n = 1 + rng.below(std::min<std::size_t>(b.size() - at, 64));
      b.erase(b.begin() + static_cast<std::ptrdiff_t>(at),
              b.begin() + static_cast<std::ptrdiff_t>(at + n));
      break;
    }
    case 4: {  // repeat a range in place
      if (b.empty()) break;
      const std::size_t at = rng.below(b.size());
      const std::size_t n = 1 + rng.below(std::min<std::size_t>(b.size() - at, 64));
      if (b.size() + n > max_size) break;
      const Bytes copy(b.begin() + static_cast<std::ptrdiff_t>(at),
                       b.begin() + static_cast<std::ptrdiff_t>(at + n));
      b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), copy.begin(), copy.end());
      break;
    }
    case 5:  // truncate
      if (!b.empty()) b.resize(rng.below(b.size()));
      break;
    default: {  // a dictionary token, inserted or written over
      const Bytes& token = dict[rng.below(dict.size())];
      const std::size_t at = rng.below(b.size() + 1);
      if (rng.below(2) == 0 && at + token.size() <= b.size()) {
        std::copy(token.begin(), token.end(), b.begin() + static_cast<std::ptrdiff_t>(at));
      } else if (b.size() + token.size() <= max_size) {
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), token.begin(), token.end());
      }
      break;
    }
  }
}

struct Options {
  long mutants = 0;
  std::vector<Bytes> dict;
  std::vector<std::filesystem::path> inputs;
};

void collect(const std::filesystem::path& root, std::vector<std::filesystem::path>& out) {
  if (std::filesystem::is_directory(root)) {
    std::vector<std::filesystem::path> found;
    for (const auto& entry : std::filesystem::recursive_directory_iterator(root)) {
      if (entry.is_regular_file()) found.push_back(entry.path());
    }
    std::sort(found.begin(), found.end());  // the same order, so the same mutants
    out.insert(out.end(), found.begin(), found.end());
  } else if (std::filesystem::exists(root)) {
    out.push_back(root);
  }
}

int usage(const char* message) {
  std::fprintf(stderr, "replay: %s\nusage: replay [--mutate N] [--dict FILE] FILE_OR_DIR...\n",
               message);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg == "--mutate" || arg == "--dict") {
      if (i + 1 == argc) return usage("a flag needs a value");
      const char* value = argv[++i];
      if (arg == "--mutate") {
        char* end = nullptr;
        options.mutants = std::strtol(value, &end, 10);
        if (*end != '\0' || options.mutants < 0 || options.mutants > 100'000'000) {
          return usage("--mutate takes a count from 0 to 100000000");
        }
      } else {
        std::optional<std::vector<Bytes>> dict = read_dictionary(value);
        if (!dict) return usage("cannot read the dictionary");
        options.dict = std::move(*dict);
      }
    } else {
      collect(arg, options.inputs);
    }
  }
  const std::string target = std::filesystem::path(argv[0]).filename().string();
  install_death_handlers();

  long runs = 0;
  for (const std::filesystem::path& path : options.inputs) {
    std::optional<Bytes> seed = read_file(path);
    if (!seed) {
      std::fprintf(stderr, "replay: cannot read %s\n", path.c_str());
      return 1;
    }
    std::snprintf(g_crash_path, sizeof(g_crash_path), "crash-%s-%016llx", target.c_str(),
                  static_cast<unsigned long long>(fnv1a(*seed)));
    run_one(*seed);
    ++runs;
    // Mutants stay within twice the seed's size (and at least 4 KiB), as
    // libFuzzer's length limit does, so a run's time stays bounded.
    const std::size_t max_size = std::max<std::size_t>(4096, 2 * seed->size());
    Random rng(fnv1a(*seed));
    for (long m = 0; m < options.mutants; ++m) {
      Bytes mutant = *seed;
      const std::size_t edits = 1 + rng.below(4);
      for (std::size_t e = 0; e < edits; ++e) mutate_once(mutant, rng, options.dict, max_size);
      std::snprintf(g_crash_path, sizeof(g_crash_path), "crash-%s-%016llx", target.c_str(),
                    static_cast<unsigned long long>(fnv1a(mutant)));
      run_one(mutant);
      ++runs;
    }
  }
  std::printf("ran %ld input(s): %zu file(s), %ld mutant(s) each\n", runs, options.inputs.size(),
              options.mutants);
  return 0;
}
