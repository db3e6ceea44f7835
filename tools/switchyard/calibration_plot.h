// `switchyard calibrate --plot DIR`: pictures of each kernel's measured times
// against its fitted and its modelled cost, one per op family, so that a person
// can see where a cost model is wrong (docs/calibration.md, "Plots").
//
// The tool writes the data (DIR/<family>.json) and the script that draws it
// (DIR/plot_calibration.py, embedded in the binary) and runs the script with
// python3 and matplotlib. The directory then holds everything needed to draw the
// pictures again, or differently.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "switchyard/calibrate.h"
#include "switchyard/calibration.h"
#include "switchyard/status.h"

namespace switchyard::tool {

// What the size axis measures: "work: roofline ns at 50 GFLOP/s and 20 GB/s, +20
// ns a call" (the reference rates of calibration_size).
[[nodiscard]] std::string calibration_axis_label();

// The fitted cost along the size axis (calibration_size's), from `lo` to `hi`, as
// [size, ns] points log-spaced for drawing.
[[nodiscard]] nlohmann::json fitted_curve(const FittedCost& fit, double lo, double hi);

// Writes DIR/<family>.json for each op family in `report` and the script, and
// returns the data files' paths. The directory is made when missing.
[[nodiscard]] Result<std::vector<std::filesystem::path>> write_calibration_plot_data(
    const CalibrateReport& report, const std::filesystem::path& dir);

// Runs DIR/plot_calibration.py on the data files `write_calibration_plot_data`
// wrote there and returns the pictures (each data file's path as .svg). A
// missing python3 or matplotlib is kFailedPrecondition, naming what to install
// and how to draw the pictures afterwards.
[[nodiscard]] Result<std::vector<std::filesystem::path>> draw_calibration_plots(
    const std::filesystem::path& dir, const std::vector<std::filesystem::path>& data);

}  // namespace switchyard::tool
