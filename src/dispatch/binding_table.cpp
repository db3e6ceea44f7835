#include "switchyard/binding_table.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <string_view>

#include <fmt/format.h>

namespace switchyard {
namespace {

// FNV-1a, 64-bit: stable across runs, builds and platforms, which std::hash is not.
constexpr std::uint64_t kFnvOffset = 0xcbf29ce484222325ull;
constexpr std::uint64_t kFnvPrime = 0x100000001b3ull;

std::uint64_t fnv1a(std::uint64_t h, std::string_view bytes) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= kFnvPrime;
  }
  return h;
}

std::uint64_t fnv1a_u64(std::uint64_t h, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) {
    h ^= (v >> (8 * i)) & 0xffu;
    h *= kFnvPrime;
  }
  return h;
}

std::uint64_t revision_hash(std::string_view name, std::string_view source,
                            std::uint32_t revision) {
  std::uint64_t h = fnv1a(kFnvOffset, name);
  h = fnv1a(h, "\x1f");
  h = fnv1a(h, source);
  return fnv1a_u64(h, revision);
}

std::string key_name(BindingKey key) {
  if (auto op = key.static_op()) return std::string(name(*op));
  return fmt::format("fused#{}", key.raw());
}

// A sibling that a shape-blind lookup may hand out: dense operands of any shape.
bool serves_any_dense_shape(const BindingEntry& e) {
  return !e.caps.requires_broadcast && e.admits == nullptr;
}

}  // namespace

// --- DTypeList --------------------------------------------------------------

DTypeList::DTypeList(std::span<const DType> dtypes) {
  overflowed_ = dtypes.size() > kMaxOperands;
  size_ = static_cast<std::uint8_t>(std::min<std::size_t>(dtypes.size(), kMaxOperands));
  std::copy_n(dtypes.begin(), size_, items_.begin());
}

std::string DTypeList::to_string() const {
  std::string text;
  for (std::size_t i = 0; i < size_; ++i) {
    if (i) text += ',';
    text += name(items_[i]);
  }
  if (overflowed_) text += ",...";
  return text;
}

bool operator==(const DTypeList& a, const DTypeList& b) {
  return a.size_ == b.size_ && a.overflowed_ == b.overflowed_ &&
         std::equal(a.items_.begin(), a.items_.begin() + a.size_, b.items_.begin());
}

// --- BindingEntry ------------------------------------------------------------

CostEstimate BindingEntry::estimate(const CostInputs& in) const {
  if (cost_expr) {
    Result<CostEstimate> r = cost_expr->evaluate(in);
    // A formula that cannot be evaluated for this shape has no estimate: say
    // unknown rather than inventing a number.
    return r.is_ok() ? *r : CostEstimate::unknown();
  }
  return cost(in);
}

// --- helpers -------------------------------------------------------------------

std::string describe_key(BindingKey key, const DTypeList& dtypes, BackendId backend) {
  return fmt::format("{}({})@{}", key_name(key), dtypes.to_string(), name(backend));
}

std::string kernel_name(BindingKey key, const DTypeList& dtypes, BackendId backend,
                        std::string_view variant) {
  std::string text;
  if (auto op = key.static_op()) {
    text = name(*op);
  } else {
    text = fmt::format("fused{}", key.raw());
  }
  const std::span<const DType> d = dtypes.span();
  const bool one_dtype = std::all_of(d.begin(), d.end(), [&](DType t) { return t == d[0]; });
  for (std::size_t i = 0; i < (one_dtype ? std::min<std::size_t>(d.size(), 1) : d.size()); ++i) {
    text += '_';
    text += name(d[i]);
  }
  text += "__";
  text += name(backend);
  if (!variant.empty()) {
    text += '_';
    text += variant;
  }
  return text;
}

std::string describe_site(const std::source_location& site) {
  std::string_view file = site.file_name();
  // Paths are build-machine specific; from "src/" or "tests/" on they are stable.
  for (std::string_view marker : {"/src/", "/tests/", "/tools/", "/bench/"}) {
    if (auto pos = file.rfind(marker); pos != std::string_view::npos) {
      file.remove_prefix(pos + 1);
      break;
    }
  }
  return fmt::format("{}:{}", file, site.line());
}

std::string describe_site(const BindingEntry& entry) {
  return entry.declared_at.empty() ? describe_site(entry.site) : entry.declared_at;
}

std::string describe_site(const CoverageBinding& binding) {
  return binding.declared_at.empty() ? describe_site(binding.site) : binding.declared_at;
}

KernelBindingTable::PackedKey KernelBindingTable::pack(BindingKey key, const DTypeList& dtypes,
                                                       BackendId backend) {
  static_assert(sizeof(DType) == 1 && kMaxOperands == 8, "dtypes must pack into one word");
  std::uint64_t types = 0;
  for (std::size_t i = 0; i < dtypes.size(); ++i) {
    types |= static_cast<std::uint64_t>(dtypes[i]) << (8 * i);
  }
  const std::uint64_t head = static_cast<std::uint64_t>(key.raw()) |
                             (static_cast<std::uint64_t>(backend) << 16) |
                             (static_cast<std::uint64_t>(dtypes.size()) << 24) |
                             (static_cast<std::uint64_t>(dtypes.overflowed()) << 32);
  return {head, types};
}

std::size_t KernelBindingTable::hash(const PackedKey& key) {
  // Multiply-xorshift mixing of both words: cheap and well spread for small keys.
  std::uint64_t h = (key.head * 0x9e3779b97f4a7c15ull) ^ (key.types * 0xc2b2ae3d27d4eb4full);
  h ^= h >> 32;
  h *= 0xd6e8feb86659fd93ull;
  return static_cast<std::size_t>(h ^ (h >> 32));
}

void KernelBindingTable::insert_index(const PackedKey& key, std::uint32_t slot) {
  const std::size_t mask = index_.size() - 1;
  for (std::size_t i = hash(key) & mask;; i = (i + 1) & mask) {
    if (index_[i].slot == kEmptyCell) {
      index_[i] = {key, slot};
      return;
    }
  }
}

Result<std::shared_ptr<void>> pack_operand(const WeightPacking& packing, TensorView& operand,
                                           ExecContext& ctx) {
  const std::int64_t bytes = packing.packed_bytes(operand.dtype(), operand.shape());
  if (bytes < 0) {
    return invalid_argument_error(fmt::format("{} cannot be packed", describe(operand)));
  }
  void* p = ::operator new (static_cast<std::size_t>(std::max<std::int64_t>(bytes, 1)),
                            std::align_val_t{64});
  std::shared_ptr<void> copy(p, [](void* q) { ::operator delete (q, std::align_val_t{64}); });
  SWITCHYARD_RETURN_IF_ERROR(packing.pack(operand, copy.get(), ctx));
  operand = TensorView::contiguous(copy.get(), operand.dtype(), operand.shape());
  return copy;
}

// --- registration -------------------------------------------------------------

void KernelBindingTable::register_kernel(BindingKey key, DTypeList dtypes, BackendId backend,
                                         KernelFn fn, KernelOptions options,
                                         std::source_location site) {
  BindingEntry entry;
  entry.fn = fn;
  entry.revision_hash = revision_hash(options.name, options.source, options.revision);
  entry.name = std::move(options.name);
  entry.caps = options.caps;
  entry.precision = options.precision;
  entry.cost = options.cost != nullptr ? options.cost : &unknown_cost;
  entry.cost_expr = std::move(options.cost_expr);
  entry.source = std::move(options.source);
  entry.is_generic = options.is_generic;
  entry.admits = options.admits;
  entry.site = site;
  entry.data = std::move(options.data);
  entry.declared_at = std::move(options.declared_at);
  entry.packing = options.packing;

  const PackedKey packed = pack(key, dtypes, backend);
  std::uint32_t slot = find_slot(packed);
  if (slot == kEmptyCell) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.push_back(Slot{key, dtypes, backend, {}});
    if (2 * slots_.size() > index_.size()) {
      rebuild_index();
    } else {
      insert_index(packed, slot);
    }
  }
  slots_[slot].alternatives.push_back(std::move(entry));
  ++entry_count_;
  finalized_ = false;
}

void KernelBindingTable::register_rows(BackendId backend, std::span<const Row> rows) {
  for (const Row& row : rows) {
    register_kernel(row.key, row.dtypes, backend, row.fn, row.options, row.site);
  }
}

namespace {

// One kernel is one function with one registration datum: kernels loaded at run
// time share a trampoline and differ only in their data.
bool same_kernel(const BindingEntry& a, const BindingEntry& b) {
  return a.fn == b.fn && a.data == b.data;
}

}  // namespace

Status KernelBindingTable::finalize() {
  auto payload = std::make_shared<RegistrationProblems>();
  auto add = [&](std::string message, const std::source_location& first,
                 std::optional<std::source_location> second = std::nullopt) {
    payload->problems.push_back({std::move(message), first, second});
  };
  std::map<std::string_view, const BindingEntry*> by_name;
  bool duplicate_fn = false;
  for (const Slot& slot : slots_) {
    const std::string where = describe_key(slot.key, slot.dtypes, slot.backend);
    if (slot.dtypes.overflowed()) {
      add(fmt::format("{}: more than {} operands", where, kMaxOperands),
          slot.alternatives.front().site);
    }
    if (!slot.key.is_static() && runtime_fused(*slot.key.fused_id()) == nullptr) {
      add(fmt::format("{}: runtime-fused id was never registered", where),
          slot.alternatives.front().site);
    }
    for (std::size_t i = 0; i < slot.alternatives.size(); ++i) {
      const BindingEntry& e = slot.alternatives[i];
      if (e.fn == nullptr) add(fmt::format("{}: null kernel function", where), e.site);
      if (e.name.empty()) add(fmt::format("{}: kernel has no name", where), e.site);
      if (e.packing != nullptr &&
          (e.packing->pack == nullptr || e.packing->packed_bytes == nullptr ||
           e.packing->operand < 0 ||
           static_cast<std::size_t>(e.packing->operand) + 1 >= slot.dtypes.size())) {
        add(fmt::format("{}: kernel '{}' packs operand {} without a pack function, a size "
                        "function or such an input",
                        where, e.name, e.packing->operand),
            e.site);
      }
      for (std::size_t j = 0; j < i; ++j) {
        if (same_kernel(slot.alternatives[j], e) && e.fn != nullptr) {
          duplicate_fn = true;
          add(fmt::format("{}: kernel '{}' registered twice under one key (at {} and {})", where,
                          e.name, describe_site(slot.alternatives[j]), describe_site(e)),
              slot.alternatives[j].site, e.site);
        }
      }
      if (e.name.empty()) continue;
      auto [it, inserted] = by_name.try_emplace(e.name, &e);
      if (!inserted && !same_kernel(*it->second, e)) {
        add(fmt::format("kernel name '{}' names two different kernels (at {} and {})", e.name,
                        describe_site(*it->second), describe_site(e)),
            it->second->site, e.site);
      }
    }
  }
  if (payload->problems.empty()) {
    finalized_ = true;
    return Status::ok();
  }
  std::string message =
      fmt::format("binding table has {} registration problem(s):", payload->problems.size());
  for (const auto& p : payload->problems) message += "\n  " + p.message;
  return Status(duplicate_fn ? StatusCode::kAlreadyExists : StatusCode::kInvalidArgument,
                std::move(message), std::move(payload));
}

void KernelBindingTable::fill_unset_precision(BackendId backend,
                                              const PrecisionGuarantee& fallback) {
  for (Slot& slot : slots_) {
    if (slot.backend != backend) continue;
    for (BindingEntry& e : slot.alternatives) {
      if (e.precision.is_unaudited()) e.precision = fallback;
    }
  }
}

void KernelBindingTable::fill_unset_cost(BackendId backend, CostFn (*dispatcher)(OpKind)) {
  for (Slot& slot : slots_) {
    if (slot.backend != backend) continue;
    std::optional<OpKind> op = slot.key.static_op();
    if (!op) {
      const RuntimeFusedInfo* info = runtime_fused(*slot.key.fused_id());
      if (info == nullptr || info->region.nodes.empty()) continue;
      op = info->region.nodes.back().op;
    }
    for (BindingEntry& e : slot.alternatives) {
      if (!e.has_known_cost()) e.cost = dispatcher(*op);
    }
  }
}

// --- lookups -------------------------------------------------------------------

const KernelBindingTable::Slot* KernelBindingTable::find(BindingKey key, const DTypeList& dtypes,
                                                         BackendId backend) const {
  const std::uint32_t slot = find_slot(pack(key, dtypes, backend));
  return slot == kEmptyCell ? nullptr : &slots_[slot];
}

std::uint32_t KernelBindingTable::find_slot(const PackedKey& packed) const {
  if (index_.empty()) return kEmptyCell;
  const std::size_t mask = index_.size() - 1;
  for (std::size_t i = hash(packed) & mask;; i = (i + 1) & mask) {
    const IndexCell& cell = index_[i];
    if (cell.slot == kEmptyCell || cell.key == packed) return cell.slot;
  }
}

Result<const BindingEntry*> KernelBindingTable::lookup(BindingKey key, const DTypeList& dtypes,
                                                       BackendId backend) const {
  const Slot* slot = find(key, dtypes, backend);
  if (slot == nullptr) [[unlikely]]
    return miss_error(key, dtypes, backend);
  return &slot->alternatives.front();
}

Result<const BindingEntry*> KernelBindingTable::lookup_with_caps(BindingKey key,
                                                                 const DTypeList& dtypes,
                                                                 BackendId backend) const {
  if (const Slot* slot = find(key, dtypes, backend)) [[likely]] {
    for (const BindingEntry& e : slot->alternatives) {
      if (serves_any_dense_shape(e)) return &e;
    }
  }
  return miss_error(key, dtypes, backend);
}

std::span<const BindingEntry> KernelBindingTable::lookup_alternatives(BindingKey key,
                                                                      const DTypeList& dtypes,
                                                                      BackendId backend) const {
  const Slot* slot = find(key, dtypes, backend);
  return slot ? std::span<const BindingEntry>(slot->alternatives) : std::span<const BindingEntry>();
}

bool KernelBindingTable::backend_supports(BindingKey key, const DTypeList& dtypes,
                                          BackendId backend) const {
  const Slot* slot = find(key, dtypes, backend);
  if (slot == nullptr) return false;
  return std::any_of(slot->alternatives.begin(), slot->alternatives.end(),
                     [](const BindingEntry& e) { return serves_any_dense_shape(e); });
}

PrecisionGuarantee KernelBindingTable::lookup_precision(BindingKey key, const DTypeList& dtypes,
                                                        BackendId backend) const {
  const Slot* slot = find(key, dtypes, backend);
  return slot ? slot->alternatives.front().precision : PrecisionGuarantee{};
}

CostFn KernelBindingTable::lookup_cost(BindingKey key, const DTypeList& dtypes,
                                       BackendId backend) const {
  const Slot* slot = find(key, dtypes, backend);
  return slot ? slot->alternatives.front().cost : &unknown_cost;
}

std::vector<CoverageBinding> KernelBindingTable::coverage() const {
  std::vector<CoverageBinding> out;
  out.reserve(slots_.size());
  for (const Slot& s : slots_) {
    out.push_back({s.backend, s.key, s.dtypes, s.alternatives.front().name,
                   s.alternatives.front().site, s.alternatives.front().declared_at});
  }
  return out;
}

void KernelBindingTable::add_backend(BackendId backend, BackendMemory& memory) {
  memory_[static_cast<std::size_t>(backend)] = &memory;
}

std::vector<BackendId> KernelBindingTable::backends() const {
  std::vector<BackendId> out;
  for (BackendId b : kAllBackends) {
    if (backend_memory(b) != nullptr ||
        std::any_of(slots_.begin(), slots_.end(), [b](const Slot& s) { return s.backend == b; })) {
      out.push_back(b);
    }
  }
  return out;
}

Status KernelBindingTable::miss_error(BindingKey key, const DTypeList& dtypes,
                                      BackendId backend) const {
  auto payload = std::make_shared<NoBackendForOp>();
  payload->key = key;
  payload->dtypes = dtypes;
  payload->backend = backend;
  for (const Slot& s : slots_) {
    if (s.key == key) {
      payload->available.push_back({s.backend, s.key, s.dtypes, s.alternatives.front().name,
                                    s.alternatives.front().site,
                                    s.alternatives.front().declared_at});
    }
  }
  for (BackendId b : kAllBackends) {
    if (std::any_of(payload->available.begin(), payload->available.end(),
                    [b](const CoverageBinding& c) { return c.backend == b; })) {
      payload->backends_for_op.push_back(b);
    }
  }
  const bool op_known = !payload->available.empty();
  if (!op_known) payload->available = coverage();
  if (const Slot* slot = find(key, dtypes, backend)) {
    for (const BindingEntry& e : slot->alternatives) {
      if (e.caps.requires_broadcast) {
        payload->rejected.push_back(
            fmt::format("{}: requires a broadcast operand, operands are dense", e.name));
      } else if (e.admits != nullptr) {
        payload->rejected.push_back(
            fmt::format("{}: serves only the shapes it admits, not every shape", e.name));
      }
    }
  }

  std::string message = fmt::format("no kernel for {}", describe_key(key, dtypes, backend));
  if (dtypes.overflowed()) {
    message += fmt::format(" (more than {} operands)", kMaxOperands);
  }
  for (const std::string& r : payload->rejected) message += "\n  rejected " + r;
  if (slots_.empty()) {
    message += "\n  the binding table is empty";
  } else if (op_known) {
    std::vector<std::string> names;
    for (BackendId b : payload->backends_for_op) names.emplace_back(name(b));
    message += fmt::format("\n  backends serving {}: {}", key_name(key), fmt::join(names, ", "));
    message += "\n  registered combinations:";
    for (const CoverageBinding& c : payload->available) {
      message += fmt::format("\n    {} ({} at {})", describe_key(c.key, c.dtypes, c.backend),
                             c.kernel_name, describe_site(c));
    }
  } else {
    std::vector<std::string> names;
    for (BackendId b : backends()) names.emplace_back(name(b));
    message += fmt::format("\n  no backend registers {} at any dtypes; backends in the table: {}",
                           key_name(key), fmt::join(names, ", "));
    message += fmt::format(" ({} bindings; `switchyard coverage` lists them)", slots_.size());
  }
  return Status(StatusCode::kNotFound, std::move(message), std::move(payload));
}

// --- runtime-fused ops ---------------------------------------------------------

std::uint64_t FusedRegion::structural_hash() const {
  std::uint64_t h = fnv1a_u64(kFnvOffset, static_cast<std::uint64_t>(num_inputs));
  for (const Node& n : nodes) {
    h = fnv1a_u64(h, static_cast<std::uint64_t>(n.op));
    h = fnv1a_u64(h, n.inputs.size());
    for (int i : n.inputs)
      h = fnv1a_u64(h, static_cast<std::uint64_t>(static_cast<std::int64_t>(i)));
  }
  h = fnv1a_u64(h, outputs.size());
  for (int o : outputs) h = fnv1a_u64(h, static_cast<std::uint64_t>(o));
  return h;
}

Status FusedRegion::validate() const {
  if (num_inputs < 0) return invalid_argument_error("fused region: negative input count");
  if (nodes.empty()) return invalid_argument_error("fused region: no nodes");
  if (outputs.empty()) return invalid_argument_error("fused region: no outputs");
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    for (int ref : nodes[n].inputs) {
      const bool region_input = ref < 0 && -ref <= num_inputs;
      const bool earlier_node = ref >= 0 && static_cast<std::size_t>(ref) < n;
      if (!region_input && !earlier_node) {
        return invalid_argument_error(fmt::format(
            "fused region: node {} reads {}, which is neither a region input nor an earlier "
            "node",
            n, ref));
      }
    }
  }
  for (int o : outputs) {
    if (o < 0 || static_cast<std::size_t>(o) >= nodes.size()) {
      return invalid_argument_error(fmt::format("fused region: output {} is not a node", o));
    }
  }
  return Status::ok();
}

Result<FusedOpId> KernelBindingTable::register_runtime_fused(std::string name, FusedRegion region) {
  SWITCHYARD_RETURN_IF_ERROR(region.validate().with_context(name));
  const std::uint64_t hash = region.structural_hash();
  auto& same_hash = fused_by_hash_[hash];
  for (std::uint16_t raw : same_hash) {
    const RuntimeFusedInfo* existing = runtime_fused(FusedOpId{raw});
    if (existing != nullptr && existing->region == region) return existing->id;
  }
  if (fused_.size() >= 0xffffu - kFirstFusedOpId) {
    return resource_exhausted_error("runtime-fused id range exhausted");
  }
  const FusedOpId id{static_cast<std::uint16_t>(kFirstFusedOpId + fused_.size())};
  fused_.push_back({id, std::move(name), std::move(region)});
  same_hash.push_back(id.value);
  return id;
}

const RuntimeFusedInfo* KernelBindingTable::runtime_fused(FusedOpId id) const {
  if (id.value < kFirstFusedOpId) return nullptr;
  const std::size_t index = id.value - kFirstFusedOpId;
  return index < fused_.size() ? &fused_[index] : nullptr;
}

bool KernelBindingTable::has_runtime_fused(FusedOpId id, BackendId backend) const {
  return std::any_of(slots_.begin(), slots_.end(), [&](const Slot& s) {
    return s.key == BindingKey(id) && s.backend == backend;
  });
}

RuntimeFusedLookup KernelBindingTable::unique_runtime_fused(FusedOpId id, BackendId backend) const {
  RuntimeFusedLookup result;
  const Slot* only = nullptr;
  // slots_ is in registration order, so the candidate list is deterministic.
  for (const Slot& s : slots_) {
    if (s.key == BindingKey(id) && s.backend == backend) {
      result.dtypes.push_back(s.dtypes);
      only = &s;
    }
  }
  if (result.dtypes.empty()) {
    result.kind = RuntimeFusedLookup::Kind::kNotBound;
  } else if (result.dtypes.size() > 1) {
    result.kind = RuntimeFusedLookup::Kind::kAmbiguous;
  } else {
    result.kind = RuntimeFusedLookup::Kind::kUnique;
    result.entry = &only->alternatives.front();
  }
  return result;
}

// --- iteration and masking -------------------------------------------------------

KernelBindingTable::EntryRange KernelBindingTable::entries() const {
  const Slot* begin = slots_.data();
  const Slot* end = slots_.data() + slots_.size();
  return {EntryIterator(begin, end), EntryIterator(end, end)};
}

std::vector<CoverageBinding> KernelBindingTable::remove_if(
    FunctionRef<bool(const Slot&, const BindingEntry&)> hide) {
  std::vector<CoverageBinding> removed;
  for (Slot& slot : slots_) {
    auto& alts = slot.alternatives;
    auto kept = std::stable_partition(alts.begin(), alts.end(),
                                      [&](const BindingEntry& e) { return !hide(slot, e); });
    for (auto it = kept; it != alts.end(); ++it) {
      removed.push_back({slot.backend, slot.key, slot.dtypes, it->name, it->site, it->declared_at});
    }
    entry_count_ -= static_cast<std::size_t>(alts.end() - kept);
    alts.erase(kept, alts.end());
  }
  std::erase_if(slots_, [](const Slot& s) { return s.alternatives.empty(); });
  rebuild_index();
  return removed;
}

void KernelBindingTable::rebuild_index() {
  std::size_t capacity = 16;
  while (capacity < 2 * slots_.size()) capacity *= 2;
  index_.assign(capacity, IndexCell{});
  for (std::size_t i = 0; i < slots_.size(); ++i) {
    insert_index(pack(slots_[i].key, slots_[i].dtypes, slots_[i].backend),
                 static_cast<std::uint32_t>(i));
  }
}

}  // namespace switchyard
