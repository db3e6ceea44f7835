// cuda's collectives: NCCL between the ranks of a group (one process driving one
// GPU per rank), a device copy for a single rank. Note [Collectives] in
// collective.h.
//
// Note [NCCL's layout and ours]
// NCCL gathers and scatters whole contiguous chunks, rank after rank: all_gather
// of [rows, n] per rank gives [ranks, rows, n]; reduce_scatter hands rank r the
// r-th contiguous chunk. The ops join and split along the last dimension
// ([rows, n ranks]), which is the same memory only when rows is 1 (a decode
// step). Otherwise all_gather gathers into the stream's scratch and moves each
// rank's chunk to its columns with one 2-D copy, and reduce_scatter first lays
// each rank's columns out as a chunk in the scratch, then reduces.
#include <cuda_runtime_api.h>

#include <mutex>
#include <optional>

#include <fmt/format.h>

#include "backends/cuda/collective/nccl.h"
#include "backends/cuda/kernel_checks.h"
#include "backends/cuda/kernels.h"

#if SWITCHYARD_HAVE_NCCL
#include <nccl.h>
#endif

namespace switchyard::cuda {
namespace {

#if SWITCHYARD_HAVE_NCCL

// NCCL's result as a Status: a system or CUDA failure is the device's
// (kUnavailable), anything else a misuse (kInternal).
Status nccl_error_or_ok(ncclResult_t result, std::string_view what) {
  if (result == ncclSuccess) return Status::ok();
  const std::string message = fmt::format("{}: NCCL: {}", what, ncclGetErrorString(result));
  if (result == ncclSystemError || result == ncclUnhandledCudaError) {
    return unavailable_error(message);
  }
  return internal_error(message);
}

// A rank of an NCCL group, on device `rank`.
class NcclCommunicator final : public Communicator {
 public:
  NcclCommunicator(ncclComm_t comm, int rank, int size) : comm_(comm), rank_(rank), size_(size) {}
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;
  ~NcclCommunicator() override { (void)ncclCommDestroy(comm_); }

  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override { return size_; }
  [[nodiscard]] BackendId backend() const override { return BackendId::kCuda; }
  // Marks this rank, whose later collectives return the reason. It does not end
  // the group's queued work: with several GPUs, peers whose NCCL kernels wait for
  // a rank that failed would spin until ncclCommAbort on every communicator of
  // the group, which this does not call yet (a group here has one rank; a
  // recorded step replays its NCCL calls without this check).
  void abort(const Status& why) override {
    std::lock_guard lock(mutex_);
    if (aborted_) return;
    aborted_ = true;
    why_ = why.is_ok() ? failed_precondition_error("the NCCL group was aborted") : why;
  }
  [[nodiscard]] Status usable() const {
    std::lock_guard lock(mutex_);
    return aborted_ ? why_ : Status::ok();
  }
  [[nodiscard]] ncclComm_t comm() const { return comm_; }

 private:
  ncclComm_t comm_;
  int rank_;
  int size_;
  mutable std::mutex mutex_;
  bool aborted_ = false;
  Status why_;
};

std::optional<ncclDataType_t> nccl_type(DType t) {
  switch (t) {
    case DType::kF32: return ncclFloat32;
    case DType::kF16: return ncclFloat16;
    case DType::kBF16: return ncclBfloat16;
    default: return std::nullopt;
  }
}

// Note [NCCL's layout and ours]
Status run_nccl(OpKind op, const KernelCall& call, NcclCommunicator& rank, cudaStream_t stream) {
  SWITCHYARD_RETURN_IF_ERROR(rank.usable());
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  const ncclDataType_t type = *nccl_type(x.dtype());
  const std::int64_t ranks = rank.size();
  const auto element = static_cast<std::size_t>(block_bytes(x.dtype()));
  const std::string what(label(call));
  if (op == OpKind::kAllReduce) {
    return nccl_error_or_ok(
        ncclAllReduce(x.first(), out.first(), static_cast<std::size_t>(x.numel()), type, ncclSum,
                      rank.comm(), stream),
        what);
  }
  // all_gather: x [rows, n] -> out [rows, n ranks]; reduce_scatter: x [rows, n
  // ranks] -> out [rows, n].
  const TensorView& narrow = op == OpKind::kAllGather ? x : out;
  const auto rows = static_cast<std::size_t>(narrow.shape().outer());
  const auto n = static_cast<std::size_t>(narrow.shape().inner());
  const std::size_t chunk = rows * n;
  if (rows == 1) {
    return nccl_error_or_ok(
        op == OpKind::kAllGather
            ? ncclAllGather(x.first(), out.first(), chunk, type, rank.comm(), stream)
            : ncclReduceScatter(x.first(), out.first(), chunk, type, ncclSum, rank.comm(), stream),
        what);
  }
  SWITCHYARD_ASSIGN_OR_RETURN(CudaStream * s, stream_of(call));
  SWITCHYARD_ASSIGN_OR_RETURN(void* staged, scratch(*s, chunk * ranks * element));
  auto* base = static_cast<std::byte*>(staged);
  const std::size_t row_bytes = n * element;
  if (op == OpKind::kAllGather) {
    SWITCHYARD_RETURN_IF_ERROR(
        nccl_error_or_ok(ncclAllGather(x.first(), staged, chunk, type, rank.comm(), stream), what));
    for (std::int64_t r = 0; r < ranks; ++r) {
      SWITCHYARD_RETURN_IF_ERROR(
          launched(cudaMemcpy2DAsync(static_cast<std::byte*>(out.first()) + r * row_bytes,
                                     row_bytes * ranks, base + r * chunk * element, row_bytes,
                                     row_bytes, rows, cudaMemcpyDeviceToDevice, stream),
                   call));
    }
    return Status::ok();
  }
  for (std::int64_t r = 0; r < ranks; ++r) {
    SWITCHYARD_RETURN_IF_ERROR(launched(
        cudaMemcpy2DAsync(base + r * chunk * element, row_bytes,
                          static_cast<const std::byte*>(x.first()) + r * row_bytes,
                          row_bytes * ranks, row_bytes, rows, cudaMemcpyDeviceToDevice, stream),
        call));
  }
  return nccl_error_or_ok(
      ncclReduceScatter(staged, out.first(), chunk, type, ncclSum, rank.comm(), stream), what);
}

#endif  // SWITCHYARD_HAVE_NCCL

// x [.., n] -> out [.., n ranks] (all_gather), [.., n / ranks] (reduce_scatter)
// or [.., n] (all_reduce): contiguous, one float dtype.
Status check_operands(OpKind op, const KernelCall& call) {
  const TensorView &x = call.inputs[0], &out = call.outputs[0];
  const std::int64_t ranks = call.params.ranks;
  const std::int64_t n = x.rank() > 0 ? x.shape().inner() : 0;
  std::int64_t expected = n;
  if (op == OpKind::kAllGather) expected = n * ranks;
  if (op == OpKind::kReduceScatter) expected = ranks > 0 && n % ranks == 0 ? n / ranks : -1;
  const bool float_type =
      x.dtype() == DType::kF32 || x.dtype() == DType::kF16 || x.dtype() == DType::kBF16;
  if (!float_type || out.dtype() != x.dtype() || !x.is_contiguous() || !out.is_contiguous() ||
      x.rank() < 1 || out.rank() != x.rank() || out.shape().outer() != x.shape().outer() ||
      out.shape().inner() != expected) {
    return invalid_argument_error(
        fmt::format("{}: x {} and out {} do not fit {} over {} ranks (contiguous f32, f16 or bf16)",
                    label(call), describe(x), describe(out), name(op), ranks));
  }
  return Status::ok();
}

template <OpKind kOp>
Status collective_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(cudaStream_t stream, prepare(call, 1));
  SWITCHYARD_RETURN_IF_ERROR(check_operands(kOp, call));
  const int ranks = call.params.ranks;
  Communicator* comm = call.ctx.comm;
  const int size = comm != nullptr ? comm->size() : 1;
  if (size != ranks) {
    if (comm == nullptr) {
      return failed_precondition_error(fmt::format(
          "{}: planned for {} ranks, but the call has no communicator", label(call), ranks));
    }
    return invalid_argument_error(
        fmt::format("{}: planned for {} ranks, the communicator has {}", label(call), ranks, size));
  }
  if (comm == nullptr) {
    // One rank and no group: a copy.
    const TensorView &x = call.inputs[0], &out = call.outputs[0];
    if (x.first() == out.first()) return Status::ok();
    return launched(cudaMemcpyAsync(out.first(), x.first(),
                                    static_cast<std::size_t>(x.numel() * block_bytes(x.dtype())),
                                    cudaMemcpyDeviceToDevice, stream),
                    call);
  }
  if (comm->backend() != BackendId::kCuda) {
    return failed_precondition_error(fmt::format("{}: the communicator is {}'s, not cuda's",
                                                 label(call), name(comm->backend())));
  }
#if SWITCHYARD_HAVE_NCCL
  return run_nccl(kOp, call, static_cast<NcclCommunicator&>(*comm), stream);
#else
  return unimplemented_error(
      fmt::format("{}: this build has no NCCL, so cuda has no group collectives", label(call)));
#endif
}

}  // namespace

KernelFn collective_kernel(OpKind op) {
  switch (op) {
    case OpKind::kAllReduce: return &collective_kernel<OpKind::kAllReduce>;
    case OpKind::kAllGather: return &collective_kernel<OpKind::kAllGather>;
    case OpKind::kReduceScatter: return &collective_kernel<OpKind::kReduceScatter>;
    default: return nullptr;
  }
}

Result<std::vector<std::unique_ptr<Communicator>>> create_nccl_communicators(int ranks) {
  if (ranks < 1) {
    return invalid_argument_error(
        fmt::format("cuda: a group has at least one rank, not {}", ranks));
  }
#if SWITCHYARD_HAVE_NCCL
  int devices = 0;
  const cudaError_t e = cudaGetDeviceCount(&devices);
  if (e != cudaSuccess || devices == 0) {
    (void)cudaGetLastError();
    return unavailable_error("cuda: no CUDA device is present for an NCCL group");
  }
  if (ranks > devices) {
    return unavailable_error(
        fmt::format("cuda: an NCCL group of {} ranks needs {} GPUs; this machine has {}", ranks,
                    ranks, devices));
  }
  std::vector<ncclComm_t> comms(static_cast<std::size_t>(ranks));
  std::vector<int> ordinals(static_cast<std::size_t>(ranks));
  for (int r = 0; r < ranks; ++r) ordinals[static_cast<std::size_t>(r)] = r;
  SWITCHYARD_RETURN_IF_ERROR(
      nccl_error_or_ok(ncclCommInitAll(comms.data(), ranks, ordinals.data()),
                       fmt::format("cuda: making an NCCL group of {} ranks", ranks)));
  std::vector<std::unique_ptr<Communicator>> group;
  for (int r = 0; r < ranks; ++r) {
    group.push_back(
        std::make_unique<NcclCommunicator>(comms[static_cast<std::size_t>(r)], r, ranks));
  }
  return group;
#else
  return unimplemented_error("cuda: this build has no NCCL, so it makes no communicators");
#endif
}

}  // namespace switchyard::cuda
