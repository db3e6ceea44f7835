// Kernel packs: dlopen, the ABI handshake, registration into a staging list,
// the manifest check, and the trampoline through which every pack kernel is
// called.
//
// Note [A pack enters whole or not at all]
// The pack's registration function declares kernels one call at a time, and any
// of them may be malformed, or the function may fail or crash after a few. So
// declarations go into a staging list, each copied and checked on arrival; only
// when the function has returned 0 and every declaration matches the manifest
// (and the manifest has no kernel the pack did not declare) are the kernels
// registered into the table. A crash cannot be caught in the process that
// crashes, so registration first runs in a forked child that registers into
// nothing: a child killed by a signal refuses the pack before the caller's
// process ever calls into it. (A pack whose registration misbehaves only
// sometimes can still crash the caller afterwards; registration functions are
// expected to be deterministic.)

#include "switchyard/kernel_packs.h"

#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "switchyard/dispatch.h"
#include "switchyard/environment.h"
#include "switchyard/kernel_pack.h"

namespace switchyard {

namespace {

using nlohmann::json;

static_assert(kMaxRank <= SY_MAX_RANK, "sy_tensor must hold every rank");

constexpr std::string_view kManifestFormat = "switchyard-kernel-pack";
constexpr int kManifestVersion = 1;
constexpr std::size_t kErrorBytes = 512;

// --- the loaded library ------------------------------------------------------

struct Library {
  explicit Library(void* h) : handle(h) {}
  Library(const Library&) = delete;
  Library& operator=(const Library&) = delete;
  ~Library() { dlclose(handle); }
  void* handle;
};

// What a pack entry's BindingEntry::data holds: the pack's function, its datum,
// and the library they live in (kept loaded while any entry refers to it).
struct PackKernel {
  sy_kernel_fn fn = nullptr;
  void* data = nullptr;
  std::shared_ptr<const Library> library;
  // The registered name, NUL-terminated for sy_kernel_call.name without a copy
  // per call.
  std::string name;
};

std::string dl_error() {
  const char* e = dlerror();
  return e != nullptr ? std::string(e) : std::string("unknown dynamic loader error");
}

// --- the trampoline ----------------------------------------------------------

sy_tensor to_c(const TensorView& v) {
  sy_tensor t{};
  t.data = v.first();
  t.dtype = name(v.dtype()).data();
  t.rank = v.rank();
  for (int i = 0; i < v.rank(); ++i) {
    t.shape[i] = v.dim(i);
    t.strides[i] = v.stride(i);
  }
  return t;
}

void parallel_for_c(const sy_kernel_call* call, int64_t n, int64_t grain, sy_range_fn body,
                    void* body_data) {
  const auto* ctx = static_cast<const ExecContext*>(call->runner);
  ctx->parallel_for(n, grain,
                    [&](std::int64_t begin, std::int64_t end) { body(body_data, begin, end); });
}

// The one KernelFn of every pack kernel: converts the call to the C ABI and the
// pack's answer back to a Status.
Status pack_trampoline(const KernelCall& call) {
  const auto* kernel = static_cast<const PackKernel*>(call.data);
  if (kernel == nullptr) {
    return internal_error(fmt::format("{}: pack kernel called without its entry data", call.name));
  }
  std::array<sy_tensor, kMaxOperands> inputs{};
  std::array<sy_tensor, kMaxOperands> outputs{};
  if (call.inputs.size() > inputs.size() || call.outputs.size() > outputs.size()) {
    return invalid_argument_error(fmt::format("{}: too many operands", call.name));
  }
  for (std::size_t i = 0; i < call.inputs.size(); ++i) inputs[i] = to_c(call.inputs[i]);
  for (std::size_t i = 0; i < call.outputs.size(); ++i) outputs[i] = to_c(call.outputs[i]);
  const OpParams& p = call.params;
  const sy_op_params params{.scale = p.scale,
                            .eps = p.eps,
                            .axis = p.axis,
                            .causal = p.causal ? 1 : 0,
                            .rope_neox = p.rope_mode == RopeMode::kNeox ? 1 : 0,
                            .rope_base = p.rope_base,
                            .rope_dims = p.rope_dims,
                            .query_offset = p.query_offset};
  std::array<char, kErrorBytes> error{};
  const sy_kernel_call c{.inputs = inputs.data(),
                         .num_inputs = static_cast<int32_t>(call.inputs.size()),
                         .outputs = outputs.data(),
                         .num_outputs = static_cast<int32_t>(call.outputs.size()),
                         .params = &params,
                         .name = kernel->name.c_str(),
                         .kernel_data = kernel->data,
                         .stream = call.ctx.stream,
                         .num_threads = call.ctx.num_threads(),
                         .parallel_for = &parallel_for_c,
                         .error = error.data(),
                         .error_size = error.size(),
                         .runner = &call.ctx};
  if (kernel->fn(&c) == 0) return Status::ok();
  error.back() = '\0';
  return invalid_argument_error(fmt::format(
      "{}: {}", call.name, error[0] != '\0' ? printable(error.data(), kErrorBytes) : "failed"));
}

// --- declarations ------------------------------------------------------------

// One kernel as the pack declared it, copied out of the C structs.
struct Declared {
  std::string name;
  std::string op;
  std::string dtypes;
  std::string backend;
  std::uint32_t caps = 0;
  PrecisionGuarantee precision;
  std::string cost_flops, cost_bytes, cost_overhead_ns;
  std::uint32_t revision = 1;
  sy_kernel_fn fn = nullptr;
  void* data = nullptr;
};

// Everything the registrar callbacks see.
struct Staging {
  std::vector<Declared> kernels;
  std::vector<std::string> problems;
  bool dry_run = false;  // the crash probe: count, keep nothing
};

std::string c_string(const char* s) { return s != nullptr ? std::string(s) : std::string(); }

std::optional<double> c_bound(double v) { return v >= 0 ? std::optional<double>(v) : std::nullopt; }

std::optional<PrecisionGuarantee> precision_of(const sy_precision& p) {
  const bool stable = p.bit_stable != 0;
  const bool deterministic = p.deterministic_across_threads != 0;
  if (p.audit == SY_PRECISION_NO_BOUND) return PrecisionGuarantee::no_bound(stable, deterministic);
  if (p.audit != SY_PRECISION_BOUNDED) return std::nullopt;
  return PrecisionGuarantee::bounded(stable, deterministic, c_bound(p.max_ulp), c_bound(p.max_rel),
                                     c_bound(p.max_abs));
}

int add_kernel_c(void* state, const sy_kernel_decl* decl) {
  auto* staging = static_cast<Staging*>(state);
  const std::size_t index = staging->kernels.size() + staging->problems.size();
  if (decl == nullptr) {
    staging->problems.push_back(fmt::format("declaration {} is null", index));
    return 1;
  }
  if (staging->dry_run) return 0;
  Declared d;
  d.name = c_string(decl->name);
  const std::string who = d.name.empty() ? fmt::format("declaration {}", index)
                                         : fmt::format("kernel '{}'", printable(d.name));
  std::vector<std::string> missing;
  if (d.name.empty()) missing.emplace_back("name");
  if (decl->op == nullptr) missing.emplace_back("op");
  if (decl->dtypes == nullptr) missing.emplace_back("dtypes");
  if (decl->backend == nullptr) missing.emplace_back("backend");
  if (decl->fn == nullptr) missing.emplace_back("fn");
  if (decl->cost_flops == nullptr || decl->cost_bytes == nullptr) {
    missing.emplace_back("cost_flops and cost_bytes");
  }
  if (!missing.empty()) {
    staging->problems.push_back(fmt::format("{} has no {}", who, fmt::join(missing, ", ")));
    return 1;
  }
  const std::optional<PrecisionGuarantee> precision = precision_of(decl->precision);
  if (!precision) {
    staging->problems.push_back(
        fmt::format("{}: precision.audit is {}, not SY_PRECISION_BOUNDED or SY_PRECISION_NO_BOUND",
                    who, decl->precision.audit));
    return 1;
  }
  if (decl->caps & ~(SY_CAP_STRIDED_INPUT | SY_CAP_BROADCAST_INPUT | SY_CAP_IN_PLACE |
                     SY_CAP_TRADES_PRECISION)) {
    staging->problems.push_back(fmt::format("{}: unknown capability bits {:#x}", who, decl->caps));
    return 1;
  }
  d.op = c_string(decl->op);
  d.dtypes = c_string(decl->dtypes);
  d.backend = c_string(decl->backend);
  d.caps = decl->caps;
  d.precision = *precision;
  d.cost_flops = c_string(decl->cost_flops);
  d.cost_bytes = c_string(decl->cost_bytes);
  d.cost_overhead_ns = decl->cost_overhead_ns != nullptr ? c_string(decl->cost_overhead_ns) : "0";
  d.revision = decl->revision;
  d.fn = decl->fn;
  d.data = decl->data;
  staging->kernels.push_back(std::move(d));
  return 0;
}

void fail_c(void* state, const char* message) {
  auto* staging = static_cast<Staging*>(state);
  staging->problems.push_back(message != nullptr ? printable(message, 400)
                                                 : std::string("(no message)"));
}

// --- the library's symbols -----------------------------------------------------

struct Entry {
  sy_pack_abi_version_fn abi_version = nullptr;
  sy_pack_register_fn register_kernels = nullptr;
};

Result<Entry> find_symbols(void* handle, const std::string& path) {
  Entry e;
  e.abi_version =
      reinterpret_cast<sy_pack_abi_version_fn>(dlsym(handle, "switchyard_pack_abi_version"));
  e.register_kernels =
      reinterpret_cast<sy_pack_register_fn>(dlsym(handle, "switchyard_pack_register"));
  std::vector<std::string_view> missing;
  if (e.abi_version == nullptr) missing.emplace_back("switchyard_pack_abi_version");
  if (e.register_kernels == nullptr) missing.emplace_back("switchyard_pack_register");
  if (!missing.empty()) {
    return invalid_argument_error(
        fmt::format("kernel pack {} does not export {} (declare them with SWITCHYARD_PACK_EXPORT, "
                    "switchyard/kernel_pack.h)",
                    path, fmt::join(missing, " and ")));
  }
  const std::uint32_t version = e.abi_version();
  if (version != SWITCHYARD_PACK_ABI_VERSION) {
    return failed_precondition_error(fmt::format(
        "kernel pack {} was built for kernel-pack ABI {}, this Switchyard loads ABI {}; rebuild "
        "the pack against this version's switchyard/kernel_pack.h",
        path, version, SWITCHYARD_PACK_ABI_VERSION));
  }
  return e;
}

Status registration_problems(const std::string& path, int rc, const Staging& staging) {
  if (rc == 0 && staging.problems.empty()) return Status::ok();
  std::string message =
      fmt::format("kernel pack {} refused; nothing from it was registered:", path);
  if (rc != 0) message += fmt::format("\n  switchyard_pack_register returned {}", rc);
  for (const std::string& p : staging.problems) message += "\n  " + p;
  return invalid_argument_error(std::move(message));
}

// Note [A pack enters whole or not at all]: registration once in a child, so that a
// crash is an error here and not the end of this process.
Status probe_in_child(const std::string& path) {
  std::fflush(nullptr);
  const pid_t pid = fork();
  if (pid < 0) return Status::ok();  // no child to spare: the in-process load still checks
  if (pid == 0) {
    // A handler installed by the caller (a sanitizer's, a crash reporter's) would
    // turn the crash into an exit; the probe wants the signal itself.
    for (const int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, SIG_DFL);
    void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) _exit(0);  // the caller reports the loader's error itself
    Result<Entry> entry = find_symbols(handle, path);
    if (!entry.is_ok()) _exit(0);
    Staging staging{.dry_run = true};
    const sy_pack_registrar registrar{SWITCHYARD_PACK_ABI_VERSION, &staging, &add_kernel_c,
                                      &fail_c};
    (void)entry->register_kernels(&registrar);
    _exit(0);
  }
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return Status::ok();
  }
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
    return internal_error(fmt::format(
        "kernel pack {} ended the process while registering its kernels (exit status {}); "
        "nothing from it was registered",
        path, WEXITSTATUS(status)));
  }
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    return internal_error(fmt::format(
        "kernel pack {} crashed while registering its kernels (signal {}, {}); nothing from it "
        "was registered",
        path, sig, strsignal(sig)));
  }
  return Status::ok();
}

// --- the manifest --------------------------------------------------------------

struct ManifestKernel {
  std::size_t index = 0;
  json value;
};

struct Manifest {
  std::string path;
  std::string pack;
  std::map<std::string, ManifestKernel, std::less<>> kernels;
};

Result<Manifest> read_manifest(const std::string& path, const std::string& library) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return not_found_error(fmt::format(
        "kernel pack {} has no manifest: cannot open {} (every pack declares its kernels in a "
        "JSON manifest beside the library; docs/kernel-packs.md)",
        library, path));
  }
  std::stringstream text;
  text << in.rdbuf();
  json doc = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) {
    return data_loss_error(fmt::format("manifest {}: not valid JSON (truncated or corrupt)", path));
  }
  auto bad = [&](std::string what) {
    return invalid_argument_error(fmt::format("manifest {}: {}", path, what));
  };
  if (!doc.is_object()) return bad("the top level is not an object");
  if (doc.value("format", std::string()) != kManifestFormat) {
    return bad(fmt::format("\"format\" is not \"{}\"", kManifestFormat));
  }
  if (!doc.contains("version") || !doc["version"].is_number_integer() ||
      doc["version"].get<int>() != kManifestVersion) {
    return bad(
        fmt::format("\"version\" is not {} (the only manifest version this Switchyard "
                    "reads)",
                    kManifestVersion));
  }
  Manifest m;
  m.path = path;
  if (!doc.contains("pack") || !doc["pack"].is_string() || doc["pack"].get<std::string>().empty()) {
    return bad("\"pack\" (the pack's name) is missing or empty");
  }
  m.pack = doc["pack"].get<std::string>();
  const bool name_ok = std::all_of(m.pack.begin(), m.pack.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
  });
  if (!name_ok) return bad("\"pack\" may hold only letters, digits, '-', '_' and '.'");
  if (!doc.contains("kernels") || !doc["kernels"].is_array()) {
    return bad("\"kernels\" is missing or not an array");
  }
  const json& kernels = doc["kernels"];
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    const json& k = kernels[i];
    if (!k.is_object() || !k.contains("name") || !k["name"].is_string()) {
      return bad(fmt::format("kernels[{}] has no \"name\"", i));
    }
    const std::string name = k["name"].get<std::string>();
    if (!m.kernels.try_emplace(name, ManifestKernel{i, k}).second) {
      return bad(fmt::format("kernels[{}] declares '{}' a second time", i, printable(name)));
    }
  }
  return m;
}

std::string caps_text(std::uint32_t caps) {
  std::vector<std::string_view> names;
  if (caps & SY_CAP_STRIDED_INPUT) names.emplace_back("strided_input");
  if (caps & SY_CAP_BROADCAST_INPUT) names.emplace_back("broadcast_input");
  if (caps & SY_CAP_IN_PLACE) names.emplace_back("in_place");
  if (caps & SY_CAP_TRADES_PRECISION) names.emplace_back("trades_precision");
  return json(names).dump();
}

// The manifest's declaration of `d` in the registration's own terms, compared field
// by field; each difference is one line.
std::vector<std::string> manifest_differences(const Declared& d, const json& k) {
  std::vector<std::string> out;
  auto text = [&](const char* field) -> std::string {
    return k.contains(field) && k[field].is_string() ? k[field].get<std::string>() : "(missing)";
  };
  auto compare = [&](std::string_view field, const std::string& declared,
                     const std::string& registered) {
    if (declared != registered) {
      out.push_back(fmt::format("{}: manifest says {}, the library registers {}", field,
                                printable(declared), printable(registered)));
    }
  };
  compare("op", text("op"), d.op);
  compare("backend", text("backend"), d.backend);
  std::string dtypes = "(missing)";
  if (k.contains("dtypes") && k["dtypes"].is_array()) {
    std::vector<std::string> names;
    for (const json& t : k["dtypes"]) names.push_back(t.is_string() ? t.get<std::string>() : "?");
    dtypes = fmt::format("{}", fmt::join(names, ","));
  }
  compare("dtypes", dtypes, d.dtypes);
  const std::string caps = k.contains("caps") ? k["caps"].dump() : "[]";
  compare("caps", caps, caps_text(d.caps));
  const json declared_precision = k.contains("precision") ? k["precision"] : json();
  const json registered_precision = json::parse(to_json(d.precision));
  if (declared_precision != registered_precision) {
    out.push_back(fmt::format("precision: manifest says {}, the library registers {}",
                              printable(declared_precision.dump(), 200),
                              registered_precision.dump()));
  }
  const json cost = k.contains("cost") && k["cost"].is_object() ? k["cost"] : json::object();
  auto cost_text = [&](const char* field, const char* fallback) {
    return cost.contains(field) && cost[field].is_string() ? cost[field].get<std::string>()
                                                           : std::string(fallback);
  };
  compare("cost.flops", cost_text("flops", "(missing)"), d.cost_flops);
  compare("cost.bytes", cost_text("bytes", "(missing)"), d.cost_bytes);
  compare("cost.overhead_ns", cost_text("overhead_ns", "0"), d.cost_overhead_ns);
  const std::string revision =
      k.contains("revision") ? k["revision"].dump() : std::string("(missing)");
  compare("revision", revision, std::to_string(d.revision));
  return out;
}

// --- from declarations to table rows -------------------------------------------

struct Staged {
  BindingKey key = OpKind::kCopy;
  DTypeList dtypes;
  BackendId backend = BackendId::kCpu;
  KernelOptions options;
};

Result<BindingKey> resolve_op(const KernelBindingTable& table, const std::string& op) {
  if (Result<OpKind> kind = parse_op(op); kind.is_ok()) return BindingKey(*kind);
  for (const RuntimeFusedInfo& f : table.runtime_fused_ops()) {
    if (f.name == op) return BindingKey(f.id);
  }
  return invalid_argument_error(fmt::format(
      "op '{}' is neither an op of op.def nor a runtime-fused recipe in the table", printable(op)));
}

Result<DTypeList> resolve_dtypes(const std::string& text) {
  std::vector<DType> types;
  std::size_t start = 0;
  while (start <= text.size()) {
    const std::size_t comma = std::min(text.find(',', start), text.size());
    SWITCHYARD_ASSIGN_OR_RETURN(DType t, parse_dtype(text.substr(start, comma - start)));
    types.push_back(t);
    start = comma + 1;
  }
  if (types.size() < 2) {
    return invalid_argument_error(
        fmt::format("dtypes '{}' name fewer than two operands", printable(text)));
  }
  if (types.size() > static_cast<std::size_t>(kMaxOperands)) {
    return invalid_argument_error(
        fmt::format("dtypes '{}' name more than {} operands", printable(text), kMaxOperands));
  }
  return DTypeList(std::span<const DType>(types));
}

Result<Staged> stage(const KernelBindingTable& table, const Declared& d,
                     const std::shared_ptr<const Library>& library, const std::string& source,
                     std::string declared_at) {
  Staged s;
  SWITCHYARD_ASSIGN_OR_RETURN(s.key, resolve_op(table, d.op));
  SWITCHYARD_ASSIGN_OR_RETURN(s.dtypes, resolve_dtypes(d.dtypes));
  SWITCHYARD_ASSIGN_OR_RETURN(s.backend, parse_backend(d.backend));
  if (table.backend_memory(s.backend) == nullptr) {
    return failed_precondition_error(
        fmt::format("backend '{}' is not in this table (not compiled into this build)", d.backend));
  }
  SWITCHYARD_ASSIGN_OR_RETURN(CostExpr cost,
                              CostExpr::compile(d.cost_flops, d.cost_bytes, d.cost_overhead_ns));
  auto kernel = std::make_shared<PackKernel>(PackKernel{d.fn, d.data, library, d.name});
  s.options = KernelOptions{.name = d.name,
                            .caps = {.strided_input = (d.caps & SY_CAP_STRIDED_INPUT) != 0,
                                     .broadcast_input = (d.caps & SY_CAP_BROADCAST_INPUT) != 0,
                                     .in_place = (d.caps & SY_CAP_IN_PLACE) != 0,
                                     .trades_precision = (d.caps & SY_CAP_TRADES_PRECISION) != 0},
                            .precision = d.precision,
                            .cost_expr = std::make_shared<const CostExpr>(std::move(cost)),
                            .source = source,
                            .revision = d.revision,
                            .data = std::move(kernel),
                            .declared_at = std::move(declared_at)};
  return s;
}

struct Installed {
  std::mutex mutex;
  std::vector<KernelPackInfo> packs;
};

Installed& installed() {
  static Installed instance;
  return instance;
}

}  // namespace

std::string kernel_pack_manifest_path(std::string_view library_path) {
  std::filesystem::path p(library_path);
  p.replace_extension(".json");
  return p.string();
}

Result<KernelPackInfo> load_kernel_pack(KernelBindingTable& table, std::string_view library_path) {
  const std::string path(library_path);
  if (std::error_code ec; !std::filesystem::is_regular_file(path, ec)) {
    return not_found_error(fmt::format("kernel pack {}: no such file", path));
  }
  KernelPackInfo info{.library_path = path, .manifest_path = kernel_pack_manifest_path(path)};
  SWITCHYARD_ASSIGN_OR_RETURN(Manifest manifest, read_manifest(info.manifest_path, path));
  info.name = manifest.pack;
  SWITCHYARD_RETURN_IF_ERROR(probe_in_child(path));
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return invalid_argument_error(fmt::format("kernel pack {}: {}", path, dl_error()));
  }
  auto library = std::make_shared<const Library>(handle);
  SWITCHYARD_ASSIGN_OR_RETURN(Entry entry, find_symbols(handle, path));

  Staging staging;
  const sy_pack_registrar registrar{SWITCHYARD_PACK_ABI_VERSION, &staging, &add_kernel_c, &fail_c};
  const int rc = entry.register_kernels(&registrar);
  SWITCHYARD_RETURN_IF_ERROR(registration_problems(path, rc, staging));

  const std::string source = "pack:" + manifest.pack;
  std::vector<std::string> problems;
  std::vector<Staged> rows;
  std::map<std::string, bool, std::less<>> registered;
  for (const Declared& d : staging.kernels) {
    auto it = manifest.kernels.find(d.name);
    if (it == manifest.kernels.end()) {
      problems.push_back(fmt::format("{} registers kernel '{}', which {} does not declare", path,
                                     printable(d.name), manifest.path));
      continue;
    }
    if (!registered.try_emplace(d.name, true).second) {
      problems.push_back(fmt::format("{} registers kernel '{}' twice", path, printable(d.name)));
      continue;
    }
    const std::string declared_at =
        fmt::format("{} (declared in {} kernels[{}])", path, manifest.path, it->second.index);
    for (const std::string& diff : manifest_differences(d, it->second.value)) {
      problems.push_back(fmt::format("kernel '{}' of {} disagrees with {} kernels[{}]: {}", d.name,
                                     path, manifest.path, it->second.index, diff));
    }
    Result<Staged> row = stage(table, d, library, source, declared_at);
    if (!row.is_ok()) {
      problems.push_back(
          fmt::format("kernel '{}' ({}): {}", d.name, declared_at, row.status().message()));
      continue;
    }
    rows.push_back(std::move(*row));
  }
  for (const auto& [name, k] : manifest.kernels) {
    if (!registered.contains(name)) {
      problems.push_back(fmt::format("{} kernels[{}] declares '{}', which {} does not register",
                                     manifest.path, k.index, printable(name), path));
    }
  }
  if (!problems.empty()) {
    return invalid_argument_error(
        fmt::format("kernel pack {} refused; nothing from it was registered:\n  {}", path,
                    fmt::join(problems, "\n  ")));
  }
  for (Staged& row : rows) {
    info.kernels.push_back(row.options.name);
    table.register_kernel(row.key, row.dtypes, row.backend, &pack_trampoline,
                          std::move(row.options));
  }
  return info;
}

Result<std::vector<KernelPackInfo>> install_kernel_packs(
    std::span<const std::string> library_paths) {
  std::vector<KernelPackInfo> loaded;
  SWITCHYARD_RETURN_IF_ERROR(update_table([&](KernelBindingTable& table) -> Status {
                               for (const std::string& path : library_paths) {
                                 SWITCHYARD_ASSIGN_OR_RETURN(KernelPackInfo info,
                                                             load_kernel_pack(table, path));
                                 loaded.push_back(std::move(info));
                               }
                               return Status::ok();
                             }).status());
  Installed& state = installed();
  const std::lock_guard lock(state.mutex);
  state.packs.insert(state.packs.end(), loaded.begin(), loaded.end());
  return loaded;
}

std::vector<std::string> kernel_packs_from_environment() {
  std::vector<std::string> paths;
  const char* value = read_environment(EnvVar::kKernelPacks);
  if (value == nullptr) return paths;
  std::string_view rest(value);
  while (!rest.empty()) {
    const std::size_t colon = std::min(rest.find(':'), rest.size());
    if (colon > 0) paths.emplace_back(rest.substr(0, colon));
    rest.remove_prefix(std::min(colon + 1, rest.size()));
  }
  return paths;
}

Status install_environment_kernel_packs() {
  static const Status outcome = [] {
    const std::vector<std::string> paths = kernel_packs_from_environment();
    if (paths.empty()) return Status::ok();
    Result<std::vector<KernelPackInfo>> packs = install_kernel_packs(paths);
    if (!packs.is_ok()) {
      return Status(packs.status().code(),
                    fmt::format("SWITCHYARD_KERNEL_PACKS: {}", packs.status().message()));
    }
    return Status::ok();
  }();
  return outcome;
}

std::vector<KernelPackInfo> installed_kernel_packs() {
  Installed& state = installed();
  const std::lock_guard lock(state.mutex);
  return state.packs;
}

}  // namespace switchyard
