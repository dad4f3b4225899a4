// The HTML dashboard from a store with a year of synthetic nightlies: pages written, every name
// escaped (a model called <script>alert(1)</script>), nothing fetched from the network, the
// regressions page with its reproduce commands; and, in headless Chromium, the DOM after the
// scripts ran (a summary table, a canvas per chart, the escaped name as text), the time to first
// render, and a screenshot kept under the build directory.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <vector>

#include "cli_util.h"
#include "crucible/reports/store.h"
#include "synthetic_history.h"

namespace crucible::reports {
namespace {

namespace fs = std::filesystem;
using testing::run_command;
using testing::run_crucible;

constexpr const char* kHostile = "<script>alert(1)</script>";

class Report : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / ("crucible_report_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    // A year of nightlies: 10 models x 3 backends of the synthetic history (steps, noise,
    // environment changes), accuracy and performance, kernels on codegen, one hostile name.
    const std::vector<synthetic::Series> all = synthetic::year(7);
    const char* backends[] = {"eager", "codegen", "other"};
    auto s = Store::open(dir_ / "year.db");
    for (int r = 0; r < synthetic::kRuns; ++r) {
      RunInfo info = make_run_info("syn", "eager,codegen,other", "both");
      info.env.compiler = all[0].points[r].fingerprint.substr(9);
      info.env.launcher["OMP_NUM_THREADS"] = "2";
      info.env.launcher["numactl"] = "--physcpubind=0,1";
      const int64_t run = s->begin_run(info);
      std::vector<ResultRecord> rs;
      for (size_t i = 0; i < 30; ++i) {
        const std::string model = i / 3 == 4 ? kHostile : "model" + std::to_string(i / 3);
        const bool inaccurate = i == 4 && r > 300;
        ResultRecord x = make_result("syn", model, backends[i % 3], "performance", 1);
        x.status = inaccurate ? Status::kSkipped : Status::kPass;  // as a run skips its timing
        x.samples_ms = all[i].points[r].samples;
        x.noisy = all[i].points[r].noisy;
        if (i % 3 != 0) {
          x.speedup = 1.5 * all[i - i % 3].points[r].samples[0] / all[i].points[r].samples[0];
          x.compile_s = 2.0;
          x.memory_ratio = 1.2;
          // The calls differ by run, so a test can tell which run's kernels a table shows.
          x.kernels = {{"cpp_fused_add_0", 10 + r, 40000}, {"extern::gemm</td>", 10, 90000}};
          // The fused kernel moves 10 GB/s against a 20 GB/s triad: 50% of its roofline.
          x.kernels[0].bytes = 400000.0;
          x.kernels[0].flops = 40000.0;
          x.roofline = Roofline{1e6, 1e6, 100.0, 20.0, {}, {}, {}};
        }
        rs.push_back(x);
        ResultRecord a = make_result("syn", model, backends[i % 3], "accuracy", 1);
        a.status = inaccurate ? Status::kFailAccuracy : Status::kPass;
        rs.push_back(a);
      }
      s->add_results(run, rs);
      s->finish_run(run, "complete");
    }
    s.reset();
    // One run a night over the year before today, each with its commit, as a nightly store has.
    const auto r =
        run_command("sqlite3 " + (dir_ / "year.db").string() +
                    " \"UPDATE runs SET started_at = strftime('%Y-%m-%dT02:00:00Z', 'now', (id - " +
                    std::to_string(synthetic::kRuns) +
                    ") || ' days'), git_commit = lower(hex(randomblob(20)))\"");
    ASSERT_EQ(r.status, 0) << r.err;
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }
  static fs::path dir_;
};
fs::path Report::dir_;

TEST_F(Report, StaticSiteEscapesEveryNameAndNeedsNoNetwork) {
  const fs::path site = dir_ / "site";
  const auto t0 = std::chrono::steady_clock::now();
  // The default window, --since 365d, holds the whole year.
  auto r = run_crucible("report --html " + site.string() + " --db " + (dir_ / "year.db").string());
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("(365 runs, 10 models)"), std::string::npos) << r.out;
  std::printf("%s(whole command %.2f s)\n", r.out.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  EXPECT_NE(r.out.find("wrote 12 pages"), std::string::npos) << r.out;  // index, regressions, 10
  int model_pages = 0, kernel_files = 0;
  for (const auto& e : fs::directory_iterator(site)) {
    const std::string html = testing::read_all(e.path());
    EXPECT_EQ(html.find(kHostile), std::string::npos) << e.path();  // never raw
    EXPECT_EQ(html.find("gemm</td>"), std::string::npos) << e.path();
    // Nothing is fetched: no src or href leaves the directory.
    EXPECT_FALSE(std::regex_search(html, std::regex(R"((src|href)\s*=\s*["']?(https?:)?//)")))
        << e.path();
    const std::string name = e.path().filename().string();
    if (name.rfind("model-", 0) != 0) continue;
    if (e.path().extension() == ".html") {
      ++model_pages;
      continue;
    }
    // A model's kernel file: the timings of every profiled run (codegen's and other's, one a
    // night), loaded by its page when an older run is chosen.
    ++kernel_files;
    EXPECT_EQ(name.substr(name.size() - 11), ".kernels.js");
    EXPECT_EQ(html.rfind("crKernelsLoaded({", 0), 0u) << name;
    size_t results = 0;
    for (size_t at = html.find("\": [["); at != std::string::npos; at = html.find("\": [[", at + 1))
      ++results;
    EXPECT_EQ(results, 2u * synthetic::kRuns) << name;
  }
  EXPECT_EQ(model_pages, 10);
  EXPECT_EQ(kernel_files, 10);
  const std::string index = testing::read_all(site / "index.html");
  EXPECT_NE(index.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  EXPECT_NE(index.find("<h2>codegen over time</h2>"), std::string::npos);
  const std::string regressions = testing::read_all(site / "regressions.html");
  EXPECT_NE(regressions.find("crucible compare "), std::string::npos);
  EXPECT_NE(regressions.find("crucible minify --suite syn --only model1 --backend codegen"),
            std::string::npos);  // the accuracy failure planted from run 301
  // Each alert with the bisection over its commit range (last at the old level .. first at the
  // new, 10 hex digits): by status, or by time over eager's.
  EXPECT_TRUE(std::regex_search(
      regressions, std::regex("crucible bisect --good [0-9a-f]{10} --bad [0-9a-f]{10} -- --suite "
                              "syn --only model1 --backends codegen --mode accuracy")));
  EXPECT_TRUE(std::regex_search(regressions,
                                std::regex("crucible bisect --good [0-9a-f]{10} --bad [0-9a-f]{10} "
                                           "--judge ratio -- --suite syn --only \\S+ --backends "
                                           "(codegen|other) --mode performance")));
}

// The index marks what is not a clean speed-up: a noisy result and an unaudited one carry their
// mark in the models table, a failed one its status, and the backend's geomean counts the models
// it covers, noisy ones left out.
TEST_F(Report, TheIndexMarksNoisyUnauditedAndFailedResults) {
  const fs::path db = dir_ / "marks.db";
  {
    auto s = Store::open(db);
    RunInfo info;
    info.suites = "m";
    info.backends = "eager,fast";
    info.mode = "performance";
    const int64_t run = s->begin_run(info);
    std::vector<ResultRecord> rs;
    auto add = [&](const std::string& model, Status status, double speedup) {
      ResultRecord x = make_result("m", model, "fast", "performance", 1);
      x.status = status;
      x.samples_ms = {1.0, 1.0, 1.0};
      x.audit = "bitwise";
      if (status == Status::kPass) x.speedup = speedup;
      rs.push_back(x);
      return &rs.back();
    };
    add("clean", Status::kPass, 1.5);
    add("loud", Status::kPass, 68.0)->noisy = true;
    add("broken", Status::kFailAccuracyInPerf, 0);
    add("blind", Status::kPass, 2100.0)->audit = kAuditOff;
    s->add_results(run, rs);
    s->finish_run(run, "complete");
  }
  const fs::path site = dir_ / "site_marks";
  ASSERT_EQ(
      run_crucible("report --html " + site.string() + " --since all --db " + db.string()).status,
      0);
  const std::string index = testing::read_all(site / "index.html");
  EXPECT_NE(index.find("fast: <span class=\"pass\">pass</span> <span class=\"warn\">noisy</span>"),
            std::string::npos)
      << index;
  EXPECT_NE(index.find("<span class=\"warn\">unaudited</span>"), std::string::npos);
  EXPECT_NE(index.find("<span class=\"fail\">fail_accuracy_in_perf</span>"), std::string::npos);
  // fast: clean's 1.5x alone, over 1 of its 3 audited models; the unaudited row apart.
  EXPECT_NE(index.find("1.500x over 1 of 3 models <span class=\"warn\">(1 noisy left out)</span>"),
            std::string::npos)
      << index;
  EXPECT_NE(index.find("2100.000x over 1 of 1 models"), std::string::npos);
}

// A latency of microseconds on a millisecond axis: every tick keeps as many decimals as it takes
// to differ from its neighbours (uPlot's default of 3 labelled 0.0031..0.0034 ms all 0.003).
TEST_F(Report, TickLabelsOfATinyLatencyAxisDiffer) {
  const fs::path db = dir_ / "tiny.db";
  {
    auto s = Store::open(db);
    for (int r = 0; r < 6; ++r) {
      const int64_t run = s->begin_run(make_run_info("tiny", "eager", "performance"));
      ResultRecord x = make_result("tiny", "micro", "eager", "performance", 1);
      x.status = Status::kPass;
      const double ms = 0.00312 + 0.00006 * r;
      x.samples_ms = {ms, ms * 1.001, ms * 0.999};
      s->add_results(run, {x});
      s->finish_run(run, "complete");
    }
  }
  const fs::path site = dir_ / "site_tiny";
  ASSERT_EQ(run_crucible("report --html " + site.string() + " --db " + db.string()).status, 0);
  std::string model_page;
  for (const auto& e : fs::directory_iterator(site)) {
    if (e.path().filename().string().rfind("model-tiny_micro", 0) == 0 &&
        e.path().extension() == ".html")
      model_page = e.path();
  }
  ASSERT_FALSE(model_page.empty());
  const auto r = run_command(
      "chromium --headless=new --no-sandbox --disable-gpu --allow-file-access-from-files "
      "--virtual-time-budget=5000 --dump-dom file://" +
      model_page);
  ASSERT_EQ(r.status, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("data-yticks=\"([^\"]*)\"")))
      << r.out.substr(0, 3000);
  std::istringstream ticks(m[1].str());
  std::vector<std::string> labels;
  for (std::string t; ticks >> t;) labels.push_back(t);
  ASSERT_GE(labels.size(), 2u) << m[1];
  for (size_t i = 1; i < labels.size(); ++i) EXPECT_NE(labels[i], labels[i - 1]) << m[1];
  EXPECT_EQ(labels[0].find("0.00"), 0u) << m[1];  // milliseconds, not rounded to 0
}

TEST_F(Report, HeadlessChromiumDrawsEveryChartAndRendersInUnderASecond) {
  const fs::path site = dir_ / "site_browser";
  ASSERT_EQ(run_crucible("report --html " + site.string() + " --since all --db " +
                         (dir_ / "year.db").string())
                .status,
            0);
  const std::string chromium =
      "chromium --headless=new --no-sandbox --disable-gpu --allow-file-access-from-files "
      "--virtual-time-budget=5000 ";
  auto r = run_command(chromium + "--dump-dom file://" + (site / "index.html").string());
  ASSERT_EQ(r.status, 0) << r.err;
  // Each backend but eager has 4 charts, eager its accuracy pass rate alone; uPlot draws each on
  // a canvas.
  std::smatch m;
  size_t canvases = 0;
  for (auto it = r.out.cbegin(); std::regex_search(it, r.out.cend(), m, std::regex("<canvas"));
       it = m.suffix().first) {
    ++canvases;
  }
  EXPECT_EQ(canvases, 9u) << r.out.substr(0, 2000);
  EXPECT_NE(r.out.find("<th>geomean speed-up (passing models)</th>"), std::string::npos);
  EXPECT_NE(r.out.find("&lt;script&gt;alert(1)&lt;/script&gt;"), std::string::npos);
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("data-render-ms=\"(\\d+)\"")))
      << r.out.substr(0, 2000);
  std::printf("index.html rendered in %s ms\n", m[1].str().c_str());
  EXPECT_LT(std::stoi(m[1].str()), 1000);
  // A model page: its charts, and the kernel table built from the data.
  std::string model_page;
  for (const auto& e : fs::directory_iterator(site)) {
    if (e.path().filename().string().rfind("model-syn_model1", 0) == 0 &&
        e.path().extension() == ".html")
      model_page = e.path();
  }
  r = run_command(chromium + "--dump-dom file://" + model_page);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("<td>cpp_fused_add_0</td>"), std::string::npos) << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("extern::gemm&lt;/td&gt;"), std::string::npos);
  // Each kernel beside its roofline, as `crucible kernels` prints it; '–' where none is known.
  EXPECT_NE(r.out.find("<th>% of roofline</th><th>bound by</th>"), std::string::npos);
  EXPECT_NE(r.out.find("<td class=\"n\">10.0</td><td class=\"n\">50.0</td><td>DRAM</td>"),
            std::string::npos)
      << r.out.substr(0, 3000);
  EXPECT_NE(r.out.find("<td class=\"n\">–</td><td>–</td>"), std::string::npos);
  EXPECT_NE(r.out.find("<td>OMP_NUM_THREADS</td>"), std::string::npos);
  // model1's codegen timings were skipped because its accuracy failed: the page names the cause.
  EXPECT_NE(r.out.find("<td class=\"fail\">fail_accuracy (timing skipped)</td>"),
            std::string::npos);
  EXPECT_EQ(r.out.find("<td class=\"fail\">skipped</td>"), std::string::npos);
  // An older run's kernels come from the model's kernel file, loaded when that run is chosen
  // (here by the link's #run=).
  r = run_command(chromium + "--dump-dom 'file://" + model_page + "#run=100'");
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("<td>cpp_fused_add_0</td><td class=\"n\">109</td>"), std::string::npos)
      << r.out.substr(0, 3000);
  // Said once, in the script's own text; never drawn into a table.
  EXPECT_EQ(r.out.find("kernel file is missing"), r.out.rfind("kernel file is missing"));
  // Screenshots for a person to look at, kept under the build directory.
  const fs::path shots = fs::path(CRUCIBLE_BIN_DIR).parent_path() / "report_screenshots";
  fs::create_directories(shots);
  for (const auto& [name, page] : {std::pair{"index.png", site / "index.html"},
                                   {"model.png", fs::path(model_page)},
                                   {"regressions.png", site / "regressions.html"}}) {
    r = run_command(chromium + "--window-size=1280,1600 --screenshot=" + (shots / name).string() +
                    " file://" + page.string());
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_GT(fs::file_size(shots / name), 10000u) << name;
  }
}

}  // namespace
}  // namespace crucible::reports
