#include "switchyard/environment.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>

#include <unistd.h>

#include <fmt/format.h>

extern char** environ;

namespace switchyard {
namespace {

struct EnvInfo {
  std::string_view name;
  std::string_view meaning;
};

constexpr std::array<EnvInfo, kAllEnvVars.size()> kEnvInfos = {{
#define SWITCHYARD_ENV(ident, name, meaning) {name, meaning},
#include "switchyard/environment.def"
#undef SWITCHYARD_ENV
}};

struct Problems {
  std::mutex mutex;
  std::vector<std::string> lines;
};

Problems& problems() {
  static Problems* p = new Problems();  // never destroyed: readers may run at exit
  return *p;
}

constexpr std::string_view kPrefix = "SWITCHYARD_";

}  // namespace

std::string_view name(EnvVar v) { return kEnvInfos[static_cast<std::size_t>(v)].name; }
std::string_view meaning(EnvVar v) { return kEnvInfos[static_cast<std::size_t>(v)].meaning; }

const char* read_environment(EnvVar v) {
  // The names in environment.def are string literals, so data() is terminated.
  return std::getenv(name(v).data());
}

void note_environment_problem(EnvVar v, std::string problem) {
  std::string line = fmt::format("{}: {}", name(v), problem);
  Problems& p = problems();
  std::lock_guard lock(p.mutex);
  if (std::find(p.lines.begin(), p.lines.end(), line) == p.lines.end()) {
    p.lines.push_back(std::move(line));
  }
}

std::vector<std::string> environment_problems() {
  Problems& p = problems();
  std::lock_guard lock(p.mutex);
  return p.lines;
}

Status check_environment() {
  std::vector<std::string> found;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    if (!text.starts_with(kPrefix)) continue;
    const std::string_view var = text.substr(0, text.find('='));
    const bool known = std::any_of(kEnvInfos.begin(), kEnvInfos.end(),
                                   [&](const EnvInfo& info) { return info.name == var; });
    if (!known) {
      std::vector<std::string_view> names;
      for (const EnvInfo& info : kEnvInfos) names.push_back(info.name);
      found.push_back(fmt::format("{} is not a Switchyard variable (known: {})", printable(var),
                                  fmt::join(names, ", ")));
    }
  }
  for (std::string& line : environment_problems()) found.push_back(std::move(line));
  if (found.empty()) return Status::ok();
  return invalid_argument_error(fmt::format("environment: {}", fmt::join(found, "; ")));
}

std::int64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page = sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return 0;
  std::int64_t bytes = 0;
  if (__builtin_mul_overflow(static_cast<std::int64_t>(pages), static_cast<std::int64_t>(page),
                             &bytes)) {
    return INT64_MAX;
  }
  return bytes;
}

}  // namespace switchyard
