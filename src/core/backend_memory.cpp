#include "switchyard/backend_memory.h"

#include <cstdlib>
#include <cstring>

#include <fmt/format.h>

namespace switchyard {
namespace {

class HostMemory final : public BackendMemory {
 public:
  Result<void*> allocate(std::int64_t bytes) override {
    if (bytes <= 0) return static_cast<void*>(nullptr);
    const auto size = static_cast<std::size_t>((bytes + 63) / 64 * 64);
    void* p = std::aligned_alloc(64, size);
    if (p == nullptr) {
      return resource_exhausted_error(fmt::format("cannot allocate {} bytes", bytes));
    }
    return p;
  }
  void deallocate(void* pointer) override { std::free(pointer); }
  Status copy(const TensorView& src, const TensorView& dst, void* /*stream*/) override {
    if (src.dtype() != dst.dtype() || !(src.shape() == dst.shape()) || !src.is_contiguous() ||
        !dst.is_contiguous()) {
      return invalid_argument_error(
          fmt::format("host copy: {} into {}", describe(src), describe(dst)));
    }
    SWITCHYARD_ASSIGN_OR_RETURN(std::int64_t bytes, row_bytes(src.dtype(), src.numel()));
    if (bytes > 0) std::memmove(dst.first(), src.first(), static_cast<std::size_t>(bytes));
    return Status::ok();
  }
  bool host_addressable() const override { return true; }
};

}  // namespace

BackendMemory& host_memory() {
  static HostMemory memory;
  return memory;
}

}  // namespace switchyard
