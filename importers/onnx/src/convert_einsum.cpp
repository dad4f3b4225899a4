// Einsum for the forms models use: one operand (transpose, sums over dropped letters) or two
// (batched contraction), lowered to sum, permute, reshape and one matmul. Repeated letters in
// one operand (diagonals) and ellipses are refused by name.
#include <fmt/format.h>

#include <algorithm>

#include "converters.h"

namespace crucible::onnx {

namespace {

struct Equation {
  std::vector<std::string> inputs;
  std::string output;
};

Equation parse_equation(std::string eq, size_t operands) {
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  if (eq.find("...") != std::string::npos) unsupported("Einsum with an ellipsis");
  Equation e;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    e.inputs.push_back(lhs.substr(start, comma - start));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (e.inputs.size() != operands)
    malformed(fmt::format("the equation has {} operands, the node {}", e.inputs.size(), operands));
  for (const auto& in : e.inputs) {
    for (char ch : in) {
      if (!std::isalpha(static_cast<unsigned char>(ch)))
        malformed(fmt::format("bad letter '{}'", ch));
      if (std::count(in.begin(), in.end(), ch) > 1)
        unsupported("Einsum with a repeated letter (a diagonal)");
    }
  }
  if (arrow != std::string::npos) {
    e.output = eq.substr(arrow + 2);
  } else {
    // Implicit output: the letters used once, in alphabetical order.
    std::string all;
    for (const auto& in : e.inputs) all += in;
    for (char ch = 'A'; ch <= 'z'; ++ch)
      if (std::count(all.begin(), all.end(), ch) == 1) e.output += ch;
  }
  return e;
}

// Sums `x` (labelled `labels`) over the letters `keep` lacks; updates `labels`.
Val sum_out(Ctx& c, Val x, std::string& labels, const std::string& keep) {
  std::vector<int64_t> dims;
  std::string kept;
  for (size_t i = 0; i < labels.size(); ++i) {
    if (keep.find(labels[i]) == std::string::npos)
      dims.push_back(static_cast<int64_t>(i));
    else
      kept += labels[i];
  }
  labels = kept;
  if (dims.empty()) return x;
  return c.op("sum", {x}, {{"dims", dims}, {"keepdim", false}});
}

// Permutes `x` from `from` to the letter order `to`.
Val arrange(Ctx& c, const Val& x, const std::string& from, const std::string& to) {
  if (from == to) return x;
  std::vector<int64_t> perm;
  for (char ch : to) perm.push_back(static_cast<int64_t>(from.find(ch)));
  return c.op("permute", {x}, {{"dims", perm}});
}

int64_t size_of(const Val& x, const std::string& labels, char ch) {
  return x.type.shape[labels.find(ch)];
}

void einsum(Ctx& c, const NodeProto& n) {
  const Equation e = parse_equation(attr_string(n, "equation", ""), n.input_size());
  if (e.inputs.size() > 2) unsupported("Einsum with more than two operands");
  std::vector<Val> x;
  for (int i = 0; i < n.input_size(); ++i) {
    x.push_back(c.in(n, i));
    if (x.back().rank() != static_cast<int64_t>(e.inputs[i].size()))
      malformed(fmt::format("operand {} has rank {}, its letters say {}", i, x.back().rank(),
                            e.inputs[i].size()));
  }
  std::string la = e.inputs[0];
  if (x.size() == 1) {
    Val y = sum_out(c, x[0], la, e.output);
    return c.out(n, 0, arrange(c, y, la, e.output));
  }
  std::string lb = e.inputs[1];
  // Letters in one operand only and not in the output are summed away first.
  Val a = sum_out(c, x[0], la, lb + e.output), b = sum_out(c, x[1], lb, la + e.output);
  std::string batch, contract, a_only, b_only;
  for (char ch : la) {
    const bool in_b = lb.find(ch) != std::string::npos,
               in_out = e.output.find(ch) != std::string::npos;
    (in_b ? (in_out ? batch : contract) : a_only) += ch;
  }
  for (char ch : lb)
    if (la.find(ch) == std::string::npos) b_only += ch;
  auto prod = [](const Val& v, const std::string& labels, const std::string& of) {
    int64_t p = 1;
    for (char ch : of) p *= size_of(v, labels, ch);
    return p;
  };
  std::vector<int64_t> batch_a, batch_b;
  for (char ch : batch) {
    batch_a.push_back(size_of(a, la, ch));
    batch_b.push_back(size_of(b, lb, ch));
  }
  auto with = [](std::vector<int64_t> v, std::initializer_list<int64_t> tail) {
    v.insert(v.end(), tail);
    return v;
  };
  Val am = c.op("reshape", {arrange(c, a, la, batch + a_only + contract)},
                {{"shape", with(batch_a, {prod(a, la, a_only), prod(a, la, contract)})}});
  Val bm = c.op("reshape", {arrange(c, b, lb, batch + contract + b_only)},
                {{"shape", with(batch_b, {prod(b, lb, contract), prod(b, lb, b_only)})}});
  Val y = c.op("matmul", {am, bm});
  std::vector<int64_t> shape(y.type.shape.begin(),
                             y.type.shape.begin() + static_cast<int64_t>(batch.size()));
  for (char ch : a_only) shape.push_back(size_of(a, la, ch));
  for (char ch : b_only) shape.push_back(size_of(b, lb, ch));
  y = c.op("reshape", {y}, {{"shape", shape}});
  const std::string labels = batch + a_only + b_only;
  if (labels.size() != e.output.size()) malformed("the output names a letter no operand has");
  c.out(n, 0, arrange(c, y, labels, e.output));
}

}  // namespace

void add_einsum_converter(ConverterTable& t) { t["Einsum"] = einsum; }

}  // namespace crucible::onnx
