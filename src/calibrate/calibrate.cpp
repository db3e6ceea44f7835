#include "switchyard/calibrate.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "calibrate/timing.h"
#include "switchyard/thread_pool.h"

namespace switchyard {

namespace {

using Clock = std::chrono::steady_clock;

// --- the shape grids ---------------------------------------------------------

// The operand shapes (key order) of one calibration point.
using Point = std::vector<Shape>;

// Element counts from 4 Ki to 16 Mi, a factor of 4 apart: from L1 to well past
// any last-level cache.
constexpr std::int64_t kStreamSizes[] = {1 << 12, 1 << 14, 1 << 16, 1 << 18,
                                         1 << 20, 1 << 22, 1 << 24};

// Why the op at these dtypes has no grid, or its grid.
Result<std::vector<Point>> grid(OpKind op, const DTypeList& dtypes) {
  const std::size_t n = dtypes.size();
  const OpFamily family = op_family(op);
  std::vector<Point> points;
  switch (family) {
    case OpFamily::kBinary:
      if (n != 3) break;
      for (std::int64_t s : kStreamSizes) points.push_back({Shape{s}, Shape{s}, Shape{s}});
      return points;
    case OpFamily::kUnary:
    case OpFamily::kCast:
      if (n != 2) break;
      for (std::int64_t s : kStreamSizes) points.push_back({Shape{s}, Shape{s}});
      return points;
    case OpFamily::kLayout:
      if (op != OpKind::kCopy || n != 2) break;
      for (std::int64_t s : kStreamSizes) points.push_back({Shape{s}, Shape{s}});
      return points;
    case OpFamily::kNorm:
    case OpFamily::kSoftmax:
      if (n != 2) break;
      for (std::int64_t rows : {1, 4, 16, 64, 256, 1024, 4096}) {
        points.push_back({Shape{rows, 4096}, Shape{rows, 4096}});
      }
      return points;
    case OpFamily::kMatmul:
      if (op != OpKind::kMatmul || n != 3) break;
      // Decode (one row) over growing weights, then prompt-sized row counts.
      for (auto [m, nk] : {std::pair<std::int64_t, std::int64_t>{1, 512},
                           {1, 2048},
                           {1, 4096},
                           {8, 2048},
                           {32, 2048},
                           {128, 2048},
                           {256, 4096}}) {
        points.push_back({Shape{m, nk}, Shape{nk, nk}, Shape{m, nk}});
      }
      return points;
    default: break;
  }
  return unimplemented_error(fmt::format(
      "no calibration grid for {} ({} family) at {} operands yet", name(op), name(family), n));
}

// The entry's own estimate at a point: the terms its fit is written in.
CostEstimate estimate_at(const KernelBindingTable::Slot& slot, const BindingEntry& entry, OpKind op,
                         const Point& shapes) {
  std::vector<DType> dtypes(slot.dtypes.span().begin(), slot.dtypes.span().end());
  const OpParams params;
  return entry.estimate({op, shapes, dtypes, &params, nullptr});
}

std::string cpu_text(int threads) {
  std::ifstream in("/proc/cpuinfo");
  std::string line, model = "unknown CPU", flags;
  while (std::getline(in, line)) {
    auto value = [&]() {
      const std::size_t colon = line.find(':');
      return colon == std::string::npos ? std::string() : line.substr(colon + 2);
    };
    if (line.starts_with("model name") && model == "unknown CPU") model = value();
    if (line.starts_with("flags") && flags.empty()) flags = value();
  }
  // FNV-1a of the feature flags: a machine with other features gets another print.
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : flags) h = (h ^ static_cast<unsigned char>(c)) * 0x100000001b3ull;
  return fmt::format("{} | features {:016x} | {} thread{}", model, h, threads,
                     threads == 1 ? "" : "s");
}

}  // namespace

std::vector<BackendFingerprint> machine_fingerprints(const KernelBindingTable& table, int threads) {
  std::vector<BackendFingerprint> out;
  for (BackendId b : table.backends()) {
    const BackendMemory* memory = table.backend_memory(b);
    if (memory == nullptr || memory->host_addressable()) {
      out.push_back({b, cpu_text(threads)});
    } else if (memory->ready().is_ok()) {
      out.push_back({b, memory->device_description()});
    }
  }
  return out;
}

Result<CalibrateReport> calibrate(const KernelBindingTable& table,
                                  const CalibrateOptions& options) {
  const Clock::time_point start = Clock::now();
  CalibrateReport report;
  for (BackendFingerprint& f : machine_fingerprints(table, options.threads)) {
    if (!options.backend || f.backend == *options.backend) {
      report.profile.set_fingerprint(std::move(f));
    }
  }
  struct Job {
    const KernelBindingTable::Slot* slot;
    const BindingEntry* entry;
    OpKind op;
    std::vector<Point> points;
  };
  std::vector<Job> jobs;
  for (const auto& ref : table.entries()) {
    const KernelBindingTable::Slot& slot = ref.slot;
    if (options.backend && slot.backend != *options.backend) continue;
    const std::optional<OpKind> op = slot.key.static_op();
    if (!op) {
      report.skipped.push_back(fmt::format("{}: a runtime-fused kernel (no grid)", ref.entry.name));
      continue;
    }
    if (options.op && *op != *options.op) continue;
    const BackendMemory* memory = table.backend_memory(slot.backend);
    if (memory != nullptr && !memory->ready().is_ok()) {
      report.skipped.push_back(fmt::format("{}: {}", ref.entry.name, memory->ready().message()));
      continue;
    }
    Result<std::vector<Point>> points = grid(*op, slot.dtypes);
    if (!points.is_ok()) {
      report.skipped.push_back(fmt::format("{}: {}", ref.entry.name, points.status().message()));
      continue;
    }
    std::vector<Point> admitted;
    for (Point& p : *points) {
      if (ref.entry.admits_shapes(p)) admitted.push_back(std::move(p));
    }
    jobs.push_back({&slot, &ref.entry, *op, std::move(admitted)});
  }
  if (jobs.empty()) return report;

  ThreadPool pool(options.threads);
  const double per_entry_s = options.budget_s / static_cast<double>(jobs.size());
  for (std::size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    if (options.progress) options.progress(j, jobs.size(), job.entry->name);
    BackendMemory* memory = table.backend_memory(job.slot->backend);
    const Clock::time_point entry_deadline =
        Clock::now() +
        std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(per_entry_s));
    std::vector<CostSample> samples;
    std::string failure;
    for (const Point& p : job.points) {
      if (samples.size() >= 3 && Clock::now() >= entry_deadline) break;
      const double point_s = per_entry_s / static_cast<double>(job.points.size());
      Result<double> ns = time_entry(*job.entry, job.slot->backend, job.slot->dtypes.span(), p,
                                     OpParams{}, memory, pool, point_s);
      if (!ns.is_ok()) {
        failure = std::string(ns.status().message());
        break;
      }
      const CostEstimate est = estimate_at(*job.slot, *job.entry, job.op, p);
      if (!est.known) {
        failure = "the entry has no cost estimate to fit against";
        break;
      }
      samples.push_back({est.bytes, est.flops, *ns});
    }
    if (!failure.empty()) {
      report.skipped.push_back(fmt::format("{}: {}", job.entry->name, failure));
      continue;
    }
    Result<FittedCost> fit = fit_cost(samples);
    if (!fit.is_ok()) {
      report.skipped.push_back(fmt::format("{}: {}", job.entry->name, fit.status().message()));
      continue;
    }
    report.profile.add(
        {job.entry->name, job.slot->backend, job.entry->revision_hash, std::move(*fit)});
    ++report.calibrated;
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

Result<std::shared_ptr<const CalibrationProfile>> load_calibration(
    const std::string& path, const KernelBindingTable& table, int threads,
    std::vector<std::string>& ignored) {
  SWITCHYARD_ASSIGN_OR_RETURN(CalibrationProfile profile, CalibrationProfile::load(path));
  std::vector<std::uint64_t> revisions;
  for (const auto& ref : table.entries()) revisions.push_back(ref.entry.revision_hash);
  const std::vector<BackendFingerprint> here = machine_fingerprints(table, threads);
  CalibrationProfile::Applicable usable = profile.applicable(here, revisions);
  ignored.insert(ignored.end(), usable.ignored.begin(), usable.ignored.end());
  return std::make_shared<const CalibrationProfile>(std::move(usable.profile));
}

}  // namespace switchyard
