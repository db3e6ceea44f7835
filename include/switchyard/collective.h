// Ranks of a tensor-parallel plan and how their collectives meet.
//
// Note [Collectives]
// A tensor-parallel model runs as one plan per rank, each holding its share of the
// weights (docs/multi-gpu.md). Where the ranks' partial results must be combined,
// the plan has a collective node: all_reduce, all_gather or reduce_scatter
// (op.def's collective family). Collectives are ops with bindings per backend like
// every other op, so a backend without one is a miss the registry names at load,
// not a plan that silently moves a tensor through the host.
//
// A collective kernel finds its group through ExecContext::comm: a Communicator of
// the backend whose kernels can use it (backend()). The CPU's kernels take a
// HostCommunicator: ranks as threads of one process that meet in host memory,
// which is how the planning and the numerics of a split model are tested without
// several devices. cuda's take an NCCL communicator (src/backends/cuda).
//
// Every rank must call the same collectives in the same order, which running each
// rank's plan step by step does. A rank that fails must abort the group: every
// rank that waits in a collective, or enters one later, then returns the abort's
// error instead of waiting for a peer that will never come.
//
// Example (two simulated ranks; run_rank runs one rank's plan with
// ExecContext::comm = &group.rank(r))
//   HostRankGroup group(2);
//   std::vector<std::jthread> threads;
//   for (int r = 0; r < 2; ++r) threads.emplace_back([&, r] {
//     Status s = run_rank(r, group.rank(r));
//     if (!s.is_ok()) group.abort(s);
//   });
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/status.h"

namespace switchyard {

// One rank's handle on its group.
class Communicator {
 public:
  virtual ~Communicator() = default;
  [[nodiscard]] virtual int rank() const = 0;
  [[nodiscard]] virtual int size() const = 0;
  // The backend whose collective kernels can use this communicator.
  [[nodiscard]] virtual BackendId backend() const = 0;
  // Ends the group's collectives: every rank waiting in one, and every later one,
  // returns `why` (kFailedPrecondition when `why` is ok). The first abort's reason is kept.
  virtual void abort(const Status& why) = 0;
};

class HostRankGroup;

// A rank of a HostRankGroup: the CPU's collective kernels exchange pointers to
// host buffers through it.
class HostCommunicator final : public Communicator {
 public:
  [[nodiscard]] int rank() const override { return rank_; }
  [[nodiscard]] int size() const override;
  [[nodiscard]] BackendId backend() const override { return BackendId::kCpu; }
  void abort(const Status& why) override;

  // Publishes this rank's buffers (the same number on every rank) and waits until
  // every rank has published; then published(s)[i] is rank s's buffer i, until
  // the barrier() that every rank passes after its last read of them.
  [[nodiscard]] Status publish(std::span<const void* const> buffers);
  [[nodiscard]] std::span<const void* const> published(int rank) const;
  // Waits until every rank arrives. The abort's error if the group was aborted.
  [[nodiscard]] Status barrier();

 private:
  friend class HostRankGroup;
  HostCommunicator(HostRankGroup& group, int rank) : group_(&group), rank_(rank) {}
  HostRankGroup* group_;
  int rank_;
};

// `ranks` simulated ranks in one process, each to be driven by its own thread.
class HostRankGroup {
 public:
  // kInvalidArgument for fewer than one rank or more than kMaxRanks.
  [[nodiscard]] static Result<std::unique_ptr<HostRankGroup>> create(int ranks);
  static constexpr int kMaxRanks = 64;

  HostRankGroup(const HostRankGroup&) = delete;
  HostRankGroup& operator=(const HostRankGroup&) = delete;

  [[nodiscard]] int size() const { return static_cast<int>(ranks_.size()); }
  // Rank r's communicator, 0 <= r < size().
  [[nodiscard]] HostCommunicator& rank(int r);
  void abort(const Status& why);
  // Whether abort() was called; the group refuses every collective until reset().
  [[nodiscard]] bool aborted() const;
  // Makes an aborted group usable again. Only while no rank is in a collective
  // (after the ranks' threads have returned).
  void reset();

 private:
  friend class HostCommunicator;
  explicit HostRankGroup(int ranks);
  Status wait_for_all();

  std::vector<HostCommunicator> ranks_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_;
  int waiting_ = 0;
  std::uint64_t generation_ = 0;
  Status abort_status_;
  bool aborted_ = false;
  // published_[rank]: that rank's buffers of the collective in progress.
  std::vector<std::vector<const void*>> published_;
};

}  // namespace switchyard
