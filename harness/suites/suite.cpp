// Suite manifests and model selection (see suite.h).
#include "suite.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>

#include "crucible/core/did_you_mean.h"
#include "crucible/core/error.h"
#include "crucible/models/model_zoo.h"

#ifndef CRUCIBLE_SOURCE_SUITES_DIR
#define CRUCIBLE_SOURCE_SUITES_DIR ""
#endif

namespace crucible {

namespace fs = std::filesystem;

namespace {

[[noreturn]] void fail(const fs::path& file, int line, size_t col, std::string_view msg) {
  throw Error(fmt::format("{}:{}:{}: {}", file.string(), line, col + 1, msg));
}

// Splits one manifest line into words; a value may be a "quoted string" with \" escapes.
std::vector<std::pair<std::string, size_t>> split_words(const std::string& line,
                                                        const fs::path& file, int lineno) {
  std::vector<std::pair<std::string, size_t>> words;
  size_t i = 0;
  while (i < line.size()) {
    if (line[i] == '#') break;
    if (std::isspace(static_cast<unsigned char>(line[i]))) {
      ++i;
      continue;
    }
    const size_t start = i;
    std::string w;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) {
      if (line[i] == '"') {
        const size_t quote = i++;
        while (i < line.size() && line[i] != '"') {
          if (line[i] == '\\' && i + 1 < line.size()) ++i;
          w += line[i++];
        }
        if (i >= line.size()) fail(file, lineno, quote, "unterminated string");
        ++i;
      } else {
        w += line[i++];
      }
    }
    words.emplace_back(w, start);
  }
  return words;
}

double parse_number(const std::string& v, const fs::path& file, int line, size_t col,
                    const std::string& key) {
  char* end = nullptr;
  errno = 0;
  double d = std::strtod(v.c_str(), &end);
  // strtod also reads "nan" and "inf": no manifest number means either.
  if (v.empty() || *end != '\0' || errno == ERANGE || !std::isfinite(d))
    fail(file, line, col, fmt::format("{} must be a finite number, got '{}'", key, v));
  return d;
}

// `${NAME}`, `${NAME:-default}` and a leading `~/` expanded from the environment; an unset NAME
// without a default is an Error naming it.
std::string expand_path(const std::string& text) {
  std::string out;
  size_t i = 0;
  if (text.rfind("~/", 0) == 0) {
    const char* home = std::getenv("HOME");
    if (!home) throw Error("~ in a path, and HOME is not set");
    out = home;
    i = 1;
  }
  while (i < text.size()) {
    if (text.compare(i, 2, "${") != 0) {
      out += text[i++];
      continue;
    }
    const size_t close = text.find('}', i);
    if (close == std::string::npos) throw Error("unterminated ${ in a path");
    const std::string body = text.substr(i + 2, close - i - 2);
    const size_t dash = body.find(":-");
    const std::string name = body.substr(0, dash);
    const char* value = std::getenv(name.c_str());
    if (value && *value) {
      out += value;
    } else if (dash != std::string::npos) {
      out += expand_path(body.substr(dash + 2));
    } else {
      throw Error(fmt::format("${{{}}} in a path, and {} is not set", name, name));
    }
    i = close + 1;
  }
  return out;
}

// One model per folder of `dir` that holds model.onnx (ONNX's backend-test layout), sorted by name.
std::vector<ModelEntry> onnx_cases(const fs::path& dir, const std::string& suite,
                                   const ModelEntry& proto) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec))
    throw Error(fmt::format("{}: onnx_cases folder does not exist", dir.string()));
  std::vector<ModelEntry> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (!fs::exists(e.path() / "model.onnx")) continue;
    ModelEntry m = proto;
    m.suite = suite;
    m.name = e.path().filename().string();
    m.onnx = e.path() / "model.onnx";
    if (fs::is_directory(e.path() / "test_data_set_0")) m.onnx_data = e.path() / "test_data_set_0";
    out.push_back(std::move(m));
  }
  std::sort(out.begin(), out.end(),
            [](const ModelEntry& a, const ModelEntry& b) { return a.name < b.name; });
  return out;
}

}  // namespace

namespace {

using Words = std::vector<std::pair<std::string, size_t>>;

// Where a manifest line is, for its errors.
struct LineAt {
  const fs::path& manifest;
  int lineno;
  [[noreturn]] void fail(size_t col, std::string_view msg) const {
    crucible::fail(manifest, lineno, col, msg);
  }
};

// `onnx_cases DIR [rtol=X] [atol=X] [fp64=true|false]`: one model per case folder of DIR.
std::vector<ModelEntry> parse_onnx_cases(const Words& words, const LineAt& at,
                                         const std::string& suite) {
  if (words.size() < 2)
    at.fail(words[0].second, "expected 'onnx_cases DIR [rtol=X] [atol=X] [fp64=true]'");
  ModelEntry proto;
  for (size_t w = 2; w < words.size(); ++w) {
    const auto& [word, col] = words[w];
    const size_t eq = word.find('=');
    const std::string key = word.substr(0, eq),
                      value = eq == std::string::npos ? "" : word.substr(eq + 1);
    if (key == "rtol" || key == "atol") {
      const double v = parse_number(value, at.manifest, at.lineno, col, key);
      if (!(v >= 0)) at.fail(col, key + " must be >= 0");
      (key == "rtol" ? proto.rtol : proto.atol) = v;
    } else if (key == "fp64" && (value == "true" || value == "false")) {
      proto.fp64_check = value == "true";
    } else {
      at.fail(
          col,
          fmt::format("unknown onnx_cases option '{}' (expected rtol=X, atol=X or fp64=true|false)",
                      word));
    }
  }
  fs::path dir;
  try {
    dir = at.manifest.parent_path() / expand_path(words[1].first);
    return onnx_cases(dir, suite, proto);
  } catch (const Error& e) {
    at.fail(words[1].second, e.what());
  }
}

// A batch size of a manifest: an integer from 1 to 2^30.
int64_t parse_batch_size(const std::string& value, size_t col, const LineAt& at,
                         const std::string& key) {
  const double b = parse_number(value, at.manifest, at.lineno, col, key);
  // The range check comes before the cast: a double past int64's range converts to nothing.
  if (!(b >= 1 && b <= double{1 << 30}) || b != std::floor(b))
    at.fail(col, fmt::format("{} must be an integer from 1 to 2^30", key));
  return static_cast<int64_t>(b);
}

double parse_tolerance(const std::string& value, size_t col, const LineAt& at,
                       const std::string& key) {
  const double t = parse_number(value, at.manifest, at.lineno, col, key);
  if (!(t > 0)) at.fail(col, fmt::format("{} must be positive", key));
  return t;
}

// A `train_*` key of a `model` line into m.train; false when `key` is none of them.
bool parse_training_key(ModelEntry& m, const std::string& key, const std::string& value, size_t col,
                        const LineAt& at) {
  if (key == "train_batch_size") {
    m.train.batch_size = parse_batch_size(value, col, at, key);
  } else if (key == "train_tolerance") {
    m.train.tolerance = parse_tolerance(value, col, at, key);
  } else if (key == "train_skip") {
    m.train.skip = value.empty() ? "training skipped" : value;
  } else if (key == "train_xfail") {
    m.train.xfail = value.empty() ? "training expected to fail" : value;
  } else {
    return false;
  }
  return true;
}

// One key=value of a `model` line into `m`.
void parse_model_key(ModelEntry& m, const std::string& word, size_t col, const LineAt& at) {
  const size_t eq = word.find('=');
  if (eq == std::string::npos) at.fail(col, fmt::format("expected key=value, got '{}'", word));
  const std::string key = word.substr(0, eq), value = word.substr(eq + 1);
  const fs::path here = at.manifest.parent_path();
  if (parse_training_key(m, key, value, col, at)) return;
  if (key == "graph") {
    m.graph = here / value;
  } else if (key == "onnx") {
    m.onnx = here / value;
  } else if (key == "data") {
    m.onnx_data = here / value;
  } else if (key == "builtin") {
    try {
      const double tol = models::find_model(value).tolerance;
      if (!m.tolerance_set) m.tolerance = tol;
    } catch (const Error& e) {
      at.fail(col, e.what());
    }
    m.builtin = value;
  } else if (key == "batch_size") {
    m.batch_size = parse_batch_size(value, col, at, key);
  } else if (key == "image_size") {
    const double v = parse_number(value, at.manifest, at.lineno, col, key);
    if (!(v >= 32 && v <= 4096) || v != std::floor(v))
      at.fail(col, "image_size must be an integer from 32 to 4096");
    m.image_size = static_cast<int64_t>(v);
  } else if (key == "tolerance") {
    m.tolerance = parse_tolerance(value, col, at, key);
    m.tolerance_set = true;
  } else if (key == "cosine") {
    if (value != "true" && value != "false") at.fail(col, "cosine must be true or false");
    m.cosine = value == "true";
  } else if (key == "skip") {
    m.skip = value.empty() ? "skipped" : value;
  } else if (key == "xfail") {
    m.xfail = value.empty() ? "expected to fail" : value;
  } else {
    at.fail(col, fmt::format("unknown key '{}' (expected graph, builtin, onnx, data, batch_size, "
                             "image_size, tolerance, cosine, skip, xfail, train_batch_size, "
                             "train_tolerance, train_skip or train_xfail)",
                             key));
  }
}

// `model NAME graph=FILE|builtin=MODEL|onnx=FILE [key=value]...`
ModelEntry parse_model(const Words& words, const LineAt& at, const std::string& suite,
                       size_t line_end) {
  if (words.size() < 2) at.fail(line_end, "expected a model name after 'model'");
  ModelEntry m;
  m.suite = suite;
  m.name = words[1].first;
  for (size_t w = 2; w < words.size(); ++w) parse_model_key(m, words[w].first, words[w].second, at);
  if (!m.graph.empty() + !m.builtin.empty() + !m.onnx.empty() != 1) {
    at.fail(words[0].second,
            fmt::format("model '{}' needs exactly one of graph=FILE, builtin=MODEL and onnx=FILE",
                        m.name));
  }
  if (!m.onnx_data.empty() && m.onnx.empty())
    at.fail(words[0].second, "data=DIR goes with onnx=FILE");
  if (m.image_size != 0) {
    if (m.builtin.empty()) at.fail(words[0].second, "image_size=N goes with builtin=MODEL");
    if (models::find_model(m.builtin).suite != "vision")
      at.fail(
          words[0].second,
          fmt::format("image_size=N applies to the vision models; '{}' takes no image", m.builtin));
  }
  return m;
}

}  // namespace

Suite parse_suite(const std::string& text, const fs::path& manifest) {
  Suite suite;
  suite.manifest = manifest;
  suite.name = manifest.parent_path().filename().string();
  std::istringstream in(text);
  std::string line;
  std::set<std::string> names;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    const Words words = split_words(line, manifest, lineno);
    if (words.empty()) continue;
    const LineAt at{manifest, lineno};
    std::vector<ModelEntry> models;
    if (words[0].first == "onnx_cases") {
      models = parse_onnx_cases(words, at, suite.name);
    } else if (words[0].first == "model") {
      models.push_back(parse_model(words, at, suite.name, line.size()));
    } else {
      at.fail(words[0].second,
              fmt::format("expected 'model' or 'onnx_cases', got '{}'", words[0].first));
    }
    for (ModelEntry& m : models) {
      if (!names.insert(m.name).second)
        at.fail(words[1].second, fmt::format("model '{}' listed twice", m.name));
      suite.models.push_back(std::move(m));
    }
  }
  return suite;
}

Suite load_suite_file(const fs::path& manifest) {
  std::ifstream in(manifest);
  if (!in) throw Error(fmt::format("{}: cannot read: {}", manifest.string(), std::strerror(errno)));
  std::stringstream buf;
  buf << in.rdbuf();
  return parse_suite(buf.str(), manifest);
}

std::vector<fs::path> suite_search_path(const std::vector<std::string>& extra) {
  std::vector<fs::path> dirs;
  auto add_list = [&](const std::string& list) {
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ':')) {
      if (!item.empty()) dirs.emplace_back(item);
    }
  };
  for (const auto& e : extra) add_list(e);
  if (const char* env = std::getenv("CRUCIBLE_SUITE_PATH")) add_list(env);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec)
    dirs.push_back((exe.parent_path() / ".." / "share" / "crucible" / "suites").lexically_normal());
  if (*CRUCIBLE_SOURCE_SUITES_DIR) dirs.emplace_back(CRUCIBLE_SOURCE_SUITES_DIR);
  return dirs;
}

Suite find_suite(const std::string& name, const std::vector<fs::path>& dirs) {
  if (name.find('/') != std::string::npos || fs::path(name).extension() == ".manifest")
    return load_suite_file(name);
  std::vector<std::string> looked;
  for (const fs::path& d : dirs) {
    fs::path p = d / name / "suite.manifest";
    if (fs::exists(p)) return load_suite_file(p);
    looked.push_back(d.string());
  }
  std::vector<std::string> known;
  for (const fs::path& d : dirs) {
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(d, ec)) {
      if (fs::exists(e.path() / "suite.manifest")) known.push_back(e.path().filename().string());
    }
  }
  const std::string suggestion = suggest_names(name, known);
  throw Error(fmt::format("suite '{}': no {}/suite.manifest in {}{}", name, name,
                          fmt::join(looked, ", "), suggestion.empty() ? "" : "; " + suggestion));
}

void parse_shard(const std::string& spec, ModelFilter& filter) {
  int i = -1, n = -1;
  char slash = 0;
  std::istringstream in(spec);
  if (!(in >> i >> slash >> n) || slash != '/' || !in.eof() || n < 1 || i < 0 || i >= n) {
    throw Error(fmt::format("--shard expects I/N with 0 <= I < N, got '{}'", spec));
  }
  filter.shard_index = i;
  filter.shard_count = n;
}

std::vector<ModelEntry> select_models(const std::vector<Suite>& suites, const ModelFilter& f) {
  std::vector<ModelEntry> matched;
  std::set<std::string> seen_only;
  for (const Suite& s : suites) {
    for (const ModelEntry& m : s.models) {
      if (!f.only.empty()) {
        if (std::find(f.only.begin(), f.only.end(), m.name) == f.only.end()) continue;
        seen_only.insert(m.name);
      }
      if (f.include && !std::regex_search(m.name, *f.include)) continue;
      if (f.exclude && std::regex_search(m.name, *f.exclude)) continue;
      matched.push_back(m);
    }
  }
  for (const std::string& o : f.only) {
    if (seen_only.contains(o)) continue;
    std::vector<std::string> known;
    for (const Suite& s : suites) {
      for (const ModelEntry& m : s.models) known.push_back(m.name);
    }
    throw Error(fmt::format("--only {}: no such model in the selected suites; {}", o,
                            suggest_names(o, known)));
  }
  std::vector<ModelEntry> out;
  for (size_t k = 0; k < matched.size(); ++k) {
    if (static_cast<int>(k % f.shard_count) == f.shard_index) out.push_back(matched[k]);
  }
  return out;
}

}  // namespace crucible
