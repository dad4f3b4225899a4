// crucible_mutfuzz: mutates .graph files (bytes, tokens, numbers, lines) and runs each mutant
// through `crucible run-graph` on every backend; a signal, a hang, an exit code outside 0/1/2 or
// an exit-2 message without file:line:col (or not one line) is a finding.
#include <fcntl.h>
#include <fmt/format.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/program_options.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

#include "crucible/ir/text_format.h"
#include "random_graph.h"

namespace po = boost::program_options;
namespace fs = std::filesystem;
using namespace crucible;

namespace {

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Fragments a hostile or careless author writes: extreme numbers, stray syntax, control bytes,
// names that exist and names that do not.
const std::vector<std::string> kTokens = {"%x",
                                          "%y",
                                          "%w",
                                          "%nope",
                                          "[",
                                          "]",
                                          "(",
                                          ")",
                                          "{",
                                          "}",
                                          ",",
                                          "=",
                                          ":",
                                          "-",
                                          "\"",
                                          "#",
                                          "0",
                                          "1",
                                          "-1",
                                          "2147483648",
                                          "4294967296",
                                          "4611686018427387904",
                                          "9223372036854775807",
                                          "99999999999999999999",
                                          "1e308",
                                          "1e-320",
                                          "nan",
                                          "inf",
                                          "-inf",
                                          "f32",
                                          "f64",
                                          "bf16",
                                          "u8",
                                          "i32",
                                          "i64",
                                          "bool",
                                          "f16",
                                          "param",
                                          "return",
                                          "graph",
                                          "neg",
                                          "softmax",
                                          "linear",
                                          "sum",
                                          "reshape",
                                          "expand",
                                          "cat",
                                          "randn(seed=1.5)",
                                          "randint(low=3, high=3)",
                                          "file(path=\"x.bin\")",
                                          "dims=[0,0]",
                                          "dims=[]",
                                          "dim=99",
                                          "shape=[-1,-1]",
                                          "shape=[4611686018427387904,4]",
                                          "gather",
                                          "topk",
                                          "pad",
                                          "pads=[-9,9]",
                                          "k=-1",
                                          "mode=\"wrap\"",
                                          "\x01",
                                          "\x1b[31m",
                                          "\xff\xfe",
                                          "\n",
                                          "\t",
                                          "\r",
                                          std::string(1, '\0')};

std::string mutate(std::string s, std::mt19937_64& rng) {
  auto uni = [&](size_t lo, size_t hi) {
    return std::uniform_int_distribution<size_t>(lo, hi)(rng);
  };
  const int rounds = static_cast<int>(uni(1, 4));
  for (int r = 0; r < rounds && !s.empty(); ++r) {
    const size_t at = uni(0, s.size() - 1);
    switch (uni(0, 7)) {
      case 0:  // delete a span
        s.erase(at, uni(1, 12));
        break;
      case 1:  // duplicate a span
        s.insert(at, s.substr(at, uni(1, 40)));
        break;
      case 2:  // insert a token
        s.insert(at, " " + kTokens[uni(0, kTokens.size() - 1)] + " ");
        break;
      case 3: {  // replace a number with an extreme one
        std::smatch m;
        const std::string tail = s.substr(at);
        if (std::regex_search(tail, m, std::regex("[0-9]+"))) {
          s.replace(at + static_cast<size_t>(m.position(0)), static_cast<size_t>(m.length(0)),
                    kTokens[uni(16, 26)]);
        }
        break;
      }
      case 4:  // flip a byte
        s[at] = static_cast<char>(s[at] ^ (1 << uni(0, 7)));
        break;
      case 5:  // truncate
        s.resize(at);
        break;
      case 6: {  // swap two lines
        std::vector<std::string> lines;
        std::stringstream in(s);
        for (std::string l; std::getline(in, l);) lines.push_back(l);
        if (lines.size() > 2)
          std::swap(lines[uni(0, lines.size() - 1)], lines[uni(0, lines.size() - 1)]);
        s.clear();
        for (const auto& l : lines) s += l + "\n";
        break;
      }
      default:  // replace a byte with a random one
        s[at] = static_cast<char>(uni(0, 255));
    }
  }
  return s;
}

struct Outcome {
  bool signaled = false, hung = false;
  int code = 0, sig = 0;
  std::string err;
};

// crucible run-graph FILE --backend B in a child with an address-space cap (so a huge shape fails
// to allocate instead of waking the OOM killer) and a wall-clock limit.
Outcome run_one(const fs::path& crucible, const fs::path& graph, const std::string& backend,
                const fs::path& err_file, int timeout_s) {
  const pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    rlimit rl{size_t{8} << 30, size_t{8} << 30};
    setrlimit(RLIMIT_AS, &rl);
    const int devnull = open("/dev/null", O_RDWR);
    const int err = open(err_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(devnull, 0);
    dup2(devnull, 1);
    dup2(err, 2);
    const std::string timeout = std::to_string(timeout_s);
    execl(crucible.c_str(), "crucible", "run-graph", graph.c_str(), "--backend", backend.c_str(),
          "--threads", "1", "--timeout", timeout.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  Outcome o;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout_s + 30);
  for (;;) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(-pid, SIGKILL);
      waitpid(pid, &status, 0);
      o.hung = true;
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  o.signaled = !o.hung && WIFSIGNALED(status);
  o.sig = o.signaled ? WTERMSIG(status) : 0;
  o.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  o.err = read_file(err_file);
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 60;
  uint64_t seed = 1;
  int timeout = 20;
  std::string backends = "eager,codegen", out_dir, corpus_dir;
  po::options_description opts("crucible_mutfuzz: mutated .graph files through run-graph\noptions");
  opts.add_options()("help,h", "this help")("seconds", po::value(&seconds)->default_value(seconds),
                                            "how long to fuzz")(
      "seed", po::value(&seed)->default_value(seed), "mutation seed")(
      "backends", po::value(&backends)->default_value(backends), "comma-separated backends")(
      "timeout", po::value(&timeout)->default_value(timeout), "run-graph --timeout per mutant")(
      "corpus", po::value(&corpus_dir),
      "directory of seed .graph files (default: suites/tutorial and 30 random graphs)")(
      "out,o", po::value(&out_dir), "keep each finding's mutant here");
  po::variables_map vm;
  try {
    po::store(po::parse_command_line(argc, argv, opts), vm);
    po::notify(vm);
  } catch (const po::error& e) {
    std::cerr << "crucible_mutfuzz: " << e.what() << "\n";
    return 2;
  }
  if (vm.count("help")) {
    std::cout << opts << "\n";
    return 0;
  }
  const fs::path self = fs::read_symlink("/proc/self/exe");
  const fs::path crucible = self.parent_path() / "crucible";
  std::vector<std::string> corpus;
  const fs::path dir =
      corpus_dir.empty() ? fs::path(CRUCIBLE_SOURCE_DIR) / "suites/tutorial" : fs::path(corpus_dir);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".graph") corpus.push_back(read_file(e.path()));
  }
  if (corpus_dir.empty()) {
    for (uint64_t s = 1; s <= 30; ++s) corpus.push_back(print_graph(fuzz::random_graph(s)));
  }
  std::vector<std::string> names;
  for (size_t a = 0, b; a <= backends.size(); a = b + 1) {
    b = backends.find(',', a);
    if (b == std::string::npos) b = backends.size();
    if (b > a) names.push_back(backends.substr(a, b - a));
  }
  const fs::path work = fs::temp_directory_path() / fmt::format("crucible_mutfuzz_{}", getpid());
  fs::create_directories(work);
  ::setenv("CRUCIBLE_CACHE_DIR", (work / "cache").c_str(), 1);
  std::mt19937_64 rng(seed);
  const std::regex located(R"(\.graph:[0-9]+:[0-9]+: )");
  int64_t runs = 0, findings = 0;
  std::map<int, int64_t> by_code;
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  while (elapsed() < seconds) {
    const std::string text = mutate(corpus[rng() % corpus.size()], rng);
    const fs::path g = work / "mutant.graph";
    std::ofstream(g, std::ios::binary) << text;
    for (const std::string& b : names) {
      const Outcome o = run_one(crucible, g, b, work / "err", timeout);
      ++runs;
      std::string problem;
      if (o.hung) {
        problem = "hung past run-graph's own timeout";
      } else if (o.signaled) {
        problem = fmt::format("killed by signal {}", o.sig);
      } else if (o.code != 0 && o.code != 1 && o.code != 2) {
        problem = fmt::format("exit code {}", o.code);
      } else if (o.code == 2) {
        const size_t lines = static_cast<size_t>(std::count(o.err.begin(), o.err.end(), '\n'));
        if (lines != 1)
          problem = fmt::format("exit 2 with {} lines on stderr", lines);
        else if (!std::regex_search(o.err, located))
          problem = "exit 2 without file:line:col";
      }
      ++by_code[o.hung || o.signaled ? -1 : o.code];
      if (problem.empty()) continue;
      ++findings;
      std::cout << fmt::format("finding {} ({}): {}\n  stderr: {}\n", findings, b, problem, o.err);
      if (!out_dir.empty()) {
        fs::create_directories(out_dir);
        std::ofstream(fs::path(out_dir) / fmt::format("finding_{}.graph", findings),
                      std::ios::binary)
            << text;
      }
    }
  }
  fs::remove_all(work);
  std::cout << fmt::format(
      "{} runs in {:.0f} s over {} backends: exit 0 {}, exit 1 {}, exit 2 {}; {} findings\n", runs,
      elapsed(), names.size(), by_code[0], by_code[1], by_code[2], findings);
  return findings > 0 ? 1 : 0;
}
