// Cost model: what a kernel call is estimated to cost, as a roofline triple.
//
// A CostFn maps the shapes and dtypes of a call (inputs then outputs, as in the
// binding key), its parameters and the backend's capabilities to {flops, bytes
// moved, fixed overhead}. `unknown_cost` is the explicit "no estimate" sentinel:
// it is recognised by identity, so a weaker real estimate must be a different
// function.
//
// A CostExpr is the data form of a cost function: formulas over shape symbols,
// compiled once and evaluated per shape.
//
// Example
//   SWITCHYARD_ASSIGN_OR_RETURN(CostExpr expr,
//       CostExpr::compile("2*m*n*k", "(m*k + n*k + m*n)*dtype_bytes(a)", "500"));
//   SWITCHYARD_ASSIGN_OR_RETURN(CostEstimate c, expr.evaluate(inputs));
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "switchyard/dtype.h"
#include "switchyard/op.h"
#include "switchyard/tensor.h"

namespace switchyard {

struct OpParams;

// What a backend can do per second, for turning a CostEstimate into time.
struct BackendCaps {
  double peak_gflops = 50.0;
  double memory_gbps = 20.0;
  // Added to every call (launch, dispatch).
  double call_overhead_ns = 20.0;
  // One step of a collective between ranks (a hop of a ring): the link's latency
  // and the synchronisation of the two ranks.
  double link_hop_ns = 1000.0;
};

struct CostInputs {
  // The op the call belongs to (static op; runtime-fused calls use their region's
  // dominant op).
  OpKind op = OpKind::kCopy;
  // Inputs then outputs, in binding-key order.
  std::span<const Shape> shapes;
  std::span<const DType> dtypes;
  const OpParams* params = nullptr;
  const BackendCaps* caps = nullptr;
};

struct CostEstimate {
  double flops = 0;
  double bytes = 0;
  double overhead_ns = 0;
  // False only for the unknown sentinel.
  bool known = true;

  [[nodiscard]] static CostEstimate unknown() { return {0, 0, 0, false}; }
  // Roofline time: the larger of compute and memory time, plus the overheads.
  [[nodiscard]] double time_ns(const BackendCaps& caps) const;
};

using CostFn = CostEstimate (*)(const CostInputs& in);

// The "no estimate" sentinel.
CostEstimate unknown_cost(const CostInputs& in);

// The default roofline cost function for an op's family: elementwise ops read and
// write every element once, matmul costs 2*M*N*K flops, and so on.
[[nodiscard]] CostFn default_cost_for(OpKind op);

// Bytes of `numel` elements of `t`, fractional for block types (a q4_0 element is
// 18/32 bytes).
[[nodiscard]] double element_bytes(DType t);

// A compiled cost formula triple.
//
// Language: numbers, + - * / and parentheses, and these symbols:
//   a, b, c, d, e, f   the inputs in order;  out  the first output
//   numel(x)  dtype_bytes(x)  bytes(x) = numel*dtype_bytes  rows(x)  cols(x)
//   dim(x, i)  (i may be negative, counting from the end)
//   m, n, k  for the matmul and fused-linear families: rows(a), rows(b), cols(a)
// Compilation rejects unknown names and syntax errors. Evaluation fails on an
// operand the call does not have, on m/n/k outside the matmul families, and on a
// division by zero: never a silent zero.
class CostExpr {
 public:
  [[nodiscard]] static Result<CostExpr> compile(std::string_view flops, std::string_view bytes,
                                                std::string_view overhead_ns = "0");
  [[nodiscard]] Result<CostEstimate> evaluate(const CostInputs& in) const;
  [[nodiscard]] std::string to_string() const;

  // One step of a compiled formula (a stack machine); public only so the
  // class stays copyable in headers.
  struct Instr {
    enum class Kind : unsigned char {
      kConst,
      kNumel,
      kDtypeBytes,
      kBytes,
      kRows,
      kCols,
      kDim,
      kM,
      kN,
      kK,
      kAdd,
      kSub,
      kMul,
      kDiv,
      kNeg
    };
    Kind kind;
    double value = 0;  // kConst
    int operand = 0;   // operand index; -1 is `out`
    int index = 0;     // kDim
  };

 private:
  struct Program {
    std::string source;
    std::vector<Instr> code;
  };
  static Result<Program> compile_one(std::string_view source);
  static Result<double> run(const Program& program, const CostInputs& in);

  Program flops_;
  Program bytes_;
  Program overhead_;
};

}  // namespace switchyard
