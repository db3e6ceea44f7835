#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"

namespace switchyard {
namespace {

Status marker_kernel(const KernelCall&) { return Status::ok(); }

const DTypeList kF32x3{DType::kF32, DType::kF32, DType::kF32};

TEST(PublishedTableTest, BuiltinTableIsFinalizedAndHasTheCpuBackend) {
  TableSnapshot table = current_table();
  ASSERT_NE(table, nullptr);
  EXPECT_TRUE(table->is_finalized());
  EXPECT_GE(table->generation(), 1u);
  EXPECT_TRUE(table->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCpu));
  ASSERT_FALSE(compiled_backends().empty());
  EXPECT_EQ(compiled_backends()[0], BackendId::kCpu);
}

TEST(PublishedTableTest, UpdatePublishesANewGenerationAndLeavesOldSnapshotsIntact) {
  TableSnapshot before = current_table();
  const std::size_t before_size = before->size();
  Result<std::uint64_t> gen = update_table([](KernelBindingTable& t) {
    t.register_kernel(OpKind::kSum, {DType::kF64, DType::kF64}, BackendId::kCpu, &marker_kernel,
                      {.name = "published_table_test_marker"});
    return Status::ok();
  });
  ASSERT_TRUE(gen.is_ok()) << gen.status().to_string();
  EXPECT_GT(*gen, before->generation());
  EXPECT_EQ(current_generation(), *gen);
  EXPECT_EQ(current_table()->size(), before_size + 1);
  EXPECT_EQ(before->size(), before_size);  // the old snapshot never changes
}

TEST(PublishedTableTest, FailedEditPublishesNothing) {
  const std::uint64_t gen = current_generation();
  Result<std::uint64_t> r = update_table([](KernelBindingTable& t) {
    t.register_kernel(OpKind::kSum, {DType::kF64, DType::kF64}, BackendId::kCuda, nullptr,
                      {.name = "broken"});
    return Status::ok();
  });
  EXPECT_FALSE(r.is_ok());
  Result<std::uint64_t> refused =
      update_table([](KernelBindingTable&) { return failed_precondition_error("no"); });
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(current_generation(), gen);
}

// One distinct key per marker index (kDTypeCount^2 of them, more than we publish).
DTypeList marker_key(std::size_t m) {
  return {DType::kI32, static_cast<DType>(m % kDTypeCount), static_cast<DType>(m / kDTypeCount)};
}

// Readers look up continuously while a writer publishes hundreds of snapshots.
// The snapshot of generation base+g holds markers 0..g-1, so a reader can check
// that whatever it sees is complete.
TEST(PublishedTableTest, ConcurrentReadersAlwaysSeeACompleteTable) {
  Result<KernelBindingTable> base = make_builtin_table();
  ASSERT_TRUE(base.is_ok());
  const std::size_t base_size = base->size();
  const std::uint64_t base_gen = *publish_table(*base);

  constexpr int kPublishes = 300;
  static_assert(kPublishes < kDTypeCount * kDTypeCount);
  constexpr int kReaders = 4;
  std::atomic<bool> done{false};
  std::atomic<long> checks{0};
  std::atomic<long> failures{0};

  std::vector<std::thread> readers;
  for (int r = 0; r < kReaders; ++r) {
    readers.emplace_back([&] {
      std::uint64_t last_gen = 0;
      while (!done.load(std::memory_order_acquire)) {
        TableSnapshot t = current_table();
        const std::uint64_t gen = t->generation();
        const std::size_t markers = gen - base_gen;
        bool ok = t->is_finalized() && gen >= last_gen && t->size() == base_size + markers &&
                  t->backend_supports(OpKind::kMatmul, kF32x3, BackendId::kCpu);
        for (std::size_t m = 0; ok && m < markers; ++m) {
          ok = t->backend_supports(OpKind::kMax, marker_key(m), BackendId::kCpu);
        }
        if (!ok) failures.fetch_add(1);
        checks.fetch_add(1);
        last_gen = gen;
      }
    });
  }

  for (int i = 0; i < kPublishes; ++i) {
    Result<std::uint64_t> g = update_table([i](KernelBindingTable& t) {
      t.register_kernel(OpKind::kMax, marker_key(static_cast<std::size_t>(i)), BackendId::kCpu,
                        &marker_kernel, {.name = "concurrent_marker_" + std::to_string(i)});
      return Status::ok();
    });
    ASSERT_TRUE(g.is_ok()) << g.status().to_string();
    EXPECT_EQ(*g, base_gen + static_cast<std::uint64_t>(i) + 1);
  }
  done.store(true, std::memory_order_release);
  for (std::thread& t : readers) t.join();
  EXPECT_GT(checks.load(), 0);
  EXPECT_EQ(failures.load(), 0);
  // Leave the process with the plain builtin table for later tests.
  ASSERT_TRUE(publish_table(*make_builtin_table()).is_ok());
}

TEST(PublishedTableTest, InstallingAgainKeepsWhateverIsPublished) {
  const std::uint64_t before = current_generation();
  ASSERT_GT(before, 0u);
  bool built = false;
  Result<std::uint64_t> again = publish_initial_table([&]() -> Result<KernelBindingTable> {
    built = true;
    return KernelBindingTable();
  });
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  EXPECT_EQ(*again, before);
  EXPECT_FALSE(built) << "a table is published, so the builder must not run";
  Result<std::uint64_t> builtin = install_builtin_table();
  ASSERT_TRUE(builtin.is_ok());
  EXPECT_EQ(*builtin, before);
  EXPECT_EQ(current_generation(), before);
}

TEST(PublishedTableTest, TheBuiltinTableCarriesEachBackendsMemory) {
  TableSnapshot table = current_table();
  for (BackendId b : compiled_backends()) {
    BackendMemory* memory = table->backend_memory(b);
    ASSERT_NE(memory, nullptr) << name(b) << " registered no memory hooks";
    if (Status ready = memory->ready(); !ready.is_ok()) {
      // A device backend compiled in where its device is absent: every allocation
      // says so, as ready() does.
      EXPECT_EQ(ready.code(), StatusCode::kUnavailable) << ready.to_string();
      EXPECT_EQ(memory->allocate(100).status().code(), StatusCode::kUnavailable) << name(b);
      continue;
    }
    Result<void*> block = memory->allocate(100);
    ASSERT_TRUE(block.is_ok()) << block.status().to_string();
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(*block) % 64, 0u) << name(b);
    memory->deallocate(*block);
  }
  EXPECT_TRUE(table->backend_memory(kHostBackend)->host_addressable());
}

// Death tests run in a fresh process that has published nothing
// (tests/main.cpp).
TEST(PublishedTableDeathTest, ReadingBeforeAnyPublicationSaysWhatToCall) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH((void)current_table(), "install_builtin_table");
}

TEST(PublishedTableDeathTest, FirstPublicationIsTheInstalledOneAndIsGenerationOne) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const bool empty_before = current_generation() == 0;
        // A mask set before anything is published waits for the first table.
        Result<std::uint64_t> masked = set_kernel_mask(*KernelMask::parse("cpu:add:*"));
        const bool mask_deferred = masked.is_ok() && *masked == 0;
        Result<std::uint64_t> first = install_builtin_table();
        const bool ok = empty_before && mask_deferred && first.is_ok() && *first == 1 &&
                        current_generation() == 1 &&
                        !current_table()->backend_supports(OpKind::kAdd, kF32x3, BackendId::kCpu) &&
                        current_table()->backend_supports(OpKind::kMul, kF32x3, BackendId::kCpu);
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace switchyard
