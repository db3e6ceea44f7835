// The process-wide snapshot.
//
// Note [Publishing without reader locks]
// Writers serialise on `writer`, build the next table off to the side, and swap it
// in; no reader ever sees a table that is half written. Readers keep a per-thread
// copy of the current shared_ptr and compare its generation with an atomic
// counter: in the steady state acquiring the snapshot is one acquire load and one
// reference-count increment, with no lock. Only when the generation moved does a
// reader take `swap` for the few nanoseconds of a pointer copy; it never holds a
// lock while it uses the table.
//
// std::atomic<std::shared_ptr> would express the same thing, but libstdc++ 12
// releases its internal lock bit with relaxed ordering on loads, which
// ThreadSanitizer rightly reports as a race; this scheme is race-free under the
// memory model, so the tsan run stays meaningful.
//
// Note [Who publishes the first table]
// The dispatch layer knows no backend: it cannot build the built-in table, so it
// starts with nothing published (generation 0) and the top of the stack (the tool,
// the model loader, a test or benchmark main) publishes the first table, usually
// through install_builtin_table() in backends.h, which calls
// publish_initial_table(). Reading current_table() before any publication is a
// programmer error and aborts with a message saying what to call: an empty table
// would turn every dispatch into a miss far from the mistake.
//
// Note [Kernel masks and the base table]
// While a kernel mask is active, writers keep the unmasked base table beside the
// published one: every publication is base-minus-mask, so masking is reversible
// and an update_table() edit lands in the base, not in the masked copy. Without a
// mask the published table is the base, and nothing is kept beside it.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "switchyard/dispatch.h"
#include "switchyard/environment.h"

namespace switchyard {
namespace {

struct Published {
  std::mutex writer;  // serialises update_table / publish_table / set_kernel_mask
  std::mutex swap;    // guards `table` for the pointer copy
  TableSnapshot table;
  std::atomic<std::uint64_t> generation{0};
  // Guarded by writer: the unmasked table, held only while `mask` is not empty.
  std::optional<KernelBindingTable> base;
  KernelMask mask;                      // guarded by writer
  bool mask_from_environment = false;   // guarded by writer: `mask` is the variable's
  std::vector<CoverageBinding> masked;  // guarded by writer: what `mask` removed
};

// The mask named by SWITCHYARD_MASK_KERNELS. Read once, from the first-use
// initializer below. A malformed value cannot be returned as a Status from there,
// and ignoring it quietly would be the silent behaviour masking exists to avoid:
// it is noted as an environment problem, which check_environment() turns into an
// error (the tool calls it at start-up and exits 2, in one line).
KernelMask mask_from_environment() {
  const char* spec = read_environment(EnvVar::kMaskKernels);
  if (spec == nullptr) return {};
  Result<KernelMask> mask = KernelMask::parse(spec);
  if (!mask.is_ok()) {
    note_environment_problem(EnvVar::kMaskKernels,
                             fmt::format("{}; nothing is masked", mask.status().message()));
    return {};
  }
  return *std::move(mask);
}

TableSnapshot load_locked(Published& p) {
  std::lock_guard lock(p.swap);
  return p.table;
}

// Publishes `table` (unmasked) minus the mask and keeps it as the base while a mask
// is active. `p.writer` must be held (or `p` not yet shared). On failure nothing
// is published and the state is left alone.
Result<std::uint64_t> publish_locked(Published& p, KernelBindingTable table) {
  SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  std::optional<KernelBindingTable> base;
  std::vector<CoverageBinding> masked;
  if (!p.mask.empty()) {
    base = table;
    masked = apply_kernel_mask(p.mask, table);
    SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  }
  const std::uint64_t generation = p.generation.load(std::memory_order_relaxed) + 1;
  table.set_generation(generation);
  auto next = std::make_shared<const KernelBindingTable>(std::move(table));
  p.base = std::move(base);
  p.masked = std::move(masked);
  {
    std::lock_guard lock(p.swap);
    p.table = std::move(next);
  }
  p.generation.store(generation, std::memory_order_release);
  return generation;
}

// The unmasked table as it stands. `p.writer` must be held.
KernelBindingTable unmasked_locked(Published& p) {
  if (p.base) return *p.base;
  TableSnapshot current = load_locked(p);
  return current ? *current : KernelBindingTable();
}

Published& published() {
  // Built on first use; nothing is published until the top of the stack does it
  // (Note [Who publishes the first table]).
  static Published* p = [] {
    auto* state = new Published();  // never destroyed: readers may outlive main()
    state->mask = mask_from_environment();
    state->mask_from_environment = !state->mask.empty();
    return state;
  }();
  return *p;
}

}  // namespace

TableSnapshot current_table() {
  Published& p = published();
  thread_local TableSnapshot cached;
  const std::uint64_t generation = p.generation.load(std::memory_order_acquire);
  if (cached == nullptr || cached->generation() != generation) [[unlikely]] {
    if (generation == 0) {
      detail::check_failed("current_table()", __FILE__, __LINE__,
                           "no kernel binding table has been published yet: call "
                           "switchyard::install_builtin_table() (switchyard/backends.h) or "
                           "publish_table() at startup");
    }
    cached = load_locked(p);
  }
  return cached;
}

std::uint64_t current_generation() {
  return published().generation.load(std::memory_order_acquire);
}

Result<std::uint64_t> update_table(FunctionRef<Status(KernelBindingTable&)> edit) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  KernelBindingTable next = unmasked_locked(p);
  SWITCHYARD_RETURN_IF_ERROR(edit(next));
  return publish_locked(p, std::move(next));
}

Result<std::uint64_t> publish_initial_table(FunctionRef<Result<KernelBindingTable>()> build) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  const std::uint64_t generation = p.generation.load(std::memory_order_relaxed);
  if (generation > 0) return generation;
  SWITCHYARD_ASSIGN_OR_RETURN(KernelBindingTable table, build());
  const bool report_mask = p.mask_from_environment && !p.mask.empty();
  SWITCHYARD_ASSIGN_OR_RETURN(std::uint64_t first, publish_locked(p, std::move(table)));
  if (report_mask) {
    // A mask set from the environment is a debugging switch someone may forget is
    // on; say once what it hides.
    fmt::print(stderr, "switchyard: SWITCHYARD_MASK_KERNELS={} hides {} binding(s)\n",
               p.mask.to_string(), p.masked.size());
  }
  return first;
}

Result<std::uint64_t> publish_table(KernelBindingTable table) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  return publish_locked(p, std::move(table));
}

Result<std::uint64_t> set_kernel_mask(KernelMask mask) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  // Before the first publication there is nothing to mask yet: the first table
  // published gets the mask.
  if (p.generation.load(std::memory_order_relaxed) == 0) {
    p.mask = std::move(mask);
    p.mask_from_environment = false;
    return std::uint64_t{0};
  }
  KernelBindingTable base = unmasked_locked(p);
  p.mask_from_environment = false;
  KernelMask previous = std::exchange(p.mask, std::move(mask));
  Result<std::uint64_t> generation = publish_locked(p, std::move(base));
  if (!generation.is_ok()) p.mask = std::move(previous);
  return generation;
}

Result<std::uint64_t> clear_kernel_mask() { return set_kernel_mask(KernelMask()); }

KernelMask current_kernel_mask() {
  Published& p = published();
  std::lock_guard lock(p.writer);
  return p.mask;
}

std::vector<CoverageBinding> masked_bindings() {
  Published& p = published();
  std::lock_guard lock(p.writer);
  return p.masked;
}

}  // namespace switchyard
