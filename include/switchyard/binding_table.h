// KernelBindingTable: which kernels exist, keyed by (op, operand dtypes, backend).
//
// Overview
//   A key is (BindingKey, DTypeList, BackendId): the static op or runtime-fused id,
//   the dtypes of the operands (inputs in order, then outputs) and the backend. One
//   key holds an ordered list of sibling alternatives (a SIMD kernel, a BLAS call,
//   the portable reference ...). Each alternative is a BindingEntry: the kernel, its
//   capability flags, precision claim, cost function, provenance and the place it
//   was registered.
//
//   Registration appends and never fails on the spot; `finalize()` validates the
//   whole table once after bulk registration and reports every problem (the same
//   kernel twice under one key, names reused, malformed registrations) as a typed
//   Status. Lookups never guess: a miss is a NoBackendForOp error that shows what
//   is registered, and an ambiguous runtime-fused resolution is refused.
//
// Sibling order
//   Siblings keep registration order, and a backend registers best first and its
//   portable reference last. `lookup` returns the first sibling; `lookup_with_caps`
//   the first that can take dense operands. Choosing by cost and precision is the
//   planner's job (it ranks `lookup_alternatives`); the order here is only the
//   deterministic tie-break it falls back on.
//
// Threads
//   The table is a plain value: safe for concurrent reads, not for concurrent
//   writes. The process-wide table is published as an immutable snapshot (see
//   dispatch.h), so readers never lock.
//
// Example
//   KernelBindingTable table;
//   table.register_kernel(OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32},
//                         BackendId::kCpu, &add_f32,
//                         {.name = "add_f32__cpu_ref", .source = "portable"});
//   SWITCHYARD_RETURN_IF_ERROR(table.finalize());
//   SWITCHYARD_ASSIGN_OR_RETURN(const BindingEntry* e,
//       table.lookup(OpKind::kAdd, {DType::kF32, DType::kF32, DType::kF32},
//                    BackendId::kCpu));
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <memory>
#include <optional>
#include <source_location>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "switchyard/backend.h"
#include "switchyard/backend_memory.h"
#include "switchyard/cost.h"
#include "switchyard/dtype.h"
#include "switchyard/kernel.h"
#include "switchyard/op.h"
#include "switchyard/precision.h"
#include "switchyard/status.h"

namespace switchyard {

// Runtime-fused ids start here, above every static op.
inline constexpr std::uint16_t kFirstFusedOpId = 0x4000;
static_assert(kOpCount < kFirstFusedOpId, "static ops must stay below the fused range");

// The id of a runtime-fused op (a recipe registered while the process runs).
struct FusedOpId {
  std::uint16_t value = 0;
  friend bool operator==(FusedOpId, FusedOpId) = default;
};

// A static op or a runtime-fused id.
class BindingKey {
 public:
  // NOLINTNEXTLINE(google-explicit-constructor): an op *is* a binding key.
  constexpr BindingKey(OpKind op) : raw_(static_cast<std::uint16_t>(op)) {}
  // NOLINTNEXTLINE(google-explicit-constructor)
  constexpr BindingKey(FusedOpId id) : raw_(id.value) {}

  [[nodiscard]] constexpr bool is_static() const { return raw_ < kFirstFusedOpId; }
  [[nodiscard]] constexpr std::optional<OpKind> static_op() const {
    return is_static() ? std::optional<OpKind>(static_cast<OpKind>(raw_)) : std::nullopt;
  }
  [[nodiscard]] constexpr std::optional<FusedOpId> fused_id() const {
    return is_static() ? std::nullopt : std::optional<FusedOpId>(FusedOpId{raw_});
  }
  [[nodiscard]] constexpr std::uint16_t raw() const { return raw_; }
  friend constexpr bool operator==(BindingKey, BindingKey) = default;

 private:
  std::uint16_t raw_;
};

inline constexpr int kMaxOperands = 8;

// The per-operand dtypes of a key, stored inline (no allocation). Holds at most
// kMaxOperands; a longer list is remembered as overflowed so that registration can
// report it at finalize() and lookups can refuse it.
class DTypeList {
 public:
  DTypeList() = default;
  DTypeList(std::initializer_list<DType> dtypes)
      : DTypeList(std::span<const DType>(dtypes.begin(), dtypes.size())) {}
  explicit DTypeList(std::span<const DType> dtypes);

  [[nodiscard]] std::span<const DType> span() const { return {items_.data(), size_}; }
  [[nodiscard]] std::size_t size() const { return size_; }
  [[nodiscard]] DType operator[](std::size_t i) const { return items_[i]; }
  [[nodiscard]] bool overflowed() const { return overflowed_; }
  // "f32,f32->f32" needs the input count, so this gives "f32,f32,f32".
  [[nodiscard]] std::string to_string() const;

  friend bool operator==(const DTypeList& a, const DTypeList& b);

 private:
  std::array<DType, kMaxOperands> items_{};
  std::uint8_t size_ = 0;
  bool overflowed_ = false;
};

// Capability flags of one alternative.
// Note [Precision trades]
// Some siblings are fast because they compute in a narrower type than their key's
// dtypes (cuda's TF32 product of f32 operands). Their claims are honest and
// verified, but a plan that picked them on cost alone would lower its precision
// without anyone asking: a calibration profile ranks them first, and so would any
// cost model that knew their speed. Such a sibling says so (trades_precision), and
// the planner rejects it (RejectReason::kPrecisionTrade) unless the plan admits
// precision trades (PlanOptions::admit_precision_trades; the tool's
// --admit-precision-trades). Admitted, it competes on cost like any sibling and
// must still meet the precision floor where one is set.
struct KernelCaps {
  // Accepts inputs with arbitrary strides; otherwise the executor makes inputs
  // contiguous before the call.
  bool strided_input = false;
  // Accepts broadcast inputs (stride 0 in a dimension longer than 1).
  bool broadcast_input = false;
  // Only correct when an operand is broadcast (it reads element 0 of a stride-0
  // operand): a dense operand must never be routed here.
  bool requires_broadcast = false;
  // May write its output over its first input.
  bool in_place = false;
  // Computes in a narrower type than its key's dtypes to be faster than a
  // sibling with a tighter claim (Note [Precision trades]).
  bool trades_precision = false;

  friend bool operator==(const KernelCaps&, const KernelCaps&) = default;
};

// Note [Prepacked weights]
// A sibling may read one operand, a weight, in a layout of its own that is made
// once at load rather than on every call: interleaved rows and unpacked levels
// for a quantized GEMM, say. The key's dtype stays the file's (a prepacked q4_k
// weight is still a q4_k operand: the layout is how this sibling stores it, as an
// instruction set is how it computes), and the sibling says how to pack:
//   - the planner routes a node to it only where that operand is a constant (a
//     weight), makes the packed copy a once-per-executor buffer like a device
//     upload, and shows it in explain; the cost function prices the packed
//     bytes, so decode keeps the file's layout where that reads fewer bytes;
//   - the executor packs while it is created and reports the bytes
//     (Executor::packed_bytes); the file's bytes are never modified;
//   - the conformance harness and the calibrator pack before they call it;
//   - the kernel refuses bytes that are not its layout (pack writes a header it
//     checks), so a caller that forgets to pack gets an error, not garbage.
struct WeightPacking {
  // Which input is packed.
  int operand = 1;
  // Bytes of the packed form of a `dtype` tensor of `shape` (-1: this sibling
  // cannot pack that shape).
  std::int64_t (*packed_bytes)(DType dtype, const Shape& shape) = nullptr;
  // Writes the packed form of `src` (host memory, contiguous) to `dst`
  // (packed_bytes bytes, 64-byte aligned, host memory). Errors name the tensor's
  // position that could not be packed.
  Status (*pack)(const TensorView& src, void* dst, ExecContext& ctx) = nullptr;
};

// Packs host tensor `operand` for a sibling with `packing` into 64-byte aligned
// host memory and points `operand` at the packed copy (same dtype and shape),
// which the result owns: keep it alive for as long as the view is used. For
// callers that run such a sibling outside an executor (the conformance harness,
// the calibrator, benchmarks, tests, the Python binding). On error `operand` is
// unchanged.
[[nodiscard]] Result<std::shared_ptr<void>> pack_operand(const WeightPacking& packing,
                                                         TensorView& operand, ExecContext& ctx);

// Shape admission of a sibling that serves only some shapes (a matvec kernel for
// M = 1). Receives the call's shapes in binding-key order (inputs, then outputs) and
// says whether this sibling is the right kernel for them. A sibling with a predicate
// must still be correct (or refuse with a Status) for any shape it is handed; the
// predicate states where it is meant to be chosen, not where it is safe.
using ShapeAdmitFn = bool (*)(std::span<const Shape> shapes);

// Optional metadata of a registration. Every field has a safe default; use
// designated initializers: {.name = "...", .precision = ..., .source = "openblas"}.
struct KernelOptions {
  // The kernel's name, unique in the table: `<op>_<dtypes>__<backend>_<variant>`,
  // as kernel_name() builds it.
  std::string name;
  KernelCaps caps{};
  PrecisionGuarantee precision{};
  CostFn cost = &unknown_cost;
  // A compiled cost formula; when set, it is preferred over `cost`.
  std::shared_ptr<const CostExpr> cost_expr;
  // Where the implementation comes from: "portable", "avx2", "avx512", "openblas",
  // "cublas", ... Diagnostic only.
  std::string source = "portable";
  // The kernel handles any layout by construction (a structural fallback).
  bool is_generic = false;
  // Null: the sibling serves every shape. Otherwise only the shapes it admits;
  // lookup_with_caps and backend_supports skip it (it is no general fallback), and a
  // planner that ranks siblings for a concrete shape asks `admits_shapes` first.
  ShapeAdmitFn admits = nullptr;
  // Bump when the kernel's numerics change: the verification ledger keys audits by
  // (name, revision hash), so a new revision needs a new audit.
  std::uint32_t revision = 1;
  // Handed to the kernel as KernelCall::data, and kept alive (with whatever it
  // owns) as long as an entry holds it: a kernel loaded at run time shares one
  // trampoline function and finds its own code here (kernel_packs.h).
  std::shared_ptr<const void> data;
  // Where a kernel loaded at run time was declared ("libfast.so, declared in
  // fast.json kernels[0]"); empty for a compiled-in kernel, whose site says.
  std::string declared_at;
  // Set when the sibling reads a weight packed at load (Note [Prepacked
  // weights]); a static object that outlives the table.
  const WeightPacking* packing = nullptr;
};

// One alternative at a key.
struct BindingEntry {
  KernelFn fn = nullptr;
  std::string name;
  KernelCaps caps;
  PrecisionGuarantee precision;
  CostFn cost = &unknown_cost;
  std::shared_ptr<const CostExpr> cost_expr;
  std::string source;
  bool is_generic = false;
  ShapeAdmitFn admits = nullptr;
  // Stable across runs and builds: a hash of name, source and revision.
  std::uint64_t revision_hash = 0;
  std::source_location site;
  std::shared_ptr<const void> data;
  std::string declared_at;
  const WeightPacking* packing = nullptr;

  [[nodiscard]] bool has_known_cost() const {
    return cost_expr != nullptr || cost != &unknown_cost;
  }
  // Whether this sibling serves a call with these shapes (inputs, then outputs):
  // true when it has no admission predicate.
  [[nodiscard]] bool admits_shapes(std::span<const Shape> shapes) const {
    return admits == nullptr || admits(shapes);
  }
  // The estimate from cost_expr when set, else from cost.
  [[nodiscard]] CostEstimate estimate(const CostInputs& in) const;
};

// A (backend, op, dtypes) combination that exists, and where it was registered.
struct CoverageBinding {
  BackendId backend;
  BindingKey key;
  DTypeList dtypes;
  std::string kernel_name;
  std::source_location site;
  std::string declared_at;
};

// The typed payload of a lookup miss (code kNotFound).
struct NoBackendForOp : StatusPayload {
  BindingKey key = OpKind::kCopy;
  DTypeList dtypes;
  BackendId backend = BackendId::kCpu;
  // Distinct backends that register this op (any dtypes), in BackendId order.
  std::vector<BackendId> backends_for_op;
  // What exists for this op; every binding in the table when the op has none.
  std::vector<CoverageBinding> available;
  // Why each sibling at the exact key was rejected, when the key exists.
  std::vector<std::string> rejected;
};

// The typed payload of finalize()'s failure (code kAlreadyExists or
// kInvalidArgument): every problem found, each naming its registration sites.
struct RegistrationProblems : StatusPayload {
  struct Problem {
    std::string message;
    std::source_location first_site;
    std::optional<std::source_location> second_site;
  };
  std::vector<Problem> problems;
};

// The shape of a runtime-fused recipe: nodes in topological order, each reading
// region inputs (negative: -1 is input 0, -2 input 1 ...) or earlier nodes.
struct FusedRegion {
  struct Node {
    OpKind op;
    std::vector<int> inputs;
    friend bool operator==(const Node&, const Node&) = default;
  };
  int num_inputs = 0;
  std::vector<Node> nodes;
  // Indices of the nodes whose values leave the region.
  std::vector<int> outputs;
  friend bool operator==(const FusedRegion&, const FusedRegion&) = default;
  // A hash of the structure alone (not of the name).
  [[nodiscard]] std::uint64_t structural_hash() const;
  // Checks topological order and that every reference is in range.
  [[nodiscard]] Status validate() const;
};

struct RuntimeFusedInfo {
  FusedOpId id;
  std::string name;
  FusedRegion region;
};

// The answer of unique_runtime_fused: three facts with three different fixes.
struct RuntimeFusedLookup {
  enum class Kind : unsigned char {
    kNotBound,   // no kernel for (id, backend) at any dtypes
    kAmbiguous,  // several dtype tuples are bound; the caller must name one
    kUnique,     // exactly one dtype tuple; `entry` is its first sibling
  };
  Kind kind = Kind::kNotBound;
  const BindingEntry* entry = nullptr;
  // The bound dtype tuples, in registration order (one when unique).
  std::vector<DTypeList> dtypes;
};

class KernelBindingTable {
 public:
  // One decision point: a key and its siblings in registration order.
  struct Slot {
    BindingKey key;
    DTypeList dtypes;
    BackendId backend;
    std::vector<BindingEntry> alternatives;
  };

  // A registration as data, so a backend can list its kernels in a table. The
  // site defaults to where the row is written.
  struct Row {
    Row(BindingKey row_key, DTypeList row_dtypes, KernelFn row_fn, KernelOptions row_options,
        std::source_location row_site = std::source_location::current())
        : key(row_key),
          dtypes(row_dtypes),
          fn(row_fn),
          options(std::move(row_options)),
          site(row_site) {}
    BindingKey key;
    DTypeList dtypes;
    KernelFn fn;
    KernelOptions options;
    std::source_location site;
  };

  KernelBindingTable() = default;

  // A backend's section: its identity and memory hooks. A backend adds it once,
  // from its registration function, before its kernels; the executor allocates
  // and copies through it (backend_memory.h). `memory` must outlive every table
  // holding it (backends register process-lifetime objects). Adding a section
  // again replaces its memory.
  void add_backend(BackendId backend, BackendMemory& memory);
  // The memory `backend` registered, or null when it added no section.
  [[nodiscard]] BackendMemory* backend_memory(BackendId backend) const {
    return memory_[static_cast<std::size_t>(backend)];
  }

  // Appends a sibling at (key, dtypes, backend). Never fails here: problems are
  // reported by finalize().
  void register_kernel(BindingKey key, DTypeList dtypes, BackendId backend, KernelFn fn,
                       KernelOptions options = {},
                       std::source_location site = std::source_location::current());
  // Registers every row for `backend`, in order.
  void register_rows(BackendId backend, std::span<const Row> rows);

  // Validates the table: the same function twice under one key, a name used by two
  // entries, a null function, an empty name and too many operands are errors that
  // name the registration sites. Returns ok and marks the table finalized when
  // there are none.
  [[nodiscard]] Status finalize();
  [[nodiscard]] bool is_finalized() const { return finalized_; }

  // Gives every unaudited entry of `backend` the claim `fallback`. Entries with an
  // explicit claim (bounded or no-bound) are left alone.
  void fill_unset_precision(BackendId backend, const PrecisionGuarantee& fallback);
  // Gives every entry of `backend` whose cost is unknown (and that has no cost
  // expression) the cost function `dispatcher(op)`. Runtime-fused entries use the
  // region's last node's op.
  void fill_unset_cost(BackendId backend, CostFn (*dispatcher)(OpKind));

  // The first sibling at the key. kNotFound with a NoBackendForOp payload on a miss.
  [[nodiscard]] Result<const BindingEntry*> lookup(BindingKey key, const DTypeList& dtypes,
                                                   BackendId backend) const;
  // The first sibling that can take dense operands of any shape
  // (caps.requires_broadcast and admits unset), whatever the registration order.
  // Misses as lookup does, also when every sibling requires a broadcast operand or
  // serves only some shapes.
  [[nodiscard]] Result<const BindingEntry*> lookup_with_caps(BindingKey key,
                                                             const DTypeList& dtypes,
                                                             BackendId backend) const;
  // Every sibling, in registration order; empty on a miss.
  [[nodiscard]] std::span<const BindingEntry> lookup_alternatives(BindingKey key,
                                                                  const DTypeList& dtypes,
                                                                  BackendId backend) const;
  // Whether `backend` serves the key with a dense-safe sibling: exactly
  // lookup_with_caps's success condition, without building a diagnostic. There is
  // deliberately no "any backend" variant: a node runs on one backend.
  [[nodiscard]] bool backend_supports(BindingKey key, const DTypeList& dtypes,
                                      BackendId backend) const;
  // The first sibling's precision claim; unaudited on a miss.
  [[nodiscard]] PrecisionGuarantee lookup_precision(BindingKey key, const DTypeList& dtypes,
                                                    BackendId backend) const;
  // The first sibling's cost function; unknown_cost on a miss.
  [[nodiscard]] CostFn lookup_cost(BindingKey key, const DTypeList& dtypes,
                                   BackendId backend) const;

  // The miss error for a key, as lookup would return it.
  [[nodiscard]] Status miss_error(BindingKey key, const DTypeList& dtypes, BackendId backend) const;
  // Every (backend, key, dtypes) in the table with its first sibling's name and site.
  [[nodiscard]] std::vector<CoverageBinding> coverage() const;
  // The distinct backends with a section or at least one binding, in BackendId
  // order.
  [[nodiscard]] std::vector<BackendId> backends() const;

  // Runtime-fused recipes. Registering a region structurally identical to an
  // existing one returns the existing id. Fails on an invalid region or when the
  // fused id range is exhausted.
  [[nodiscard]] Result<FusedOpId> register_runtime_fused(std::string name, FusedRegion region);
  [[nodiscard]] const RuntimeFusedInfo* runtime_fused(FusedOpId id) const;
  [[nodiscard]] std::span<const RuntimeFusedInfo> runtime_fused_ops() const { return fused_; }
  // Whether any dtype tuple is bound for (id, backend).
  [[nodiscard]] bool has_runtime_fused(FusedOpId id, BackendId backend) const;
  [[nodiscard]] RuntimeFusedLookup unique_runtime_fused(FusedOpId id, BackendId backend) const;

  // One item per key, in first-registration order.
  [[nodiscard]] std::span<const Slot> slots() const { return slots_; }

  // One item per alternative, keys in first-registration order, siblings in order.
  struct EntryRef {
    const Slot& slot;
    const BindingEntry& entry;
  };
  class EntryIterator {
   public:
    using value_type = EntryRef;
    using difference_type = std::ptrdiff_t;
    EntryIterator() = default;
    EntryIterator(const Slot* slot, const Slot* end) : slot_(slot), end_(end) { skip_empty(); }
    EntryRef operator*() const { return {*slot_, slot_->alternatives[index_]}; }
    EntryIterator& operator++() {
      ++index_;
      skip_empty();
      return *this;
    }
    EntryIterator operator++(int) {
      EntryIterator old = *this;
      ++*this;
      return old;
    }
    friend bool operator==(const EntryIterator& a, const EntryIterator& b) {
      return a.slot_ == b.slot_ && a.index_ == b.index_;
    }

   private:
    void skip_empty() {
      while (slot_ != end_ && index_ >= slot_->alternatives.size()) {
        ++slot_;
        index_ = 0;
      }
    }
    const Slot* slot_ = nullptr;
    const Slot* end_ = nullptr;
    std::size_t index_ = 0;
  };
  struct EntryRange {
    EntryIterator first;
    EntryIterator last;
    [[nodiscard]] EntryIterator begin() const { return first; }
    [[nodiscard]] EntryIterator end() const { return last; }
  };
  [[nodiscard]] EntryRange entries() const;

  // Number of alternatives (a key with N siblings counts N).
  [[nodiscard]] std::size_t size() const { return entry_count_; }
  // Number of distinct keys.
  [[nodiscard]] std::size_t key_count() const { return slots_.size(); }
  [[nodiscard]] bool empty() const { return slots_.empty(); }

  // Removes every entry for which `hide(slot, entry)` is true (kernel masking).
  // Returns the removed bindings. Keys left without siblings disappear.
  std::vector<CoverageBinding> remove_if(FunctionRef<bool(const Slot&, const BindingEntry&)> hide);

  // The publication generation (set by the process-wide snapshot; 0 for a table
  // that was never published).
  [[nodiscard]] std::uint64_t generation() const { return generation_; }
  void set_generation(std::uint64_t generation) { generation_ = generation; }

 private:
  // A key packed into two words, so the index compares and hashes integers.
  struct PackedKey {
    std::uint64_t head;   // binding key, backend, operand count, overflow bit
    std::uint64_t types;  // the dtypes, one byte each
    friend bool operator==(const PackedKey&, const PackedKey&) = default;
  };
  static constexpr std::uint32_t kEmptyCell = 0xffffffffu;
  // Open-addressing index (linear probing, load <= 1/2) from key to slot: a hit is
  // one hash and usually one probe, the hot path of every dispatch lookup.
  struct IndexCell {
    PackedKey key;
    std::uint32_t slot = kEmptyCell;
  };
  static PackedKey pack(BindingKey key, const DTypeList& dtypes, BackendId backend);
  static std::size_t hash(const PackedKey& key);

  [[nodiscard]] const Slot* find(BindingKey key, const DTypeList& dtypes, BackendId backend) const;
  // The slot index of `packed`, or kEmptyCell.
  [[nodiscard]] std::uint32_t find_slot(const PackedKey& packed) const;
  void insert_index(const PackedKey& key, std::uint32_t slot);
  void rebuild_index();

  std::array<BackendMemory*, kBackendCount> memory_{};
  std::vector<Slot> slots_;
  std::vector<IndexCell> index_;
  std::vector<RuntimeFusedInfo> fused_;
  std::unordered_map<std::uint64_t, std::vector<std::uint16_t>> fused_by_hash_;
  std::size_t entry_count_ = 0;
  bool finalized_ = false;
  std::uint64_t generation_ = 0;
};

// The name a backend registers a kernel under, built from its key alone (the
// XNNPACK convention; a name says what the kernel is):
//
//   <op>_<dtypes>__<backend>_<variant>
//
//   <op>       the op's name in op.def, or "fused<id>" for a runtime-fused id
//   <dtypes>   the operands' dtype names in key order (inputs, then outputs)
//              joined by '_', collapsed to one name when every operand has it
//   <backend>  the backend's name in backend.def
//   <variant>  which sibling at the key: its instruction set or library first
//              ("ref", "avx2", "openblas"), then whatever else tells it from the
//              other kernels of the backend whose names would otherwise agree
//              ("avx2_matvec" for a sibling serving one row; "ref_mask" where an
//              extra input leaves the collapsed dtypes unchanged). Empty: the name
//              ends after <backend>.
//
//   kernel_name(OpKind::kMatmul, {kF32, kF32, kF32}, BackendId::kCpu, "ref")
//       == "matmul_f32__cpu_ref"
//   kernel_name(OpKind::kMatmul, {kF32, kQ4_K, kF32}, BackendId::kCpu, "avx2")
//       == "matmul_f32_q4_k_f32__cpu_avx2"
//
// Names must be unique in a table (finalize() refuses a repeat): two keys of one
// op whose dtypes collapse alike ({f32, f32} and {f32, f32, f32}) need variants
// that differ. A backend's registration builds every name through this function.
[[nodiscard]] std::string kernel_name(BindingKey key, const DTypeList& dtypes, BackendId backend,
                                      std::string_view variant);

// "add(f32,f32,f32)@cpu", or "fused#16384(...)" for a runtime-fused key without a
// table at hand.
[[nodiscard]] std::string describe_key(BindingKey key, const DTypeList& dtypes, BackendId backend);
// "file.cpp:42".
[[nodiscard]] std::string describe_site(const std::source_location& site);
// Where a binding was declared: its declared_at when it has one (a kernel loaded
// at run time), else its site.
[[nodiscard]] std::string describe_site(const BindingEntry& entry);
[[nodiscard]] std::string describe_site(const CoverageBinding& binding);

}  // namespace switchyard
