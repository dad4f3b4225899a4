// The out-of-process accuracy check: the tensor file a worker hands its outputs out in (round
// trips, and every malformed file refused with its path), the verdict reached on them, and the
// reference worker, which loads no plugin.
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "accuracy_verdict.h"
#include "cli_util.h"
#include "crucible/core/error.h"
#include "tensor_file.h"
#include "test_util.h"
#include "worker_report.h"

namespace crucible {
namespace {

namespace fs = std::filesystem;
using reports::Status;
using testing::T;

void expect_same(const Tensor& a, const Tensor& b) {
  ASSERT_EQ(a.defined(), b.defined());
  if (!a.defined()) return;
  EXPECT_EQ(a.dtype(), b.dtype());
  EXPECT_EQ(a.shape(), b.shape());
  EXPECT_EQ(a.to_doubles(), b.to_doubles());
}

std::string bytes_of(const fs::path& p) { return testing::read_all(p); }
void write_bytes(const fs::path& p, const std::string& s) {
  std::ofstream(p, std::ios::binary | std::ios::trunc) << s;
}

TEST(TensorFile, RoundTripsEveryDtypeShapeLayoutAndUndefined) {
  const fs::path dir = testing::fresh_test_dir("tensor_file");
  const Tensor wide = T(DType::kF32, {2, 3}, {1, 2, 3, 4, 5, 6});
  const TensorGroups groups = {
      {wide.transpose(0, 1), T(DType::kBool, {3}, {1, 0, 1}), T(DType::kU8, {2}, {7, 255}),
       T(DType::kI32, {}, {-5}), T(DType::kI64, {2}, {1LL << 53, -3}),
       T(DType::kBF16, {2}, {1.5, -2}), T(DType::kF64, {1, 0, 4}, {})},
      {},
      {Tensor(), T(DType::kF64, {1}, {0.1})}};
  write_tensor_file(dir / "t", groups);
  const TensorGroups back = read_tensor_file(dir / "t");
  ASSERT_EQ(back.size(), groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    ASSERT_EQ(back[g].size(), groups[g].size()) << g;
    for (size_t i = 0; i < groups[g].size(); ++i) expect_same(back[g][i], groups[g][i]);
  }
  EXPECT_TRUE(back[0][0].is_contiguous());  // written in logical order
  EXPECT_FALSE(fs::exists(dir / "t.tmp"));
}

// Every prefix of a good file is refused (never a crash, never a partial result), and so is every
// lie about sizes, with the file's path in the message.
TEST(TensorFile, RefusesEveryTruncationAndEveryLieWithItsPath) {
  const fs::path dir = testing::fresh_test_dir("tensor_file_bad");
  write_tensor_file(dir / "good", {{T(DType::kF32, {2, 2}, {1, 2, 3, 4}), Tensor()}});
  const std::string good = bytes_of(dir / "good");
  for (size_t n = 0; n < good.size(); ++n) {
    write_bytes(dir / "cut", good.substr(0, n));
    EXPECT_THROW(read_tensor_file(dir / "cut"), Error) << n << " bytes";
  }
  write_bytes(dir / "long", good + "x");
  EXPECT_THROW(read_tensor_file(dir / "long"), Error);
  const size_t header = std::string("crucible-tensors 2\n").size();
  auto patched = [&](size_t at, const std::string& with) {
    std::string s = good;
    s.replace(at, with.size(), with);
    write_bytes(dir / "lie", s);
    try {
      read_tensor_file(dir / "lie");
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  const size_t tensor = header + 16;  // after the group count and the tensor count
  EXPECT_NE(patched(0, "X").find("not a crucible tensor file"), std::string::npos);
  EXPECT_NE(patched(header, std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8)).find("groups"),
            std::string::npos);
  EXPECT_NE(patched(tensor, "\x02").find("neither 0 nor 1"), std::string::npos);
  EXPECT_NE(patched(tensor + 1, "\x09").find("unknown dtype"), std::string::npos);
  EXPECT_NE(patched(tensor + 2, std::string("\x41\0\0\0\0\0\0\0", 8)).find("rank"),
            std::string::npos);
  // A dimension of 2^62 elements in a file of a few dozen bytes.
  EXPECT_NE(patched(tensor + 10, std::string("\0\0\0\0\0\0\0\x40", 8)).find("more elements"),
            std::string::npos);
  // A data size that disagrees with dtype and shape.
  EXPECT_NE(patched(tensor + 26, std::string("\x11", 1)).find("which takes 16"), std::string::npos);
  const std::string missing = patched(0, "c");  // a good file is read again after a bad one
  EXPECT_EQ(missing, "accepted");
  try {
    read_tensor_file(dir / "absent");
    FAIL() << "a missing file was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find((dir / "absent").string()), std::string::npos);
  }
}

// The tensors read borrow the file's pages, aligned as any tensor's storage: they outlive the
// file's removal, a write to one never reaches the file, and padding that is not zeros (the only
// bytes a mapped reader would otherwise never look at) is refused.
TEST(TensorFile, ReadTensorsAreAlignedPrivateAndOutliveTheirFile) {
  const fs::path dir = testing::fresh_test_dir("tensor_file_mapped");
  write_tensor_file(dir / "t", {{T(DType::kU8, {3}, {1, 2, 3}), T(DType::kF64, {2}, {0.5, -1})}});
  const std::string bytes = bytes_of(dir / "t");
  TensorGroups back = read_tensor_file(dir / "t");
  for (const Tensor& t : back[0])
    EXPECT_EQ(reinterpret_cast<uintptr_t>(t.raw_data()) % Storage::kAlignment, 0u);
  fs::remove(dir / "t");
  EXPECT_EQ(back[0][1].to_doubles(), (std::vector<double>{0.5, -1}));
  write_bytes(dir / "t", bytes);
  TensorGroups again = read_tensor_file(dir / "t");
  static_cast<double*>(again[0][1].raw_data())[0] = 7;
  EXPECT_EQ(bytes_of(dir / "t"), bytes);
  // The first tensor's padding: after its header (the magic, two counts, then 1 + 1 + 8 + 8 + 8).
  const size_t pad = std::string("crucible-tensors 2\n").size() + 16 + 26;
  ASSERT_EQ(bytes.at(pad), '\0');
  std::string dirty = bytes;
  dirty[pad] = 'x';
  write_bytes(dir / "dirty", dirty);
  try {
    read_tensor_file(dir / "dirty");
    FAIL() << "padding that is not zeros was read";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("padding"), std::string::npos) << e.what();
  }
  fs::remove_all(dir);
}

WorkerJob rule(double tolerance = 1e-4) {
  WorkerJob job;
  job.tolerance = tolerance;
  return job;
}

TEST(AccuracyVerdict, JudgesOutputsAgainstEagerAndFp64) {
  AccuracyReference ref;
  ref.eager = {T(DType::kF32, {3}, {1, 2, 3})};
  ref.fp64 = {T(DType::kF64, {3}, {1, 2, 3})};
  auto judge = [&](std::vector<Tensor> res) {
    reports::ResultRecord r = reports::make_result("s", "m", "b", "accuracy", 1);
    r.status = Status::kPass;  // what the backend's worker said: it ran
    judge_outputs(rule(), ref, res, r);
    return r;
  };
  EXPECT_EQ(judge({T(DType::kF32, {3}, {1, 2, 3})}).status, Status::kPass);
  const auto wrong = judge({T(DType::kF32, {3}, {0, 0, 0})});
  EXPECT_EQ(wrong.status, Status::kFailAccuracy);
  EXPECT_NE(wrong.error.find("3 of 3 elements differ"), std::string::npos) << wrong.error;
  EXPECT_EQ(judge({}).status, Status::kFailAccuracy);
  EXPECT_EQ(judge({T(DType::kF32, {3}, {1, 2, 3}), T(DType::kF32, {1}, {0})}).error,
            "2 outputs, eager gives 1");
  // NaN matches NaN only where eager has it.
  EXPECT_EQ(judge({T(DType::kF32, {3}, {testing::op_helpers::kNaN, 2, 3})}).status,
            Status::kFailAccuracy);
}

// After an update one eager run is one draw of a spread: a backend 3.9x farther from fp64 than
// eager's lucky draw passes when another f32 run (inputs one rounding apart) is as far as it, is
// still failed when no draw comes near it, and an output before any update keeps the one-draw rule.
TEST(AccuracyVerdict, AfterAnUpdateTheYardstickIsTheLargestF32Draw) {
  AccuracyReference ref;
  ref.eager = {T(DType::kF32, {}, {1.96}), T(DType::kF32, {}, {1.96})};
  ref.fp64 = {T(DType::kF64, {}, {1.95}), T(DType::kF64, {}, {1.95})};
  ref.after_update = {false, true};
  ref.spread = {{T(DType::kF32, {}, {1.90}), T(DType::kF32, {}, {1.90})},
                {T(DType::kF32, {}, {1.97}), T(DType::kF32, {}, {1.97})}};
  auto judge = [&](double v) {
    reports::ResultRecord r = reports::make_result("s", "m", "b", "accuracy", 1);
    r.status = Status::kPass;
    judge_outputs(rule(), ref, {T(DType::kF32, {}, {v}), T(DType::kF32, {}, {v})}, r);
    return r;
  };
  const auto honest = judge(1.99);  // 0.04 off: eager 0.01, the spread 0.05
  ASSERT_EQ(honest.accuracy.size(), 2u);
  EXPECT_FALSE(honest.accuracy[0].passed) << "before an update: 0.04 > 3 x 0.01";
  EXPECT_TRUE(honest.accuracy[1].passed);
  EXPECT_NEAR(honest.accuracy[1].rmse_eager_vs_fp64, 0.05, 1e-6);
  EXPECT_NE(honest.error.find("output 0"), std::string::npos) << honest.error;
  const auto wrong = judge(2.25);  // 0.3 off: past 3 x 0.05
  EXPECT_FALSE(wrong.accuracy[1].passed);
}

TEST(AccuracyVerdict, JudgesATestCaseAgainstItsExpectedOutputs) {
  AccuracyReference ref;
  ref.eager = {T(DType::kF32, {2}, {1, 2})};
  ref.expected = {T(DType::kF32, {2}, {1, 2})};
  WorkerJob job = rule();
  job.expected = "case";
  reports::ResultRecord r = reports::make_result("s", "m", "b", "accuracy", 1);
  judge_outputs(job, ref, {T(DType::kF32, {2}, {1, 2})}, r);
  EXPECT_EQ(r.status, Status::kPass);
  judge_outputs(job, ref, {T(DType::kF32, {2}, {0, 0})}, r);
  EXPECT_EQ(r.status, Status::kFailAccuracy);
  judge_outputs(job, ref, {}, r);
  EXPECT_EQ(r.error, "0 outputs, the test case expects 1");
}

const char* kGraph = R"(graph g(%x: f32[64]) {
  %y = sin(%x)
  return %y
}
)";
// Through a real run: the reference and each backend's outputs come from workers of their own;
// the reference's loads no plugin at all (its report names no plugin's version), a backend's
// worker loads that backend alone, and the verdict is reached in the parent.
TEST(AccuracyCheck, TheReferenceWorkerLoadsNoPluginAndEachBackendRunsAlone) {
  const fs::path dir = testing::fresh_test_dir("accuracy_check");
  std::ofstream(dir / "g.graph") << kGraph;
  const auto r = testing::run_crucible("run --graph " + (dir / "g.graph").string() +
                                       " --backends eager,faulty --mode accuracy" +
                                       " --plugin-path " + CRUCIBLE_TEST_PLUGIN_DIR + " --db " +
                                       (dir / "r.db").string() + " -o " + (dir / "out").string());
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  const fs::path reports = dir / "out" / "reports";
  EXPECT_TRUE(read_report(reports / "g.reference.accuracy" / "report").versions.empty());
  for (const std::string b : {"eager", "faulty"}) {
    const auto loaded = read_report(reports / ("g." + b + ".accuracy") / "report").versions;
    ASSERT_EQ(loaded.size(), 1u) << b;
    EXPECT_EQ(loaded.begin()->first, b);
  }
  EXPECT_FALSE(fs::exists(reports / "g.reference.accuracy" / "tensors"));  // read, then removed
  EXPECT_FALSE(fs::exists(reports / "g.faulty.accuracy" / "tensors"));
  const auto wrong = testing::run_crucible(
      "run --graph " + (dir / "g.graph").string() + " --backends faulty --mode accuracy" +
      " -c fault.g=wrong --plugin-path " + CRUCIBLE_TEST_PLUGIN_DIR + " --db " +
      (dir / "r.db").string() + " -o " + (dir / "out2").string());
  EXPECT_EQ(wrong.status, 1) << wrong.out << wrong.err;
  EXPECT_NE(wrong.out.find("fail_accuracy"), std::string::npos) << wrong.out;
}

}  // namespace
}  // namespace crucible
