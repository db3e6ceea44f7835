// The SWITCHYARD_* environment variables: the one list of them, and the check that
// none is misspelt or holds a value its reader could not use.
//
// Each variable is read once per process by the layer that uses it (the thread
// pool, the CPU backend, the registry, the published table). A reader that finds
// a value it cannot use falls back to the safe reading — strict mode stays on,
// nothing is masked, no CPU feature is dropped — and reports the problem here with
// note_environment_problem(). A program calls check_environment() after its
// readers have run (the tool does at startup) and refuses to go on when anything
// is wrong, so a typo can never change behaviour silently.
//
// Example
//   if (Status env = check_environment(); !env.is_ok()) {
//     fmt::print(stderr, "{}\n", env.message());
//     return 2;
//   }
#pragma once

#include <array>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/status.h"

namespace switchyard {

enum class EnvVar : std::uint8_t {
#define SWITCHYARD_ENV(ident, name, meaning) ident,
#include "switchyard/environment.def"
#undef SWITCHYARD_ENV
};

inline constexpr std::array kAllEnvVars = {
#define SWITCHYARD_ENV(ident, name, meaning) EnvVar::ident,
#include "switchyard/environment.def"
#undef SWITCHYARD_ENV
};

// "SWITCHYARD_THREADS", ...
[[nodiscard]] std::string_view name(EnvVar v);
// What the variable means and takes, one line.
[[nodiscard]] std::string_view meaning(EnvVar v);

// The variable's value, or null when unset. The same pointer std::getenv gives.
[[nodiscard]] const char* read_environment(EnvVar v);

// Records that `v` holds a value its reader cannot use, and what the reader did
// instead. `problem` is one line ("unknown feature 'avx3'; known: ...").
// Thread-safe; the same message twice is kept once.
void note_environment_problem(EnvVar v, std::string problem);

// Every problem noted so far, "NAME: problem", in the order noted.
[[nodiscard]] std::vector<std::string> environment_problems();

// kInvalidArgument when a SWITCHYARD_* variable is set that is not in
// environment.def (naming it and listing the known ones), or when a reader noted a
// problem; the message holds every problem, separated by "; ". Reads the
// environment's names each call; values are judged by their readers, so call it
// after the readers ran.
[[nodiscard]] Status check_environment();

// The machine's physical memory in bytes (0 when the platform does not say): the
// bound for memory sized from untrusted numbers (a KV cache for a requested token
// count), checked before allocating so that a request too large is a clear error.
[[nodiscard]] std::int64_t physical_memory_bytes();

}  // namespace switchyard
