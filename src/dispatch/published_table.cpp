// The process-wide snapshot. Readers load an atomic shared_ptr; writers serialise
// on a mutex, build a new table off to the side and swap it in, so no reader ever
// sees a table that is half written.
//
// Writers keep the unmasked base table beside the published one: every
// publication is base-minus-mask, so masking is reversible and an update_table()
// edit made while a mask is active lands in the base, not in the masked copy.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

struct Published {
  std::atomic<std::shared_ptr<const KernelBindingTable>> table;
  std::mutex writer;
  std::uint64_t generation = 0;         // guarded by writer
  KernelBindingTable base;              // guarded by writer; finalized, never masked
  KernelMask mask;                      // guarded by writer
  std::vector<CoverageBinding> masked;  // guarded by writer: what `mask` removed
};

// The mask named by SWITCHYARD_MASK_KERNELS. Read once, from the first-use
// initializer below. A malformed value cannot be returned as a Status from there,
// and ignoring it quietly would be the silent behaviour masking exists to avoid,
// so it is printed where the user will see it.
KernelMask mask_from_environment() {
  const char* spec = std::getenv("SWITCHYARD_MASK_KERNELS");
  if (spec == nullptr) return {};
  Result<KernelMask> mask = KernelMask::parse(spec);
  if (!mask.is_ok()) {
    fmt::print(stderr, "switchyard: SWITCHYARD_MASK_KERNELS ignored, nothing is masked: {}\n",
               mask.status().message());
    return {};
  }
  return *std::move(mask);
}

// Publishes base-minus-mask. `p.writer` must be held (or `p` not yet shared).
Result<std::uint64_t> publish_locked(Published& p) {
  KernelBindingTable next = p.base;
  std::vector<CoverageBinding> masked = apply_kernel_mask(p.mask, next);
  SWITCHYARD_RETURN_IF_ERROR(next.finalize());
  next.set_generation(++p.generation);
  p.masked = std::move(masked);
  p.table.store(std::make_shared<const KernelBindingTable>(std::move(next)),
                std::memory_order_release);
  return p.generation;
}

Published& published() {
  // Built on first use; the builtin table must be complete before any reader
  // can see the pointer, which the function-local static guarantees.
  static Published* p = [] {
    auto* state = new Published();  // never destroyed: readers may outlive main()
    Result<KernelBindingTable> builtin = make_builtin_table();
    if (!builtin.is_ok()) {
      detail::check_failed("make_builtin_table()", __FILE__, __LINE__,
                           builtin.status().to_string());
    }
    state->base = *std::move(builtin);
    state->mask = mask_from_environment();
    Result<std::uint64_t> first = publish_locked(*state);
    if (!first.is_ok()) {
      detail::check_failed("publish_locked(builtin)", __FILE__, __LINE__,
                           first.status().to_string());
    }
    return state;
  }();
  return *p;
}

}  // namespace

TableSnapshot current_table() { return published().table.load(std::memory_order_acquire); }

std::uint64_t current_generation() { return current_table()->generation(); }

Result<std::uint64_t> update_table(FunctionRef<Status(KernelBindingTable&)> edit) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  KernelBindingTable next = p.base;
  SWITCHYARD_RETURN_IF_ERROR(edit(next));
  SWITCHYARD_RETURN_IF_ERROR(next.finalize());
  KernelBindingTable previous = std::exchange(p.base, std::move(next));
  Result<std::uint64_t> generation = publish_locked(p);
  if (!generation.is_ok()) p.base = std::move(previous);
  return generation;
}

Result<std::uint64_t> publish_table(KernelBindingTable table) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  KernelBindingTable previous = std::exchange(p.base, std::move(table));
  Result<std::uint64_t> generation = publish_locked(p);
  if (!generation.is_ok()) p.base = std::move(previous);
  return generation;
}

Result<std::uint64_t> set_kernel_mask(KernelMask mask) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  KernelMask previous = std::exchange(p.mask, std::move(mask));
  Result<std::uint64_t> generation = publish_locked(p);
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
