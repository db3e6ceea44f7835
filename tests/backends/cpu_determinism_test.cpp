// Thread determinism of the CPU kernels: every entry that claims the same bytes
// at any thread count is run on one and on three threads over operands that span
// several work chunks, and the outputs are compared byte for byte.
#include "backends/cpu_cases.h"

namespace switchyard::test {
namespace {

TEST(CpuKernelsConcurrentTest, ThreadDeterministicEntriesGiveTheSameBytesOnOneAndThreeThreads) {
  const TableSnapshot table = current_table();
  int checked = 0;
  for (const auto& ref : table->entries()) {
    if (ref.slot.backend != BackendId::kCpu || !ref.slot.key.is_static()) continue;
    if (!ref.entry.precision.deterministic_across_threads) continue;
    const OpKind op = *ref.slot.key.static_op();
    // The matmul family's large cases belong to its own tests.
    if (op_family(op) == OpFamily::kMatmul || op_family(op) == OpFamily::kFused) continue;
    Case one = make_case(op, ref.slot.dtypes, /*big=*/true);
    Case three = make_case(op, ref.slot.dtypes, /*big=*/true);
    ASSERT_FALSE(one.outputs.empty()) << ref.entry.name;
    ASSERT_TRUE(call_entry(ref.entry, one.input_views(), one.output_views(), one.params, 1).is_ok())
        << ref.entry.name;
    ASSERT_TRUE(
        call_entry(ref.entry, three.input_views(), three.output_views(), three.params, 3).is_ok())
        << ref.entry.name;
    EXPECT_TRUE(one.outputs[0].same_bytes(three.outputs[0])) << ref.entry.name;
    ++checked;
  }
  EXPECT_GT(checked, 100);
}

}  // namespace
}  // namespace switchyard::test
