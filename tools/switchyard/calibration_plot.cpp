#include "calibration_plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <system_error>
#include <utility>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "plot_calibration_script.h"

extern char** environ;

namespace switchyard::tool {
namespace {

namespace fs = std::filesystem;

constexpr std::string_view kScriptName = "plot_calibration.py";
// The script exits with this when matplotlib is missing.
constexpr int kNoMatplotlib = 3;
// Points on each fitted curve (log-spaced): enough to show its bends.
constexpr int kCurvePoints = 48;

// The position of (bytes, flops) on the plots' x axis: the work at the reference
// rates (calibration_size, the axis the fit interpolates on).
double size_of(const CostSample& s) { return calibration_size(s.bytes, s.flops); }

}  // namespace

// The fit is a function of the size alone, so any (bytes, flops) at a size gives
// it; bytes alone are used.
std::string calibration_axis_label() {
  const BackendCaps caps;
  return fmt::format("work: roofline ns at {:g} GFLOP/s and {:g} GB/s, +{:g} ns a call",
                     caps.peak_gflops, caps.memory_gbps, caps.call_overhead_ns);
}

nlohmann::json fitted_curve(const FittedCost& fit, double lo, double hi) {
  const double base = calibration_size(0, 0);
  const double per_byte = calibration_size(1, 0) - base;
  nlohmann::json curve = nlohmann::json::array();
  for (int i = 0; i < kCurvePoints; ++i) {
    const double x = lo * std::pow(hi / lo, static_cast<double>(i) / (kCurvePoints - 1));
    curve.push_back({x, fit.predict_ns((x - base) / per_byte, 0)});
  }
  return curve;
}

namespace {

nlohmann::json series_json(const CalibrationSeries& s) {
  nlohmann::json measured = nlohmann::json::array();
  nlohmann::json modelled = nlohmann::json::array();
  double lo = 0, hi = 0;
  for (std::size_t i = 0; i < s.measured.size(); ++i) {
    const double x = size_of(s.measured[i]);
    measured.push_back({x, s.measured[i].ns});
    modelled.push_back({x, s.modelled_ns[i]});
    lo = i == 0 ? x : std::min(lo, x);
    hi = std::max(hi, x);
  }
  return {{"kernel", s.kernel},
          {"backend", std::string(name(s.backend))},
          {"op", std::string(name(s.op))},
          {"key", s.key},
          {"measured", std::move(measured)},
          {"modelled", std::move(modelled)},
          {"fitted", lo > 0 ? fitted_curve(s.fit, lo, 2 * hi) : nlohmann::json::array()}};
}

Status write_text(const fs::path& path, std::string_view text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) {
    return internal_error(
        fmt::format("calibrate --plot: cannot write {}: {}", path.string(), std::strerror(errno)));
  }
  return Status::ok();
}

}  // namespace

Result<std::vector<fs::path>> write_calibration_plot_data(const CalibrateReport& report,
                                                          const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) {
    return invalid_argument_error(
        fmt::format("calibrate --plot {}: not a directory it can make: {}", dir.string(),
                    ec ? ec.message() : "exists"));
  }
  const std::string x_label = calibration_axis_label();
  nlohmann::json machines = nlohmann::json::array();
  for (const BackendFingerprint& f : report.profile.fingerprints()) {
    machines.push_back(fmt::format("{}: {}", name(f.backend), f.text));
  }
  std::map<std::string, nlohmann::json> families;
  for (const CalibrationSeries& s : report.series) {
    const std::string family(name(op_family(s.op)));
    nlohmann::json& f = families[family];
    if (f.is_null()) {
      f = {{"format", "switchyard-calibration-plot"},
           {"version", 1},
           {"family", family},
           {"x_label", x_label},
           {"machines", machines},
           {"series", nlohmann::json::array()}};
    }
    f["series"].push_back(series_json(s));
  }
  std::vector<fs::path> written;
  for (const auto& [family, data] : families) {
    fs::path path = dir / (family + ".json");
    SWITCHYARD_RETURN_IF_ERROR(write_text(path, data.dump(1)));
    written.push_back(std::move(path));
  }
  SWITCHYARD_RETURN_IF_ERROR(write_text(dir / kScriptName, kPlotCalibrationScript));
  return written;
}

Result<std::vector<fs::path>> draw_calibration_plots(const fs::path& dir,
                                                     const std::vector<fs::path>& data) {
  const std::string script = (dir / kScriptName).string();
  std::vector<std::string> args = {"python3", script};
  for (const fs::path& p : data) args.push_back(p.string());
  const std::string again = fmt::format("python3 {} {}/*.json", script, dir.string());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  // The script prints the pictures' paths, which are known here: its output goes
  // nowhere and its errors to ours.
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  const int spawned = posix_spawnp(&pid, "python3", &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (spawned != 0) {
    return failed_precondition_error(fmt::format(
        "calibrate --plot: cannot run python3 ({}); the data and the script are in {}: install "
        "python3 and matplotlib (Debian: apt-get install python3-matplotlib), then run {}",
        std::strerror(spawned), dir.string(), again));
  }
  int wstatus = 0;
  while (waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) {
      return internal_error(fmt::format("calibrate --plot: waitpid: {}", std::strerror(errno)));
    }
  }
  const int code = WIFEXITED(wstatus) ? WEXITSTATUS(wstatus) : 128 + WTERMSIG(wstatus);
  if (code == kNoMatplotlib) {
    return failed_precondition_error(fmt::format(
        "calibrate --plot: drawing needs matplotlib; the data and the script are in {}: install "
        "it (Debian: apt-get install python3-matplotlib), then run {}",
        dir.string(), again));
  }
  if (code != 0) {
    return internal_error(
        fmt::format("calibrate --plot: {} failed with exit status {}", again, code));
  }
  std::vector<fs::path> pictures;
  for (const fs::path& p : data) pictures.push_back(fs::path(p).replace_extension(".svg"));
  return pictures;
}

}  // namespace switchyard::tool
