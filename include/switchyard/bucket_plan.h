// BucketPlan: the planned form of one shape bucket, the contract between the
// planner (which builds it) and whoever runs it (the executor).
//
// A bucket is a flat list of steps in execution order. A step runs one kernel
// (its inputs, then its output, as operand references) or copies one value between
// two backends. Operand references name where the memory is: a buffer in a
// backend's arena (offsets fixed by the buffer plan), or the value's own storage
// (a caller's input or output tensor, a constant's data). Nothing in a bucket is
// looked up at run time: each kernel step holds the function and the table entry
// the planner chose.
//
// Read it through ExecutionPlan::bucket(i); a BucketPlan is immutable once the
// plan is built and lives as long as its plan.
//
// Example: the step at which node n runs in bucket 0
//   const BucketPlan& bucket = plan.bucket(0);
//   for (std::size_t s = 0; s < bucket.steps.size(); ++s)
//     if (bucket.steps[s].node == n) return s;
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "switchyard/plan.h"

namespace switchyard {

// Where one operand's memory is: the value (a view is laid over its source), the
// backend whose copy is read, and the buffer holding it (-1: the value's own
// storage, i.e. a caller's input/output tensor or a constant's data).
struct OperandRef {
  ValueId value;
  BackendId backend = kHostBackend;
  std::int32_t buffer = -1;
};

enum class StepKind : std::uint8_t {
  kKernel,  // operands: inputs, then the output
  kCopy,    // operands: source, then destination (same value, two backends)
};

struct PlannedStep {
  StepKind kind = StepKind::kKernel;
  BackendId backend = kHostBackend;
  std::uint16_t num_inputs = 0;
  std::uint32_t first_operand = 0;
  // Graph node, -1 for copies.
  std::int32_t node = -1;
  KernelFn fn = nullptr;
  const BindingEntry* entry = nullptr;
  const OpParams* params = nullptr;
};

// One logical tensor in a backend's arena.
struct BufferPlan {
  BackendId backend = kHostBackend;
  std::int64_t offset = 0;
  std::int64_t bytes = 0;
  // Steps that write it first and read it last.
  std::int32_t first_step = 0;
  std::int32_t last_step = 0;
  // A constant uploaded once when an executor is set up (Note [Uploaded
  // constants]): not in the arena (offset unused), shared by every bucket.
  ValueId upload;
  // With `upload`: the constant is packed for the sibling that reads it (Note
  // [Prepacked weights]) into `bytes` of its own, once per executor.
  const WeightPacking* packing = nullptr;
};

struct BucketPlan {
  std::string name;
  // Per graph symbol, the accepted range.
  std::vector<std::int64_t> min;
  std::vector<std::int64_t> max;
  std::vector<PlannedStep> steps;
  std::vector<OperandRef> operands;
  std::vector<BufferPlan> buffers;
  std::array<std::int64_t, kBackendCount> arena_bytes{};
  // Filled while routing; plan_graph moves it into the plan's PlanReport.
  BucketReport report;

  [[nodiscard]] bool accepts(std::span<const std::int64_t> sizes) const {
    for (std::size_t i = 0; i < min.size(); ++i) {
      if (sizes[i] < min[i] || sizes[i] > max[i]) return false;
    }
    return true;
  }
};

// `shape` with every symbol replaced by its size.
[[nodiscard]] Shape concrete_shape(const Shape& shape, std::span<const std::int64_t> sizes);

// The layout an operand presents at these sizes (views resolved).
[[nodiscard]] Result<ViewLayout> operand_layout(const Graph& graph, ValueId value,
                                                std::span<const std::int64_t> sizes);

}  // namespace switchyard
