// The harness catches deliberately wrong kernels, each for the right reason, and
// passes correct ones; the built-in CPU table conforms.
#include <atomic>
#include <cmath>
#include <cstring>
#include <set>

#include <gtest/gtest.h>

#include "switchyard/backends.h"
#include "switchyard/dispatch.h"
#include "switchyard/verify.h"

namespace switchyard {
namespace {

constexpr DType kF32 = DType::kF32;

// Contiguous f32 add with a twist chosen by `Mode`.
enum class Mode {
  kCorrect,
  kOneUlpHigh,
  kWritePastEnd,
  kWriteBeforeStart,
  kNaN,
  kSkipLast,
  kFlakyAcrossRuns,
  kThreadDependent,
  kRefuse,
  kWriteInput,
  kScaledWrong,
  kIgnoresStrides,
  kDropsNaN,
  kClampsInfinity,
};

std::atomic<int> g_calls{0};

template <Mode M>
Status test_add(const KernelCall& call) {
  if (call.inputs.size() != 2 || call.outputs.size() != 1) {
    return invalid_argument_error("test_add: arity");
  }
  if (M == Mode::kRefuse) return unimplemented_error("test_add refuses everything");
  const TensorView& a = call.inputs[0];
  const TensorView& b = call.inputs[1];
  const TensorView& out = call.outputs[0];
  if (M != Mode::kIgnoresStrides &&
      (!a.is_contiguous() || !b.is_contiguous() || !(a.shape() == out.shape()))) {
    return invalid_argument_error("test_add: contiguous operands of one shape");
  }
  const float* pa = a.first_as<const float>();
  const float* pb = b.first_as<const float>();
  float* po = out.first_as<float>();
  const std::int64_t n = out.numel();
  const int threads = call.ctx.num_threads();
  call.ctx.parallel_for(n, 4, [&](std::int64_t begin, std::int64_t end) {
    for (std::int64_t i = begin; i < end; ++i) {
      float r = pa[i] + pb[i];
      if (M == Mode::kOneUlpHigh) r = std::nextafter(r, INFINITY);
      if (M == Mode::kScaledWrong) r = pa[i] + 1.5f * pb[i];
      if (M == Mode::kSkipLast && i == n - 1) continue;
      // As a maximum that returns its second operand would: NaN becomes b.
      if (M == Mode::kDropsNaN && std::isnan(r)) r = std::isnan(pb[i]) ? 0.0f : pb[i];
      if (M == Mode::kClampsInfinity && std::isinf(r)) r = std::copysign(3.0e38f, r);
      po[i] = r;
    }
  });
  if (M == Mode::kWritePastEnd) po[n] = 0.0f;
  if (M == Mode::kWriteBeforeStart) po[-1] = 0.0f;
  if (M == Mode::kNaN) po[n / 2] = std::nanf("");
  if (M == Mode::kFlakyAcrossRuns && (g_calls.fetch_add(1) % 2 == 1)) {
    po[0] = std::nextafter(po[0], INFINITY);
  }
  if (M == Mode::kThreadDependent && threads > 1) po[0] = std::nextafter(po[0], INFINITY);
  if (M == Mode::kWriteInput) const_cast<float*>(pa)[0] += 1.0f;
  return Status::ok();
}

PrecisionGuarantee exact(bool stable = true, bool threads = true) {
  return PrecisionGuarantee::bounded(stable, threads, 0.5, std::nullopt, std::nullopt);
}

// A finalized one-key table holding `fn` with `precision` (and `more` siblings).
KernelBindingTable table_with(KernelFn fn, PrecisionGuarantee precision,
                              std::string name = "add_f32__test", std::uint32_t revision = 1) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, {kF32, kF32, kF32}, BackendId::kCpu, fn,
                        {.name = std::move(name), .precision = precision, .revision = revision});
  EXPECT_TRUE(table.finalize().is_ok());
  return table;
}

VerifyEntryReport verify_one(KernelFn fn, PrecisionGuarantee precision) {
  const KernelBindingTable table = table_with(fn, precision);
  std::vector<VerifyEntryReport> reports = verify_table(table);
  EXPECT_EQ(reports.size(), 1u);
  return reports.empty() ? VerifyEntryReport{} : reports[0];
}

TEST(VerifyHarnessTest, CorrectKernelPasses) {
  const VerifyEntryReport r = verify_one(&test_add<Mode::kCorrect>, exact());
  EXPECT_EQ(r.verdict, VerifyVerdict::kPass) << r.reason;
  EXPECT_EQ(r.failure, VerifyFailure::kNone);
  EXPECT_GE(r.cases.size(), 4u);
  EXPECT_TRUE(r.bit_stable_checked);
  EXPECT_TRUE(r.thread_determinism_checked);
  EXPECT_LT(r.worst_nmse, 1e-12);
  EXPECT_EQ(r.kernel, "add_f32__test");
}

TEST(VerifyHarnessTest, OneUlpOffFailsAHalfUlpClaimButPassesAOneUlpClaim) {
  const VerifyEntryReport tight = verify_one(&test_add<Mode::kOneUlpHigh>, exact());
  EXPECT_EQ(tight.verdict, VerifyVerdict::kFail);
  EXPECT_EQ(tight.failure, VerifyFailure::kBoundExceeded) << tight.reason;
  const VerifyEntryReport loose =
      verify_one(&test_add<Mode::kOneUlpHigh>,
                 PrecisionGuarantee::bounded(true, true, 1.5, std::nullopt, std::nullopt));
  EXPECT_EQ(loose.verdict, VerifyVerdict::kPass) << loose.reason;
  // A relative bound of 2^-22 of |a + b| holds one ulp (2^-23 relative at most).
  const VerifyEntryReport rel =
      verify_one(&test_add<Mode::kOneUlpHigh>,
                 PrecisionGuarantee::bounded(true, true, std::nullopt, 0x1p-22, std::nullopt));
  EXPECT_EQ(rel.verdict, VerifyVerdict::kPass) << rel.reason;
}

TEST(VerifyHarnessTest, OutOfBoundsWritesAreCaughtOnBothSides) {
  for (KernelFn fn : {&test_add<Mode::kWritePastEnd>, &test_add<Mode::kWriteBeforeStart>}) {
    const VerifyEntryReport r = verify_one(fn, exact());
    EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
    EXPECT_EQ(r.failure, VerifyFailure::kOutOfBoundsWrite) << r.reason;
  }
}

TEST(VerifyHarnessTest, NaNAndUnwrittenElementsFail) {
  for (KernelFn fn : {&test_add<Mode::kNaN>, &test_add<Mode::kSkipLast>}) {
    // Even an unaudited kernel fails on a NaN.
    for (const PrecisionGuarantee& p : {exact(), PrecisionGuarantee{}}) {
      const VerifyEntryReport r = verify_one(fn, p);
      EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
      EXPECT_EQ(r.failure, VerifyFailure::kNaN) << r.reason;
    }
  }
}

// Note [Poisoned inputs]: a kernel correct on finite inputs that turns a NaN or
// an infinity into a finite number fails, whatever it claims.
TEST(VerifyHarnessTest, AKernelThatDropsNonFiniteValuesFails) {
  for (KernelFn fn : {&test_add<Mode::kDropsNaN>, &test_add<Mode::kClampsInfinity>}) {
    for (const PrecisionGuarantee& p : {exact(), PrecisionGuarantee{}}) {
      const VerifyEntryReport r = verify_one(fn, p);
      EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
      EXPECT_EQ(r.failure, VerifyFailure::kNonFiniteDropped) << r.reason;
      EXPECT_NE(r.reason.find("poisoned"), std::string::npos) << r.reason;
      // The regular cases passed: only the poisoned one failed.
      for (const VerifyCaseResult& c : r.cases) EXPECT_EQ(c.failure, VerifyFailure::kNone);
    }
  }
  EXPECT_EQ(name(VerifyFailure::kNonFiniteDropped), "non-finite-dropped");
}

TEST(VerifyHarnessTest, NonDeterminismAcrossRunsBreaksABitStableClaim) {
  const PrecisionGuarantee loose =
      PrecisionGuarantee::bounded(true, false, 2.0, std::nullopt, std::nullopt);
  const VerifyEntryReport r = verify_one(&test_add<Mode::kFlakyAcrossRuns>, loose);
  EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
  EXPECT_EQ(r.failure, VerifyFailure::kNotBitStable) << r.reason;
  // Without the claim, the same kernel is within its bound and passes.
  const VerifyEntryReport unclaimed =
      verify_one(&test_add<Mode::kFlakyAcrossRuns>,
                 PrecisionGuarantee::bounded(false, false, 2.0, std::nullopt, std::nullopt));
  EXPECT_EQ(unclaimed.verdict, VerifyVerdict::kPass) << unclaimed.reason;
  EXPECT_FALSE(unclaimed.bit_stable_checked);
}

TEST(VerifyHarnessTest, ThreadCountDependenceBreaksAThreadDeterminismClaim) {
  const VerifyEntryReport r =
      verify_one(&test_add<Mode::kThreadDependent>,
                 PrecisionGuarantee::bounded(true, true, 2.0, std::nullopt, std::nullopt));
  EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
  EXPECT_EQ(r.failure, VerifyFailure::kNotThreadDeterministic) << r.reason;
  // Bit-stable at one thread count is still true, and that claim alone passes.
  const VerifyEntryReport stable_only =
      verify_one(&test_add<Mode::kThreadDependent>,
                 PrecisionGuarantee::bounded(true, false, 2.0, std::nullopt, std::nullopt));
  EXPECT_EQ(stable_only.verdict, VerifyVerdict::kPass) << stable_only.reason;
}

TEST(VerifyHarnessTest, KernelErrorsAndInputWritesFail) {
  const VerifyEntryReport refused = verify_one(&test_add<Mode::kRefuse>, exact());
  EXPECT_EQ(refused.failure, VerifyFailure::kKernelError);
  EXPECT_NE(refused.reason.find("refuses everything"), std::string::npos) << refused.reason;
  const VerifyEntryReport writer = verify_one(&test_add<Mode::kWriteInput>, PrecisionGuarantee{});
  EXPECT_EQ(writer.verdict, VerifyVerdict::kFail);
  EXPECT_EQ(writer.failure, VerifyFailure::kInputModified) << writer.reason;
}

TEST(VerifyHarnessTest, NoBoundClaimsAndUnauditedEntriesFaceTheNmseGate) {
  const PrecisionGuarantee no_bound = PrecisionGuarantee::no_bound(false, false);
  EXPECT_EQ(verify_one(&test_add<Mode::kCorrect>, no_bound).verdict, VerifyVerdict::kPass);
  const VerifyEntryReport wrong = verify_one(&test_add<Mode::kScaledWrong>, no_bound);
  EXPECT_EQ(wrong.verdict, VerifyVerdict::kFail);
  EXPECT_EQ(wrong.failure, VerifyFailure::kNmseExceeded) << wrong.reason;
  EXPECT_EQ(verify_one(&test_add<Mode::kScaledWrong>, PrecisionGuarantee{}).failure,
            VerifyFailure::kNmseExceeded);
  // A correct unaudited kernel is reported as unaudited, never as a pass.
  const VerifyEntryReport unaudited = verify_one(&test_add<Mode::kCorrect>, PrecisionGuarantee{});
  EXPECT_EQ(unaudited.verdict, VerifyVerdict::kUnaudited);
  EXPECT_FALSE(unaudited.bit_stable_checked);
}

TEST(VerifyHarnessTest, EverySiblingIsVerified) {
  KernelBindingTable table;
  const DTypeList key{kF32, kF32, kF32};
  table.register_kernel(OpKind::kAdd, key, BackendId::kCpu, &test_add<Mode::kCorrect>,
                        {.name = "add_f32__test_good", .precision = exact()});
  table.register_kernel(OpKind::kAdd, key, BackendId::kCpu, &test_add<Mode::kOneUlpHigh>,
                        {.name = "add_f32__test_bad", .precision = exact()});
  table.register_kernel(OpKind::kAdd, key, BackendId::kCuda, &test_add<Mode::kCorrect>,
                        {.name = "add_f32__test_cuda", .precision = exact()});
  ASSERT_TRUE(table.finalize().is_ok());
  const std::vector<VerifyEntryReport> all = verify_table(table);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].verdict, VerifyVerdict::kPass);
  EXPECT_EQ(all[1].verdict, VerifyVerdict::kFail);
  EXPECT_EQ(all[1].kernel, "add_f32__test_bad");
  // Device memory is not host memory: skipped with a reason, not passed.
  EXPECT_EQ(all[2].verdict, VerifyVerdict::kSkipped);
  EXPECT_FALSE(all[2].reason.empty());
  EXPECT_EQ(verify_table(table, {.backend = BackendId::kCpu}).size(), 2u);
  EXPECT_TRUE(verify_table(table, {.op = OpKind::kMul}).empty());
}

// A stand-in device: host memory that claims not to be, with streams, so that the
// harness's device path (Note [Verifying on a device]) runs without a GPU.
class StandInDevice final : public BackendMemory {
 public:
  Result<void*> allocate(std::int64_t bytes) override {
    SWITCHYARD_RETURN_IF_ERROR(ready());
    return host_memory().allocate(bytes);
  }
  void deallocate(void* pointer) override { host_memory().deallocate(pointer); }
  Status copy(const TensorView& src, const TensorView& dst, void* stream) override {
    ++copies;
    EXPECT_NE(stream, nullptr) << "the harness copies on its stream";
    return host_memory().copy(src, dst, stream);
  }
  bool host_addressable() const override { return false; }
  Status ready() const override {
    return absent ? unavailable_error("no stand-in device") : Status::ok();
  }
  Result<void*> create_stream() override {
    ++made;
    return static_cast<void*>(this);
  }
  void destroy_stream(void*) override { ++destroyed; }
  int copies = 0, made = 0, destroyed = 0;
  bool absent = false;
};

// Device entries run on device copies of each case, and the guards, the poison and
// the input check still catch what they catch on the host.
TEST(VerifyHarnessTest, DeviceEntriesRunOnCopiesWithTheSameGuards) {
  StandInDevice device;
  KernelBindingTable table;
  table.add_backend(BackendId::kCuda, device);
  const DTypeList key{kF32, kF32, kF32};
  table.register_kernel(OpKind::kAdd, key, BackendId::kCuda, &test_add<Mode::kCorrect>,
                        {.name = "add_f32__dev_good", .precision = exact()});
  table.register_kernel(OpKind::kAdd, key, BackendId::kCuda, &test_add<Mode::kWritePastEnd>,
                        {.name = "add_f32__dev_past_end", .precision = exact()});
  table.register_kernel(OpKind::kAdd, key, BackendId::kCuda, &test_add<Mode::kSkipLast>,
                        {.name = "add_f32__dev_skip_last", .precision = exact()});
  table.register_kernel(OpKind::kAdd, key, BackendId::kCuda, &test_add<Mode::kWriteInput>,
                        {.name = "add_f32__dev_write_input", .precision = exact()});
  ASSERT_TRUE(table.finalize().is_ok());
  const std::vector<VerifyEntryReport> r = verify_table(table);
  ASSERT_EQ(r.size(), 4u);
  EXPECT_EQ(r[0].verdict, VerifyVerdict::kPass) << r[0].reason;
  EXPECT_EQ(r[1].failure, VerifyFailure::kOutOfBoundsWrite) << r[1].reason;
  EXPECT_EQ(r[2].failure, VerifyFailure::kNaN) << r[2].reason;
  EXPECT_EQ(r[3].failure, VerifyFailure::kInputModified) << r[3].reason;
  EXPECT_GT(device.copies, 0);
  EXPECT_EQ(device.made, 4);
  EXPECT_EQ(device.destroyed, 4);

  // Without its device the entries are skipped, saying why.
  device.absent = true;
  const std::vector<VerifyEntryReport> skipped = verify_table(table);
  ASSERT_EQ(skipped.size(), 4u);
  EXPECT_EQ(skipped[0].verdict, VerifyVerdict::kSkipped);
  EXPECT_NE(skipped[0].reason.find("no stand-in device"), std::string::npos) << skipped[0].reason;
}

TEST(VerifyHarnessTest, KeysOutsideTheContractAreSkippedWithTheReason) {
  KernelBindingTable table;
  table.register_kernel(OpKind::kAdd, {kF32, kF32}, BackendId::kCpu, &test_add<Mode::kCorrect>,
                        {.name = "add_f32__two_operands", .precision = exact()});
  ASSERT_TRUE(table.finalize().is_ok());
  const std::vector<VerifyEntryReport> r = verify_table(table);
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(r[0].verdict, VerifyVerdict::kSkipped);
  EXPECT_NE(r[0].reason.find("no case generator"), std::string::npos) << r[0].reason;
}

TEST(VerifyHarnessTest, SameSeedSameInputs) {
  const KernelBindingTable table = table_with(&test_add<Mode::kCorrect>, exact());
  const auto a = verify_table(table, {.seed = 11});
  const auto b = verify_table(table, {.seed = 11});
  const auto c = verify_table(table, {.seed = 12});
  EXPECT_EQ(a[0].worst_max_abs, b[0].worst_max_abs);
  EXPECT_EQ(a[0].worst_nmse, b[0].worst_nmse);
  EXPECT_NE(a[0].worst_nmse, c[0].worst_nmse);
}

TEST(VerifyHarnessTest, AKernelThatClaimsStridesButIgnoresThemFails) {
  KernelBindingTable table;
  table.register_kernel(
      OpKind::kAdd, {kF32, kF32, kF32}, BackendId::kCpu, &test_add<Mode::kIgnoresStrides>,
      {.name = "add_f32__test_strides", .caps = {.strided_input = true}, .precision = exact()});
  ASSERT_TRUE(table.finalize().is_ok());
  const VerifyEntryReport r = verify_table(table)[0];
  EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
  // The gaps of a strided input hold NaN, so reading them shows.
  EXPECT_EQ(r.failure, VerifyFailure::kNaN) << r.reason;
  EXPECT_NE(r.reason.find("strided"), std::string::npos) << r.reason;
}

// A matmul that drops the last term of every dot product.
Status matmul_dropping_last_term(const KernelCall& call) {
  const TensorView& a = call.inputs[0];
  const TensorView& w = call.inputs[1];
  const TensorView& out = call.outputs[0];
  if (w.rank() != 2) return unimplemented_error("shared weights only");
  const std::int64_t k = a.shape().inner(), n = w.dim(0), rows = a.numel() / k;
  for (std::int64_t r = 0; r < rows; ++r) {
    for (std::int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (std::int64_t p = 0; p + 1 < k; ++p) {
        acc += a.first_as<const float>()[r * k + p] * w.first_as<const float>()[j * k + p];
      }
      out.first_as<float>()[r * n + j] = acc;
    }
  }
  return Status::ok();
}

TEST(VerifyHarnessTest, AMatmulMissingATermFailsEveryKindOfClaim) {
  for (const PrecisionGuarantee& p :
       {PrecisionGuarantee::bounded(false, false, std::nullopt, 1e-4, std::nullopt),
        PrecisionGuarantee::no_bound(false, false)}) {
    KernelBindingTable table;
    table.register_kernel(OpKind::kMatmul, {kF32, kF32, kF32}, BackendId::kCpu,
                          &matmul_dropping_last_term,
                          {.name = "matmul_f32__test_short", .precision = p});
    ASSERT_TRUE(table.finalize().is_ok());
    const VerifyEntryReport r = verify_table(table)[0];
    EXPECT_EQ(r.verdict, VerifyVerdict::kFail);
    EXPECT_EQ(r.failure, p.audit == AuditState::kBounded ? VerifyFailure::kBoundExceeded
                                                         : VerifyFailure::kNmseExceeded)
        << r.reason;
  }
}

// The conformance run of the built-in CPU table: every entry passes its claim.
TEST(VerifyHarnessTest, BuiltinCpuTableConforms) {
  const TableSnapshot table = current_table();
  const std::vector<VerifyEntryReport> reports = verify_table(*table, {.backend = BackendId::kCpu});
  ASSERT_FALSE(reports.empty());
  for (const VerifyEntryReport& r : reports) {
    EXPECT_NE(r.verdict, VerifyVerdict::kFail) << r.kernel << ": " << r.reason;
    // Every CPU entry is run: a skip here means the harness lacks a generator.
    EXPECT_NE(r.verdict, VerifyVerdict::kSkipped) << r.kernel << ": " << r.reason;
  }
}

// The harness's threaded runs (ThreadSanitizer reruns this): kernels split over
// the pool write disjoint elements, and the harness reads them only afterwards.
TEST(VerifyHarnessConcurrentTest, ThreadedRunsAgreeWithSerialOnes) {
  const TableSnapshot table = current_table();
  for (int threads : {1, 3}) {
    for (const VerifyEntryReport& r : verify_table(*table, {.threads = threads})) {
      EXPECT_NE(r.verdict, VerifyVerdict::kFail)
          << r.kernel << " at " << threads << ": " << r.reason;
    }
  }
  const KernelBindingTable racy =
      table_with(&test_add<Mode::kThreadDependent>,
                 PrecisionGuarantee::bounded(true, true, 2.0, std::nullopt, std::nullopt));
  EXPECT_EQ(verify_table(racy, {.threads = 4})[0].failure, VerifyFailure::kNotThreadDeterministic);
}

}  // namespace
}  // namespace switchyard
