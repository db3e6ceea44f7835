// What `inspect --check` and `run --check-weights` print about a weight check
// (switchyard/weight_check.h): the scan with its progress bar, one line per tensor
// with findings, a summary, JSON.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "switchyard/gguf.h"
#include "switchyard/weight_check.h"

namespace switchyard::tool {

struct TimedWeightCheck {
  WeightCheckReport report;
  double seconds = 0;
};

// Runs check_weights on `runner`, with a progress bar on stderr when `progress` is
// set and stderr is a terminal.
[[nodiscard]] Result<TimedWeightCheck> timed_weight_check(const GgufFile& file,
                                                          ParallelRunner* runner, bool progress);

// One line per tensor with a finding, names escaped and truncated: "NONFINITE name
// desc" for each tensor holding NaN or infinity, then "SUBNORMAL name  desc" for
// each other tensor holding subnormals that stay subnormal in f32
// (subnormal_in_f32); empty when there are none.
[[nodiscard]] std::string finding_lines(const GgufFile& file, const WeightCheckReport& report);

// "checked 12 of 12 tensors, 4.07 GB in 0.21 s (19.4 GB/s): ..." (no newline).
[[nodiscard]] std::string check_summary(const GgufFile& file, const TimedWeightCheck& check);

// The first non-finite tensor, for a one-line refusal: "'blk.0.attn_q.weight' (q4_0:
// 1 NaN, ...), 1 tensor in all"; empty when the weights are finite.
[[nodiscard]] std::string first_nonfinite_text(const GgufFile& file,
                                               const WeightCheckReport& report);

// {"ok", "tensors", "checked", "bytes", "seconds", "gb_per_s", "values", "nan",
//  "inf", "subnormal", "nonfinite_tensors", "subnormal_tensors", "findings": [...]}.
[[nodiscard]] nlohmann::json check_json(const GgufFile& file, const TimedWeightCheck& check);

}  // namespace switchyard::tool
