// The planner's graph-rewriting passes (fusion, dtype reconciliation) and the
// helpers they share with route picking. Not API.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "switchyard/plan.h"

namespace switchyard::detail {

// The binding key of a node: its static op or its runtime-fused id.
[[nodiscard]] BindingKey node_key(const Node& node);
// The node's operand dtypes in key order: inputs, then the output.
[[nodiscard]] DTypeList node_dtypes(const Graph& graph, const Node& node);
// "matmul" or "fused:<region name>".
[[nodiscard]] std::string node_op_label(const KernelBindingTable& table, const Node& node);

// Why `precision` does not meet `floor` for an output of dtype `out`, or nullopt
// when it does.
[[nodiscard]] std::optional<std::pair<RejectReason, std::string>> check_floor(
    const PrecisionFloor& floor, const PrecisionGuarantee& precision, DType out);

// A graph rebuilt from edited values and nodes: values nothing refers to any more
// (intermediates of a fused region) are dropped and ids renumbered.
[[nodiscard]] Graph compact(const Graph& old, const std::vector<Value>& values,
                            const std::vector<Node>& nodes);

// Pattern fusion and runtime-fused recipes; appends to `report`.
[[nodiscard]] Graph fuse(Graph graph, const KernelBindingTable& table, const PlanOptions& options,
                         PlanReport& report);

// Cast insertion. Nodes no promotion can serve are returned with the table's
// miss error (by node name).
[[nodiscard]] Graph reconcile_dtypes(Graph graph, const KernelBindingTable& table,
                                     const PlanOptions& options, PlanReport& report,
                                     std::map<std::string, Status>& failures);

}  // namespace switchyard::detail
