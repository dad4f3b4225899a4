// The .graph text format: canonical round trips, initializers and side files, and malformed inputs,
// each rejected with its file:line:col message.
#include "crucible/ir/text_format.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "crucible/core/quote.h"
#include "crucible/ir/op_registry.h"
#include "test_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;

const char* kCanonical =
    "graph mixed(%x: f32[4,8], %ids: i64[3] = randint(low=0, high=10), %m: bool[4,1]) {\n"
    "  param %w: f32[8,8] = randn(seed=7, std=0.02)\n"
    "  param %b: f32[8] = zeros()\n"
    "  param %emb: f32[10,8] = uniform(seed=3, low=-0.5, high=0.5)\n"
    "  %h: f32[4,8] = linear(%x, %w, %b)\n"
    "  %g: f32[4,8] = gelu(%h, approximate=\"tanh\")\n"
    "  %c: f32[4,8] = clamp(%g, min=-1.5, max=inf)\n"
    "  %s: f32[4,8] = softmax(%c, dim=-1)\n"
    "  %r: f32[4] = sum(%s, dims=[1], keepdim=false)\n"
    "  %e: f32[3,8] = embedding(%emb, %ids)\n"
    "  %k: f64[3,8] = cast(%e, dtype=f64)\n"
    "  %z: f32[4,8] = where(%m, %s, %c)\n"
    "  return %r, %k, %z\n"
    "}\n";

TEST(TextFormat, CanonicalTextRoundTripsExactly) {
  Graph g = parse_graph(kCanonical, "mixed.graph");
  EXPECT_EQ(print_graph(g), kCanonical);
  EXPECT_EQ(g.inputs().size(), 3u);
  EXPECT_EQ(g.params().size(), 3u);
  EXPECT_EQ(g.nodes().size(), 8u);
  EXPECT_EQ(g.outputs().size(), 3u);
  EXPECT_EQ(print_graph(parse_graph(print_graph(g))), kCanonical);
}

TEST(TextFormat, TypesAreInferredWhenOmittedAndPrintedCanonically) {
  Graph g = parse_graph(
      "# the tutorial's foo1\n"
      "graph foo(%x1: u8[1,8], %x2: u8[8390,8]) {\n"
      "  %a = neg(%x1)   # wraps in u8\n"
      "  %b = maximum(%x2, %a)\n"
      "  return %b\n"
      "}\n");
  EXPECT_EQ(print_graph(g),
            "graph foo(%x1: u8[1,8], %x2: u8[8390,8]) {\n"
            "  %a: u8[1,8] = neg(%x1)\n"
            "  %b: u8[8390,8] = maximum(%x2, %a)\n"
            "  return %b\n"
            "}\n");
}

TEST(TextFormat, FloatsPrintShortestAndReadBack) {
  Graph g("f");
  ValueId x = g.add_input("x", {DType::kF32, {2}});
  ValueId c = g.add_node("clamp", {x}, {{"min", 0.1}, {"max", 1e-30}});
  ValueId d = g.add_node("clamp", {c}, {{"min", -INFINITY}, {"max", 3.0}});
  g.set_outputs({d});
  std::string text = print_graph(g);
  EXPECT_NE(text.find("min=0.1, max=1e-30"), std::string::npos) << text;
  EXPECT_NE(text.find("min=-inf, max=3.0"), std::string::npos) << text;
  EXPECT_EQ(print_graph(parse_graph(text)), text);
}

TEST(TextFormat, TutorialGraphsParseAndRoundTrip) {
  for (const auto& entry :
       fs::directory_iterator(fs::path(CRUCIBLE_SOURCE_DIR) / "suites" / "tutorial")) {
    if (entry.path().extension() != ".graph") continue;
    SCOPED_TRACE(entry.path().string());
    Graph g = load_graph_file(entry.path());
    std::string canonical = print_graph(g);
    EXPECT_EQ(print_graph(parse_graph(canonical)), canonical);
  }
}

TEST(TextFormat, SideFileParametersSaveAndLoad) {
  fs::path dir = fs::temp_directory_path() / ("crucible_tf_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  Graph g("side");
  ValueId x = g.add_input("x", {DType::kF32, {3}});
  ValueId w = g.add_param_data("w", testing::T(DType::kF32, {3}, {1.5, -2, 4}));
  g.set_outputs({g.add_node("mul", {x, w})});
  save_graph_file(g, dir / "side.graph");
  EXPECT_TRUE(fs::exists(dir / "side.w.bin"));
  Graph back = load_graph_file(dir / "side.graph");
  EXPECT_NE(print_graph(back).find("param %w: f32[3] = file(path=\"side.w.bin\")"),
            std::string::npos);
  testing::ExpectTensor(materialize_param(back, back.params()[0]), DType::kF32, {3}, {1.5, -2, 4});
  // A side file of the wrong size is refused with both sizes named.
  { std::ofstream(dir / "side.w.bin", std::ios::trunc) << "xx"; }
  Graph bad = load_graph_file(dir / "side.graph");
  try {
    materialize_param(bad, bad.params()[0]);
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("holds 2 bytes, f32[3] needs 12"), std::string::npos)
        << e.what();
  }
  fs::remove_all(dir);
}

TEST(TextFormat, InitializersAreDeterministic) {
  Graph g = parse_graph(
      "graph p() {\n  param %w: f32[64] = randn(seed=7, std=0.02)\n  %y = neg(%w)\n  return "
      "%y\n}\n");
  Tensor a = materialize_param(g, g.params()[0]);
  Tensor b = materialize_param(g, g.params()[0]);
  EXPECT_EQ(a.to_doubles(), b.to_doubles());
  double max_abs = 0;
  for (double v : a.to_doubles()) max_abs = std::max(max_abs, std::abs(v));
  EXPECT_GT(max_abs, 0.0);
  EXPECT_LT(max_abs, 0.2);  // 10 sigma of std 0.02
}

TEST(TextFormat, MissingFileIsOneClearError) {
  try {
    load_graph_file("/nonexistent/dir/model.graph");
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "/nonexistent/dir/model.graph: cannot read: No such file or directory");
  }
}

// A side file that is missing is reported where the parameter's recipe is written; its path is
// quoted with control bytes escaped (escape_controls), so the message stays one line.
TEST(TextFormat, RuntimeRecipeErrorsNameTheirLocation) {
  const Graph g = parse_graph(
      "graph g(%x: f32[2]) {\n  param %w: f32[2] = file(path=\"missing\\n.bin\")\n"
      "  %y = add(%x, %w)\n  return %y\n}\n",
      "dir/t.graph");
  try {
    materialize_param(g, g.params()[0]);
    ADD_FAILURE();
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_EQ(m.rfind("dir/t.graph:2:22: parameter %w: ", 0), 0u) << m;
    EXPECT_EQ(escape_controls(m).find('\n'), std::string::npos);
    EXPECT_NE(escape_controls(m).find("missing\\n.bin"), std::string::npos) << escape_controls(m);
  }
}

TEST(TextFormat, EscapeControlsEscapesEveryControlByte) {
  EXPECT_EQ(escape_controls("a\nb\tc\x1b[0m\x7f\x01"), "a\\nb\\tc\\x1b[0m\\x7f\\x01");
  EXPECT_EQ(escape_controls("caf\xc3\xa9 %x"), "caf\xc3\xa9 %x");  // UTF-8 passes through
}

struct Malformed {
  const char* text;
  const char* message;  // the whole expected message, "t.graph:line:col: ..."
};

void PrintTo(const Malformed& m, std::ostream* os) { *os << m.message; }

class MalformedGraph : public ::testing::TestWithParam<Malformed> {};

TEST_P(MalformedGraph, GivesPositionAndReason) {
  try {
    parse_graph(GetParam().text, "t.graph");
    ADD_FAILURE() << "parsed without error";
  } catch (const ParseError& e) {
    EXPECT_EQ(std::string(e.what()), GetParam().message);
  }
}

INSTANTIATE_TEST_SUITE_P(
    Cases, MalformedGraph,
    ::testing::Values(
        Malformed{"", "t.graph:1:1: expected 'graph', got end of file"},
        Malformed{"grph g() {}", "t.graph:1:1: expected 'graph', got 'grph'"},
        Malformed{"graph (%x: f32[1]) {}", "t.graph:1:7: expected a graph name, got '('"},
        Malformed{"graph g(%x: f33[1]) {\n  return %x\n}",
                  "t.graph:1:13: unknown dtype 'f33' (expected f32, f64, bf16, "
                  "i64, i32, u8 or bool)"},
        Malformed{"graph g(%x: f32[2,-3]) {\n  return %x\n}",
                  "t.graph:1:19: dimension size -3 is negative"},
        Malformed{"graph g(%x: f32[2 3]) {\n  return %x\n}", "t.graph:1:19: expected ']', got '3'"},
        Malformed{"graph g(%x f32[2]) {\n  return %x\n}", "t.graph:1:12: expected ':', got 'f32'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = nag(%x)\n  return %y\n}",
                  "t.graph:2:8: unknown op 'nag'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = neg(%q)\n  return %y\n}",
                  "t.graph:2:12: undefined value %q"},
        Malformed{"graph g(%x: f32[2]) {\n  %x = neg(%x)\n  return %x\n}",
                  "t.graph:2:3: value %x is defined twice"},
        Malformed{"graph g(%x: f32[2], %y: f32[3]) {\n  %z = add(%x, %y)\n  return %z\n}",
                  "t.graph:2:8: add: shapes [2] and [3] cannot be broadcast"},
        Malformed{"graph g(%x: f32[2]) {\n  %y: f32[3] = neg(%x)\n  return %y\n}",
                  "t.graph:2:7: %y is declared f32[3] but neg gives f32[2]"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = neg(%x, %x)\n  return %y\n}",
                  "t.graph:2:8: neg: expects 1 operand, got 2"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = softmax(%x, dimension=0)\n  return %y\n}",
                  "t.graph:2:8: softmax: unknown attribute 'dimension'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = softmax(%x)\n  return %y\n}",
                  "t.graph:2:8: softmax: missing attribute 'dim'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = softmax(%x, dim=\"last\")\n  return %y\n}",
                  "t.graph:2:8: softmax: attribute 'dim' must be int, got string"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = softmax(%x, dim=0, dim=0)\n  return %y\n}",
                  "t.graph:2:27: attribute 'dim' given twice"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = softmax(dim=0, %x)\n  return %y\n}",
                  "t.graph:2:23: operands must come before attributes"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = gelu(%x, approximate=\"tanh)\n  return %y\n}",
                  "t.graph:2:29: unterminated string"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = clamp(%x, min=1.5e)\n  return %y\n}",
                  "t.graph:2:22: malformed number '1.5e'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = clamp(%x, min=12abc)\n  return %y\n}",
                  "t.graph:2:22: malformed number '12a'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = neg(%x)\n}",
                  "t.graph:3:1: graph has no return statement"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = neg(%x)\n  return %y",
                  "t.graph:3:12: expected '}' to close the graph"},
        Malformed{"graph g(%x: f32[2]) {\n  return %x\n  %y = neg(%x)\n}",
                  "t.graph:3:3: unexpected '%y' after return"},
        Malformed{"graph g(%x: f32[2]) {\n  return %x\n}\nextra",
                  "t.graph:4:1: unexpected 'extra' after the graph"},
        Malformed{"graph g(%x: f32[2]) {\n  return %nope\n}",
                  "t.graph:2:10: undefined value %nope"},
        Malformed{"graph g() {\n  param %w: f32[2] = gaussian(std=1.0)\n  return %w\n}",
                  "t.graph:2:22: unknown initializer 'gaussian' (expected randn, uniform, randint, "
                  "zeros, ones, full "
                  "or file)"},
        Malformed{"graph g() {\n  param %w: f32[2]\n  return %w\n}",
                  "t.graph:3:3: expected '=', got 'return'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = neg(%x) $\n  return %y\n}",
                  "t.graph:2:16: unexpected character '$'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = cast(%x, dtype=f16)\n  return %y\n}",
                  "t.graph:2:23: unknown name 'f16' as a value (expected a number, string, list, "
                  "bool or dtype)"},
        Malformed{
            "graph g(%x: f32[2]) {\n  %y = neg(%x)\n  foo\n}",
            "t.graph:3:3: expected 'param', a %value definition, 'gradients' or 'return', got "
            "'foo'"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = sum(%x, dims=[0, 0])\n  return %y\n}",
                  "t.graph:2:8: sum: dimension 0 appears twice in dims"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = gelu(%x, approximate=\"a\\qb\")\n  return %y\n}",
                  "t.graph:2:31: unknown escape '\\q' in string"},
        Malformed{"graph g(%x: f32[99999999999999999999]) {\n  return %x\n}",
                  "t.graph:1:17: integer '99999999999999999999' is out of range"},
        // Sizes whose element count or byte count overflows, declared or inferred.
        Malformed{"graph g(%x: f32[4611686018427387904,2]) {\n  return %x\n}",
                  "t.graph:1:13: shape [4611686018427387904,2] is too large (over 2^63 elements)"},
        Malformed{"graph g(%x: f32[4294967296,4294967296]) {\n  return %x\n}",
                  "t.graph:1:13: shape [4294967296,4294967296] is too large (over 2^63 elements)"},
        Malformed{"graph g(%x: f64[1048576,1048576,64]) {\n  return %x\n}",
                  "t.graph:1:13: shape [1048576,1048576,64] is too large (70368744177664 elements "
                  "of 8 bytes; at most 2^48 bytes)"},
        // Empty, but its other sizes overflow its strides (found by fuzz_onnx_tensor), declared
        // or inferred.
        Malformed{"graph g(%x: f32[2157896034072363200,121,0]) {\n  return %x\n}",
                  "t.graph:1:13: shape [2157896034072363200,121,0] is too large (its sizes other "
                  "than 0 span over 2^48 bytes of 4-byte elements)"},
        Malformed{"graph g(%x: u8[0,281474976710657]) {\n  return %x\n}",
                  "t.graph:1:13: shape [0,281474976710657] is too large (its sizes other than 0 "
                  "span over 2^48 bytes of 1-byte elements)"},
        Malformed{"graph g(%x: f32[1,0]) {\n  %y = expand(%x, shape=[4294967296,4294967296,0])\n"
                  "  return %y\n}",
                  "t.graph:2:8: expand: result shape [4294967296,4294967296,0] is too large (its "
                  "sizes other than 0 span over 2^48 bytes of 4-byte elements)"},
        Malformed{"graph g(%x: f32[1,1]) {\n  %y = expand(%x, shape=[4294967296,4294967296])\n"
                  "  return %y\n}",
                  "t.graph:2:8: expand: result shape [4294967296,4294967296] is too large (over "
                  "2^63 elements)"},
        // Recipe attributes are checked where they are written.
        Malformed{"graph g(%x: f32[2] = randn(seed=1.5)) {\n  return %x\n}",
                  "t.graph:1:22: input %x: randn: attribute 'seed' must be int, got float"},
        Malformed{"graph g(%x: i32[2] = randint(low=5, high=5)) {\n  return %x\n}",
                  "t.graph:1:22: input %x: randint: empty range [5, 5)"},
        Malformed{"graph g(%x: u8[2] = randint(low=0, high=300)) {\n  return %x\n}",
                  "t.graph:1:21: input %x: randint: range [0, 300) does not fit u8 ([0, 255])"},
        Malformed{"graph g(%x: i32[2] = randint(low=0)) {\n  return %x\n}",
                  "t.graph:1:22: input %x: randint: attribute 'high' is required"},
        Malformed{"graph g() {\n  param %w: f32[2] = randn(sed=3)\n  return %w\n}",
                  "t.graph:2:22: parameter %w: randn: unknown attribute 'sed' (takes seed, mean, "
                  "std)"},
        Malformed{"graph g() {\n  param %w: f32[2] = randn(std=-1.0)\n  return %w\n}",
                  "t.graph:2:22: parameter %w: randn: std must be >= 0, got -1"},
        Malformed{"graph g() {\n  param %w: f32[2] = uniform(low=nan)\n  return %w\n}",
                  "t.graph:2:22: parameter %w: uniform: attribute 'low' must be finite, got nan"},
        Malformed{"graph g() {\n  param %w: f32[2] = full()\n  return %w\n}",
                  "t.graph:2:22: parameter %w: full: attribute 'value' is required"},
        Malformed{"graph g() {\n  param %w: f32[2] = file(path=3)\n  return %w\n}",
                  "t.graph:2:22: parameter %w: file: attribute 'path' must be string, got int"},
        Malformed{"graph g() {\n  param %w: f32[2] = zeros(value=1)\n  return %w\n}",
                  "t.graph:2:22: parameter %w: zeros: unknown attribute 'value' (takes none)"},
        // Bytes that are not text are named by value, never echoed raw.
        Malformed{"graph g(%x: f32[2]) {\n  %y = ne\x01g(%x)\n  return %y\n}",
                  "t.graph:2:10: unexpected byte 0x01"},
        Malformed{"graph g(%x: f32[2]) {\n  %y = neg(%x)\x1b[31m\n  return %y\n}",
                  "t.graph:2:15: unexpected byte 0x1b"}),
    [](const ::testing::TestParamInfo<Malformed>& info) {
      return "case" + std::to_string(info.index);
    });

// A run's command is stored as shell words, and the dashboard reads its options back: every word
// survives the round trip (spaces, quotes, an empty word), and the reader takes what a shell does.
TEST(ShellWords, ACommandRoundTripsAndReadsAsAShellWould) {
  const std::vector<std::string> argv = {"crucible", "run",     "-c",          "inject=neg:times2",
                                         "-c",       "x=a b",   "--tag",       "it's",
                                         "",         "tab\tin", "$HOME;rm -rf"};
  const std::string line = shell_command(argv);
  EXPECT_EQ(shell_words(line), argv) << line;
  EXPECT_EQ(line.substr(0, 35), "crucible run -c inject=neg:times2 -");
  EXPECT_EQ(shell_words("a  \"b \\\" c\" d\\ e 'f'\\''g'"),
            (std::vector<std::string>{"a", "b \" c", "d e", "f'g"}));
  EXPECT_EQ(shell_words("  "), std::vector<std::string>{});
  EXPECT_EQ(shell_words("plain words only"), (std::vector<std::string>{"plain", "words", "only"}));
}

}  // namespace
}  // namespace crucible
