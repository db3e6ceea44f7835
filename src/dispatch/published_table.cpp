// The process-wide snapshot. Readers load an atomic shared_ptr; writers serialise
// on a mutex, build a new table off to the side and swap it in, so no reader ever
// sees a table that is half written.
#include <atomic>
#include <cstdio>
#include <mutex>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

struct Published {
  std::atomic<std::shared_ptr<const KernelBindingTable>> table;
  std::mutex writer;
  std::uint64_t generation = 0;  // guarded by writer
};

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
    state->generation = 1;
    builtin->set_generation(1);
    state->table.store(std::make_shared<const KernelBindingTable>(std::move(*builtin)));
    return state;
  }();
  return *p;
}

Result<std::uint64_t> publish_locked(Published& p, KernelBindingTable table) {
  SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  table.set_generation(++p.generation);
  p.table.store(std::make_shared<const KernelBindingTable>(std::move(table)),
                std::memory_order_release);
  return p.generation;
}

}  // namespace

TableSnapshot current_table() { return published().table.load(std::memory_order_acquire); }

std::uint64_t current_generation() { return current_table()->generation(); }

Result<std::uint64_t> update_table(FunctionRef<Status(KernelBindingTable&)> edit) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  KernelBindingTable next = *p.table.load(std::memory_order_acquire);
  SWITCHYARD_RETURN_IF_ERROR(edit(next));
  return publish_locked(p, std::move(next));
}

Result<std::uint64_t> publish_table(KernelBindingTable table) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  return publish_locked(p, std::move(table));
}

}  // namespace switchyard
