// Every op of op.def can be verified and run: it has a float64 reference and a
// case generator (src/verify) that accept the dtypes it is bound at, and, unless
// op.def marks its binding kOptional, at least one CPU binding in the built-in
// table.
//
// The reference switch is exhaustive (an op without a reference does not
// compile); this test checks what the compiler cannot: that the op has a case
// generator (elementwise ops take their family's), that it produces cases and
// that the reference computes on them, at every dtype list the table binds, and
// that a required op is bound at all.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "switchyard/dispatch.h"
#include "verify/cases.h"
#include "verify/quantized_operands.h"
#include "verify/reference.h"
#include "verify/storage.h"

namespace switchyard::verify_detail {
namespace {

using ::testing::HasSubstr;

// Why `op` at `dtypes` (with `caps`) cannot be verified, or an empty string: the
// case generator refuses the key or makes no case, or the reference refuses the
// first case.
std::string verify_problem(OpKind op, const DTypeList& dtypes, const KernelCaps& caps) {
  std::mt19937_64 rng(11);
  Result<std::vector<Case>> cases = make_cases(op, dtypes, caps, rng);
  if (!cases.is_ok()) return "no cases: " + cases.status().to_string();
  if (cases->empty()) return "the case generator made no case";
  Case& c = cases->front();
  std::vector<RefTensor> refs;
  for (InputSpec& in : c.inputs) {
    if (is_quantized(in.dtype)) {
      Result<std::vector<std::byte>> bytes = quantize_operand(in.dtype, in.shape, in.values);
      if (!bytes.is_ok()) return "a case input does not quantize: " + bytes.status().to_string();
    } else {
      round_to_dtype(in.dtype, in.values);
      collapse_broadcast(in.shape, in.broadcast_mask, in.values);
    }
    refs.push_back({in.dtype, in.shape, in.values});
  }
  Result<RefOutput> out = compute_reference(op, refs, c.params, dtypes[dtypes.size() - 1]);
  if (!out.is_ok()) return "no reference: " + out.status().to_string();
  return "";
}

// What keeps `op` from being verified and run with `table`, one line per problem,
// each naming the op; empty when nothing does.
std::vector<std::string> coverage_problems(const KernelBindingTable& table, OpKind op) {
  std::vector<std::string> problems;
  bool cpu_bound = false;
  bool bound = false;
  for (const KernelBindingTable::Slot& slot : table.slots()) {
    if (slot.key != BindingKey(op)) continue;
    bound = true;
    cpu_bound = cpu_bound || slot.backend == BackendId::kCpu;
    // One check per distinct set of caps: the cases depend on them.
    std::vector<KernelCaps> seen;
    for (const BindingEntry& e : slot.alternatives) {
      if (std::find(seen.begin(), seen.end(), e.caps) != seen.end()) continue;
      seen.push_back(e.caps);
      const std::string why = verify_problem(op, slot.dtypes, e.caps);
      if (!why.empty()) {
        problems.push_back(fmt::format("{}: {} ({}) cannot be verified: {}", name(op), e.name,
                                       describe_key(slot.key, slot.dtypes, slot.backend), why));
      }
    }
  }
  if (op_binding(op) == OpBinding::kRequired && !cpu_bound) {
    problems.push_back(fmt::format(
        "{}: no CPU binding, and op.def marks its binding kRequired (mark it kOptional only "
        "for a fused op the planner forms where a backend binds it)",
        name(op)));
  }
  if (!bound && op_binding(op) == OpBinding::kOptional) {
    // An optional op that nothing binds has no dtypes to check at: some all-f32
    // operand list must give cases the reference computes on, so that a backend
    // which binds it later can be verified.
    bool any = false;
    std::string last;
    for (std::size_t n = 2; n <= kMaxOperands && !any; ++n) {
      const std::vector<DType> f32(n, DType::kF32);
      last = verify_problem(op, DTypeList(std::span<const DType>(f32)), {});
      any = last.empty();
    }
    if (!any) {
      problems.push_back(fmt::format(
          "{}: unbound, and no all-f32 operand list has cases and a reference (last: {})", name(op),
          last));
    }
  }
  return problems;
}

TEST(OpCoverageTest, EveryOpHasAReferenceCasesAndTheBindingsOpDefRequires) {
  const TableSnapshot table = current_table();
  for (OpKind op : kAllOps) {
    for (const std::string& problem : coverage_problems(*table, op)) ADD_FAILURE() << problem;
  }
}

// The test of the test: without bindings every required op is reported, by name,
// and an optional one is still checked for a reference and cases.
TEST(OpCoverageTest, AnEmptyTableNamesEveryRequiredOp) {
  const KernelBindingTable empty;
  for (OpKind op : kAllOps) {
    const std::vector<std::string> problems = coverage_problems(empty, op);
    if (op_binding(op) == OpBinding::kRequired) {
      ASSERT_EQ(problems.size(), 1u) << name(op);
      EXPECT_THAT(problems[0], HasSubstr(std::string(name(op)) + ": no CPU binding"));
    } else {
      EXPECT_TRUE(problems.empty()) << name(op) << ": " << problems.front();
    }
  }
}

Status never_called(const KernelCall&) { return internal_error("not run by this test"); }

// A binding at dtypes the op's case generator refuses (add takes one float dtype)
// is reported with the kernel's name; the CPU binding requirement is then met.
TEST(OpCoverageTest, ABindingTheHarnessCannotVerifyIsNamed) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, {DType::kI32, DType::kI32, DType::kI32}, BackendId::kCpu,
                        &never_called, {.name = "add_i32__cpu_test"});
  const std::vector<std::string> problems = coverage_problems(table, OpKind::kAdd);
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_THAT(problems[0], HasSubstr("add: add_i32__cpu_test"));
  EXPECT_THAT(problems[0], HasSubstr("no cases"));
}

}  // namespace
}  // namespace switchyard::verify_detail
