// The global op registry: op libraries install themselves when loaded, and a library loaded after
// the registry is in use (a plugin adding ops) is installed at once.
#include "crucible/ir/op_registry.h"

#include <gtest/gtest.h>

#include "crucible/core/error.h"
#include "crucible/ir/text_format.h"

namespace crucible {
namespace {

TEST(OpRegistry, BuiltinOpsAreInstalledWithoutAnyDirectCall) {
  // This test calls nothing in the ops library; loading it is what registers the ops.
  const OpRegistry& r = OpRegistry::global();
  for (const char* op : {"add", "relu", "sum", "softmax", "linear", "conv2d", "layer_norm"})
    EXPECT_NE(r.find(op), nullptr) << op;
  Graph g = parse_graph("graph g(%x: f32[2]) {\n  %y = relu(%x)\n  return %y\n}\n");
  EXPECT_EQ(g.nodes().size(), 1u);
}

void install_test_op(OpRegistry& r) {
  r.add(OpDef{OpSchema{"test_identity_op", 1, 1, {}},
              [](std::span<const TensorType> t, const Attrs&) { return t[0]; },
              [](std::span<const Tensor> t, const Attrs&) { return t[0]; },
              {}});
}

TEST(OpRegistry, LibraryLoadedAfterFirstUseIsInstalledAtOnce) {
  ASSERT_EQ(OpRegistry::global().find("test_identity_op"), nullptr);
  OpLibrary late{install_test_op};
  EXPECT_NE(OpRegistry::global().find("test_identity_op"), nullptr);
  Graph g = parse_graph("graph g(%x: f32[3]) {\n  %y = test_identity_op(%x)\n  return %y\n}\n");
  EXPECT_EQ(g.value(g.outputs()[0]).type.shape, (Shape{3}));
  // A second library claiming the same name is refused, not silently shadowing the first.
  EXPECT_THROW(OpLibrary{install_test_op}, Error);
}

}  // namespace
}  // namespace crucible
