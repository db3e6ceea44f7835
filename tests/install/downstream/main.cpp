// Uses an installed Switchyard: checks the library's version against the
// headers', publishes the built-in table, dispatches one matmul through it and
// prints the kernel's name. Exit 0 when all of that works.
#include <cstdio>
#include <vector>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/version.h"

int main() {
  using namespace switchyard;
  if (Status s = check_library_version(); !s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  if (Result<std::uint64_t> installed = install_builtin_table(); !installed.is_ok()) {
    std::fprintf(stderr, "%s\n", installed.status().to_string().c_str());
    return 1;
  }
  const TableSnapshot table = current_table();
  Result<const BindingEntry*> entry =
      table->lookup(OpKind::kMatmul, {DType::kF32, DType::kF32, DType::kF32}, BackendId::kCpu);
  if (!entry.is_ok()) {
    std::fprintf(stderr, "%s\n", entry.status().to_string().c_str());
    return 1;
  }
  // out [2, 3] = a [2, 2] . w [3, 2]^T
  std::vector<float> a = {1, 2, 3, 4}, w = {1, 0, 0, 1, 1, 1}, out(6);
  const TensorView inputs[] = {TensorView::contiguous(a.data(), DType::kF32, {2, 2}),
                               TensorView::contiguous(w.data(), DType::kF32, {3, 2})};
  const TensorView result = TensorView::contiguous(out.data(), DType::kF32, {2, 3});
  ExecContext ctx;
  const OpParams params;
  if (Status s = (*entry)->fn({.inputs = inputs,
                               .outputs = std::span<const TensorView>(&result, 1),
                               .params = params,
                               .ctx = ctx,
                               .name = (*entry)->name});
      !s.is_ok()) {
    std::fprintf(stderr, "%s\n", s.to_string().c_str());
    return 1;
  }
  const std::vector<float> expected = {1, 2, 3, 3, 4, 7};
  if (out != expected) {
    std::fprintf(stderr, "matmul gave the wrong values\n");
    return 1;
  }
  std::printf("switchyard %s: %s\n", library_version().to_string().c_str(), (*entry)->name.c_str());
  return 0;
}
