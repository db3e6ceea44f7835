// switchyard: the command-line face of the kernel binding table and the runtime.
#include <csignal>
#include <cstdio>
#include <exception>
#include <string>
#include <string_view>
#include <vector>

#include <fmt/format.h>

#include "command.h"
#include "switchyard/backends.h"
#include "switchyard/environment.h"
#include "switchyard/kernel_packs.h"
#include "switchyard/registry.h"
#include "switchyard/thread_pool.h"

namespace switchyard::tool {

namespace {

// The message with every control byte written as \xNN: whatever a file or the
// environment put into it, an error is one line and sends the terminal nothing
// but text. (Strings taken from files are also cut where they enter a message;
// printable() in status.h.)
std::string one_line(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    const auto b = static_cast<unsigned char>(c);
    if (b < 0x20 || b == 0x7f) {
      out += fmt::format("\\x{:02x}", b);
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

int report_failure(const Status& status) {
  std::fprintf(stderr, "switchyard: %s\n", one_line(status.to_string()).c_str());
  switch (status.code()) {
    case StatusCode::kInvalidArgument:
    case StatusCode::kNotFound:
    case StatusCode::kDataLoss:
    case StatusCode::kOutOfRange:
    case StatusCode::kUnimplemented: return kExitUsage;
    default: return kExitCheckFailed;
  }
}

namespace {

int run_command_line(int argc, char** argv) {
  CLI::App app{"switchyard: kernel dispatch you can see"};
  app.require_subcommand(1);
  CommandMain selected;
  // Kernel packs load before any command runs, so every command sees them; the
  // option may stand before or after the command's name (fallthrough is set
  // before the commands are added, so that they inherit it).
  std::vector<std::string> kernel_packs;
  app.add_option("--kernel-pack", kernel_packs,
                 "Load the kernels of this kernel pack (a shared library with its manifest "
                 "beside it; docs/kernel-packs.md); repeatable")
      ->type_name("PATH");
  app.fallthrough();
  add_coverage_command(app, selected);
  add_run_command(app, selected);
  add_explain_command(app, selected);
  add_verify_command(app, selected);
  add_inspect_command(app, selected);
  add_quantize_command(app, selected);
  add_perplexity_command(app, selected);
  add_calibrate_command(app, selected);
  add_regret_command(app, selected);
  add_report_command(app, selected);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version print as CLI11 prints them; a usage error is one line
    // on stderr, like every other error.
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kExitOk : kExitUsage;
    std::fprintf(stderr, "switchyard: usage: %s (see --help)\n", one_line(e.what()).c_str());
    return kExitUsage;
  }
  if (!selected) return kExitUsage;
  // The tool is the top of the stack: it publishes the built-in table that every
  // command reads.
  if (Result<std::uint64_t> table = install_builtin_table(); !table.is_ok()) {
    return report_failure(table.status());
  }
  if (!kernel_packs.empty()) {
    Result<std::vector<KernelPackInfo>> packs = install_kernel_packs(kernel_packs);
    if (!packs.is_ok()) return report_failure(packs.status());
  }
  // Kernels from outside the build are never silent: one line per pack on stderr.
  for (const KernelPackInfo& pack : installed_kernel_packs()) {
    std::fprintf(stderr, "switchyard: kernel pack %s from %s: %zu kernel(s)\n", pack.name.c_str(),
                 one_line(pack.library_path).c_str(), pack.kernels.size());
  }
  // Every SWITCHYARD_* variable is read by now or here, and a misspelt name or an
  // unusable value is a usage error before any work starts.
  (void)RegistryConfig::from_environment();
  (void)default_thread_count();
  if (Status env = check_environment(); !env.is_ok()) return report_failure(env);
  return selected();
}

}  // namespace
}  // namespace switchyard::tool

int main(int argc, char** argv) {
  using namespace switchyard::tool;
  std::set_terminate(&terminate_in_one_line);
  // A file-size limit (ulimit -f) makes a write fail with EFBIG, reported like a
  // full disk, instead of killing the process with a core dump.
  std::signal(SIGXFSZ, SIG_IGN);
  return run_guarded([&] { return run_command_line(argc, argv); });
}
