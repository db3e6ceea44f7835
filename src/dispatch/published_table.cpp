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
#include <atomic>
#include <mutex>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

struct Published {
  std::mutex writer;  // serialises update_table / publish_table
  std::mutex swap;    // guards `table` for the pointer copy
  TableSnapshot table;
  std::atomic<std::uint64_t> generation{0};
};

Published& published() {
  // Built on first use; the function-local static makes the builtin table
  // complete before any reader can see it.
  static Published* p = [] {
    auto* state = new Published();  // never destroyed: readers may outlive main()
    Result<KernelBindingTable> builtin = make_builtin_table();
    if (!builtin.is_ok()) {
      detail::check_failed("make_builtin_table()", __FILE__, __LINE__,
                           builtin.status().to_string());
    }
    builtin->set_generation(1);
    state->table = std::make_shared<const KernelBindingTable>(std::move(*builtin));
    state->generation.store(1, std::memory_order_release);
    return state;
  }();
  return *p;
}

TableSnapshot load_locked(Published& p) {
  std::lock_guard lock(p.swap);
  return p.table;
}

Result<std::uint64_t> publish_locked(Published& p, KernelBindingTable table) {
  SWITCHYARD_RETURN_IF_ERROR(table.finalize());
  const std::uint64_t generation = p.generation.load(std::memory_order_relaxed) + 1;
  table.set_generation(generation);
  auto next = std::make_shared<const KernelBindingTable>(std::move(table));
  {
    std::lock_guard lock(p.swap);
    p.table = std::move(next);
  }
  p.generation.store(generation, std::memory_order_release);
  return generation;
}

}  // namespace

TableSnapshot current_table() {
  Published& p = published();
  thread_local TableSnapshot cached;
  const std::uint64_t generation = p.generation.load(std::memory_order_acquire);
  if (cached == nullptr || cached->generation() != generation) cached = load_locked(p);
  return cached;
}

std::uint64_t current_generation() {
  return published().generation.load(std::memory_order_acquire);
}

Result<std::uint64_t> update_table(FunctionRef<Status(KernelBindingTable&)> edit) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  KernelBindingTable next = *load_locked(p);
  SWITCHYARD_RETURN_IF_ERROR(edit(next));
  return publish_locked(p, std::move(next));
}

Result<std::uint64_t> publish_table(KernelBindingTable table) {
  Published& p = published();
  std::lock_guard lock(p.writer);
  return publish_locked(p, std::move(table));
}

}  // namespace switchyard
