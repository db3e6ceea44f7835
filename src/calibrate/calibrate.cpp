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

// Matmul's (rows, n = k): decode (one row) over growing weights, then
// prompt-sized row counts.
constexpr std::pair<std::int64_t, std::int64_t> kMatmulPoints[] = {
    {1, 512}, {1, 2048}, {1, 4096}, {8, 2048}, {32, 2048}, {128, 2048}, {256, 4096}};

// The fused ops' grids (linear as matmul with a bias; ffn_swiglu at a small
// model's width; rms_norm_mul as a weighted norm), or none.
std::vector<Point> fused_grid(OpKind op, std::size_t n) {
  std::vector<Point> points;
  if (op == OpKind::kLinear && n == 4) {
    for (auto [m, nk] : kMatmulPoints) {
      points.push_back({Shape{m, nk}, Shape{nk, nk}, Shape{nk}, Shape{m, nk}});
    }
  } else if (op == OpKind::kFfnSwiglu && n == 5) {
    // x [rows, 1024] through gate and up [2816, 1024] and down [1024, 2816].
    for (std::int64_t m : {1, 8, 32, 128, 512}) {
      const Shape x{m, 1024}, up{2816, 1024};
      points.push_back({x, up, up, Shape{1024, 2816}, x});
    }
  } else if (op == OpKind::kRmsNormMul && n == 3) {
    for (std::int64_t rows : {1, 16, 256, 4096}) {
      points.push_back({Shape{rows, 4096}, Shape{4096}, Shape{rows, 4096}});
    }
  }
  return points;
}

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
      if (op == OpKind::kTranspose && n == 2) {
        for (std::int64_t s : {64, 256, 1024, 4096}) points.push_back({Shape{s, s}, Shape{s, s}});
        return points;
      }
      if (op != OpKind::kCopy || n != 2) break;
      for (std::int64_t s : kStreamSizes) points.push_back({Shape{s}, Shape{s}});
      return points;
    case OpFamily::kNorm:
    case OpFamily::kSoftmax:
      // One input; a norm's weight (and bias) of one row; a softmax's mask as
      // large as its input.
      if (n < 2 || n > 4 || (family == OpFamily::kSoftmax && n > 3)) break;
      for (std::int64_t rows : {1, 4, 16, 64, 256, 1024, 4096}) {
        Point p(n, Shape{rows, 4096});
        if (family == OpFamily::kNorm) {
          for (std::size_t i = 1; i + 1 < n; ++i) p[i] = Shape{4096};
        }
        points.push_back(std::move(p));
      }
      return points;
    case OpFamily::kRope:
      // x [tokens, 32 heads, 64], positions [tokens], per-pair factors [32].
      if (n != 3 && n != 4) break;
      for (std::int64_t tokens : {1, 16, 128, 512, 2048}) {
        const Shape x{tokens, 32, 64};
        Point p = {x, Shape{tokens}};
        if (n == 4) p.push_back(Shape{32});
        p.push_back(x);
        points.push_back(std::move(p));
      }
      return points;
    case OpFamily::kGetRows:
      if (op == OpKind::kGetRows && n == 3) {
        // Rows of a [4096, 2048] table.
        for (std::int64_t rows : {1, 16, 128, 512, 2048}) {
          points.push_back({Shape{4096, 2048}, Shape{rows}, Shape{rows, 2048}});
        }
        return points;
      }
      if (op == OpKind::kSetRows && n == 4) {
        // Rows written into a [4096, 512] cache.
        for (std::int64_t rows : {1, 16, 128, 512, 2048}) {
          points.push_back({Shape{4096, 512}, Shape{rows, 512}, Shape{rows}, Shape{4096, 512}});
        }
        return points;
      }
      break;
    case OpFamily::kAttention:
      // 32 query heads over 8 kv heads of 64: one query against growing caches
      // (decoding), then prompts against themselves.
      if (n != 4 && n != 5) break;
      for (auto [sq, skv] : {std::pair<std::int64_t, std::int64_t>{1, 256},
                             {1, 1024},
                             {1, 4096},
                             {64, 64},
                             {256, 256},
                             {1024, 1024}}) {
        const Shape q{sq, 32, 64}, kv{skv, 8, 64};
        Point p = {q, kv, kv};
        if (n == 5) p.push_back(Shape{sq, skv});
        p.push_back(q);
        points.push_back(std::move(p));
      }
      return points;
    case OpFamily::kMatmul:
      if (op != OpKind::kMatmul || n != 3) break;
      for (auto [m, nk] : kMatmulPoints) {
        points.push_back({Shape{m, nk}, Shape{nk, nk}, Shape{m, nk}});
      }
      return points;
    case OpFamily::kFused:
      points = fused_grid(op, n);
      if (points.empty()) break;
      return points;
    default: break;
  }
  return unimplemented_error(fmt::format(
      "no calibration grid for {} ({} family) at {} operands yet", name(op), name(family), n));
}

// One timing of a calibration job: a grid point (default parameters) or a
// plan's shape (its node's).
struct Timing {
  Point shapes;
  OpParams params;
  bool in_place = false;
};

// The entry's own estimate at a point: the terms its fit is written in.
CostEstimate estimate_at(const KernelBindingTable::Slot& slot, const BindingEntry& entry, OpKind op,
                         const Timing& t) {
  std::vector<DType> dtypes(slot.dtypes.span().begin(), slot.dtypes.span().end());
  return entry.estimate({op, t.shapes, dtypes, &t.params, nullptr});
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
    std::vector<Timing> planned;  // always timed
    std::vector<Timing> grid;     // while the entry's budget lasts
  };
  std::vector<Job> jobs;
  for (const auto& ref : table.entries()) {
    const KernelBindingTable::Slot& slot = ref.slot;
    if (options.backend && slot.backend != *options.backend) continue;
    std::vector<Timing> planned;
    for (const PlannedShape& s : options.planned) {
      if (s.kernel == ref.entry.name) planned.push_back({s.shapes, s.params, s.in_place});
    }
    if (!options.planned.empty() && planned.empty()) continue;
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
      if (planned.empty()) {
        report.skipped.push_back(fmt::format("{}: {}", ref.entry.name, points.status().message()));
        continue;
      }
      points = std::vector<Point>{};  // the plan's shapes alone
    }
    std::vector<Timing> admitted;
    for (Point& p : *points) {
      // set_rows is timed as graphs run it: in place (Note [Rows written in place]).
      if (ref.entry.admits_shapes(p))
        admitted.push_back({std::move(p), {}, *op == OpKind::kSetRows});
    }
    jobs.push_back({&slot, &ref.entry, *op, std::move(planned), std::move(admitted)});
  }
  if (jobs.empty()) return report;

  ThreadPool pool(options.threads);
  const Clock::time_point end = start + std::chrono::duration_cast<Clock::duration>(
                                            std::chrono::duration<double>(options.budget_s));
  // The siblings at one key are timed together, point by point and in turn
  // (Note [Timing in alternation] in timing.h): the plans' shapes first, then the
  // grid's while the key's share of the budget lasts (and until each sibling has
  // three sizes). A key's share is what is left of the budget split evenly among
  // the entries still to time, so that a key that overran (slow kernels at their
  // three smallest sizes, planned shapes timed whatever the budget) is paid for by
  // the keys after it and the whole table keeps its budget.
  std::size_t done = 0;
  for (std::size_t first = 0; first < jobs.size();) {
    std::size_t last = first;
    while (last < jobs.size() && jobs[last].slot == jobs[first].slot) ++last;
    const std::size_t count = last - first;
    if (options.progress) options.progress(done, jobs.size(), jobs[first].entry->name);
    const Clock::time_point now = Clock::now();
    const double left_s = std::max(0.0, std::chrono::duration<double>(end - now).count());
    const double per_entry_s = left_s / static_cast<double>(jobs.size() - done);
    done += count;
    const KernelBindingTable::Slot& slot = *jobs[first].slot;
    BackendMemory* memory = table.backend_memory(slot.backend);
    const Clock::time_point deadline =
        now + std::chrono::duration_cast<Clock::duration>(
                  std::chrono::duration<double>(per_entry_s * static_cast<double>(count)));
    // Each point once, with the jobs that take it: planned points, then the grid.
    struct Shared {
      Timing timing;
      bool planned = false;
      std::vector<std::size_t> jobs;
    };
    std::vector<Shared> points;
    const auto add = [&](const Timing& t, bool planned, std::size_t j) {
      const std::string key = timing_key(t.in_place ? "in place" : "", t.shapes, t.params);
      for (Shared& p : points) {
        if (p.planned == planned && timing_key(p.timing.in_place ? "in place" : "", p.timing.shapes,
                                               p.timing.params) == key) {
          p.jobs.push_back(j);
          return;
        }
      }
      points.push_back({t, planned, {j}});
    };
    for (std::size_t j = first; j < last; ++j) {
      for (const Timing& t : jobs[j].planned) add(t, true, j);
    }
    for (std::size_t j = first; j < last; ++j) {
      for (const Timing& t : jobs[j].grid) add(t, false, j);
    }
    std::vector<std::vector<CostSample>> samples(count);
    std::vector<std::vector<double>> modelled(count);
    std::vector<std::string> failure(count);
    const double point_s =
        per_entry_s / static_cast<double>(std::max<std::size_t>(1, points.size()));
    for (const Shared& p : points) {
      bool enough = true;
      for (std::size_t j = first; j < last; ++j) {
        enough = enough && (!failure[j - first].empty() || samples[j - first].size() >= 3);
      }
      if (!p.planned && enough && Clock::now() >= deadline) break;
      std::vector<KernelTimer> timers;
      std::vector<std::size_t> owners;
      for (std::size_t j : p.jobs) {
        if (!failure[j - first].empty()) continue;
        Result<KernelTimer> timer =
            KernelTimer::make(*jobs[j].entry, slot.backend, slot.dtypes.span(), p.timing.shapes,
                              p.timing.params, memory, pool, p.timing.in_place);
        if (!timer.is_ok()) {
          failure[j - first] = std::string(timer.status().message());
          continue;
        }
        timers.push_back(std::move(*timer));
        owners.push_back(j);
      }
      const std::vector<Result<double>> ns = time_in_turn(timers, point_s, /*min_rounds=*/3);
      for (std::size_t i = 0; i < owners.size(); ++i) {
        const std::size_t j = owners[i];
        if (!ns[i].is_ok()) {
          failure[j - first] = std::string(ns[i].status().message());
          continue;
        }
        const CostEstimate est = estimate_at(slot, *jobs[j].entry, jobs[j].op, p.timing);
        if (!est.known) {
          failure[j - first] = "the entry has no cost estimate to fit against";
          continue;
        }
        samples[j - first].push_back({est.bytes, est.flops, *ns[i]});
        modelled[j - first].push_back(est.time_ns(BackendCaps{}));
      }
    }
    for (std::size_t j = first; j < last; ++j) {
      const BindingEntry& entry = *jobs[j].entry;
      if (!failure[j - first].empty()) {
        report.skipped.push_back(fmt::format("{}: {}", entry.name, failure[j - first]));
        continue;
      }
      Result<FittedCost> fit = fit_cost(samples[j - first]);
      if (!fit.is_ok()) {
        report.skipped.push_back(fmt::format("{}: {}", entry.name, fit.status().message()));
        continue;
      }
      report.series.push_back(
          {entry.name, slot.backend, jobs[j].op, describe_key(slot.key, slot.dtypes, slot.backend),
           std::move(samples[j - first]), std::move(modelled[j - first]), *fit});
      report.profile.add({entry.name, slot.backend, entry.revision_hash, std::move(*fit)});
      ++report.calibrated;
    }
    first = last;
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  return report;
}

CalibrationProfile applicable_here(const CalibrationProfile& profile,
                                   const KernelBindingTable& table, int threads,
                                   std::vector<std::string>& ignored) {
  std::vector<std::uint64_t> revisions;
  for (const auto& ref : table.entries()) revisions.push_back(ref.entry.revision_hash);
  const std::vector<BackendFingerprint> here = machine_fingerprints(table, threads);
  CalibrationProfile::Applicable usable = profile.applicable(here, revisions);
  ignored.insert(ignored.end(), usable.ignored.begin(), usable.ignored.end());
  return std::move(usable.profile);
}

Result<std::shared_ptr<const CalibrationProfile>> load_calibration(
    const std::string& path, const KernelBindingTable& table, int threads,
    std::vector<std::string>& ignored) {
  SWITCHYARD_ASSIGN_OR_RETURN(CalibrationProfile profile, CalibrationProfile::load(path));
  return std::make_shared<const CalibrationProfile>(
      applicable_here(profile, table, threads, ignored));
}

}  // namespace switchyard
