// CostExpr: a tiny formula language compiled to a stack program.
//
// Grammar (recursive descent):
//   expr    := term (('+' | '-') term)*
//   term    := unary (('*' | '/') unary)*
//   unary   := '-' unary | primary
//   primary := number | '(' expr ')' | symbol | func '(' operand (',' integer)? ')'
#include <cctype>
#include <charconv>
#include <cmath>
#include <string>

#include <fmt/format.h>

#include "switchyard/cost.h"

namespace switchyard {
namespace {

using Instr = CostExpr::Instr;
using Kind = Instr::Kind;

class Parser {
 public:
  explicit Parser(std::string_view src) : src_(src) {}

  Result<std::vector<Instr>> parse() {
    SWITCHYARD_RETURN_IF_ERROR(expr());
    skip_space();
    if (pos_ != src_.size()) return error("unexpected text");
    return std::move(code_);
  }

 private:
  Status error(std::string_view what) const {
    return invalid_argument_error(
        fmt::format("cost expression '{}': {} at offset {}", src_, what, pos_));
  }
  void skip_space() {
    while (pos_ < src_.size() && std::isspace(static_cast<unsigned char>(src_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip_space();
    if (pos_ < src_.size() && src_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  std::string_view identifier() {
    skip_space();
    const std::size_t start = pos_;
    while (pos_ < src_.size() &&
           (std::isalnum(static_cast<unsigned char>(src_[pos_])) || src_[pos_] == '_')) {
      ++pos_;
    }
    return src_.substr(start, pos_ - start);
  }

  Status expr() {
    SWITCHYARD_RETURN_IF_ERROR(term());
    while (true) {
      if (eat('+')) {
        SWITCHYARD_RETURN_IF_ERROR(term());
        code_.push_back({Kind::kAdd});
      } else if (eat('-')) {
        SWITCHYARD_RETURN_IF_ERROR(term());
        code_.push_back({Kind::kSub});
      } else {
        return Status::ok();
      }
    }
  }
  Status term() {
    SWITCHYARD_RETURN_IF_ERROR(unary());
    while (true) {
      if (eat('*')) {
        SWITCHYARD_RETURN_IF_ERROR(unary());
        code_.push_back({Kind::kMul});
      } else if (eat('/')) {
        SWITCHYARD_RETURN_IF_ERROR(unary());
        code_.push_back({Kind::kDiv});
      } else {
        return Status::ok();
      }
    }
  }
  Status unary() {
    if (eat('-')) {
      SWITCHYARD_RETURN_IF_ERROR(unary());
      code_.push_back({Kind::kNeg});
      return Status::ok();
    }
    return primary();
  }
  Status primary() {
    skip_space();
    if (pos_ >= src_.size()) return error("expression ends early");
    if (eat('(')) {
      SWITCHYARD_RETURN_IF_ERROR(expr());
      return eat(')') ? Status::ok() : error("missing ')'");
    }
    const char c = src_[pos_];
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return number();
    const std::string_view id = identifier();
    if (id.empty()) return error(fmt::format("unexpected '{}'", c));
    if (id == "m") return push({Kind::kM});
    if (id == "n") return push({Kind::kN});
    if (id == "k") return push({Kind::kK});
    static constexpr std::pair<std::string_view, Kind> kFunctions[] = {
        {"numel", Kind::kNumel}, {"dtype_bytes", Kind::kDtypeBytes},
        {"bytes", Kind::kBytes}, {"rows", Kind::kRows},
        {"cols", Kind::kCols},   {"dim", Kind::kDim}};
    for (auto [fname, kind] : kFunctions) {
      if (id == fname) return call(kind);
    }
    return error(fmt::format("unknown symbol '{}'", id));
  }
  Status push(Instr instr) {
    code_.push_back(instr);
    return Status::ok();
  }
  Status number() {
    skip_space();
    double value = 0;
    const char* begin = src_.data() + pos_;
    auto [end, ec] = std::from_chars(begin, src_.data() + src_.size(), value);
    if (ec != std::errc()) return error("bad number");
    pos_ += static_cast<std::size_t>(end - begin);
    return push({Kind::kConst, value});
  }
  Status call(Kind kind) {
    if (!eat('(')) return error("expected '(' after function name");
    const std::string_view operand = identifier();
    int index = 0;
    if (operand == "out") {
      index = -1;
    } else if (operand.size() == 1 && operand[0] >= 'a' && operand[0] <= 'f') {
      index = operand[0] - 'a';
    } else {
      return error(fmt::format("unknown operand '{}' (use a..f or out)", operand));
    }
    Instr instr{kind, 0, index, 0};
    if (kind == Kind::kDim) {
      if (!eat(',')) return error("dim() takes an operand and an index");
      skip_space();
      bool negative = eat('-');
      skip_space();
      const char* begin = src_.data() + pos_;
      auto [end, ec] = std::from_chars(begin, src_.data() + src_.size(), instr.index);
      if (ec != std::errc()) return error("bad dimension index");
      pos_ += static_cast<std::size_t>(end - begin);
      if (negative) instr.index = -instr.index;
    }
    if (!eat(')')) return error("missing ')'");
    return push(instr);
  }

  std::string_view src_;
  std::size_t pos_ = 0;
  std::vector<Instr> code_;
};

bool is_matmul_like(OpKind op) {
  return op_family(op) == OpFamily::kMatmul || op == OpKind::kLinear || op == OpKind::kFfnSwiglu;
}

}  // namespace

Result<CostExpr::Program> CostExpr::compile_one(std::string_view source) {
  SWITCHYARD_ASSIGN_OR_RETURN(std::vector<Instr> code, Parser(source).parse());
  return Program{std::string(source), std::move(code)};
}

Result<CostExpr> CostExpr::compile(std::string_view flops, std::string_view bytes,
                                   std::string_view overhead_ns) {
  CostExpr expr;
  SWITCHYARD_ASSIGN_OR_RETURN(expr.flops_, compile_one(flops));
  SWITCHYARD_ASSIGN_OR_RETURN(expr.bytes_, compile_one(bytes));
  SWITCHYARD_ASSIGN_OR_RETURN(expr.overhead_, compile_one(overhead_ns));
  return expr;
}

Result<double> CostExpr::run(const Program& program, const CostInputs& in) {
  // The outputs follow the inputs; `out` is the first output. Without op arity at
  // hand, the last operand is taken as the output, which holds for every op with
  // one output (all of Switchyard's static ops).
  const std::size_t count = std::min(in.shapes.size(), in.dtypes.size());
  auto operand = [&](int index) -> Result<std::size_t> {
    const std::size_t i = index < 0 ? count - 1 : static_cast<std::size_t>(index);
    if (count == 0 || i >= count) {
      return invalid_argument_error(fmt::format(
          "cost expression '{}': operand {} is not present ({} operands)", program.source,
          index < 0 ? std::string("out") : std::string(1, static_cast<char>('a' + index)), count));
    }
    return i;
  };
  auto matmul_dim = [&](char which) -> Result<double> {
    if (!is_matmul_like(in.op) || count < 2) {
      return invalid_argument_error(fmt::format(
          "cost expression '{}': symbol '{}' is defined only for matmul-like ops, not {}",
          program.source, which, name(in.op)));
    }
    switch (which) {
      case 'm': return static_cast<double>(in.shapes[0].outer());
      case 'k': return static_cast<double>(in.shapes[0].inner());
      default: return static_cast<double>(in.shapes[1].outer());
    }
  };

  std::vector<double> stack;
  stack.reserve(program.code.size());
  for (const Instr& ins : program.code) {
    switch (ins.kind) {
      case Kind::kConst: stack.push_back(ins.value); break;
      case Kind::kM:
      case Kind::kN:
      case Kind::kK: {
        const char which = ins.kind == Kind::kM ? 'm' : ins.kind == Kind::kN ? 'n' : 'k';
        SWITCHYARD_ASSIGN_OR_RETURN(double v, matmul_dim(which));
        stack.push_back(v);
        break;
      }
      case Kind::kNumel:
      case Kind::kDtypeBytes:
      case Kind::kBytes:
      case Kind::kRows:
      case Kind::kCols:
      case Kind::kDim: {
        SWITCHYARD_ASSIGN_OR_RETURN(std::size_t i, operand(ins.operand));
        const Shape& s = in.shapes[i];
        double v = 0;
        if (ins.kind == Kind::kNumel) v = static_cast<double>(s.numel());
        if (ins.kind == Kind::kDtypeBytes) v = element_bytes(in.dtypes[i]);
        if (ins.kind == Kind::kBytes)
          v = static_cast<double>(s.numel()) * element_bytes(in.dtypes[i]);
        if (ins.kind == Kind::kRows) v = static_cast<double>(s.outer());
        if (ins.kind == Kind::kCols) v = static_cast<double>(s.inner());
        if (ins.kind == Kind::kDim) {
          const int d = ins.index < 0 ? s.rank() + ins.index : ins.index;
          if (d < 0 || d >= s.rank()) {
            return invalid_argument_error(
                fmt::format("cost expression '{}': dim index {} out of range for rank {}",
                            program.source, ins.index, s.rank()));
          }
          v = static_cast<double>(s[d]);
        }
        stack.push_back(v);
        break;
      }
      case Kind::kNeg: stack.back() = -stack.back(); break;
      case Kind::kAdd:
      case Kind::kSub:
      case Kind::kMul:
      case Kind::kDiv: {
        const double rhs = stack.back();
        stack.pop_back();
        double& lhs = stack.back();
        if (ins.kind == Kind::kAdd) lhs += rhs;
        if (ins.kind == Kind::kSub) lhs -= rhs;
        if (ins.kind == Kind::kMul) lhs *= rhs;
        if (ins.kind == Kind::kDiv) {
          if (rhs == 0) {
            return invalid_argument_error(
                fmt::format("cost expression '{}': division by zero", program.source));
          }
          lhs /= rhs;
        }
        break;
      }
    }
  }
  return stack.back();
}

Result<CostEstimate> CostExpr::evaluate(const CostInputs& in) const {
  CostEstimate e;
  SWITCHYARD_ASSIGN_OR_RETURN(e.flops, run(flops_, in));
  SWITCHYARD_ASSIGN_OR_RETURN(e.bytes, run(bytes_, in));
  SWITCHYARD_ASSIGN_OR_RETURN(e.overhead_ns, run(overhead_, in));
  return e;
}

std::string CostExpr::to_string() const {
  return fmt::format("flops={} bytes={} overhead_ns={}", flops_.source, bytes_.source,
                     overhead_.source);
}

}  // namespace switchyard
