// Writing and verifying repro directories (see repro.h).
#include "repro.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <iterator>
#include <sstream>

#include "crucible/ir/text_format.h"
#include "crucible/plugin_api.h"
#include "output_digest.h"

namespace crucible::minify {

namespace fs = std::filesystem;

namespace {

constexpr const char* kManifest = "manifest.txt";
constexpr const char* kFormat = "crucible-repro 1";

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(fmt::format("{}: cannot read", path.string()));
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string file_hash(const fs::path& path) {
  const std::string bytes = read_file(path);
  return fmt::format("{:016x}", digest_bytes(bytes.data(), bytes.size()));
}

void check_line_safe(const std::string& what, const std::string& text) {
  if (text.find('\n') != std::string::npos || text.find('\r') != std::string::npos) {
    throw Error(fmt::format("repro: {} holds a line break: {}", what, text));
  }
}

}  // namespace

void check_repro_dir(const fs::path& dir) {
  if (!fs::exists(dir)) return;
  if (!fs::is_directory(dir))
    throw Error(fmt::format("{}: exists and is not a directory", dir.string()));
  if (fs::is_empty(dir) || fs::is_regular_file(dir / kManifest)) return;
  throw Error(fmt::format(
      "{}: exists and is not a repro directory (no {}); give a new or empty directory with -o",
      dir.string(), kManifest));
}

Candidate bind_params(const Candidate& c) {
  Candidate bound = c;
  for (ValueId id : bound.graph.params()) {
    Value& v = bound.graph.mutable_value(id);
    if (v.init.empty()) continue;
    v.data = materialize_param(bound.graph, id);
    v.init = {};
  }
  return bound;
}

std::vector<std::string> repro_plugin_paths(const ReproInfo& info,
                                            const std::vector<std::string>& given) {
  std::vector<std::string> dirs = given;
  // The recorded file is looked up by the backend's name in its folder, so a plugin rebuilt in
  // place (git bisect) is the one that runs.
  if (!info.plugin_file.empty()) dirs.push_back(fs::path(info.plugin_file).parent_path().string());
  return dirs;
}

void write_repro(const fs::path& dir, const Candidate& c, const ReproInfo& info) {
  check_repro_dir(dir);
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file()) fs::remove(e.path());
  }
  bind_params(c).write(dir);
  // The recipes, beside the data they made: same inputs, parameters as written before binding
  // (one from a file, or already bound, reads the copy graph.graph uses).
  Graph recipes = c.graph;
  for (ValueId id : recipes.params()) {
    Value& v = recipes.mutable_value(id);
    if (v.init.empty() || v.init.kind == "file") {
      v.init = Initializer{"file", {{"path", fmt::format("graph.{}.bin", v.name)}}};
    }
  }
  for (ValueId id : recipes.inputs()) {
    Value& v = recipes.mutable_value(id);
    v.init = Initializer{"file", {{"path", input_file_name(v.name)}}};
  }
  std::ofstream(dir / "graph_recipes.graph") << print_graph(recipes);
  if (!info.kernel_code.empty()) std::ofstream(dir / "culprit_kernel.cpp") << info.kernel_code;
  std::string m = fmt::format("{}\nabi {}\n", kFormat, plugin::kAbiVersion);
  check_line_safe("the backend", info.backend);
  m += fmt::format("backend {}\n", info.backend);
  if (!info.backend_version.empty()) {
    check_line_safe("the backend version", info.backend_version);
    m += fmt::format("backend_version {}\n", info.backend_version);
  }
  if (!info.plugin_file.empty()) {
    check_line_safe("the plugin file", info.plugin_file);
    m += fmt::format("plugin_file {}\n", info.plugin_file);
  }
  for (const auto& [k, v] : info.config) {
    check_line_safe("option " + k, v);
    m += fmt::format("config {}={}\n", k, v);
  }
  for (const auto& [k, v] : info.backend_env) {
    check_line_safe("variable " + k, v.value_or(""));
    m += v ? fmt::format("backend_env {}={}\n", k, *v) : fmt::format("backend_env -{}\n", k);
  }
  m += fmt::format("tolerance {}\ncosine {}\n", info.tolerance, info.cosine ? 1 : 0);
  if (info.scaled_tolerance) m += "scaled_tolerance 1\n";  // older repros have no such line
  m += fmt::format("threads {}\n", info.threads);
  m += fmt::format("signature {}\n", info.signature.str());
  check_line_safe("the original", info.original);
  m += fmt::format("original {}\nnodes {} {}\nreplays {} {}\n", info.original, info.nodes_before,
                   info.nodes_after, info.replays_ok, info.replays);
  if (!info.culprit.empty()) {
    check_line_safe("the culprit", info.culprit);
    m += fmt::format("culprit {}\n", info.culprit);
  }
  if (!info.code_hash.empty()) m += fmt::format("code_hash {}\n", info.code_hash);
  m += fmt::format("seed {}\n", info.seed);
  m += fmt::format("command crucible repro {}\n", fs::absolute(dir).string());
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.is_regular_file() && e.path().filename() != kManifest) files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  for (const fs::path& f : files) {
    m += fmt::format("file {} {} {}\n", f.filename().string(), fs::file_size(f), file_hash(f));
  }
  std::ofstream(dir / kManifest, std::ios::trunc) << m;
}

namespace {

// A `file NAME SIZE HASH` line of the manifest at `where`: the file is there, whole and unedited.
void check_listed_file(const fs::path& dir, const std::string& where, const std::string& rest) {
  std::istringstream words(rest);
  std::string name, hash;
  uintmax_t size = 0;
  if (!(words >> name >> size >> hash) || name.find('/') != std::string::npos) {
    throw Error(fmt::format("{}: bad file line '{}'", where, rest));
  }
  const fs::path f = dir / name;
  if (!fs::is_regular_file(f)) throw Error(fmt::format("{}: {} is missing", where, f.string()));
  if (fs::file_size(f) != size) {
    throw Error(fmt::format("{}: {} holds {} bytes, the manifest says {} (truncated or replaced)",
                            where, f.string(), fs::file_size(f), size));
  }
  if (file_hash(f) != hash) {
    throw Error(fmt::format("{}: {} was edited (hash {}, the manifest says {})", where, f.string(),
                            file_hash(f), hash));
  }
}

// write_repro binds every input and parameter to a file it lists, so a repro's graph makes no
// data of its own: a recipe there (randn of a huge shape, say) is an edit, refused before it runs.
void check_file_bound(const Graph& g) {
  auto check = [&](ValueId id, const char* role) {
    const Value& v = g.value(id);
    if (!v.data.defined() && v.init.kind != "file") {
      throw Error(
          fmt::format("{}{} %{} is not read from a file (a repro's inputs and parameters "
                      "are files its manifest lists)",
                      g.where(id), role, v.name));
    }
  };
  for (ValueId id : g.inputs()) check(id, "input");
  for (ValueId id : g.params()) check(id, "parameter");
}

// A `backend_env KEY=VALUE` (set) or `backend_env -KEY` (unset) line into `env`.
template <typename Env>
void read_backend_env(const std::string& where, const std::string& rest, Env& env) {
  const size_t eq = rest.find('=');
  if (rest.starts_with('-') && rest.size() > 1 && eq == std::string::npos) {
    env[rest.substr(1)] = std::nullopt;
  } else if (eq != std::string::npos && eq > 0) {
    env[rest.substr(0, eq)] = rest.substr(eq + 1);
  } else {
    throw Error(fmt::format("{}: bad backend_env '{}'", where, rest));
  }
}

}  // namespace

LoadedRepro load_repro(const fs::path& dir) {
  const fs::path manifest = dir / kManifest;
  if (!fs::is_regular_file(manifest)) {
    throw Error(fmt::format("{}: not a repro directory (no {})", dir.string(), kManifest));
  }
  std::istringstream in(read_file(manifest));
  std::string line;
  if (!std::getline(in, line) || line != kFormat) {
    throw Error(fmt::format("{}: not a repro manifest of this version (first line '{}', want '{}')",
                            manifest.string(), line, kFormat));
  }
  LoadedRepro r;
  bool have_abi = false, have_signature = false;
  int listed = 0;
  for (int n = 2; std::getline(in, line); ++n) {
    const std::string where = fmt::format("{}:{}", manifest.string(), n);
    const size_t sp = line.find(' ');
    const std::string key = line.substr(0, sp),
                      rest = sp == std::string::npos ? "" : line.substr(sp + 1);
    std::istringstream words(rest);
    if (key == "abi") {
      uint32_t abi = 0;
      if (!(words >> abi)) throw Error(fmt::format("{}: abi '{}' is not a number", where, rest));
      if (abi != plugin::kAbiVersion) {
        throw Error(fmt::format("{}: written for plugin ABI {}, this crucible has ABI {}", where,
                                abi, plugin::kAbiVersion));
      }
      have_abi = true;
    } else if (key == "backend") {
      r.info.backend = rest;
    } else if (key == "backend_version") {
      r.info.backend_version = rest;
    } else if (key == "plugin_file") {
      if (!fs::path(rest).is_absolute())
        throw Error(fmt::format("{}: plugin_file '{}' is not an absolute path", where, rest));
      r.info.plugin_file = rest;
    } else if (key == "config") {
      const size_t eq = rest.find('=');
      if (eq == std::string::npos || eq == 0)
        throw Error(fmt::format("{}: bad config '{}'", where, rest));
      r.info.config[rest.substr(0, eq)] = rest.substr(eq + 1);
    } else if (key == "backend_env") {
      read_backend_env(where, rest, r.info.backend_env);
    } else if (key == "tolerance") {
      if (!(words >> r.info.tolerance) || !std::isfinite(r.info.tolerance) || r.info.tolerance < 0)
        throw Error(fmt::format("{}: bad tolerance '{}'", where, rest));
    } else if (key == "cosine") {
      int v = 0;
      if (!(words >> v)) throw Error(fmt::format("{}: bad cosine", where));
      r.info.cosine = v != 0;
    } else if (key == "scaled_tolerance") {
      int v = 0;
      if (!(words >> v)) throw Error(fmt::format("{}: bad scaled_tolerance", where));
      r.info.scaled_tolerance = v != 0;
    } else if (key == "threads") {
      if (!(words >> r.info.threads) || r.info.threads < 0)
        throw Error(fmt::format("{}: bad threads '{}'", where, rest));
    } else if (key == "signature") {
      auto s = Signature::parse(rest);
      if (!s || !s->failing()) throw Error(fmt::format("{}: bad signature '{}'", where, rest));
      r.info.signature = *s;
      have_signature = true;
    } else if (key == "original") {
      r.info.original = rest;
    } else if (key == "culprit") {
      r.info.culprit = rest;
    } else if (key == "code_hash") {
      r.info.code_hash = rest;
    } else if (key == "seed") {
      words >> r.info.seed;
    } else if (key == "nodes") {
      words >> r.info.nodes_before >> r.info.nodes_after;
    } else if (key == "replays") {
      words >> r.info.replays_ok >> r.info.replays;
    } else if (key == "file") {
      check_listed_file(dir, where, rest);
      ++listed;
    } else if (key != "command" && !key.empty()) {
      throw Error(fmt::format("{}: unknown manifest key '{}'", where, key));
    }
  }
  if (!have_abi || !have_signature || r.info.backend.empty() || listed == 0) {
    throw Error(fmt::format("{}: incomplete (needs abi, backend, signature and file lines)",
                            manifest.string()));
  }
  Graph g = load_graph_file(dir / "graph.graph");
  check_file_bound(g);
  check_side_files(g);
  r.candidate.inputs = make_inputs(g, 0);
  r.candidate.graph = std::move(g);
  return r;
}

}  // namespace crucible::minify
