// Checking a GGUF file's weights (weight_check.h).
#include "switchyard/weight_check.h"

#include <algorithm>

#include <fmt/format.h>

namespace switchyard {
namespace {

// Bytes one task scans (rounded down to whole blocks, at least one block): large
// enough that scheduling is noise, small enough that two threads share a tensor of
// a few megabytes and the last tasks of a batch finish together.
constexpr std::uint64_t kTaskBytes = std::uint64_t{1} << 20;
// Bytes between progress reports (and between the runner's joins), and the most
// tasks a batch holds (a file of a million tiny tensors must not make a million
// tasks at once).
constexpr std::uint64_t kBatchBytes = std::uint64_t{64} << 20;
constexpr std::size_t kBatchTasks = 4096;

// A run of whole blocks of one tensor.
struct Task {
  std::size_t tensor = 0;
  std::int64_t first_block = 0;
  std::int64_t blocks = 0;
};

}  // namespace

const TensorCheck* WeightCheckReport::first_nonfinite() const {
  for (const TensorCheck& t : tensors) {
    if (!t.scan.finite()) return &t;
  }
  return nullptr;
}

Result<WeightCheckReport> check_weights(const GgufFile& file, const WeightCheckOptions& options) {
  const std::span<const GgufTensorInfo> infos = file.tensors();
  WeightCheckReport report;
  report.tensors.resize(infos.size());

  // Re-check every range the walk will read against the file before the first
  // read, so that no offset reaches tensor_bytes() unchecked.
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const GgufTensorInfo& t = infos[i];
    report.tensors[i].tensor = i;
    report.tensors[i].checked = has_float_values(t.dtype);
    const auto size = static_cast<std::uint64_t>(t.size_bytes);
    std::uint64_t start = 0, end = 0;
    if (t.size_bytes < 0 || __builtin_add_overflow(file.data_offset(), t.offset, &start) ||
        __builtin_add_overflow(start, size, &end) || end > file.file_size() ||
        size % static_cast<std::uint64_t>(block_bytes(t.dtype)) != 0) {
      return internal_error(fmt::format(
          "check_weights: tensor '{}' ({} bytes at data offset {}) is not whole blocks inside the "
          "{}-byte file",
          printable(t.name), t.size_bytes, t.offset, file.file_size()));
    }
    if (report.tensors[i].checked) total += size;
  }

  const auto report_progress = [&](std::uint64_t done) {
    if (options.progress) options.progress(done, total);
  };
  report_progress(0);

  // Tasks are made a batch at a time, in file order; each batch is scanned in
  // parallel and merged in order, so a tensor's chunks are appended first to last.
  std::vector<Task> batch;
  std::vector<ValueScan> results;
  std::uint64_t done = 0;
  const auto run_batch = [&] {
    results.assign(batch.size(), ValueScan{});
    const auto body = [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t k = begin; k < end; ++k) {
        const Task& task = batch[static_cast<std::size_t>(k)];
        const GgufTensorInfo& t = infos[task.tensor];
        const auto bb = static_cast<std::size_t>(block_bytes(t.dtype));
        const std::span<const std::byte> bytes =
            file.tensor_bytes(t).subspan(static_cast<std::size_t>(task.first_block) * bb,
                                         static_cast<std::size_t>(task.blocks) * bb);
        Result<ValueScan> scan = scan_values(t.dtype, bytes, task.first_block);
        // Whole blocks inside the tensor, by construction above.
        SWITCHYARD_CHECK_MSG(scan.is_ok(), scan.status().to_string());
        results[static_cast<std::size_t>(k)] = *scan;
      }
    };
    const auto n = static_cast<std::int64_t>(batch.size());
    if (options.runner != nullptr && options.runner->num_threads() > 1 && n > 1) {
      options.runner->parallel_for(n, 1, body);
    } else {
      body(0, n);
    }
    for (std::size_t k = 0; k < batch.size(); ++k) {
      report.tensors[batch[k].tensor].scan.append(results[k]);
      done += static_cast<std::uint64_t>(batch[k].blocks) *
              static_cast<std::uint64_t>(block_bytes(infos[batch[k].tensor].dtype));
    }
    batch.clear();
    report_progress(done);
  };

  std::uint64_t batch_bytes = 0;
  for (std::size_t i = 0; i < infos.size(); ++i) {
    const GgufTensorInfo& t = infos[i];
    if (!report.tensors[i].checked) continue;
    const auto bb = static_cast<std::uint64_t>(block_bytes(t.dtype));
    const std::int64_t blocks =
        static_cast<std::int64_t>(static_cast<std::uint64_t>(t.size_bytes) / bb);
    const std::int64_t per_task =
        static_cast<std::int64_t>(std::max<std::uint64_t>(1, kTaskBytes / bb));
    for (std::int64_t at = 0; at < blocks; at += per_task) {
      const std::int64_t n = std::min(per_task, blocks - at);
      batch.push_back({i, at, n});
      batch_bytes += static_cast<std::uint64_t>(n) * bb;
      if (batch_bytes >= kBatchBytes || batch.size() >= kBatchTasks) {
        run_batch();
        batch_bytes = 0;
      }
    }
  }
  if (!batch.empty()) run_batch();
  report.bytes = done;

  for (const TensorCheck& t : report.tensors) {
    if (subnormal_in_f32(infos[t.tensor].dtype)) {
      report.subnormal_in_f32 += t.scan.subnormal;
      report.subnormal_in_f32_tensors += t.scan.subnormal > 0 ? 1 : 0;
    }
    report.values += t.scan.values;
    report.nan += t.scan.nan;
    report.inf += t.scan.inf;
    report.subnormal += t.scan.subnormal;
    report.nonfinite_tensors += t.scan.finite() ? 0 : 1;
    report.subnormal_tensors += t.scan.subnormal > 0 ? 1 : 0;
  }
  return report;
}

std::string describe(const TensorCheck& check, DType dtype) {
  const ValueScan& s = check.scan;
  if (!check.checked) return fmt::format("{}: holds no floats, not checked", name(dtype));
  const bool dense = block_elems(dtype) == 1;
  const auto where = [&](std::int64_t index, std::string_view field) {
    return dense ? fmt::format("element {}", index) : fmt::format("block {} ({})", index, field);
  };
  std::string text = fmt::format("{}: {} NaN, {} Inf, {} subnormal of {} {}", name(dtype), s.nan,
                                 s.inf, s.subnormal, s.values, dense ? "values" : "scales");
  if (s.first_nonfinite >= 0) {
    text +=
        fmt::format("; first non-finite at {}", where(s.first_nonfinite, s.first_nonfinite_field));
  }
  if (s.first_subnormal >= 0) {
    text +=
        fmt::format("; first subnormal at {}", where(s.first_subnormal, s.first_subnormal_field));
  }
  return text;
}

}  // namespace switchyard
