// Calibration: measured costs are interpolated as documented, profiles round-trip
// and refuse corrupt files, a profile of another machine or of changed kernels is
// ignored and said so, and the planner ranks by what the profile measured.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "plan/test_kernels.h"
#include "switchyard/backend_memory.h"
#include "switchyard/backends.h"
#include "switchyard/calibrate.h"
#include "switchyard/calibration.h"
#include "switchyard/dispatch.h"
#include "switchyard/graph.h"
#include "switchyard/plan.h"
#include "switchyard/regret.h"

namespace switchyard {
namespace {

using ::testing::HasSubstr;

// Samples on a pure-bytes axis: 1 KB -> 100 ns, 10 KB -> 300 ns, 100 KB -> 2000 ns.
std::vector<CostSample> three_sizes() {
  return {{10000, 0, 300}, {1000, 0, 100}, {100000, 0, 2000}};
}

TEST(Calibration, MeasurementsAreInterpolatedBetweenSizesAndExtendedOutside) {
  Result<FittedCost> fit = fit_cost(three_sizes());
  ASSERT_TRUE(fit.is_ok()) << fit.status().to_string();
  ASSERT_EQ(fit->samples.size(), 3u);
  EXPECT_EQ(fit->samples.front().bytes, 1000);  // sorted by size
  EXPECT_DOUBLE_EQ(fit->predict_ns(1000, 0), 100);
  EXPECT_DOUBLE_EQ(fit->predict_ns(10000, 0), 300);
  // Halfway on the size axis between the first two points.
  const double x0 = calibration_size(1000, 0), x1 = calibration_size(10000, 0);
  double mid_bytes = 1000;
  while (calibration_size(mid_bytes, 0) < (x0 + x1) / 2) mid_bytes += 1;
  EXPECT_NEAR(fit->predict_ns(mid_bytes, 0), 200, 1.0);
  EXPECT_DOUBLE_EQ(fit->predict_ns(10, 0), 100);  // below: the smallest's time
  EXPECT_NEAR(fit->predict_ns(200000, 0),
              2000 * calibration_size(200000, 0) / calibration_size(100000, 0), 1e-6);
}

TEST(Calibration, AFitNeedsThreeUsableSizesAndAveragesRepeats) {
  EXPECT_EQ(fit_cost(std::vector<CostSample>{{1000, 0, 10}, {2000, 0, 20}}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_FALSE(
      fit_cost(std::vector<CostSample>{{1000, 0, 10}, {2000, 0, -1}, {3000, 0, 0}}).is_ok());
  Result<FittedCost> fit =
      fit_cost(std::vector<CostSample>{{1000, 0, 10}, {1000, 0, 30}, {2000, 0, 40}, {4000, 0, 80}});
  ASSERT_TRUE(fit.is_ok());
  ASSERT_EQ(fit->samples.size(), 3u);
  EXPECT_DOUBLE_EQ(fit->samples[0].ns, 20);
}

CalibrationProfile profile_of(std::vector<CalibratedEntry> entries, std::string machine) {
  CalibrationProfile p;
  p.set_fingerprint({BackendId::kCpu, std::move(machine)});
  for (CalibratedEntry& e : entries) p.add(std::move(e));
  return p;
}

TEST(Calibration, AProfileRoundTripsAndACorruptOneIsAClearError) {
  const CalibrationProfile p =
      profile_of({{"add_f32__cpu_ref", BackendId::kCpu, 0x0123456789abcdefull,
                   fit_cost(three_sizes()).value()}},
                 "test machine | 2 threads");
  const std::string text = p.to_json();
  Result<CalibrationProfile> back = CalibrationProfile::parse(text, "memory");
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_NE(back->find(0x0123456789abcdefull), nullptr);
  EXPECT_EQ(back->find(0x0123456789abcdefull)->samples.size(), 3u);
  EXPECT_EQ(back->fingerprints(), p.fingerprints());

  Result<CalibrationProfile> truncated =
      CalibrationProfile::parse(text.substr(0, text.size() / 2), "cut.json");
  EXPECT_EQ(truncated.status().code(), StatusCode::kDataLoss);
  EXPECT_THAT(truncated.status().message(), HasSubstr("cut.json"));

  std::string future = text;
  future.replace(future.find("\"version\": 1"), 12, "\"version\": 2");
  EXPECT_EQ(CalibrationProfile::parse(future, "f").status().code(), StatusCode::kInvalidArgument);

  std::string bad_hash = text;
  bad_hash.replace(bad_hash.find("0123456789abcdef"), 16, "0123456789abcdeZ");
  Result<CalibrationProfile> refused = CalibrationProfile::parse(bad_hash, "h");
  EXPECT_THAT(refused.status().message(), HasSubstr("revision_hash"));

  std::string negative = text;
  negative.replace(negative.find("300.0"), 5, "-30.0");
  EXPECT_FALSE(CalibrationProfile::parse(negative, "n").is_ok());
}

TEST(Calibration, AnotherMachineOrAChangedKernelIsIgnoredAndSaid) {
  const CalibrationProfile p =
      profile_of({{"a", BackendId::kCpu, 1, fit_cost(three_sizes()).value()},
                  {"b", BackendId::kCpu, 2, fit_cost(three_sizes()).value()}},
                 "machine A");
  const std::vector<std::uint64_t> revisions{1};

  const std::vector<BackendFingerprint> same{{BackendId::kCpu, "machine A"}};
  CalibrationProfile::Applicable here = p.applicable(same, revisions);
  EXPECT_NE(here.profile.find(1), nullptr);
  EXPECT_EQ(here.profile.find(2), nullptr);
  ASSERT_EQ(here.ignored.size(), 1u);
  EXPECT_THAT(here.ignored[0], HasSubstr("no longer has (b)"));

  const std::vector<BackendFingerprint> other{{BackendId::kCpu, "machine B"}};
  CalibrationProfile::Applicable elsewhere = p.applicable(other, revisions);
  EXPECT_TRUE(elsewhere.profile.entries().empty());
  ASSERT_EQ(elsewhere.ignored.size(), 1u);
  EXPECT_THAT(elsewhere.ignored[0], HasSubstr("measured on \"machine A\""));
  EXPECT_THAT(elsewhere.ignored[0], HasSubstr("\"machine B\""));
}

Graph add_graph(std::int64_t n) {
  GraphBuilder b;
  ValueId x = b.input("x", DType::kF32, {n});
  ValueId y = b.input("y", DType::kF32, {n});
  b.output(b.add(x, y, "sum"));
  return std::move(b).build().value();
}

TEST(Calibration, ThePlannerRanksByWhatTheProfileMeasured) {
  const TableSnapshot table = current_table();
  const DTypeList key{DType::kF32, DType::kF32, DType::kF32};
  const std::span<const BindingEntry> siblings =
      table->lookup_alternatives(OpKind::kAdd, key, BackendId::kCpu);
  ASSERT_GE(siblings.size(), 2u);
  const BindingEntry& last = siblings.back();  // the portable reference
  // A profile in which the last sibling is measured fastest.
  CalibrationProfile p;
  for (const BindingEntry& e : siblings) {
    const double ns = &e == &last ? 10.0 : 1e6;
    p.add({e.name, BackendId::kCpu, e.revision_hash,
           fit_cost(std::vector<CostSample>{{1, 0, ns}, {1e9, 0, ns}, {2e9, 0, ns}}).value()});
  }
  PlanOptions options;
  options.record_in_registry = false;
  Result<ExecutionPlan> modelled = plan_graph(add_graph(4096), table, options);
  ASSERT_TRUE(modelled.is_ok());
  const NodeReport& m = modelled->report().buckets[0].nodes[0];
  EXPECT_NE(m.chosen.kernel, last.name);
  EXPECT_FALSE(m.chosen.measured);

  options.calibration = std::make_shared<const CalibrationProfile>(std::move(p));
  Result<ExecutionPlan> measured = plan_graph(add_graph(4096), table, options);
  ASSERT_TRUE(measured.is_ok());
  const NodeReport& n = measured->report().buckets[0].nodes[0];
  EXPECT_EQ(n.chosen.kernel, last.name);
  EXPECT_TRUE(n.chosen.measured);
  EXPECT_DOUBLE_EQ(n.chosen.kernel_ns, 10.0);
  EXPECT_GT(n.chosen.modelled_ns, 0.0);
  EXPECT_THAT(explain_text(measured->report()), HasSubstr("measured"));
  EXPECT_THAT(explain_json(measured->report()), HasSubstr("\"ranked_by\":\"measured\""));
}

TEST(Calibration, CalibrateMeasuresTheSelectedKernelsAndSkipsFamiliesWithoutAGrid) {
  CalibrateOptions options;
  options.backend = BackendId::kCpu;
  options.op = OpKind::kAdd;
  options.budget_s = 0.5;
  options.threads = 2;
  Result<CalibrateReport> report = calibrate(*current_table(), options);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  const auto siblings = current_table()->lookup_alternatives(
      OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32}, BackendId::kCpu);
  for (const BindingEntry& e : siblings) {
    const FittedCost* fit = report->profile.find(e.revision_hash);
    ASSERT_NE(fit, nullptr) << e.name;
    EXPECT_GE(fit->samples.size(), 3u);
    for (const CostSample& s : fit->samples) EXPECT_GT(s.ns, 0.0);
  }
  ASSERT_EQ(report->profile.fingerprints().size(), 1u);
  EXPECT_THAT(report->profile.fingerprints()[0].text, HasSubstr("2 threads"));

  options.op = OpKind::kSum;
  Result<CalibrateReport> none = calibrate(*current_table(), options);
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->calibrated, 0u);
  ASSERT_FALSE(none->skipped.empty());
  EXPECT_THAT(none->skipped[0], HasSubstr("no calibration grid for sum"));
}

// Given a plan's shapes, calibrate measures only the kernels the plan may run,
// and each at those shapes (a sample at each one's estimate) besides its grid.
TEST(Calibration, APlansShapesAreMeasuredBesidesTheGrid) {
  PlanOptions plan_options;
  plan_options.record_in_registry = false;
  Result<ExecutionPlan> plan = plan_graph(add_graph(3000), current_table(), plan_options);
  ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
  CalibrateOptions options;
  options.backend = BackendId::kCpu;
  options.budget_s = 0.5;
  options.threads = 2;
  options.planned = planned_shapes(*plan);
  ASSERT_FALSE(options.planned.empty());
  Result<CalibrateReport> report = calibrate(*current_table(), options);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->calibrated, options.planned.size());
  for (const PlannedShape& s : options.planned) {
    const BindingEntry* entry = nullptr;
    for (const BindingEntry& e : current_table()->lookup_alternatives(
             OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32}, BackendId::kCpu)) {
      if (e.name == s.kernel) entry = &e;
    }
    ASSERT_NE(entry, nullptr) << s.kernel;
    const FittedCost* fit = report->profile.find(entry->revision_hash);
    ASSERT_NE(fit, nullptr) << s.kernel;
    const std::vector<DType> dtypes(3, DType::kF32);
    const CostEstimate at = entry->estimate({OpKind::kAdd, s.shapes, dtypes, &s.params, nullptr});
    bool sampled = false;
    for (const CostSample& c : fit->samples) sampled = sampled || c.bytes == at.bytes;
    EXPECT_TRUE(sampled) << s.kernel << " has no sample at the plan's shape";
  }
}

// A stand-in device: host memory that claims not to be, whose streams are checked
// at every use, so that calibration's device path runs without a GPU.
class StreamCheckingDevice final : public BackendMemory {
 public:
  Result<void*> allocate(std::int64_t bytes) override { return host_memory().allocate(bytes); }
  void deallocate(void* pointer) override { host_memory().deallocate(pointer); }
  Status copy(const TensorView& src, const TensorView& dst, void* stream) override {
    SWITCHYARD_RETURN_IF_ERROR(check_live(stream, "copy"));
    return host_memory().copy(src, dst, stream);
  }
  bool host_addressable() const override { return false; }
  std::string device_description() const override { return "stand-in device"; }
  Result<void*> create_stream() override {
    auto token = std::make_unique<int>(0);
    void* stream = token.get();
    live_.emplace(stream, std::move(token));
    ++made;
    return stream;
  }
  void destroy_stream(void* stream) override {
    EXPECT_TRUE(check_live(stream, "destroy_stream").is_ok());
    live_.erase(stream);
    ++destroyed;
  }
  Status synchronize(void* stream) override { return check_live(stream, "synchronize"); }
  Status check_live(void* stream, std::string_view what) const {
    if (live_.contains(stream)) return Status::ok();
    return failed_precondition_error(fmt::format("{} on a stream that is not live", what));
  }
  int made = 0, destroyed = 0;

 private:
  std::map<void*, std::unique_ptr<int>> live_;
};

StreamCheckingDevice* stand_in = nullptr;

// add on the stand-in device, refusing a stream that is not live (two copies:
// one function is one sibling).
template <int kCopy>
Status device_add(const KernelCall& call) {
  SWITCHYARD_RETURN_IF_ERROR(stand_in->check_live(call.ctx.stream, "a kernel call"));
  return testing::binary_kernel<0>(call);
}

// Timing a device's kernels moves their timers around (into vectors, out of
// results): each stream is still destroyed once, after its last use.
TEST(Calibration, ADevicesKernelsAreTimedOnStreamsThatOutliveEveryUse) {
  StreamCheckingDevice device;
  stand_in = &device;
  KernelBindingTable t;
  t.add_backend(BackendId::kCuda, device);
  t.register_kernel(OpKind::kAdd, testing::f32s(3), BackendId::kCuda, &device_add<0>,
                    testing::opts("add_f32__dev_a", OpKind::kAdd));
  t.register_kernel(OpKind::kAdd, testing::f32s(3), BackendId::kCuda, &device_add<1>,
                    testing::opts("add_f32__dev_b", OpKind::kAdd));
  const Status finalized = t.finalize();
  ASSERT_TRUE(finalized.is_ok()) << finalized.to_string();
  CalibrateOptions options;
  options.backend = BackendId::kCuda;
  options.budget_s = 0.2;
  Result<CalibrateReport> report = calibrate(t, options);
  ASSERT_TRUE(report.is_ok()) << report.status().to_string();
  EXPECT_EQ(report->calibrated, 2u) << fmt::format("{}", fmt::join(report->skipped, "; "));
  EXPECT_GT(device.made, 0);
  EXPECT_EQ(device.made, device.destroyed);
  stand_in = nullptr;
}

}  // namespace
}  // namespace switchyard
