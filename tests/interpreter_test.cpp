// The reference interpreter and the IR's use lists: what runs, what is freed when, and what a
// plugin's override of run_node sees.
#include "crucible/ops/interpreter.h"

#include <gtest/gtest.h>

#include "crucible/core/error.h"
#include "crucible/ir/text_format.h"
#include "crucible/ir/uses.h"
#include "test_util.h"

namespace crucible {
namespace {

using testing::ExpectTensor;
using testing::T;

const char* kGraph =
    "graph g(%x: f32[3]) {\n"
    "  param %w: f32[3] = full(value=2.0)\n"
    "  %a = mul(%x, %w)\n"
    "  %b = add(%a, %a)\n"
    "  %c = neg(%b)\n"
    "  return %c, %a\n"
    "}\n";

TEST(Uses, ReadersAndLastUses) {
  Graph g = parse_graph(kGraph);
  const auto readers = readers_of(g);
  const ValueId x = g.inputs()[0], a = g.nodes()[0].output, b = g.nodes()[1].output;
  EXPECT_EQ(readers[x], (std::vector<int>{0}));
  EXPECT_EQ(readers[a], (std::vector<int>{1, 1}));  // add reads %a twice
  const auto last = last_uses(g);
  EXPECT_EQ(last[x], 0);
  EXPECT_EQ(last[b], 2);
  EXPECT_EQ(last[a], kLiveToEnd);                    // a graph output
  EXPECT_EQ(last[g.nodes()[2].output], kLiveToEnd);  // %c
  const ValueId kept[] = {b};
  EXPECT_EQ(last_uses(g, kept)[b], kLiveToEnd);
  // Over a schedule of steps instead of the nodes.
  const auto by_steps = last_uses(g, {{x}, {x, b}, {}});
  EXPECT_EQ(by_steps[x], 1);
  EXPECT_EQ(by_steps[b], 1);
}

// Records which operands are still alive when each node runs.
class Tracing final : public Interpreter {
 public:
  using Interpreter::Interpreter;
  std::vector<std::string> calls;

 protected:
  Tensor run_node(int node, std::span<const Tensor> operands) override {
    calls.push_back(graph().nodes()[node].op);
    for (const Tensor& t : operands) EXPECT_TRUE(t.defined());
    return Interpreter::run_node(node, operands);
  }
};

TEST(Interpreter, RunsEveryNodeInOrderAndReturnsOutputs) {
  Tracing interp(parse_graph(kGraph));
  const Tensor x = T(DType::kF32, {3}, {1, 2, 3});
  std::vector<Tensor> out = interp.run(std::vector<Tensor>{x});
  ASSERT_EQ(out.size(), 2u);
  ExpectTensor(out[0], DType::kF32, {3}, {-4, -8, -12});
  ExpectTensor(out[1], DType::kF32, {3}, {2, 4, 6});
  EXPECT_EQ(interp.calls, (std::vector<std::string>{"mul", "add", "neg"}));
}

TEST(Interpreter, ValuesReturnsIntermediatesAndRejectsBadIds) {
  Interpreter interp(parse_graph(kGraph));
  const Tensor x = T(DType::kF32, {3}, {1, 2, 3});
  const Graph& g = interp.graph();
  const ValueId ids[] = {g.nodes()[1].output, g.inputs()[0], g.params()[0]};
  std::vector<Tensor> v = interp.values(std::vector<Tensor>{x}, ids);
  ExpectTensor(v[0], DType::kF32, {3}, {4, 8, 12});
  ExpectTensor(v[1], DType::kF32, {3}, {1, 2, 3});
  ExpectTensor(v[2], DType::kF32, {3}, {2, 2, 2});
  const ValueId bad[] = {99};
  EXPECT_THROW(interp.values(std::vector<Tensor>{x}, bad), Error);
}

TEST(Interpreter, WrongInputsAreAnErrorNamingTheInput) {
  Interpreter interp(parse_graph(kGraph));
  try {
    interp.run(std::vector<Tensor>{T(DType::kF32, {2}, {1, 2})});
    FAIL() << "accepted an f32[2] for an f32[3] input";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "input %x must be f32[3], got f32[2]");
  }
  EXPECT_THROW(interp.run({}), Error);
}

}  // namespace
}  // namespace crucible
