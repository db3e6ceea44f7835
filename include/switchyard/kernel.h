// The one calling convention of every kernel in the binding table.
//
// A kernel receives its inputs, its pre-allocated outputs, the op's parameters and
// an execution context, and returns a Status. It never allocates its outputs and
// never throws. Inputs and outputs are given in the order of the binding key's
// dtype list: inputs first, then outputs.
//
// Example
//   Status add_f32(const KernelCall& call) {
//     const TensorView& a = call.inputs[0];
//     if (a.dtype() != DType::kF32)
//       return invalid_argument_error(fmt::format("{}: a is {}", call.name, name(a.dtype())));
//     ...
//     return Status::ok();
//   }
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "switchyard/function_ref.h"
#include "switchyard/status.h"
#include "switchyard/tensor.h"

namespace switchyard {

// Rotary embedding layouts: kNormal rotates adjacent pairs (x0, x1), kNeox rotates
// the two halves of the rotated dimensions (x_i, x_{i + d/2}).
enum class RopeMode : std::uint8_t { kNormal, kNeox };

// Parameters of an op. One flat struct for every op keeps the kernel signature
// uniform; each field says which ops read it, and ops ignore the rest.
struct OpParams {
  // scale: the multiplier. softmax and attention: the factor applied to the
  // logits before the softmax (attention's default 1/sqrt(head_dim) is the
  // caller's to compute).
  float scale = 1.0f;
  // rms_norm, layer_norm: added to the variance.
  float eps = 1e-5f;
  // concat: the dimension to join along (negative counts from the end).
  int axis = -1;
  // softmax, attention: mask positions after the query's own.
  bool causal = false;
  // rope: pair layout, frequency base and the number of leading dimensions of each
  // head that are rotated (0 means all of them).
  RopeMode rope_mode = RopeMode::kNormal;
  float rope_base = 10000.0f;
  int rope_dims = 0;
  // attention, causal masks: position of the first query row within the key
  // sequence (queries after a KV-cache prefix).
  std::int64_t query_offset = 0;
  // all_reduce, all_gather, reduce_scatter: the number of ranks in the group, which
  // the kernel checks against its communicator's (one: a copy, no communicator).
  int ranks = 1;
};

class Communicator;

// Runs parallel loops for kernels. A backend's thread pool implements it; a null
// runner in ExecContext means "run serially on the calling thread".
class ParallelRunner {
 public:
  virtual ~ParallelRunner() = default;
  // Number of threads that share the work (>= 1).
  [[nodiscard]] virtual int num_threads() const = 0;
  // Splits [0, n) into chunks of at least `grain` items and calls body(begin, end)
  // for each, possibly concurrently; returns once every chunk has run.
  virtual void parallel_for(std::int64_t n, std::int64_t grain,
                            FunctionRef<void(std::int64_t, std::int64_t)> body) = 0;
};

// What a kernel may use beyond its operands.
struct ExecContext {
  ParallelRunner* runner = nullptr;
  // The stream the backend's memory made (BackendMemory::create_stream; for CUDA
  // a CudaStream, src/backends/cuda/cuda_stream.h); null on the CPU.
  void* stream = nullptr;
  // This rank's place in the group that runs a tensor-parallel plan, for the
  // collective kernels (collective.h); null for a plan of one rank.
  Communicator* comm = nullptr;

  [[nodiscard]] int num_threads() const { return runner ? runner->num_threads() : 1; }
  // parallel_for through the runner, or serially when there is none.
  void parallel_for(std::int64_t n, std::int64_t grain,
                    FunctionRef<void(std::int64_t, std::int64_t)> body) const {
    if (runner != nullptr) {
      runner->parallel_for(n, grain, body);
    } else if (n > 0) {
      body(0, n);
    }
  }
};

struct KernelCall {
  std::span<const TensorView> inputs;
  std::span<const TensorView> outputs;
  const OpParams& params;
  ExecContext& ctx;
  // The registered name of the entry being called ("matmul_f32_q4_k_f32__cpu_avx2"),
  // for the kernel's error messages: the executor and the conformance harness pass
  // BindingEntry::name, so a kernel never formats its own name. Empty when a caller
  // calls a kernel function directly without an entry.
  std::string_view name = {};
  // What the entry was registered with (BindingEntry::data): null for a compiled-in
  // kernel; a kernel loaded at run time finds its own code here.
  const void* data = nullptr;
};

using KernelFn = Status (*)(const KernelCall& call);

}  // namespace switchyard
