// Lint of the CPU backend's registrations: every op it registers has a bit-stable
// kernel, no entry keeps the unknown cost, and every registered entry can be
// launched on a small valid call. Also: SIMD siblings appear only on CPUs that run
// them, siblings at a key keep the best-first, reference-last order, names follow
// kernel_name, and a kernel's errors carry the name of the entry it was called as.
#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "backends/cpu/cpu_features.h"
#include "backends/cpu/elementwise/elementwise.h"
#include "backends/cpu/registration.h"
#include "backends/cpu_cases.h"

namespace switchyard::test {
namespace {

TEST(CpuLintTest, EveryRegisteredOpHasABitStableKernel) {
  const TableSnapshot table = current_table();
  std::map<std::uint16_t, bool> stable_by_op;
  for (const auto& ref : table->entries()) {
    if (ref.slot.backend != BackendId::kCpu) continue;
    bool& stable = stable_by_op[ref.slot.key.raw()];
    stable = stable || (ref.entry.precision.bit_stable && !ref.entry.precision.is_unaudited());
  }
  ASSERT_FALSE(stable_by_op.empty());
  for (const auto& [op, stable] : stable_by_op) {
    EXPECT_TRUE(stable) << "op " << op << " has no bit-stable CPU kernel";
  }
}

TEST(CpuLintTest, NoEntryKeepsTheUnknownCost) {
  // The rows as written: register_backend's fill would hide a row without a cost.
  for (const KernelBindingTable::Row& row : cpu::registration_rows()) {
    EXPECT_TRUE(row.options.cost != &unknown_cost || row.options.cost_expr != nullptr)
        << row.options.name;
    EXPECT_FALSE(row.options.precision.is_unaudited()) << row.options.name;
  }
  const TableSnapshot table = current_table();
  for (const auto& ref : table->entries()) {
    if (ref.slot.backend == BackendId::kCpu) {
      EXPECT_TRUE(ref.entry.has_known_cost()) << ref.entry.name;
    }
  }
}

TEST(CpuLintTest, EveryRegisteredEntryLaunchesOnASmallValidCall) {
  const TableSnapshot table = current_table();
  int launched = 0;
  for (const auto& ref : table->entries()) {
    if (ref.slot.backend != BackendId::kCpu || !ref.slot.key.is_static()) continue;
    const OpKind op = *ref.slot.key.static_op();
    Case c = make_case(op, ref.slot.dtypes);
    ASSERT_FALSE(c.outputs.empty()) << "no test case for " << ref.entry.name;
    const std::span<const BindingEntry> alts =
        table->lookup_alternatives(ref.slot.key, ref.slot.dtypes, BackendId::kCpu);
    ASSERT_FALSE(alts.empty()) << ref.entry.name;
    const Status s = call_entry(ref.entry, c.input_views(), c.output_views(), c.params);
    EXPECT_TRUE(s.is_ok()) << ref.entry.name << ": " << s.to_string();
    ++launched;
  }
  EXPECT_GT(launched, 100);
}

TEST(CpuLintTest, SimdSiblingsMatchTheCpuAndComeBeforeTheReference) {
  const cpu::CpuFeatures& f = cpu::cpu_features();
  const TableSnapshot table = current_table();
  for (const KernelBindingTable::Slot& slot : table->slots()) {
    if (slot.backend != BackendId::kCpu) continue;
    bool seen_portable = false;
    for (const BindingEntry& e : slot.alternatives) {
      if (e.source == "avx512") {
        EXPECT_TRUE(f.avx512) << e.name;
      }
      if (e.source == "avx2") {
        EXPECT_TRUE(f.avx2 && f.f16c) << e.name;
      }
      if (e.source == "amx") {
        EXPECT_TRUE(f.amx_int8) << e.name;
      }
      if (e.source == "amx_bf16") {
        EXPECT_TRUE(f.amx_bf16) << e.name;
      }
      if (e.source == "avx512" || e.source.starts_with("amx") || e.source == "avx2") {
        EXPECT_FALSE(seen_portable) << e.name << " is listed after the portable reference";
      }
      seen_portable = seen_portable || e.source == "portable";
    }
  }
  // On a CPU with AVX2 the elementwise keys carry an AVX2 sibling.
  if (f.avx2 && f.f16c) {
    const std::vector<BindingEntry> add =
        cpu_entries(OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32});
    ASSERT_GE(add.size(), 2u);
    EXPECT_EQ(add.back().source, "portable");
  }
}

// Every CPU name is kernel_name's for its key, and its variant starts with the
// source the row claims: "ref" for the portable kernels, else the instruction set
// or library ("avx2", "avx512_matvec", "openblas").
TEST(CpuLintTest, EveryNameFollowsTheKeyAndItsSource) {
  for (const KernelBindingTable::Row& row : cpu::registration_rows()) {
    const std::string stem = kernel_name(row.key, row.dtypes, BackendId::kCpu, "") + "_";
    ASSERT_TRUE(row.options.name.starts_with(stem)) << row.options.name << " vs " << stem;
    const std::string variant = row.options.name.substr(stem.size());
    const std::string isa = row.options.source == "portable" ? "ref" : row.options.source;
    EXPECT_TRUE(variant == isa || variant.starts_with(isa + "_"))
        << row.options.name << ": variant " << variant << ", source " << row.options.source;
  }
}

// A kernel's error names the entry it was called as (KernelCall::name), and a
// direct call without an entry says so. The kernels of gemm/ and quant/ (matmul,
// linear, ffn_swiglu, the quantized operands) still format their own names and
// are left out.
TEST(CpuLintTest, ErrorsNameTheEntryTheCallCarries) {
  const TableSnapshot table = current_table();
  int checked = 0;
  for (const auto& ref : table->entries()) {
    if (ref.slot.backend != BackendId::kCpu || !ref.slot.key.is_static()) continue;
    const OpKind op = *ref.slot.key.static_op();
    const std::span<const DType> d = ref.slot.dtypes.span();
    if (op == OpKind::kMatmul || op == OpKind::kLinear || op == OpKind::kFfnSwiglu ||
        std::any_of(d.begin(), d.end(), [](DType t) { return is_quantized(t); })) {
      continue;
    }
    // No operands at all: every kernel refuses the arity before reading one.
    const Status s = call_entry(ref.entry, {}, {});
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << ref.entry.name;
    EXPECT_TRUE(s.message().starts_with(ref.entry.name + ": ")) << s.to_string();
    ++checked;
  }
  EXPECT_GT(checked, 100);
  const KernelFn add = cpu::binary_kernel(OpKind::kAdd, DType::kF32, cpu::Variant::kRef);
  OpParams params;
  ExecContext ctx;
  const Status direct = add({.inputs = {}, .outputs = {}, .params = params, .ctx = ctx});
  EXPECT_TRUE(direct.message().starts_with("(unnamed kernel): ")) << direct.to_string();
}

}  // namespace
}  // namespace switchyard::test
