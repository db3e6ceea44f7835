// The CPU's collectives: ranks as threads of one process (HostRankGroup), each
// reading its peers' buffers in host memory. Note [Collectives] in collective.h.
//
// Note [Sums in rank order]
// An element of a sum over ranks is added up in rank order, rank 0 first, in f32
// (and rounded once to f16 or bf16), whichever rank computes it: every rank ends
// with the same bits, as a tensor-parallel plan needs (each rank goes on from its
// copy of the sum, and the copies must not drift apart).
//
// Note [Host all_reduce in two phases]
// all_reduce splits the elements into one chunk per rank. Each rank sums its own
// chunk over every rank's input into its output, waits for the others, then
// copies every other chunk from the output of the rank that summed it, and waits
// again before anyone moves on. Each rank adds up 1/N of the elements, and the
// kernel stays correct when a rank's output is its input's memory: in the first
// phase a rank writes only its own chunk and reads only its own chunk of its
// peers; in the second it reads only what the peers wrote in the first.
#include <array>
#include <cstring>

#include "backends/cpu/layout/layout.h"
#include "switchyard/collective.h"

namespace switchyard::cpu {
namespace {

// The caller's rank, or null for a single rank (no group, or a group of one).
Result<HostCommunicator*> host_rank(const KernelCall& call, std::string_view kernel) {
  const int ranks = call.params.ranks;
  Communicator* comm = call.ctx.comm;
  const int size = comm != nullptr ? comm->size() : 1;
  if (size != ranks) {
    if (comm == nullptr) {
      return failed_precondition_error(
          fmt::format("{}: planned for {} ranks, but the call has no communicator", kernel, ranks));
    }
    return invalid_argument_error(
        fmt::format("{}: planned for {} ranks, the communicator has {}", kernel, ranks, size));
  }
  if (size == 1) return nullptr;
  if (comm->backend() != BackendId::kCpu) {
    return failed_precondition_error(
        fmt::format("{}: the communicator is {}'s, not the cpu's", kernel, name(comm->backend())));
  }
  return static_cast<HostCommunicator*>(comm);
}

// x [.., n] -> out [.., n * ranks] (all_gather), [.., n / ranks] (reduce_scatter)
// or [.., n] (all_reduce), both contiguous and of the kernel's dtype.
template <typename S, OpKind kOp>
Status check_operands(const KernelCall& call, std::string_view kernel) {
  SWITCHYARD_RETURN_IF_ERROR(check_arity(call, 1, 1, kernel));
  const TensorView& x = call.inputs[0];
  const TensorView& out = call.outputs[0];
  for (const TensorView* t : {&x, &out}) {
    SWITCHYARD_RETURN_IF_ERROR(check_dtype(*t, kDTypeOf<S>, kernel));
    SWITCHYARD_RETURN_IF_ERROR(check_contiguous(*t, kernel));
  }
  const std::int64_t ranks = call.params.ranks;
  const std::int64_t n = x.rank() > 0 ? x.shape().inner() : 0;
  std::int64_t expected = n;
  if (kOp == OpKind::kAllGather) expected = n * ranks;
  if (kOp == OpKind::kReduceScatter) expected = ranks > 0 && n % ranks == 0 ? n / ranks : -1;
  if (ranks < 1 || x.rank() < 1 || out.rank() != x.rank() ||
      out.shape().outer() != x.shape().outer() || out.shape().inner() != expected) {
    return invalid_argument_error(fmt::format("{}: x {} and out {} do not fit {} over {} ranks",
                                              kernel, x.shape().to_string(),
                                              out.shape().to_string(), name(kOp), ranks));
  }
  return Status::ok();
}

// One rank, or none: out is x.
template <typename S>
void copy_through(const KernelCall& call) {
  const S* x = call.inputs[0].template first_as<S>();
  S* out = call.outputs[0].template first_as<S>();
  if (x == out) return;
  call.ctx.parallel_for(
      call.inputs[0].numel(), kElementGrain, [&](std::int64_t begin, std::int64_t end) {
        std::memcpy(out + begin, x + begin, static_cast<std::size_t>(end - begin) * sizeof(S));
      });
}

// The checks every collective starts with: its operands, then its rank in the
// group; for a single rank, the copy that is the whole op, and null.
template <typename S, OpKind kOp>
Result<HostCommunicator*> enter(const KernelCall& call) {
  const std::string_view kernel = kernel_label(call);
  SWITCHYARD_RETURN_IF_ERROR((check_operands<S, kOp>(call, kernel)));
  SWITCHYARD_ASSIGN_OR_RETURN(HostCommunicator * comm, host_rank(call, kernel));
  if (comm == nullptr) copy_through<S>(call);
  return comm;
}

// Buffer `index` of every rank, as published.
template <typename S>
std::array<const S*, HostRankGroup::kMaxRanks> peer_buffers(const HostCommunicator& comm,
                                                            int index) {
  std::array<const S*, HostRankGroup::kMaxRanks> buffers{};
  for (int s = 0; s < comm.size(); ++s) {
    buffers[static_cast<std::size_t>(s)] =
        static_cast<const S*>(comm.published(s)[static_cast<std::size_t>(index)]);
  }
  return buffers;
}

// Note [Sums in rank order]
template <typename S>
S sum_in_rank_order(const std::array<const S*, HostRankGroup::kMaxRanks>& in, int ranks,
                    std::int64_t i) {
  float sum = to_f32(in[0][i]);
  for (int s = 1; s < ranks; ++s) sum += to_f32(in[static_cast<std::size_t>(s)][i]);
  return from_f32<S>(sum);
}

template <typename S>
Status all_reduce_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(HostCommunicator * comm, (enter<S, OpKind::kAllReduce>(call)));
  if (comm == nullptr) return Status::ok();
  // Note [Host all_reduce in two phases]
  S* out = call.outputs[0].first_as<S>();
  const void* mine[] = {call.inputs[0].first_as<S>(), out};
  SWITCHYARD_RETURN_IF_ERROR(comm->publish(mine));
  const int ranks = comm->size();
  const std::int64_t n = call.inputs[0].numel();
  const auto chunk_begin = [&](int c) { return n * c / ranks; };
  const std::int64_t begin = chunk_begin(comm->rank());
  const auto in = peer_buffers<S>(*comm, 0);
  call.ctx.parallel_for(chunk_begin(comm->rank() + 1) - begin, kElementGrain,
                        [&](std::int64_t lo, std::int64_t hi) {
                          for (std::int64_t i = begin + lo; i < begin + hi; ++i) {
                            out[i] = sum_in_rank_order(in, ranks, i);
                          }
                        });
  SWITCHYARD_RETURN_IF_ERROR(comm->barrier());
  const auto summed = peer_buffers<S>(*comm, 1);
  for (int s = 0; s < ranks; ++s) {
    if (s == comm->rank()) continue;
    const std::int64_t b = chunk_begin(s);
    std::memcpy(out + b, summed[static_cast<std::size_t>(s)] + b,
                static_cast<std::size_t>(chunk_begin(s + 1) - b) * sizeof(S));
  }
  return comm->barrier();
}

template <typename S>
Status all_gather_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(HostCommunicator * comm, (enter<S, OpKind::kAllGather>(call)));
  if (comm == nullptr) return Status::ok();
  const void* mine[] = {call.inputs[0].first_as<S>()};
  SWITCHYARD_RETURN_IF_ERROR(comm->publish(mine));
  const int ranks = comm->size();
  const std::int64_t n = call.inputs[0].shape().inner();
  S* out = call.outputs[0].first_as<S>();
  const auto in = peer_buffers<S>(*comm, 0);
  // One task per (row, rank) piece.
  call.ctx.parallel_for(
      call.inputs[0].shape().outer() * ranks, row_grain(n), [&](std::int64_t lo, std::int64_t hi) {
        for (std::int64_t p = lo; p < hi; ++p) {
          const std::int64_t row = p / ranks;
          const int s = static_cast<int>(p % ranks);
          std::memcpy(out + (row * ranks + s) * n, in[static_cast<std::size_t>(s)] + row * n,
                      static_cast<std::size_t>(n) * sizeof(S));
        }
      });
  return comm->barrier();
}

template <typename S>
Status reduce_scatter_kernel(const KernelCall& call) {
  SWITCHYARD_ASSIGN_OR_RETURN(HostCommunicator * comm, (enter<S, OpKind::kReduceScatter>(call)));
  if (comm == nullptr) return Status::ok();
  const void* mine[] = {call.inputs[0].first_as<S>()};
  SWITCHYARD_RETURN_IF_ERROR(comm->publish(mine));
  const int ranks = comm->size();
  const std::int64_t n = call.outputs[0].shape().inner();
  const std::int64_t column = n * comm->rank();
  S* out = call.outputs[0].first_as<S>();
  const auto in = peer_buffers<S>(*comm, 0);
  call.ctx.parallel_for(call.outputs[0].shape().outer(), row_grain(n),
                        [&](std::int64_t lo, std::int64_t hi) {
                          for (std::int64_t row = lo; row < hi; ++row) {
                            const std::int64_t from = row * n * ranks + column;
                            for (std::int64_t j = 0; j < n; ++j) {
                              out[row * n + j] = sum_in_rank_order(in, ranks, from + j);
                            }
                          }
                        });
  return comm->barrier();
}

template <typename S>
KernelFn collective_for(OpKind op) {
  switch (op) {
    case OpKind::kAllReduce: return &all_reduce_kernel<S>;
    case OpKind::kAllGather: return &all_gather_kernel<S>;
    case OpKind::kReduceScatter: return &reduce_scatter_kernel<S>;
    default: return nullptr;
  }
}

}  // namespace

KernelFn collective_kernel(OpKind op, DType dtype) {
  switch (dtype) {
    case DType::kF32: return collective_for<float>(op);
    case DType::kF16: return collective_for<F16>(op);
    case DType::kBF16: return collective_for<BF16>(op);
    default: return nullptr;
  }
}

}  // namespace switchyard::cpu
