// The change detector on real runs of this machine: 14 nightly runs of the tutorial and small
// suites on eager, codegen and the test backend `faulty`, which from run 11 busy-waits 5% longer
// on mlp, 25% on dlrm and 2% on linear_layernorm_relu (recorded by ci/aa_false_alerts.sh --slow,
// kept as tests/data/detector/slowing_runs.csv). Each case is written into a real store, judged
// by `crucible regressions`, and checked: the A/A series raise nothing, the planted steps are
// found at their first run and sized right, and a machine-wide shift, a level change in the
// warm-up and a noisy run before a step (planted on top of the real samples) raise nothing false.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "cli_util.h"
#include "crucible/reports/store.h"

namespace crucible::reports {
namespace {

namespace fs = std::filesystem;
using testing::csv_fields;
using testing::run_crucible;

struct Row {
  int64_t run = 0;
  std::string suite, model, backend, status;
  bool noisy = false;
  std::vector<double> samples, instructions;
};

std::vector<double> numbers(const std::string& text) {
  std::vector<double> out;
  std::istringstream in(text);
  for (double v; in >> v;) out.push_back(v);
  return out;
}

std::vector<Row> fixture(const std::string& name) {
  std::ifstream in(CRUCIBLE_SOURCE_DIR "/tests/data/detector/" + name);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line.rfind("run,suite,model,backend,status,noisy,samples_ms", 0), 0u) << line;
  std::vector<Row> rows;
  while (std::getline(in, line)) {
    const auto f = csv_fields(line);
    Row r{std::stoll(f[0]), f[1], f[2], f[3], f[4], f[5] == "1", numbers(f[6]), {}};
    if (f.size() > 7) r.instructions = numbers(f[7]);
    rows.push_back(std::move(r));
  }
  return rows;
}

struct Listed {
  std::string kind, model, backend, measure, commits, note;
  double change = 0;
  int64_t run = 0, confirmed_by = 0;
};

class DetectorOnRealRuns : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("crucible_real_" + std::to_string(::getpid()));
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    rows_ = fixture("slowing_runs.csv");
    ASSERT_GE(rows_.size(), 14u * 14 * 3);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // The fixture (after `edit` on each row) as a store, one run per nightly with its commit, and
  // every alert `crucible regressions --all` lists for it.
  // `env` edits each run's environment (by run number) before it is stored.
  std::vector<Listed> judge(const std::string& name, const std::function<void(Row&)>& edit = {},
                            const std::string& extra = "",
                            const std::function<void(int64_t, RunInfo&)>& env = {}) {
    const fs::path db = dir_ / (name + ".db");
    {
      auto s = Store::open(db);
      std::map<int64_t, std::vector<ResultRecord>> runs;
      for (Row r : rows_) {
        if (edit) edit(r);
        ResultRecord x = make_result(r.suite, r.model, r.backend, "performance", 1);
        x.status = *status_from_name(r.status);
        x.samples_ms = r.samples;
        x.sim_instructions = r.instructions;
        x.noisy = r.noisy;
        runs[r.run].push_back(std::move(x));
      }
      for (auto& [n, results] : runs) {
        RunInfo info;
        info.suites = "tutorial,mlp,transformer,vision";
        info.backends = "eager,codegen,faulty";
        info.mode = "performance";
        info.env.cores = 2;
        info.env.git_commit = "commit" + std::to_string(n);
        if (env) env(n, info);
        const int64_t run = s->begin_run(info);
        s->add_results(run, results);
        s->finish_run(run, "complete");
      }
    }
    const auto r = run_crucible("regressions --all --format csv --db " + db.string() + extra);
    EXPECT_TRUE(r.status == 0 || r.status == 1) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    std::getline(lines, line);
    std::vector<Listed> out;
    while (std::getline(lines, line)) {
      const auto f = csv_fields(line);
      if (f.size() != 16) {
        ADD_FAILURE() << line;
        continue;
      }
      out.push_back({f[0], f[2], f[3], f[5], f[13], f[15], f[6].empty() ? 0 : std::stod(f[6]) / 100,
                     std::stoll(f[10]), std::stoll(f[11])});
    }
    return out;
  }

  fs::path dir_;
  std::vector<Row> rows_;
};

bool is_change(const Listed& l) { return l.kind == "regression" || l.kind == "improvement"; }

std::string said(const std::vector<Listed>& all) {
  std::string out;
  for (const Listed& l : all) {
    if (l.kind != "not_judged")
      out += l.kind + " " + l.model + "/" + l.backend + "@" + std::to_string(l.run) + "/" +
             std::to_string(l.confirmed_by) + " " + std::to_string(l.change) + "; ";
  }
  return out;
}

// The planted slowdowns of `faulty`, from run 11: mlp and dlrm must be found.
const std::map<std::string, double> kPlanted = {
    {"mlp", 0.05}, {"dlrm", 0.25}, {"linear_layernorm_relu", 0.02}};

// Every change listed must be a planted one (`planted`, from run `from`): found at that run
// (confirmed within 3 judged runs of it), its size within 20% of the truth; `must` be found.
void expect_only_planted(const std::vector<Listed>& listed,
                         const std::map<std::string, double>& planted = kPlanted, int64_t from = 11,
                         const std::vector<std::string>& must = {"mlp", "dlrm"}) {
  std::map<std::string, bool> seen;
  for (const Listed& l : listed) {
    if (!is_change(l)) continue;
    const auto p = planted.find(l.model);
    const bool ok = l.backend == "faulty" && p != planted.end();
    EXPECT_TRUE(ok) << "false alert: " << l.kind << " " << l.model << "/" << l.backend << " @"
                    << l.run << " " << l.change << " (" << l.note << ")";
    if (!ok) continue;
    EXPECT_EQ(l.kind, "regression");
    EXPECT_EQ(l.run, from) << l.model;
    // Within 3 judged runs: judging starts at run 10 (9 is the last of the warm-up).
    EXPECT_LE(l.confirmed_by, std::max<int64_t>(from + 2, 12)) << l.model;
    EXPECT_NEAR(l.change, p->second, 0.2 * p->second) << l.model << ": " << l.note;
    EXPECT_EQ(l.measure, "time/eager");
    EXPECT_EQ(l.commits, fmt::format("commit{}..commit{}", from - 1, from));
    seen[l.model] = true;
  }
  for (const std::string& m : must) EXPECT_TRUE(seen[m]) << m << ": " << said(listed);
  for (const auto& [model, size] : planted) {
    std::printf("%+.0f%% step on %s/faulty: %s\n", 100 * size, model.c_str(),
                seen[model] ? "found" : "not found");
  }
}

TEST_F(DetectorOnRealRuns, AAndPlantedStepsAsRecorded) {
  const auto listed = judge("as_recorded");
  expect_only_planted(listed);
  int not_judged = 0, suspicious = 0;
  for (const Listed& l : listed) {
    not_judged += l.kind == "not_judged";
    suspicious += l.kind == "suspicious";
    EXPECT_NE(l.kind, "environment_event") << l.note;
  }
  std::printf("as recorded: %d suspicious single runs, %d series not judged at run 14\n",
              suspicious, not_judged);
}

// Steps planted on `faulty` (model -> {size, first run}) on top of a recording whose own
// slowdowns are `recorded` (the slowing recording's from run 11): every change listed is one of
// them, at its first run, confirmed by the next judged run, sized within 20%; every step of 5% or
// more on a ratio whose run-to-run noise is 1.3% or less is found; a smaller one, or one
// `listed_only`, is a change or `absorbed` at its run.
using Steps = std::map<std::string, std::pair<double, int64_t>>;
void expect_steps(const std::vector<Listed>& listed, Steps planted, const Steps& recorded,
                  const Steps& may = {}, const std::set<std::string>& listed_only = {}) {
  const Steps ours_only = planted;
  planted.insert(recorded.begin(), recorded.end());
  planted.insert(may.begin(), may.end());
  std::map<std::string, bool> seen;
  int absorbed = 0;
  for (const Listed& l : listed) {
    const auto p = planted.find(l.model);
    const bool ours = l.backend == "faulty" && p != planted.end() && l.run == p->second.second;
    if (l.kind == "absorbed") {
      ++absorbed;
      std::printf("absorbed: %s/%s @%lld %+.1f%%: %s\n", l.model.c_str(), l.backend.c_str(),
                  static_cast<long long>(l.run), 100 * l.change, l.note.c_str());
      if (ours && (std::abs(p->second.first) < 0.05 || listed_only.contains(l.model)))
        seen[l.model] = true;
      continue;
    }
    if (l.kind == "with_event") {
      std::printf("with the event: %s/%s @%lld: %s\n", l.model.c_str(), l.backend.c_str(),
                  static_cast<long long>(l.run), l.note.c_str());
    }
    if (!is_change(l)) continue;
    EXPECT_TRUE(ours) << "false alert: " << l.kind << " " << l.model << "/" << l.backend << " @"
                      << l.run << " " << l.change << " (" << l.note << ")";
    if (!ours) continue;
    const auto [size, from] = p->second;
    EXPECT_EQ(l.kind, size > 0 ? "regression" : "improvement") << l.model;
    // The next judged run (one flagged noisy between may be skipped); a step of the recording,
    // judged by the full rule, within 3 runs.
    EXPECT_LE(l.confirmed_by, from + (ours_only.contains(l.model) ? 2 : 3))
        << l.model << ": " << l.note;
    EXPECT_NEAR(l.change, size, 0.2 * std::abs(size)) << l.model << ": " << l.note;
    seen[l.model] = true;
  }
  for (const auto& [model, step] : planted) {
    std::printf("%+.0f%% step on %s/faulty at run %lld: %s\n", 100 * step.first, model.c_str(),
                static_cast<long long>(step.second), seen[model] ? "found" : "not found");
    if (!may.contains(model) && std::abs(step.first) >= 0.05) {
      EXPECT_TRUE(seen[model]) << model << ": " << said(listed);
    }
  }
  std::printf("%d steps absorbed into a baseline\n", absorbed);
}

// Multiplies faulty's samples of the planted models from their first run.
std::function<void(Row&)> plant(const Steps& steps, double machine = 1, int64_t machine_from = 0) {
  return [=](Row& r) {
    const auto p = steps.find(r.model);
    double f = machine_from > 0 && r.run >= machine_from ? machine : 1.0;
    if (r.backend == "faulty" && p != steps.end() && r.run >= p->second.second)
      f *= 1 + p->second.first;
    for (double& v : r.samples) v *= f;
  };
}

// The runs' environment: one thread from run `from` on and two before, a new environment there
// (0: none), and each run made by `commit` (""; the judge's own commit per run).
std::function<void(int64_t, RunInfo&)> one_thread_from(int64_t from,
                                                       const std::string& commit = "") {
  return [from, commit](int64_t run, RunInfo& info) {
    if (from > 0) info.env.threads = run >= from ? 1 : 2;
    if (!commit.empty()) info.env.git_commit = commit;
  };
}

const Steps kRecorded = {{"mlp", {0.05, 11}}, {"dlrm", {0.25, 11}}};
// The recording's 2% on linear_layernorm_relu moved its ratio +4.7% (median of runs 11-14 over
// runs 2-10), on a ratio 1.4% noisy run to run: it may be found, at that size.
const Steps kMayBeFound = {{"linear_layernorm_relu", {0.047, 11}}};

TEST_F(DetectorOnRealRuns, StepsInTheFirstRunsOfAStoreAreReported) {
  // The issue's case: steps at runs 2, 3, 5 and 8 of a new store, long before the 8 runs of
  // baseline the full rule wants, beside the recording's own 5% and 25% from run 11.
  const Steps planted = {{"neg_maximum_cat_u8", {0.25, 2}},
                         {"gpt2", {-0.10, 3}},
                         {"sin_cos", {0.10, 5}},
                         {"densenet121", {0.03, 5}},
                         {"resnet50", {0.05, 8}}};
  expect_steps(judge("first_runs", plant(planted)), planted, kRecorded, kMayBeFound);
}

TEST_F(DetectorOnRealRuns, FivePercentStepsAtTheSecondAndThirdRunOfAStoreAreNeverSilent) {
  // 5% steps on ratios that move 0.5-1.3% run to run, at the second run of a store (one run of
  // baseline) and its third. On this recording eager's own times moved 5-10% at runs 2-3 and
  // every ratio by 2% (the stand-in noise a short baseline is judged with), so a 5% step there is
  // past what one or two runs of baseline can report: each must be reported at its run or
  // listed there as absorbed, with its size; none may pass in silence, and nothing else is a
  // change.
  const Steps planted = {{"sin_cos", {0.05, 2}},
                         {"resnet50", {0.05, 2}},
                         {"mobilebert", {-0.05, 2}},
                         {"resnet18", {0.05, 3}},
                         {"gpt2", {0.05, 3}}};
  expect_steps(judge("second_run", plant(planted)), planted, kRecorded, kMayBeFound,
               {"sin_cos", "resnet50", "mobilebert", "resnet18", "gpt2"});
}

TEST_F(DetectorOnRealRuns, StepsRightAfterAnEnvironmentChangeAreReported) {
  // From run 6 another thread count: every series starts a new baseline there. The recording's
  // own steps at run 11 land on its 6th run; two more are planted at its 2nd and 3rd.
  // Two are only listed, as absorbed: at run 11 mlp's eager moved +35% beyond what every other
  // series did (this VM's modes move one model's times at once), and at run 8 resnet50's faulty
  // time fell 13% beyond the machine's move while its ratio rose; a short baseline cannot tell
  // either from the machine.
  const Steps planted = {{"sin_cos", {0.10, 7}}, {"resnet50", {0.05, 8}}};
  const auto listed = judge("new_environment", plant(planted), "", one_thread_from(6));
  expect_steps(listed, planted, kRecorded, kMayBeFound, {"mlp", "resnet50"});
}

TEST_F(DetectorOnRealRuns, StepsRightAfterAMachineWideShiftAreReported) {
  // From run 6 every time 15% slower (the machine, while the baseline forms), and steps of one
  // backend at the two runs after it.
  const Steps planted = {{"sin_cos", {0.25, 7}}, {"resnet50", {0.05, 8}}};
  // The shift lands in the times' warm-up: no event, and their level is the one after it
  // (listed as absorbed where the reference's time shows it); the ratios never see it.
  const auto listed = judge("machine_shift", plant(planted, 1.15, 6));
  expect_steps(listed, planted, kRecorded, kMayBeFound);
}

TEST_F(DetectorOnRealRuns, StepsThePluginPlantedInANewStore) {
  // Recorded with the steps planted by faulty itself (tests/data/detector/README.md): sin_cos
  // +25% from run 2 (its ratio rose 26%) and mlp +10% from run 5 (its ratio rose 12.5%, the
  // median of runs 5-9 over runs 1-4) lie above their series' floors and are reported at their
  // first run, confirmed by the next; the others (dlrm 5% at 8, linear_layernorm_relu 3% at 8,
  // neg_maximum_cat_u8 10% at 11 and neg_maximum_cat_f32 5% at 13, after the new environment
  // of run 10) are below what their series can show in 2 runs on this host, whose floors are
  // listed. Nothing else is a change.
  rows_ = fixture("planted_runs.csv");
  const auto listed = judge("planted", {}, "", one_thread_from(10));
  std::map<std::string, int> found;
  int floors = 0;
  for (const Listed& l : listed) {
    floors += l.kind == "floor";
    if (!is_change(l)) continue;
    const bool ours = l.backend == "faulty" && (l.model == "sin_cos" || l.model == "mlp");
    EXPECT_TRUE(ours) << "false alert: " << l.model << "/" << l.backend << " " << l.note;
    if (!ours) continue;
    ++found[l.model];
    EXPECT_EQ(l.kind, "regression");
    EXPECT_EQ(l.run, l.model == "sin_cos" ? 2 : 5);
    EXPECT_EQ(l.confirmed_by, l.run + 1);
    EXPECT_NEAR(l.change, l.model == "sin_cos" ? 0.26 : 0.125,
                0.2 * (l.model == "sin_cos" ? 0.26 : 0.125))
        << l.note;
  }
  EXPECT_EQ(found["sin_cos"], 1) << said(listed);
  EXPECT_EQ(found["mlp"], 1) << said(listed);
  EXPECT_EQ(floors, 14);  // every ratio states its floor on its short baseline of the new threads
}

TEST_F(DetectorOnRealRuns, AnIntelRecordingWithStepsInEveryPhase) {
  // 18 runs on an Intel Xeon VM (tests/data/detector/README.md): steps planted by faulty at runs
  // 2, 5 and 8 of a new store, at 11 and 12 right after a new thread count (run 10), and at 16
  // right after transparent huge pages were turned off (run 15). This host moved eager's times
  // 30-50% between runs and most ratios 2-6%: the steps on ratios that held to 1-2% are
  // reported at their run, sized within 20% of what the ratio moved (the plugin's busy-wait
  // moved densenet121's 13% and neg_maximum_cat_u8's 14.8% for a planted 10%); the others lie
  // under their series' floors. Nothing else is a change.
  rows_ = fixture("intel_runs.csv");
  const Steps found = {{"resnet18", {0.085, 5}},
                       {"resnet50", {0.05, 8}},
                       {"linear_layernorm_relu", {0.25, 11}},
                       {"densenet121", {0.13, 12}},
                       {"neg_maximum_cat_u8", {0.148, 16}}};
  const Steps under_floor = {{"bert_base", {0.05, 2}},    {"add_add_mul_add", {0.25, 2}},
                             {"gpt2", {0.03, 5}},         {"sin_cos", {0.10, 8}},
                             {"dlrm", {0.05, 11}},        {"mlp", {0.05, 16}},
                             {"mobilenet_v2", {0.03, 16}}};
  expect_steps(judge("intel", {}, "", one_thread_from(10)), found, {}, under_floor);
}

TEST_F(DetectorOnRealRuns, AHeldOutIntelRecording) {
  // Recorded after the rules were set on intel_runs.csv: steps at runs 3 and 6, a new thread
  // count from run 8, steps at 9 (its second run) and 12. dlrm's 25% (its ratio rose 30.6% over
  // the run before it, the one run of the new baseline) must be reported at its run; the others
  // lie on ratios that moved 2.8-4% run to run (mobilebert's planted 10% moved its ratio 6%).
  // Nothing else is a change.
  rows_ = fixture("intel_heldout_runs.csv");
  const Steps found = {{"dlrm", {0.33, 9}}};
  const Steps may = {{"mobilebert", {0.06, 3}},
                     {"densenet121", {0.05, 6}},
                     {"gpt2", {0.118, 9}},
                     {"linear_layernorm_relu", {0.05, 12}}};
  expect_steps(judge("intel_heldout", {}, "", one_thread_from(8)), found, {}, may);
}

TEST_F(DetectorOnRealRuns, AHeldOutRecording) {
  // Recorded after the detector was tuned on the first: from run 9, resnet18 5%, bert_base 25%
  // and add_add_mul_add 10% slower on faulty. On this machine resnet18 switches between a fast
  // and a slow mode from run to run, and faulty/eager differs by 2% between them: its ratio's
  // noise is 2%, too much for a 5% step within 3 runs. add_add_mul_add had 6 of 14 runs
  // flagged noisy. bert_base's step must be found; nothing else may be called.
  rows_ = fixture("heldout_runs.csv");
  const auto listed = judge("held_out");
  expect_only_planted(listed, {{"resnet18", 0.05}, {"bert_base", 0.25}, {"add_add_mul_add", 0.10}},
                      9, {"bert_base"});
}

// `compare`'s rows of consecutive runs a, a+1 of `db`, as CSV fields.
std::vector<std::vector<std::string>> compare_rows(const std::string& db, int64_t a, int64_t b) {
  const auto r = run_crucible(fmt::format("compare {} {} --format csv --db {}", a, b, db));
  EXPECT_EQ(r.status, 0) << r.err;
  std::istringstream lines(r.out);
  std::string line;
  std::getline(lines, line);
  std::vector<std::vector<std::string>> rows;
  while (std::getline(lines, line)) rows.push_back(csv_fields(line));
  return rows;
}

TEST_F(DetectorOnRealRuns, CompareOnAAPairsSaysNoFasterOrSlower) {
  // Every pair of consecutive runs of the four recordings, each made by one clean build (56
  // pairs), on eager and codegen (A/A: only faulty was slowed): codegen is judged over eager of
  // the same run, eager on its time. A model that ran 1.4-2.3x slower on every backend at once
  // is the machine's, said on eager's row; a ratio that moved only because eager moved alone,
  // or with both sides bent by the machine, says so; eager's own move with no code changed is
  // the machine's. No plain faster or slower is left.
  int plain = 0, machine = 0, judged = 0, alone = 0, same_code = 0, pairs = 0;
  for (const auto& [recording, runs] :
       std::vector<std::pair<std::string, int>>{{"heldout_runs.csv", 14},
                                                {"slowing_runs.csv", 14},
                                                {"intel_runs.csv", 18},
                                                {"intel_heldout_runs.csv", 14}}) {
    rows_ = fixture(recording);
    // The run each Intel recording's new thread count starts at (0: none).
    const int64_t threads_from = recording == "intel_runs.csv"           ? 10
                                 : recording == "intel_heldout_runs.csv" ? 8
                                                                         : 0;
    judge("compare_aa", {}, "", one_thread_from(threads_from, "0123456789ab"));
    const std::string db = (dir_ / "compare_aa.db").string();
    for (int a = 1; a < runs; ++a, ++pairs) {
      for (const auto& f : compare_rows(db, a, a + 1)) {
        if (f[3] != "performance" || (f[2] != "eager" && f[2] != "codegen")) continue;
        EXPECT_EQ(f[19], f[2] == "eager" ? "time" : "time/eager") << f[1];
        const std::string& v = f[18];
        if (v == "noisy: not judged") continue;
        ++judged;
        if (v.rfind("slower", 0) == 0 || v.rfind("faster", 0) == 0) {
          ++plain;
          std::printf("plain: %s runs %d-%d %s/%s %s\n", recording.c_str(), a, a + 1, f[1].c_str(),
                      f[2].c_str(), v.c_str());
        }
        machine += v.rfind("machine: ", 0) == 0;
        alone += v.find("eager moved alone") != std::string::npos;
        same_code += v.find("with the same code") != std::string::npos;
      }
    }
    fs::remove(db);
  }
  std::printf(
      "compare on %d A/A pairs: %d judged, %d the machine, %d eager alone, %d eager's with the "
      "same code, %d plain faster/slower\n",
      pairs, judged, machine, alone, same_code, plain);
  EXPECT_EQ(pairs, 56);
  EXPECT_GE(machine, 5);
  EXPECT_GE(same_code, 1);
  EXPECT_EQ(plain, 0);
}

TEST_F(DetectorOnRealRuns, CompareOnPlantedPairsSaysWhatRegressionsFound) {
  // Each change `regressions` reports on the Intel recording, compared across its first run:
  // the row says the same, on the same measure; across the runs before it, it says nothing of it.
  rows_ = fixture("intel_runs.csv");
  const auto listed = judge("planted_pairs", {}, "", one_thread_from(10, "0123456789ab"));
  const std::string db = (dir_ / "planted_pairs.db").string();
  int checked = 0;
  for (const Listed& l : listed) {
    if (!is_change(l)) continue;
    const auto row_of = [&](int64_t a, int64_t b) {
      for (const auto& f : compare_rows(db, a, b)) {
        if (f[1] == l.model && f[2] == l.backend && f[3] == "performance") return f;
      }
      ADD_FAILURE() << l.model << "/" << l.backend << " not in compare " << a << " " << b;
      return std::vector<std::string>(20);
    };
    const auto across = row_of(l.run - 1, l.run);
    EXPECT_EQ(across[18].rfind(l.kind == "regression" ? "slower" : "faster", 0), 0u)
        << l.model << ": " << across[18];
    EXPECT_EQ(across[19], l.measure);
    // Turned around, the other way.
    EXPECT_EQ(row_of(l.run, l.run - 1)[18].rfind(l.kind == "regression" ? "faster" : "slower", 0),
              0u);
    const auto before = row_of(l.run - 2, l.run - 1);
    EXPECT_EQ(before[18].find("regressions found"), std::string::npos) << before[18];
    ++checked;
  }
  EXPECT_GE(checked, 5);
}

// compare's verdict on eager's add_add_mul_add between runs 12 and 13 of the slowing recording
// (+24% on eager alone, past its noise) when every run was made by `commit` and run 13 by
// `command_13` (with `threads_13` threads where not 0).
class CompareSameCode : public DetectorOnRealRuns {
 protected:
  std::string eager_verdict(const std::string& name, const std::string& commit,
                            const std::string& command_13, int threads_13 = 0) {
    judge(name, {}, "", [&](int64_t run, RunInfo& info) {
      info.env.git_commit = commit;
      info.env.command = run == 13 ? command_13 : "crucible run --suite tutorial";
      if (run == 13 && threads_13 > 0) info.env.threads = threads_13;
    });
    const auto r = run_crucible(
        fmt::format("compare 12 13 --format csv --db {}", (dir_ / (name + ".db")).string()));
    EXPECT_EQ(r.status, 0) << r.err;
    std::istringstream lines(r.out);
    std::string line;
    while (std::getline(lines, line)) {
      const auto f = csv_fields(line);
      if (f.size() > 19 && f[1] == "add_add_mul_add" && f[2] == "eager" && f[3] == "performance")
        return f[18];
    }
    ADD_FAILURE() << r.out;
    return "";
  }
};

TEST_F(CompareSameCode, EagersOwnMoveIsTheMachinesOnlyWhenNothingOfItsCodeChanged) {
  // The +24% eager moved alone is past its noise: with one clean commit, one environment and the
  // same eager options in both runs it is the machine's; any of them different, it is a change.
  const std::string same = "crucible run --suite tutorial";
  EXPECT_EQ(eager_verdict("one_commit", "0123456789ab", same).rfind("machine: slower +24%", 0), 0u);
  // An option that does not reach eager (unscoped ones reach every backend but the reference).
  EXPECT_EQ(eager_verdict("codegen_option", "0123456789ab", same + " -c fusion=off")
                .rfind("machine: slower", 0),
            0u);
  EXPECT_EQ(eager_verdict("eager_option", "0123456789ab", same + " -c eager:threads=1"), "slower");
  EXPECT_EQ(eager_verdict("dirty", "0123456789ab-dirty", same), "slower");
  EXPECT_EQ(eager_verdict("no_commit", "", same), "slower");
  EXPECT_EQ(eager_verdict("other_threads", "0123456789ab", same, 1), "slower");
}

TEST_F(DetectorOnRealRuns, AOnePercentInstructionStepIsFoundInItsRun) {
  // 6 runs of the tutorial suite on eager, codegen and faulty under --counters cachegrind (the
  // x86-64-v3 build); from run 5 faulty runs 104,600 more loop iterations per add_add_mul_add
  // call, +1.0% of its 31.4 M instructions. The -c option that plants it changes every worker's
  // command line, which moved the small graphs' counts by up to 1,100 instructions (4%).
  rows_ = fixture("instructions_runs.csv");
  const auto listed = judge("instructions");
  int found = 0;
  for (const Listed& l : listed) {
    if (!is_change(l)) continue;
    EXPECT_TRUE(l.model == "add_add_mul_add" && l.backend == "faulty" &&
                l.measure == "instructions")
        << "false alert: " << l.model << "/" << l.backend << " " << l.measure << " " << l.change;
    EXPECT_EQ(l.kind, "regression");
    EXPECT_EQ(l.run, 5);
    EXPECT_EQ(l.confirmed_by, 5);
    EXPECT_NEAR(l.change, 0.010, 0.0005);
    ++found;
  }
  EXPECT_EQ(found, 1) << said(listed);
}

TEST_F(DetectorOnRealRuns, AMachineWideShiftIsAnEventAndAlertsNothing) {
  // From run 10 every model runs 15% slower on every backend: the whole machine.
  auto listed = judge("slower_machine", [](Row& r) {
    if (r.run >= 10)
      for (double& v : r.samples) v *= 1.15;
  });
  expect_only_planted(listed);
  int events = 0;
  for (const Listed& l : listed) events += l.kind == "environment_event" && l.run == 10;
  EXPECT_EQ(events, 1) << said(listed);
  // And judged on times alone, the event still starts a new level instead of alerting.
  listed = judge(
      "slower_machine_alone",
      [](Row& r) {
        if (r.run >= 10)
          for (double& v : r.samples) v *= 1.15;
      },
      " --reference ''");
  events = 0;
  for (const Listed& l : listed) {
    events += l.kind == "environment_event";
    if (is_change(l)) {
      EXPECT_TRUE(l.backend == "faulty" && kPlanted.contains(l.model)) << said(listed);
    }
  }
  EXPECT_EQ(events, 1) << said(listed);
}

TEST_F(DetectorOnRealRuns, TwoModelsShiftingOnEveryBackendAlertNothing) {
  // The issue's case: mlp 46 -> 27.5 us and dlrm -8% on every backend at once, from run 10.
  const auto listed = judge("two_models", [](Row& r) {
    const double f = r.model == "mlp" ? 0.6 : r.model == "dlrm" ? 0.92 : 1.0;
    if (r.run >= 10)
      for (double& v : r.samples) v *= f;
  });
  expect_only_planted(listed);
}

TEST_F(DetectorOnRealRuns, ALevelChangeInTheWarmUpAlertsNothing) {
  // add_add_mul_add 30% slower from run 5 on eager and codegen (during the first 8 runs).
  const auto listed = judge("warm_up", [](Row& r) {
    if (r.model == "add_add_mul_add" && r.backend != "faulty" && r.run >= 5)
      for (double& v : r.samples) v *= 1.3;
  });
  expect_only_planted(listed);
  // Times alone too: the warm-up's level is the one after its step.
  const auto alone = judge(
      "warm_up_alone",
      [](Row& r) {
        if (r.model == "add_add_mul_add" && r.backend != "faulty" && r.run >= 5)
          for (double& v : r.samples) v *= 1.3;
      },
      " --reference ''");
  for (const Listed& l : alone) {
    if (is_change(l)) {
      EXPECT_NE(l.model, "add_add_mul_add") << said(alone);
    }
  }
}

TEST_F(DetectorOnRealRuns, ANoisyRunJustBeforeTheStepIsNotItsStart) {
  // dlrm on faulty 12% slower in run 10 alone, then its planted 25% from run 11.
  const auto listed = judge("noisy_before", [](Row& r) {
    if (r.model == "dlrm" && r.backend == "faulty" && r.run == 10)
      for (double& v : r.samples) v *= 1.12;
  });
  expect_only_planted(listed);
}

}  // namespace
}  // namespace crucible::reports
