// The built-in backends, from the one explicit list in backend_list.def. No static
// initialiser registers kernels (static linking would drop it silently).
#include "switchyard/backends.h"

#include <array>

#include <fmt/format.h>

#include "switchyard/dispatch.h"
#include "switchyard/kernel_packs.h"

namespace switchyard {

// Each backend's entry point, defined in its registration file.
#define SWITCHYARD_BUILTIN_BACKEND(id, ns)          \
  namespace ns {                                    \
  void register_backend(KernelBindingTable& table); \
  }
#include "backends/backend_list.def"
#undef SWITCHYARD_BUILTIN_BACKEND

namespace {

struct BuiltinBackend {
  BackendId id;
  void (*register_backend)(KernelBindingTable&);
};

constexpr std::array kBuiltinBackends = {
#define SWITCHYARD_BUILTIN_BACKEND(id, ns) BuiltinBackend{BackendId::id, &ns::register_backend},
#include "backends/backend_list.def"
#undef SWITCHYARD_BUILTIN_BACKEND
};

constexpr std::array<BackendId, kBuiltinBackends.size()> backend_ids() {
  std::array<BackendId, kBuiltinBackends.size()> ids{};
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = kBuiltinBackends[i].id;
  return ids;
}
constexpr auto kCompiledBackendIds = backend_ids();

}  // namespace

std::span<const BackendId> compiled_backends() { return kCompiledBackendIds; }

bool is_compiled(BackendId backend) {
  for (BackendId b : kCompiledBackendIds) {
    if (b == backend) return true;
  }
  return false;
}

Result<BackendId> parse_compiled_backend(std::string_view text) {
  Result<BackendId> backend = parse_backend(text);
  if (backend.is_ok() && is_compiled(*backend)) return backend;
  std::string names;
  for (BackendId b : kCompiledBackendIds) {
    names += names.empty() ? "" : ", ";
    names += name(b);
  }
  return invalid_argument_error(
      backend.is_ok()
          ? fmt::format("backend '{}' is not compiled into this build (compiled: {})", text, names)
          : fmt::format("unknown backend '{}' (compiled: {})", text, names));
}

BackendId default_backend(const KernelBindingTable& table) {
  for (BackendId b : kCompiledBackendIds) {
    if (!is_accelerator(b)) continue;
    const BackendMemory* memory = table.backend_memory(b);
    if (memory != nullptr && memory->ready().is_ok()) return b;
  }
  return kHostBackend;
}

void register_builtin_backends(KernelBindingTable& table) {
  for (const BuiltinBackend& backend : kBuiltinBackends) backend.register_backend(table);
}

Result<KernelBindingTable> make_builtin_table() {
  KernelBindingTable table;
  register_builtin_backends(table);
  SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  return table;
}

Result<std::uint64_t> install_builtin_table() {
  SWITCHYARD_RETURN_IF_ERROR(publish_initial_table([]() { return make_builtin_table(); }).status());
  SWITCHYARD_RETURN_IF_ERROR(install_environment_kernel_packs());
  return current_generation();
}

}  // namespace switchyard
