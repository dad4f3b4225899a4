// `crucible models` lists models with their parameter counts, nodes, FLOPs and compulsory bytes;
// `crucible export` writes a built-in model as a .graph file that `crucible run --graph` takes.
#include <fmt/format.h>

#include <iostream>
#include <string_view>

#include "cli.h"
#include "crucible/core/error.h"
#include "crucible/ir/text_format.h"
#include "crucible/models/model_zoo.h"
#include "crucible/ops/training.h"
#include "onnx_models.h"
#include "suite.h"

namespace crucible::cli {

namespace {

// Digits grouped by thousands, so a count can be compared with a paper's at a glance.
std::string grouped(int64_t n) {
  std::string digits = std::to_string(n), out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

}  // namespace

int models_command(const std::vector<std::string>& args) {
  std::vector<std::string> suites, suite_paths;
  std::string variant_text = "full";
  int64_t batch = 0;
  po::options_description opts("models options");
  opts.add_options()("suite,s", po::value(&suites)->composing(),
                     "suite names or manifest paths (comma-separated; default: the built-in zoo)")(
      "variant", po::value(&variant_text)->default_value("full"), "full | small")(
      "batch-size", po::value(&batch)->default_value(0), "batch size (0: each model's default)")(
      "suite-path", po::value(&suite_paths)->composing(), "extra suite directories");
  po::variables_map vm;
  if (!parse("models", "[--suite S] [--variant full|small] [--batch-size N]", opts, {}, args, vm))
    return kExitOk;
  if (batch < 0) throw po::error("--batch-size must be >= 0");
  const models::Variant variant = models::parse_variant(variant_text);

  std::vector<ModelEntry> entries;
  if (suites.empty()) {
    for (const auto& spec : models::model_zoo()) {
      ModelEntry e;
      e.suite = spec.suite;
      e.name = e.builtin = spec.name;
      entries.push_back(e);
    }
  } else {
    for (const auto& s : split_commas(suites)) {
      Suite suite = find_suite(s, suite_search_path(suite_paths));
      entries.insert(entries.end(), suite.models.begin(), suite.models.end());
    }
  }
  // The columns as text: the header, and a model that has no figures.
  constexpr std::string_view kTextRow =
      "{:<12} {:<22} {:<7} {:>6} {:>14} {:>10} {:>6} {:>10} {:>9} {:>9}  {}\n";
  std::cout << fmt::format(kTextRow, "suite", "model", "variant", "batch", "params", "buffers",
                           "nodes", "GFLOP", "GMAC", "min_MB", "what");
  // A graph's batch where the manifest gives none: its first input's leading dim.
  const auto first_input_batch = [](const Graph& g, int64_t given) {
    if (given != 0 || g.inputs().empty() || g.value(g.inputs()[0]).type.shape.empty()) return given;
    return g.value(g.inputs()[0]).type.shape[0];
  };
  for (const ModelEntry& m : entries) {
    Graph g;
    std::string what, var = "-";
    int64_t used_batch = m.batch_size;
    if (!m.builtin.empty()) {
      const models::ModelSpec& spec = models::find_model(m.builtin);
      if (batch > 0) used_batch = batch;
      g = models::build_model(spec, {variant, used_batch});
      if (used_batch == 0) used_batch = spec.default_batch(variant);
      what = spec.summary;
      var = models::variant_name(variant);
      if (variant == models::Variant::kSmall) {
        // The summary describes the full model; say what the small one takes instead.
        what = "small variant; inputs";
        for (ValueId in : g.inputs())
          what += fmt::format(" %{}: {}", g.value(in).name, g.value(in).type.str());
      }
    } else if (!m.onnx.empty()) {
      // Imported in memory; a model crucible cannot import is listed with the reason, as a run
      // would skip it.
      try {
        g = onnx_model_graph(m, {});
      } catch (const Error& e) {
        std::cout << fmt::format(kTextRow, m.suite, m.name, "-", "-", "-", "-", "-", "-", "-", "-",
                                 fmt::format("not imported: {}", e.what()));
        continue;
      }
      used_batch = first_input_batch(g, used_batch);
      what = (m.onnx.parent_path().filename() / m.onnx.filename()).string();
    } else {
      g = load_graph_file(m.graph);
      used_batch = first_input_batch(g, used_batch);
      what = m.graph.filename().string();
    }
    const models::GraphStats st = models::graph_stats(g);
    std::cout << fmt::format(
        "{:<12} {:<22} {:<7} {:>6} {:>14} {:>10} {:>6} {:>10.2f} {:>9.2f} {:>9.1f}  {}\n", m.suite,
        m.name, var, used_batch, grouped(st.trainable_params), grouped(st.buffer_params), st.nodes,
        st.cost.flops / 1e9, st.cost.macs / 1e9, st.cost.min_bytes / 1e6, what);
  }
  return kExitOk;
}

int export_command(const std::vector<std::string>& args) {
  std::string name, variant_text = "full", output;
  int64_t batch = 0;
  int train_steps = 0;
  po::options_description opts("export options");
  opts.add_options()("model", po::value(&name)->required(), "a built-in model (crucible models)")(
      "variant", po::value(&variant_text)->default_value("full"), "full | small")(
      "batch-size", po::value(&batch)->default_value(0),
      "batch size (0: the model's default, for training its training batch)")(
      "train-steps", po::value(&train_steps)->default_value(0),
      "0: the model as it infers; N (1..100): N unrolled SGD steps as run --mode training builds "
      "them, with the default optimizer")("output,o", po::value(&output),
                                          "write here instead of standard output");
  po::positional_options_description pos;
  pos.add("model", 1);
  po::variables_map vm;
  if (!parse("export", "MODEL [--variant full|small] [--batch-size N] [--train-steps N] [-o FILE]",
             opts, pos, args, vm)) {
    return kExitOk;
  }
  if (batch < 0) throw po::error("--batch-size must be >= 0");
  if (train_steps < 0 || train_steps > 100) throw po::error("--train-steps must be 0..100");
  const models::ModelSpec& spec = models::find_model(name);
  const models::Variant variant = models::parse_variant(variant_text);
  if (train_steps > 0 && batch == 0) batch = spec.default_train_batch(variant);
  Graph g = models::build_model(spec, {variant, batch});
  if (train_steps > 0) {
    TrainingOptions t;
    t.steps = train_steps;
    g = training_graph(g, t);
  }
  if (output.empty()) {
    std::cout << print_graph(g);
  } else {
    save_graph_file(g, output);
    std::cerr << fmt::format("wrote {} ({} nodes)\n", output, g.nodes().size());
  }
  return kExitOk;
}

}  // namespace crucible::cli
