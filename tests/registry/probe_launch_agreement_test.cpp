// For every key of the built-in table, what a registry probe answers and what a
// launch does agree: a probe hit names the kernel dispatch (lookup_with_caps)
// resolves, and that kernel runs on real cases; once the key is masked, the probe
// misses and so does dispatch, and unmasking restores both.
#include <set>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "switchyard/dispatch.h"
#include "switchyard/kernel_mask.h"
#include "switchyard/registry.h"
#include "switchyard/verify.h"

namespace switchyard {
namespace {

TEST(ProbeLaunchAgreementTest, EveryProbeHitIsTheKernelThatLaunches) {
  Registry registry({.sink = [](std::string_view) {}});
  const TableSnapshot table = current_table();
  ASSERT_FALSE(table->empty());
  for (const KernelBindingTable::Slot& slot : table->slots()) {
    const std::string key = describe_key(slot.key, slot.dtypes, slot.backend);
    Result<const BindingEntry*> probed = probe_kernel(registry, *table,
                                                      {.key = slot.key,
                                                       .dtypes = slot.dtypes,
                                                       .backend = slot.backend,
                                                       .role = "agreement",
                                                       .fallback = "none"});
    Result<const BindingEntry*> dispatched =
        table->lookup_with_caps(slot.key, slot.dtypes, slot.backend);
    ASSERT_EQ(probed.is_ok(), dispatched.is_ok()) << key;
    ASSERT_TRUE(probed.is_ok()) << key << ": " << probed.status().to_string();
    EXPECT_EQ(*probed, *dispatched) << key;
    // The launch: the probed kernel runs on generated cases of this key, in its
    // backend's memory. A device backend compiled in without its device (CI has
    // no GPU) can only be probed here; tests/backends/cuda/ launch it on one.
    BackendMemory* memory = table->backend_memory(slot.backend);
    if (memory != nullptr && !memory->ready().is_ok()) continue;
    VerifyOptions options;
    options.memory[static_cast<std::size_t>(slot.backend)] = memory;
    const VerifyEntryReport launched = verify_entry(slot, **probed, options);
    EXPECT_NE(launched.failure, VerifyFailure::kKernelError) << key << ": " << launched.reason;
    EXPECT_FALSE(launched.cases.empty()) << key << ": " << launched.reason;
  }
  // Rows are deduplicated on (backend, op, role, weight dtype, site), so keys that
  // differ only in other operands share a row; every probe is counted.
  const SealReport report = registry.seal();
  EXPECT_TRUE(report.misses.empty());
  std::uint64_t probes = 0;
  for (const RegistryEntry& row : report.entries) probes += row.count;
  EXPECT_EQ(probes, table->key_count());
}

TEST(ProbeLaunchAgreementTest, AMaskedKeyMissesInProbeAndDispatchAlike) {
  // One key per op: masking is by backend:op:dtype, so this covers every op.
  std::set<OpKind> seen;
  // Held for the loop: publishing a mask replaces the current snapshot.
  const TableSnapshot unmasked = current_table();
  for (const KernelBindingTable::Slot& slot : unmasked->slots()) {
    const std::optional<OpKind> op = slot.key.static_op();
    if (!op || !seen.insert(*op).second) continue;
    const std::string pattern = fmt::format("{}:{}:*", name(slot.backend), name(*op));
    Result<KernelMask> mask = KernelMask::parse(pattern);
    ASSERT_TRUE(mask.is_ok()) << pattern;
    ASSERT_TRUE(set_kernel_mask(*mask).is_ok()) << pattern;
    const TableSnapshot masked = current_table();
    Registry registry({.sink = [](std::string_view) {}});
    Result<const BindingEntry*> probed = probe_kernel(
        registry, *masked,
        {.key = slot.key, .dtypes = slot.dtypes, .backend = slot.backend, .fallback = "none"});
    Result<const BindingEntry*> dispatched =
        masked->lookup_with_caps(slot.key, slot.dtypes, slot.backend);
    EXPECT_FALSE(probed.is_ok()) << pattern;
    EXPECT_FALSE(dispatched.is_ok()) << pattern;
    EXPECT_EQ(probed.status().code(), StatusCode::kNotFound);
    EXPECT_EQ(registry.seal().misses.size(), 1u) << pattern;
    ASSERT_TRUE(clear_kernel_mask().is_ok());
    EXPECT_TRUE(current_table()->backend_supports(slot.key, slot.dtypes, slot.backend)) << pattern;
  }
  EXPECT_GE(seen.size(), 20u);
}

}  // namespace
}  // namespace switchyard
