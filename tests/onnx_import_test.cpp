// The ONNX importer through `crucible import` and `crucible run --graph MODEL.onnx`: names and
// weights kept, symbolic dims bound, shape chains folded, ONNX function bodies inlined, and every
// hostile or unsupported file refused in one line with exit 2 and nothing written or run.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <tuple>
#include <vector>

#include "cli_util.h"
#include "crucible/ir/text_format.h"
#include "crucible/onnx/import.h"
#include "crucible/ops/interpreter.h"
#include "onnx_model_builder.h"
#include "test_util.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using testing::ExpectTensor;
using testing::OnnxModelBuilder;
using testing::run_crucible;
using testing::T;

// y = reshape(x @ W, [shape(x)[0], -1]): the reshape's shape is a Shape/Gather/Unsqueeze/Concat
// chain that must fold away once N is bound.
OnnxModelBuilder matmul_with_shape_chain() {
  OnnxModelBuilder b;
  b.input("x", {-1, 3, 4});
  b.initializer("layer.W", {4, 5}, std::vector<float>(20, 0.5f));
  b.int_initializer("zero", {0});
  b.int_initializer("minus_one", {-1});
  b.node("MatMul", {"x", "layer.W"}, {"mm:out"}, "matmul_1");
  b.node("Shape", {"x"}, {"shape_x"});
  auto* g = b.node("Gather", {"shape_x", "zero"}, {"n"});
  OnnxModelBuilder::attr_int(g, "axis", 0);
  b.node("Concat", {"n", "minus_one"}, {"target"});
  OnnxModelBuilder::attr_int(b.proto().mutable_graph()->mutable_node(3), "axis", 0);
  b.node("Reshape", {"mm:out", "target"}, {"y"});
  b.output("y");
  return b;
}

TEST(OnnxImport, KeepsNamesAndWeightsAndFoldsShapeChains) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  const fs::path model = matmul_with_shape_chain().save(dir / "m.onnx");
  auto r = run_crucible(
      fmt::format("import {} -o {} --shape x=2,3,4", model.string(), (dir / "out").string()));
  ASSERT_EQ(r.status, 0) << r.err;
  Graph g = load_graph_file(dir / "out" / "m.graph");
  ASSERT_EQ(g.nodes().size(), 2u) << print_graph(g);  // matmul and reshape: the chain folded
  EXPECT_EQ(g.nodes()[0].op, "matmul");
  EXPECT_EQ(g.nodes()[1].op, "reshape");
  EXPECT_EQ(g.value(g.nodes()[1].output).type.str(), "f32[2,15]");
  EXPECT_EQ(g.value(g.inputs()[0]).name, "x");
  EXPECT_EQ(g.value(g.nodes()[0].output).name, "mm_out");
  ASSERT_EQ(g.params().size(), 1u);
  EXPECT_EQ(g.value(g.params()[0]).name, "layer.W");
  EXPECT_EQ(fs::file_size(dir / "out" / "m.layer.W.bin"), 20u * 4);
  EXPECT_EQ(materialize_param(g, g.params()[0]).get(7), 0.5);
}

TEST(OnnxImport, ASymbolicDimNeedsAShapeAndSaysHow) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  const fs::path model = matmul_with_shape_chain().save(dir / "m.onnx");
  auto r = run_crucible(fmt::format("import {} -o {}", model.string(), (dir / "out").string()));
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("dim 'N' is symbolic; bind it with --shape x=DIMS"), std::string::npos)
      << r.err;
  EXPECT_FALSE(fs::exists(dir / "out"));
  for (const char* bad : {"x=2,a", "=1", "x", "x=2,-3"}) {
    auto b = run_crucible(
        fmt::format("import {} -o {} --shape {}", model.string(), (dir / "out").string(), bad));
    EXPECT_EQ(b.status, 2) << bad;
    EXPECT_NE(b.err.find("--shape"), std::string::npos) << b.err;
  }
}

TEST(OnnxImport, RunGraphOnAnOnnxFileRecordsItsResults) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  const fs::path model = matmul_with_shape_chain().save(dir / "m.onnx");
  auto r = run_crucible(
      fmt::format("run --graph {} --shape x=2,3,4 --backends eager,codegen --db {} -o {}",
                  model.string(), (dir / "c.db").string(), (dir / "out").string()));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  auto q = run_crucible(fmt::format(
      "query --db {} \"select backend, status from results order by backend\" --format csv",
      (dir / "c.db").string()));
  EXPECT_NE(q.out.find("codegen,pass"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("eager,pass"), std::string::npos) << q.out;
  // --shape with no ONNX model is refused rather than ignored.
  auto s = run_crucible(fmt::format("run --suite tutorial --shape x=1 --db {} -o {}",
                                    (dir / "d.db").string(), (dir / "out2").string()));
  EXPECT_EQ(s.status, 2);
  EXPECT_NE(s.err.find("no ONNX model"), std::string::npos) << s.err;
}

TEST(OnnxImport, FunctionOpsInlineOnnxsOwnBody) {
  // MeanVarianceNormalization has no converter: ONNX's schema body (ReduceMean, Sub, Pow, ...)
  // is inlined, with its default axes [0, 2, 3].
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  OnnxModelBuilder b(13);
  b.input("x", {2, 3, 2, 2});
  b.node("MeanVarianceNormalization", {"x"}, {"y"}, "mvn");
  b.output("y");
  auto r = run_crucible(
      fmt::format("import {} -o {}", b.save(dir / "m.onnx").string(), (dir / "out").string()));
  ASSERT_EQ(r.status, 0) << r.err;
  Graph g = load_graph_file(dir / "out" / "m.graph");
  bool has_mean = false;
  for (const auto& n : g.nodes()) {
    has_mean = has_mean || n.op == "mean";
    if (n.op == "mean") {
      EXPECT_EQ(n.attrs.get_ints("dims"), (std::vector<int64_t>{0, 2, 3}));
    }
  }
  EXPECT_TRUE(has_mean) << print_graph(g);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
}

// A hostile or malformed file: exit 2, one line on stderr holding `phrase`, nothing written.
void expect_refused(const fs::path& model, const std::string& phrase) {
  const fs::path out = model.parent_path() / "out";
  auto r = run_crucible(fmt::format("import {} -o {}", model.string(), out.string()));
  EXPECT_EQ(r.status, 2) << model;
  EXPECT_NE(r.err.find(phrase), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  EXPECT_FALSE(fs::exists(out)) << model;
  // Given to a run, the request itself is bad: exit 2 and no run recorded.
  const fs::path db = model.parent_path() / "r.db";
  auto run = run_crucible(fmt::format("run --graph {} --db {} -o {}", model.string(), db.string(),
                                      (model.parent_path() / "run").string()));
  EXPECT_EQ(run.status, 2) << run.err;
  EXPECT_FALSE(fs::exists(db));
}

OnnxModelBuilder relu_model() {
  OnnxModelBuilder b;
  b.input("x", {2, 2});
  b.node("Relu", {"x"}, {"y"});
  b.output("y");
  return b;
}

// Adds an f32[2, 2] initializer 'w' whose data is external at `location`; returns that entry.
::onnx::StringStringEntryProto* external_initializer(OnnxModelBuilder& b,
                                                     const std::string& location) {
  auto* t = b.initializer("w", {2, 2}, {});
  t->clear_raw_data();
  t->set_data_location(::onnx::TensorProto::EXTERNAL);
  auto* kv = t->add_external_data();
  kv->set_key("location");
  kv->set_value(location);
  return kv;
}

TEST(OnnxImport, HostileFilesAreOneLineAndNothingRuns) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  auto fresh = [&](const std::string& name) {
    fs::create_directories(dir / name);
    return dir / name / "m.onnx";
  };
  {  // truncated protobuf
    std::string bytes;
    matmul_with_shape_chain().proto().SerializeToString(&bytes);
    std::ofstream(fresh("truncated"), std::ios::binary) << bytes.substr(0, bytes.size() / 2);
    expect_refused(dir / "truncated" / "m.onnx", "does not parse");
  }
  {  // wrong magic: a PNG and a text file
    std::ofstream(fresh("png"), std::ios::binary) << "\x89PNG\r\n\x1a\n\0\0\0\rIHDR";
    expect_refused(dir / "png" / "m.onnx", "not an ONNX model");
    std::ofstream(fresh("text"), std::ios::binary) << "graph g(%x: f32[2]) { return %x }\n";
    expect_refused(dir / "text" / "m.onnx", "not an ONNX model");
  }
  {  // an opset from the future
    OnnxModelBuilder b(99);
    b.input("x", {2});
    b.node("Relu", {"x"}, {"y"});
    b.output("y");
    b.save(fresh("future"));
    expect_refused(dir / "future" / "m.onnx", "opset 99 of the default domain is newer than 17");
  }
  {  // external data that escapes the model's folder
    OnnxModelBuilder b = relu_model();
    auto* kv = external_initializer(b, "../../../../etc/passwd");
    b.save(fresh("escape"));
    expect_refused(dir / "escape" / "m.onnx", "leaves the model's folder");
    kv->set_value("/etc/passwd");
    b.save(fresh("absolute"));
    expect_refused(dir / "absolute" / "m.onnx", "must be relative to the model's folder");
  }
  {  // external data that is missing, too short, or at an offset past any file
    OnnxModelBuilder b = relu_model();
    external_initializer(b, "w.bin");
    auto* t = b.proto().mutable_graph()->mutable_initializer(0);
    b.save(fresh("missing_data"));
    expect_refused(dir / "missing_data" / "m.onnx", "external data file 'w.bin' is missing");
    b.save(fresh("short_data"));
    std::ofstream(dir / "short_data" / "w.bin") << "12345678";
    expect_refused(dir / "short_data" / "m.onnx", "holds 8 bytes, needs 16");
    auto* off = t->add_external_data();
    off->set_key("offset");
    off->set_value("9223372036854775800");
    b.save(fresh("far_offset"));
    std::ofstream(dir / "far_offset" / "w.bin") << std::string(64, 'x');
    expect_refused(dir / "far_offset" / "m.onnx", "needs 16 from offset 9223372036854775800");
  }
  {  // a 2^40-element initializer with no data behind it, whichever way its data would come:
     // each is refused before 4 TiB is asked of the allocator (the typed field and the external
     // file were checked after it once, which the allocator or AddressSanitizer then refused)
    OnnxModelBuilder b = relu_model();
    auto* t = b.initializer("huge", {1 << 20, 1 << 20}, {1.0f});
    b.save(fresh("huge"));
    expect_refused(dir / "huge" / "m.onnx", "initializer 'huge'");
    t->clear_raw_data();
    t->add_float_data(1.0f);
    b.save(fresh("huge_typed"));
    expect_refused(dir / "huge_typed" / "m.onnx", "1 values for 1099511627776 elements");
    t->clear_float_data();
    t->set_data_location(::onnx::TensorProto::EXTERNAL);
    auto* kv = t->add_external_data();
    kv->set_key("location");
    kv->set_value("w.bin");
    b.save(fresh("huge_external"));
    std::ofstream(dir / "huge_external" / "w.bin") << std::string(64, 'x');
    expect_refused(dir / "huge_external" / "m.onnx", "holds 64 bytes, needs 4398046511104");
  }
  {  // empty, but its other sizes overflow its strides (fuzz_onnx_tensor found it in a tensor file)
    OnnxModelBuilder b = relu_model();
    b.initializer("empty", {0, int64_t{2157896034072363200}, 121}, {});
    b.save(fresh("empty_huge"));
    expect_refused(dir / "empty_huge" / "m.onnx", "sizes other than 0 span over 2^48 bytes");
  }
  {  // Range bounds that make no count (NaN), too many elements, or no scalar at all: refused
     // before anything is cast or allocated
    auto range_model = [&](const std::string& name, std::vector<int64_t> limit_dims,
                           std::vector<float> limit) {
      OnnxModelBuilder b;
      b.initializer("s", {}, {0.0f});
      b.initializer("l", std::move(limit_dims), std::move(limit));
      b.initializer("d", {}, {1.0f});
      b.node("Range", {"s", "l", "d"}, {"r"});
      b.output("r");
      b.save(fresh(name));
      return dir / name / "m.onnx";
    };
    expect_refused(range_model("range_nan", {}, {std::nanf("")}), "Range of nan elements");
    expect_refused(range_model("range_huge", {}, {1e30f}), "more than the 16777216 a constant");
    expect_refused(range_model("range_empty", {0}, {}), "must be scalars");
  }
  {  // Gemm operands of another rank than 2, refused before any size is read (fuzz_onnx_model
     // found a 1-d B read past its shape while the bias's role was chosen)
    for (const auto& [name, a_dims, b_dims] :
         {std::tuple<const char*, std::vector<int64_t>, std::vector<int64_t>>{
              "gemm_b1", {2, 3}, {3}},
          {"gemm_b0", {2, 3}, {}},
          {"gemm_a3", {1, 2, 3}, {3, 4}}}) {
      OnnxModelBuilder b;
      b.input("a", a_dims);
      b.input("b", b_dims);
      b.input("c", {3});
      b.node("Gemm", {"a", "b", "c"}, {"y"}, "g");
      b.output("y");
      b.save(fresh(name));
      expect_refused(dir / name / "m.onnx", "node 'g' (op Gemm): Gemm operands must be 2-d");
    }
  }
  {  // an axis of a 0-d input, which has none, refused before the shape is indexed by it
     // (fuzz_onnx_model found Split reading past a scalar's shape)
    for (const std::string op : {"Split", "Squeeze", "ArgMax"}) {
      OnnxModelBuilder b;
      b.input("x", {});
      std::vector<std::string> inputs = {"x"};
      if (op == "Squeeze") {
        b.int_initializer("axes", {0});
        inputs.push_back("axes");
      }
      b.node(op, inputs, {"y"}, "s");
      b.output("y");
      b.save(fresh("scalar_" + op));
      expect_refused(dir / ("scalar_" + op) / "m.onnx",
                     "node 's' (op " + op + "): axis 0 is out of range for rank 0");
    }
  }
  {  // a node without outputs (fuzz_onnx_model found a 1-d pool reading output 0 of none)
    for (const std::string op : {"MaxPool", "Relu"}) {
      OnnxModelBuilder b;
      b.input("x", {1, 2, 8});
      b.node(op, {"x"}, {}, "p");
      b.output("x");
      b.save(fresh("no_output_" + op));
      expect_refused(dir / ("no_output_" + op) / "m.onnx",
                     "node 'p' (op " + op + "): a node without outputs");
    }
  }
  {  // a cycle and a dangling input
    OnnxModelBuilder b;
    b.input("x", {2});
    b.node("Add", {"x", "b"}, {"a"}, "first");
    b.node("Relu", {"a"}, {"b"}, "second");
    b.output("b");
    b.save(fresh("cycle"));
    expect_refused(dir / "cycle" / "m.onnx",
                   "node 'first' (op Add): 'b' is read before anything defines it");
    OnnxModelBuilder d;
    d.input("x", {2});
    d.node("Relu", {"nowhere"}, {"y"}, "lost");
    d.output("y");
    d.save(fresh("dangling"));
    expect_refused(dir / "dangling" / "m.onnx", "node 'lost' (op Relu): 'nowhere' is read before");
  }
  {  // an op crucible lacks names the node and the op
    OnnxModelBuilder b;
    b.input("x", {1, 2, 3});
    b.input("w", {1, 8, 3});
    b.input("r", {1, 8, 2});
    b.node("LSTM", {"x", "w", "r"}, {"", "h"}, "lstm_1");
    b.output("h");
    b.save(fresh("lstm"));
    expect_refused(dir / "lstm" / "m.onnx", "node 'lstm_1' (op LSTM): not supported");
  }
  // A missing file.
  expect_refused(dir / "missing" / "m.onnx", "cannot read");
}

// EyeLike's diagonal k may be any int64: its ones stand where column i + k is in the matrix
// (i + k itself overflowed for k near either end, which UBSan reports).
// Issue 51: what the importer accepted silently and now refuses in one line, each a neighbour of
// the others (a binding that changes the model, a file format or opset it cannot know).
// A model is named after its file, the same way by import and by a run (model.onnx, ONNX's
// standard name, after its folder), so two zoo models given to one run are two models; two files
// that would share a name, and every -o that is not a folder, are one line and exit 2.
TEST(OnnxImport, ModelsAreNamedAfterTheirFilesAndOutputFoldersAreChecked) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  fs::create_directories(dir / "zoo" / "alpha");
  fs::create_directories(dir / "zoo" / "beta");
  fs::create_directories(dir / "other" / "alpha");
  const fs::path alpha = relu_model().save(dir / "zoo" / "alpha" / "model.onnx");
  const fs::path beta = relu_model().save(dir / "zoo" / "beta" / "model.onnx");
  const fs::path shadow = relu_model().save(dir / "other" / "alpha" / "model.onnx");
  const fs::path named = relu_model().save(dir / "mynet.onnx");
  for (const auto& [model, graph] : {std::pair{alpha, "alpha"}, std::pair{named, "mynet"}}) {
    auto r = run_crucible(fmt::format("import {} -o {}", model.string(), (dir / "out").string()));
    ASSERT_EQ(r.status, 0) << r.err;
    const fs::path file = dir / "out" / (std::string(graph) + ".graph");
    ASSERT_TRUE(fs::exists(file)) << r.out;
    EXPECT_EQ(load_graph_file(file).name(), graph);
  }
  // One run, two model.onnx files: two models, each under its folder's name.
  const fs::path db = dir / "r.db";
  auto run =
      run_crucible(fmt::format("run --graph {} --graph {} --backends eager --db {} -o {}",
                               alpha.string(), beta.string(), db.string(), (dir / "run").string()));
  ASSERT_EQ(run.status, 0) << run.err << run.out;
  EXPECT_EQ(testing::query_text(db, "SELECT model FROM results ORDER BY model"), "alpha\nbeta\n");
  // Two files that would be one model: refused before any run.
  auto twice =
      run_crucible(fmt::format("run --graph {} --graph {} --backends eager --db {}", alpha.string(),
                               shadow.string(), (dir / "twice.db").string()));
  EXPECT_EQ(twice.status, 2);
  EXPECT_EQ(testing::count_lines(twice.err), 1) << twice.err;
  EXPECT_NE(twice.err.find("are both model 'alpha'"), std::string::npos) << twice.err;
  EXPECT_FALSE(fs::exists(dir / "twice.db"));
  // -o that is not a folder one can write: one line, exit 2, never an internal error.
  std::ofstream(dir / "a_file") << "x";
  const std::vector<std::pair<std::string, std::string>> outs = {
      {(dir / "a_file").string(), "a file, not a folder"},
      {"''", "-o '': give the folder"},
      {"/proc/crucible_no_such", "cannot write there"},
      {(dir / "a_file" / "sub").string(), "cannot write there"}};
  for (const auto& [o, says] : outs) {
    auto r = run_crucible(fmt::format("import {} -o {}", named.string(), o));
    EXPECT_EQ(r.status, 2) << o << ": " << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find(says), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << r.err;
  }
  // A refused import leaves no folder: an --input-data file of the wrong shape.
  OnnxModelBuilder two;
  two.input("x", {2, 2});
  two.node("Relu", {"x"}, {"y"});
  two.output("y");
  const fs::path small = two.save(dir / "small.onnx");
  ::onnx::TensorProto t;
  t.set_data_type(::onnx::TensorProto::FLOAT);
  t.add_dims(3);
  for (int i = 0; i < 3; ++i) t.add_float_data(1.0f);
  std::ofstream(dir / "input_0.pb", std::ios::binary) << t.SerializeAsString();
  auto refused = run_crucible(fmt::format("import {} -o {} --input-data {}", small.string(),
                                          (dir / "never").string(), (dir / "input_0.pb").string()));
  EXPECT_EQ(refused.status, 2) << refused.err;
  EXPECT_FALSE(fs::exists(dir / "never"));
}

// A refusal quotes the file, and the file is not to be trusted with the terminal: a million-entry
// attribute is one bounded line, a NUL in a node's name is shown escaped, not the end of it.
TEST(OnnxImport, MessagesQuotingTheFileStayOneBoundedLine) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  {
    OnnxModelBuilder b;
    b.input("x", {2, 2});
    auto* n = b.node("Transpose", {"x"}, {"y"}, "big_perm");
    OnnxModelBuilder::attr_ints(n, "perm", std::vector<int64_t>(1000000, 1));
    b.output("y");
    const fs::path model = b.save(dir / "big.onnx");
    auto r = run_crucible(fmt::format("import {} -o {}", model.string(), (dir / "out").string()));
    EXPECT_EQ(r.status, 2) << r.err.substr(0, 300);
    EXPECT_EQ(testing::count_lines(r.err), 1);
    EXPECT_LT(r.err.size(), 4200u);
    EXPECT_NE(r.err.find("big_perm"), std::string::npos) << r.err.substr(0, 300);
  }
  {
    OnnxModelBuilder b;
    b.input("x", {2, 2});
    b.node("NoSuchOpAnywhere", {"x"}, {"y"}, std::string("bad\0name", 8));
    b.output("y");
    const fs::path model = b.save(dir / "nul.onnx");
    auto r = run_crucible(fmt::format("import {} -o {}", model.string(), (dir / "out").string()));
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_EQ(testing::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("bad\\x00name"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("NoSuchOpAnywhere"), std::string::npos) << r.err;
  }
  {
    // A Conv whose kernel_shape contradicts its weight is a broken file, not a 3x3 conv.
    OnnxModelBuilder b;
    b.input("x", {1, 1, 8, 8});
    b.initializer("w", {1, 1, 3, 3}, std::vector<float>(9, 1.0f));
    auto* n = b.node("Conv", {"x", "w"}, {"y"}, "conv_1");
    OnnxModelBuilder::attr_ints(n, "kernel_shape", {5, 5});
    b.output("y");
    const fs::path model = b.save(dir / "conv.onnx");
    auto r = run_crucible(fmt::format("import {} -o {}", model.string(), (dir / "out").string()));
    EXPECT_EQ(r.status, 2) << r.err;
    EXPECT_NE(r.err.find("kernel_shape [5,5] differs from the weight's [3,3]"), std::string::npos)
        << r.err;
  }
  EXPECT_FALSE(fs::exists(dir / "out"));
}

// A TensorProto file of `dims` holding 0.5, 1.5, ... (float) or 0, 1, ... (int64).
fs::path tensor_file(const fs::path& file, const std::vector<int64_t>& dims, bool int64 = false) {
  ::onnx::TensorProto t;
  t.set_data_type(int64 ? ::onnx::TensorProto::INT64 : ::onnx::TensorProto::FLOAT);
  int64_t n = 1;
  for (int64_t d : dims) {
    t.add_dims(d);
    n *= d;
  }
  for (int64_t k = 0; k < n; ++k) {
    if (int64) {
      t.add_int64_data(k);
    } else {
      t.add_float_data(static_cast<float>(k) + 0.5f);
    }
  }
  std::ofstream(file, std::ios::binary) << t.SerializeAsString();
  return file;
}

// `run --graph MODEL.onnx --input-data FILE...` runs the model on the given data: its imported
// graph binds each input to its file, and both backends pass on it. A file of the wrong dims or
// dtype, one too many, one missing, and --input-data without exactly one ONNX model are each
// one line and exit 2, with no store and no folder made.
TEST(OnnxImport, RunBindsInputDataToItsOneOnnxModel) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  OnnxModelBuilder b;
  b.input("x", {2, 3});
  b.input("y", {2, 3});
  b.node("Add", {"x", "y"}, {"z"});
  b.output("z");
  const fs::path model = b.save(dir / "add.onnx");
  const fs::path x = tensor_file(dir / "x.pb", {2, 3}), y = tensor_file(dir / "y.pb", {2, 3});
  auto r = run_crucible(fmt::format(
      "run --graph {} --input-data {} --input-data {} --backends eager,codegen --db {} -o {}",
      model.string(), x.string(), y.string(), (dir / "r.db").string(), (dir / "out").string()));
  ASSERT_EQ(r.status, 0) << r.err << r.out;
  const Graph g = load_graph_file(dir / "out" / "graphs" / "add" / "add.graph");
  ASSERT_EQ(g.inputs().size(), 2u);
  for (ValueId in : g.inputs()) EXPECT_EQ(g.value(in).init.kind, "file") << print_graph(g);
  const std::vector<Tensor> given = make_inputs(g, 0);
  ASSERT_EQ(given.size(), 2u);
  EXPECT_EQ(given[0].get(4), 4.5);
  auto q = run_crucible(fmt::format(
      "query --db {} \"select backend, status from results order by backend\" --format csv",
      (dir / "r.db").string()));
  EXPECT_NE(q.out.find("codegen,pass"), std::string::npos) << q.out;
  EXPECT_NE(q.out.find("eager,pass"), std::string::npos) << q.out;

  OnnxModelBuilder other;
  other.input("w", {3});
  other.node("Relu", {"w"}, {"v"});
  other.output("v");
  const fs::path second = other.save(dir / "relu.onnx");
  const struct {
    std::string args, says;
  } refused[] = {
      {fmt::format("--graph {} --input-data {}", model.string(),
                   tensor_file(dir / "wide.pb", {3, 2}).string()),
       "input 'x': its data file wide.pb"},
      {fmt::format("--graph {} --input-data {}", model.string(),
                   tensor_file(dir / "ints.pb", {2, 3}, true).string()),
       "input 'x' is f32, its data file holds i64"},
      {fmt::format("--graph {} --input-data {} --input-data {} --input-data {}", model.string(),
                   x.string(), y.string(), x.string()),
       "--input-data: 3 files for the 2 inputs of"},
      {fmt::format("--graph {} --input-data {}", model.string(), (dir / "none.pb").string()),
       "none.pb: cannot read"},
      {fmt::format("--suite tutorial --input-data {}", x.string()),
       "--input-data binds the inputs of one --graph MODEL.onnx, and this run has 0"},
      {fmt::format("--graph {} --graph {} --input-data {}", model.string(), second.string(),
                   x.string()),
       "and this run has 2"},
  };
  for (const auto& c : refused) {
    const fs::path db = dir / "refused.db", out = dir / "refused";
    auto bad = run_crucible(
        fmt::format("run {} --backends eager --db {} -o {}", c.args, db.string(), out.string()));
    EXPECT_EQ(bad.status, 2) << c.args << ": " << bad.err;
    EXPECT_EQ(testing::count_lines(bad.err), 1) << bad.err;
    EXPECT_NE(bad.err.find(c.says), std::string::npos) << c.args << ": " << bad.err;
    EXPECT_FALSE(fs::exists(db)) << c.args;
    EXPECT_FALSE(fs::exists(out)) << c.args;
  }
}

// Token ids: an integer input that only indexes an embedding table is drawn from the table's
// rows, so `run --graph` runs a language model's graph as it is (random integers from -100 to 100
// were out of range); an integer input used as data keeps the plain random integers.
TEST(OnnxImport, TokenIdInputsAreDrawnInsideTheTableTheyIndex) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  OnnxModelBuilder b;
  b.input("ids", {2, 4}, ::onnx::TensorProto::INT64);
  b.input("count", {2}, ::onnx::TensorProto::INT64);
  b.initializer("table", {7, 3}, std::vector<float>(21, 0.25f));
  b.int_initializer("shape", {8});
  b.node("Reshape", {"ids", "shape"}, {"flat"});
  b.node("Gather", {"table", "flat"}, {"rows"}, "embed");
  b.node("Neg", {"count"}, {"negcount"});
  b.output("rows");
  b.output("negcount", ::onnx::TensorProto::INT64);
  const fs::path model = b.save(dir / "tokens.onnx");
  auto r = run_crucible(fmt::format("import {} -o {}", model.string(), (dir / "out").string()));
  ASSERT_EQ(r.status, 0) << r.err;
  const Graph g = load_graph_file(dir / "out" / "tokens.graph");
  const Value& ids = g.value(g.inputs()[0]);
  EXPECT_EQ(ids.init.kind, "randint") << print_graph(g);
  EXPECT_EQ(ids.init.args.get_int_or("low", -1), 0);
  EXPECT_EQ(ids.init.args.get_int_or("high", -1), 7);
  EXPECT_TRUE(g.value(g.inputs()[1]).init.empty()) << print_graph(g);
  for (const Tensor& t : make_inputs(g, 3)) {
    if (t.dtype() != DType::kI64 || t.numel() != 8) continue;
    for (int64_t i = 0; i < t.numel(); ++i) {
      EXPECT_GE(t.get(i), 0);
      EXPECT_LT(t.get(i), 7);
    }
  }
  auto run = run_crucible(
      fmt::format("run --graph {} --backends eager,codegen --mode accuracy --db {} -o {}",
                  model.string(), (dir / "r.db").string(), (dir / "run").string()));
  EXPECT_EQ(run.status, 0) << run.err << run.out;
}

TEST(OnnxImport, BindingsAndHeadersThatChangeTheModelAreRefused) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  auto fresh = [&](const std::string& name) {
    fs::create_directories(dir / name);
    return dir / name / "m.onnx";
  };
  const fs::path chain = matmul_with_shape_chain().save(fresh("chain"));
  // --shape fills symbolic dims; it neither changes a fixed one nor binds a name that is absent.
  for (const auto& [shape, phrase] : std::vector<std::pair<std::string, std::string>>{
           {"x=2,5,4", "gives dim 1 as 5, the model fixes it at 3"},
           {"x=2,3", "gives 2 dims, the model has 3"},
           {"z=1", "--shape z: the model has no input of that name (its inputs: x)"},
           {"layer.W=4,5", "--shape layer.W: the model has no input of that name"}}) {
    auto r = run_crucible(fmt::format("import {} -o {} --shape {}", chain.string(),
                                      (dir / "chain" / "out").string(), shape));
    EXPECT_EQ(r.status, 2) << shape;
    EXPECT_NE(r.err.find(phrase), std::string::npos) << shape << ": " << r.err;
    EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  }
  {  // two inputs of one name: the second would silently become the first
    OnnxModelBuilder b;
    b.input("x", {2});
    b.input("x", {2});
    b.node("Add", {"x", "x"}, {"y"});
    b.output("y");
    b.save(fresh("twice"));
    expect_refused(dir / "twice" / "m.onnx", "input 'x' is declared twice");
  }
  {  // a file format from the future, and two opsets for the default domain
    OnnxModelBuilder b = relu_model();
    b.proto().set_ir_version(99);
    b.save(fresh("ir99"));
    expect_refused(dir / "ir99" / "m.onnx", "ir_version 99 is newer than 10");
    OnnxModelBuilder c = relu_model();
    auto* o = c.proto().add_opset_import();
    o->set_domain("ai.onnx");
    o->set_version(13);
    c.save(fresh("two_opsets"));
    expect_refused(dir / "two_opsets" / "m.onnx",
                   "the default domain's opset is imported twice (versions 17 and 13)");
  }
  {  // an input data file whose shape is not the input's
    const fs::path model = relu_model().save(fresh("data"));
    ::onnx::TensorProto t;
    t.set_data_type(::onnx::TensorProto::FLOAT);
    t.add_dims(3);
    for (int k = 0; k < 3; ++k) t.add_float_data(1.0f);
    std::ofstream(dir / "data" / "input_0.pb", std::ios::binary) << t.SerializeAsString();
    auto r = run_crucible(fmt::format("import {} -o {} --input-data {}", model.string(),
                                      (dir / "data" / "out").string(),
                                      (dir / "data" / "input_0.pb").string()));
    EXPECT_EQ(r.status, 2);
    EXPECT_NE(r.err.find("input 'x': its data file input_0.pb gives 1 dims, the model has 2"),
              std::string::npos)
        << r.err;
    EXPECT_FALSE(fs::exists(dir / "data" / "out"));
  }
}

TEST(OnnxImport, EyeLikeTakesAnyDiagonal) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t k : {int64_t{0}, int64_t{1}, int64_t{-2}, int64_t{3}, int64_t{4}, int64_t{-3}, kMax,
                    -kMax - 1}) {
    OnnxModelBuilder b;
    b.input("x", {3, 4});
    OnnxModelBuilder::attr_int(b.node("EyeLike", {"x"}, {"y"}), "k", k);
    b.output("y");
    Graph g = onnx::import_model(b.save(dir / "eye.onnx"));
    const auto out = Interpreter(g).run(std::vector<Tensor>{Tensor::zeros(DType::kF32, {3, 4})});
    ASSERT_EQ(out.size(), 1u);
    for (int64_t i = 0; i < 3; ++i) {
      for (int64_t j = 0; j < 4; ++j) {
        EXPECT_EQ(out[0].get(i * 4 + j), j - i == k ? 1.0 : 0.0)
            << "k " << k << " at " << i << "," << j;
      }
    }
  }
}

// Clip with constant float bounds (PyTorch's ReLU6) imports as one clamp, which a packed
// convolution absorbs; it computes what max then min compute, NaN and crossed bounds included.
// Bounds read from graph inputs, a NaN bound and integer data keep the maximum and minimum.
TEST(OnnxImport, ClipWithConstantBoundsIsOneClamp) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  const float nan = std::nanf("");
  auto import = [&](float lo, float hi, bool bounds_are_inputs, bool ints) {
    OnnxModelBuilder b;
    const auto type = ints ? ::onnx::TensorProto::INT32 : ::onnx::TensorProto::FLOAT;
    b.input("x", {5}, type);
    if (bounds_are_inputs) {
      b.input("lo", {}, type);
      b.input("hi", {}, type);
    } else if (ints) {
      for (const auto& [name, v] : {std::pair{"lo", lo}, std::pair{"hi", hi}}) {
        auto* t = b.proto().mutable_graph()->add_initializer();
        t->set_name(name);
        t->set_data_type(::onnx::TensorProto::INT32);
        t->add_int32_data(static_cast<int32_t>(v));
      }
    } else {
      b.initializer("lo", {}, {lo});
      b.initializer("hi", {}, {hi});
    }
    b.node("Clip", {"x", "lo", "hi"}, {"y"});
    b.output("y", type);
    return onnx::import_model(b.save(dir / "clip.onnx"));
  };
  auto ops = [](const Graph& g) {
    std::string s;
    for (const Node& n : g.nodes()) s += n.op + " ";
    return s;
  };
  const Tensor x = T(DType::kF32, {5}, {-3.0, 0.5, nan, 7.0, 6.0});
  Graph relu6 = import(0.0F, 6.0F, false, false);
  EXPECT_EQ(ops(relu6), "clamp ") << print_graph(relu6);
  ExpectTensor(Interpreter(relu6).run(std::vector<Tensor>{x}).at(0), DType::kF32, {5},
               {0.0, 0.5, nan, 6.0, 6.0});
  Graph crossed = import(2.0F, 1.0F, false, false);  // every element takes the upper bound
  EXPECT_EQ(ops(crossed), "clamp ");
  ExpectTensor(Interpreter(crossed).run(std::vector<Tensor>{x}).at(0), DType::kF32, {5},
               {1.0, 1.0, nan, 1.0, 1.0});
  EXPECT_EQ(ops(import(0.0F, 6.0F, true, false)), "maximum minimum ");
  EXPECT_EQ(ops(import(nan, 6.0F, false, false)), "maximum minimum ");
  EXPECT_EQ(ops(import(0.0F, 6.0F, false, true)), "maximum minimum ");
}

// Div on int64 truncates in the integers: through f64 (as it was) quotients above 2^53 were
// rounded, whether the importer folded the node or it ran.
TEST(OnnxImport, Int64DivIsExactPast2To53FoldedAndAtRunTime) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  const std::vector<int64_t> x = {(int64_t{1} << 53) + 1, (int64_t{1} << 62) + 1,
                                  -((int64_t{1} << 60) + 1)};
  const std::vector<int64_t> want = {(int64_t{1} << 53) + 1, 1537228672809129301, int64_t{1} << 59};
  auto add_int64 = [](OnnxModelBuilder& b, const std::string& name, const std::vector<int64_t>& v) {
    auto* t = b.proto().mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(::onnx::TensorProto::INT64);
    t->add_dims(static_cast<int64_t>(v.size()));
    for (int64_t e : v) t->add_int64_data(e);
  };
  for (const bool folded : {false, true}) {
    SCOPED_TRACE(folded ? "folded" : "at run time");
    OnnxModelBuilder b;
    if (folded) {
      add_int64(b, "x", x);
    } else {
      b.input("x", {3}, ::onnx::TensorProto::INT64);
    }
    add_int64(b, "d", {1, 3, -2});
    b.node("Div", {"x", "d"}, {"y"});
    b.output("y", ::onnx::TensorProto::INT64);
    const Graph g = onnx::import_model(b.save(dir / "div.onnx"));
    std::vector<Tensor> in;
    if (!folded) {
      in.push_back(Tensor::empty(DType::kI64, {3}));
      std::copy(x.begin(), x.end(), in[0].data<int64_t>());
    }
    const Tensor y = Interpreter(g).run(in).at(0);
    ASSERT_EQ(y.dtype(), DType::kI64) << print_graph(g);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(y.data<int64_t>()[i], want[i]) << i;
  }
}

// fuzz_onnx_model: Selu on an int32 input made its alpha an int32 constant through a plain cast,
// undefined for -1.5e26. A constant past the input's type now holds what the cast to that type
// gives (0 for int32, as for NaN), so each such model computes what alpha = 0 computes.
TEST(OnnxImport, ActivationConstantsPastAnIntegerInputsTypeAreTheCastsValue) {
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  auto run = [&](const std::string& op, float alpha) {
    OnnxModelBuilder b;
    b.input("x", {4}, ::onnx::TensorProto::INT32);
    auto* n = b.node(op, {"x"}, {"y"});
    OnnxModelBuilder::attr_float(n, "alpha", alpha);
    if (op == "Selu") OnnxModelBuilder::attr_float(n, "gamma", 3.0F);
    b.output("y", ::onnx::TensorProto::INT32);
    Graph g = onnx::import_model(b.save(dir / "act.onnx"));
    return Interpreter(g).run(std::vector<Tensor>{T(DType::kI32, {4}, {-3, -1, 0, 5})}).at(0);
  };
  for (const std::string op : {"Selu", "Elu"}) {
    const Tensor at_zero = run(op, 0.0F);
    for (float alpha : {-1.5e26F, 1e30F, std::numeric_limits<float>::infinity(), std::nanf("")}) {
      SCOPED_TRACE(fmt::format("{} alpha {}", op, alpha));
      ExpectTensor(run(op, alpha), at_zero.dtype(), at_zero.shape(),
                   {at_zero.get(0), at_zero.get(1), at_zero.get(2), at_zero.get(3)});
    }
  }
}

}  // namespace
}  // namespace crucible

namespace crucible {
namespace {

// A worker's peak resident size is its own: after the runner imported a model with 200 MB of
// weights, a tiny model's workers (forked from that runner) report megabytes, not the runner's
// high-water mark, which ru_maxrss carries across fork and exec.
TEST(OnnxImport, AWorkersPeakMemoryIsNotItsRunnersAfterAnImport) {
  CRUCIBLE_SKIP_WHEN_SANITIZED("AddressSanitizer's shadow memory and quarantine count in RSS");
  const fs::path dir = testing::fresh_test_dir("onnx_import");
  OnnxModelBuilder b;
  const int64_t n = 50'000'000;
  b.input("x", {n});
  b.initializer("w", {n}, std::vector<float>(static_cast<size_t>(n), 0.25f));
  b.node("Add", {"x", "w"}, {"y"});
  b.output("y");
  const fs::path big = b.save(dir / "big.onnx");
  std::ofstream(dir / "tiny.graph")
      << "graph tiny(%x: f32[4]) {\n  %y = relu(%x)\n  return %y\n}\n";
  auto r = run_crucible(fmt::format(
      "run --graph {} --graph {} --mode performance --repeat 3 --warmup 1 --db {} -o {}",
      big.string(), (dir / "tiny.graph").string(), (dir / "c.db").string(),
      (dir / "out").string()));
  ASSERT_EQ(r.status, 0) << r.err;
  auto q = run_crucible(fmt::format(
      "query --db {} --format csv \"select model, peak_rss_mb from results where mode = "
      "'performance' order by model\"",
      (dir / "c.db").string()));
  double big_mb = 0, tiny_mb = 0;
  std::sscanf(q.out.c_str(), "model,peak_rss_mb\nbig,%lf\ntiny,%lf", &big_mb, &tiny_mb);
  EXPECT_GT(big_mb, 200) << q.out;  // the big model's own worker holds its weights
  EXPECT_GT(tiny_mb, 0) << q.out;
  EXPECT_LT(tiny_mb, 100) << q.out;
  fs::remove_all(dir);
}

}  // namespace
}  // namespace crucible
