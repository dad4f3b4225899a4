// A host program outside the crucible tree: loads a backend plugin (by name from the installed
// plugin directory, or by path), compiles a .graph file, runs it on seeded inputs, prints sums.
#include <crucible/ir/text_format.h>
#include <crucible/plugin_loader.h>

#include <cstdio>
#include <exception>
#include <string>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: run_graph_host BACKEND FILE.graph\n");
    return 2;
  }
  try {
    const crucible::Graph g = crucible::load_graph_file(argv[2]);
    auto loaded =
        crucible::load_plugin(crucible::find_plugin(argv[1], crucible::plugin_search_path({})));
    auto exe = loaded->backend().compile(g, {});
    const auto outputs = exe->run(crucible::make_inputs(g, 0));
    for (const crucible::Tensor& t : outputs) {
      double sum = 0;
      for (double v : t.to_doubles()) sum += v;
      std::printf("%s %s sum=%.9g\n", std::string(crucible::dtype_name(t.dtype())).c_str(),
                  crucible::shape_str(t.shape()).c_str(), sum);
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "run_graph_host: %s\n", e.what());
    return 1;
  }
  return 0;
}
