// What the CUDA tests share: the backend's memory, a skip where no device can be
// used, a stream and device memory that free themselves, random data, and one
// kernel of the table run on host data through device copies.
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <span>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/dispatch.h"
#include "switchyard/kernel.h"
#include "switchyard/tensor.h"

namespace switchyard::cuda_test {

inline BackendMemory& cuda_memory() {
  BackendMemory* memory = current_table()->backend_memory(BackendId::kCuda);
  SWITCHYARD_CHECK_MSG(memory != nullptr, "the cuda backend registered no memory");
  return *memory;
}

// Skips the test, with the backend's reason, where no device can be used.
#define REQUIRE_CUDA_DEVICE()                                                            \
  do {                                                                                   \
    if (Status ready = ::switchyard::cuda_test::cuda_memory().ready(); !ready.is_ok()) { \
      GTEST_SKIP() << "needs a CUDA device: " << ready.message();                        \
    }                                                                                    \
  } while (false)

// A stream for a test, destroyed with it.
class Stream {
 public:
  Stream() {
    Result<void*> s = cuda_memory().create_stream();
    EXPECT_TRUE(s.is_ok()) << s.status().to_string();
    stream_ = s.is_ok() ? *s : nullptr;
  }
  ~Stream() { cuda_memory().destroy_stream(stream_); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  [[nodiscard]] void* get() const { return stream_; }

 private:
  void* stream_ = nullptr;
};

// Device memory for a test, freed with it.
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::int64_t bytes) {
    Result<void*> p = cuda_memory().allocate(bytes);
    EXPECT_TRUE(p.is_ok()) << p.status().to_string();
    data_ = p.is_ok() ? *p : nullptr;
  }
  ~DeviceBuffer() { cuda_memory().deallocate(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  [[nodiscard]] void* get() const { return data_; }

 private:
  void* data_ = nullptr;
};

inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Runs `entry` (a CUDA kernel) on host data: uploads the inputs and the output
// (so a kernel that skips an element leaves the host's value), runs it on a new
// stream (as a rank of `comm`'s group where one is given), waits, and downloads
// the output. Quantized operands travel as their bytes.
inline Status run_entry(const BindingEntry& entry, std::span<const TensorView> host_inputs,
                        const TensorView& host_out, const OpParams& params,
                        Communicator* comm = nullptr) {
  BackendMemory& memory = cuda_memory();
  Stream stream;
  std::vector<std::unique_ptr<DeviceBuffer>> buffers;
  std::vector<TensorView> inputs;
  auto upload = [&](const TensorView& h) -> Result<TensorView> {
    SWITCHYARD_ASSIGN_OR_RETURN(const std::int64_t bytes, row_bytes(h.dtype(), h.numel()));
    buffers.push_back(std::make_unique<DeviceBuffer>(std::max<std::int64_t>(bytes, 1)));
    const TensorView d =
        TensorView::contiguous(buffers.back()->get(), h.dtype(), h.shape(), BackendId::kCuda);
    SWITCHYARD_RETURN_IF_ERROR(memory.copy(h, d, stream.get()));
    return d;
  };
  for (const TensorView& h : host_inputs) {
    SWITCHYARD_ASSIGN_OR_RETURN(TensorView d, upload(h));
    inputs.push_back(d);
  }
  SWITCHYARD_ASSIGN_OR_RETURN(TensorView out, upload(host_out));
  ExecContext ctx{.stream = stream.get(), .comm = comm};
  SWITCHYARD_RETURN_IF_ERROR(entry.fn({.inputs = inputs,
                                       .outputs = std::span<const TensorView>(&out, 1),
                                       .params = params,
                                       .ctx = ctx,
                                       .name = entry.name}));
  SWITCHYARD_RETURN_IF_ERROR(memory.synchronize(stream.get()));
  return memory.copy(out, host_out, stream.get());
}

// run_entry with the first CUDA kernel of the built-in table at the key.
inline Status run_kernel(OpKind op, const DTypeList& key, std::span<const TensorView> host_inputs,
                         const TensorView& host_out, const OpParams& params,
                         Communicator* comm = nullptr) {
  SWITCHYARD_ASSIGN_OR_RETURN(const BindingEntry* e,
                              current_table()->lookup(op, key, BackendId::kCuda));
  return run_entry(*e, host_inputs, host_out, params, comm);
}

}  // namespace switchyard::cuda_test
