// Executor: runs an ExecutionPlan. Planned shapes run on pre-resolved kernels with
// pre-built operand arrays: the per-node loop calls a function pointer and does no
// table lookup, map lookup, allocation or virtual call.
//
// Overview
//   An executor owns the arenas of one plan (one per backend and shape bucket,
//   sized by the plan's buffer plan) and the TensorView arrays every kernel call
//   reads. `run` binds the caller's input and output tensors, deduces the symbolic
//   sizes from the input shapes, picks the first bucket whose ranges hold them and
//   runs its steps in order. A size outside every bucket is planned on the spot
//   against the plan's table snapshot (run-time lookups, counted in
//   `stats().unplanned_runs`) unless `allow_unplanned_shapes` is off.
//
//   Stale plans are refused: when the plan was made against a published table
//   (generation > 0) and the published generation has moved on, `run` fails with
//   kFailedPrecondition naming both generations; plan again with the new snapshot.
//
//   CPU kernels parallelise through `ExecutorOptions::runner` (null: serial).
//   Each backend's memory is the BackendMemory it registered in the plan's table
//   (backend_memory.h); a caller may substitute its own per backend.
//   A failing kernel's Status comes back with the node's name, op and kernel.
//
// Example
//   auto plan = std::make_shared<const ExecutionPlan>(std::move(planned));
//   SWITCHYARD_ASSIGN_OR_RETURN(Executor exec, Executor::create(plan, {.runner = &pool}));
//   SWITCHYARD_RETURN_IF_ERROR(exec.run({x_view}, {y_view}));
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "switchyard/backend_memory.h"
#include "switchyard/kernel.h"
#include "switchyard/plan.h"

namespace switchyard {

// Wall time per step, accumulated over runs, for a caller that wants to know where
// the time goes (`switchyard run` splits it by op family). Profiling adds two clock
// reads per step; without a profile the dispatch loop has no timing at all. On a
// backend with streams a step's time is the time to queue it, not the device's:
// waiting for each step would measure the device at the price of the run's own
// throughput, which `switchyard run` reports beside the profile.
struct ExecProfile {
  // Indexed by node of the plan's graph (ExecutionPlan::graph()); sized on first use.
  std::vector<double> node_ns;
  // Copies between backends.
  double copy_ns = 0;
  // Note [Profiling a device]
  // A device backend's kernel call only queues work, so the time around it is the
  // host's cost of launching, not the kernel's. With wait_for_devices, each step
  // waits for its stream before its time is read: node_ns is then the node's
  // device time plus one launch latency, at the price of a device that idles
  // between nodes (the run is slower than an unprofiled one). On the host the
  // two are the same.
  bool wait_for_devices = false;
};

struct ExecutorOptions {
  ParallelRunner* runner = nullptr;
  // Null: no timing. Must outlive every run.
  ExecProfile* profile = nullptr;
  // Per backend; null means the memory the backend registered in the plan's
  // table (KernelBindingTable::backend_memory), if any.
  std::array<BackendMemory*, kBackendCount> memory{};
  // Per backend stream handed to kernels in ExecContext::stream and to copies.
  // Null: the executor makes one through the backend's memory
  // (BackendMemory::create_stream) when it first needs it and destroys it with
  // itself; a stream given here is the caller's to destroy, after the executor.
  std::array<void*, kBackendCount> streams{};
  bool allow_unplanned_shapes = true;
  // This rank's communicator for a tensor-parallel plan's collectives
  // (ExecContext::comm; collective.h); null for a plan of one rank. Must outlive
  // every run.
  Communicator* comm = nullptr;
  // Called after each constant that Executor::create uploads to another backend
  // (the weights, for a GPU), with the bytes uploaded so far and in all: a
  // progress bar for a load that moves gigabytes. Not called when nothing is
  // uploaded, nor later.
  std::function<void(std::int64_t done, std::int64_t total)> on_upload;
  // Note [Recorded runs]
  // Where every step of a bucket is a kernel of one backend whose memory records
  // streams (BackendMemory::can_capture), the third consecutive run that binds
  // the same sizes and the same caller tensors is recorded, and later runs with
  // that binding replay the recording: one host call instead of one launch per
  // step. The first run of a binding does the backend's once-per-shape work
  // (loading kernels, choosing library algorithms, growing scratch), which a
  // recording cannot hold; the second runs plainly too, because a binding seen
  // twice is often a re-run (a prompt after its warm-up) that will not come
  // again, and recording costs more than one plain run. A binding that holds for
  // three runs is a decode loop's, which replays it for hundreds. A new binding
  // drops the recording. A bucket whose recording fails (a kernel that waits or
  // allocates) runs plainly from then on. Profiled runs are never recorded.
  bool record_runs = true;
};

struct ExecStats {
  std::uint64_t runs = 0;
  // Runs whose sizes fell outside every planned bucket (run-time lookups).
  std::uint64_t unplanned_runs = 0;
  // The bucket the last run used.
  std::string last_bucket;
  // Runs recorded, and runs that replayed a recording (Note [Recorded runs]).
  std::uint64_t recordings = 0;
  std::uint64_t replays = 0;
  // Buckets whose recording failed, with the reason, which then run plainly.
  std::uint64_t recording_failures = 0;
  std::string last_recording_failure;
  // Host time of the last run up to its wait for the devices: binding the
  // tensors and queueing (or replaying) the steps, in nanoseconds.
  double last_queue_ns = 0;
  // Weights packed at creation for the siblings that read them packed (Note
  // [Prepacked weights]), and the bytes those copies hold.
  std::uint64_t packed_weights = 0;
  std::int64_t packed_bytes = 0;
};

class Executor {
 public:
  // Sets up arenas and operand arrays for every bucket of `plan` and uploads
  // constants to non-host backends. Fails with kUnavailable when a backend the plan
  // uses has no memory (neither registered in the table nor given in `options`), kResourceExhausted
  // when an arena cannot be allocated.
  [[nodiscard]] static Result<Executor> create(std::shared_ptr<const ExecutionPlan> plan,
                                               ExecutorOptions options = {});
  Executor(Executor&&) noexcept;
  Executor& operator=(Executor&&) noexcept;
  ~Executor();

  // Runs the plan once. `inputs` follow plan.inputs(), `outputs` plan.outputs();
  // each must have the planned dtype, be contiguous host memory and match the
  // planned shape (symbols consistently sized). Errors name the failing node.
  [[nodiscard]] Status run(std::span<const TensorView> inputs, std::span<const TensorView> outputs);

  // As run(), checking after every kernel step on a host-memory backend that its
  // output holds only finite values: kFailedPrecondition names the first node (in
  // step order) whose output holds a NaN or an infinity, the element and the value.
  // The run stops there. For finding where a non-finite value came from once run()
  // produced one (a NaN weight, a block scale that decodes to infinity): every
  // output is scanned, so it costs a read of every activation.
  [[nodiscard]] Status run_checking_finite(std::span<const TensorView> inputs,
                                           std::span<const TensorView> outputs);

  [[nodiscard]] const ExecStats& stats() const;
  [[nodiscard]] const ExecutionPlan& plan() const;

 private:
  struct State;
  explicit Executor(std::unique_ptr<State> state);
  std::unique_ptr<State> state_;
};

}  // namespace switchyard
