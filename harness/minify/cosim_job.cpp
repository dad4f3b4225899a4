// The cosim worker job (`crucible worker --job cosim`): eager, the fp64 reference and the backend
// each run the graph once, every node's value taken (the backend's from its own fused code,
// through intermediates()), and the first node in graph order whose backend value fails the
// accuracy rule against fp64 and eager is named in the reply: "node NAME", "none", or
// "unsupported" when the backend gives no intermediates.
#include <fmt/format.h>

#include "accuracy.h"
#include "crucible/ir/transforms.h"
#include "worker_session.h"

namespace crucible {

void cosim_job(Session& s) {
  const std::string backend = s.job.backends.at(0);
  reports::ResultRecord r = s.record(backend, "accuracy");
  std::string reply;
  const bool ok = attempt(r, reports::Status::kFailToRun, [&] {
    s.report.phase("load", backend);
    auto be = s.load(backend);
    auto eager = s.load("eager");
    std::vector<ValueId> ids;
    for (const Node& n : s.graph.nodes()) ids.push_back(n.output);
    s.report.phase("eager_run", "eager");
    const auto ev =
        eager->backend().compile(s.graph, s.options("eager", false))->intermediates(s.inputs, ids);
    s.report.phase("eager_fp64", "eager");
    const Graph wide = widen_to_f64(s.graph);
    std::vector<ValueId> wide_ids;  // the same values by name: widening renumbers
    for (ValueId id : ids) wide_ids.push_back(*wide.find_value(s.graph.value(id).name));
    const auto fv = eager->backend()
                        .compile(wide, s.options("eager", false))
                        ->intermediates(widen_inputs_to_f64(s.inputs), wide_ids);
    s.report.phase("compile", backend);
    auto exe = be->backend().compile(s.graph, s.options(backend, false));
    s.report.phase("run", backend);
    std::vector<Tensor> bv;
    try {
      bv = exe->intermediates(s.inputs, ids);
    } catch (const plugin::IntermediatesUnsupported&) {
      reply = "unsupported";
      return;
    }
    const AccuracyOptions opts{s.job.tolerance, s.job.cosine, true,
                               s.job.scaled_tolerance ? output_scale(ev) : 1.0};
    for (size_t k = 0; k < ids.size(); ++k) {
      if (!compare_output(bv.at(k), ev.at(k), fv.at(k), opts).passed) {
        reply = "node " + s.graph.value(ids[k]).name;
        return;
      }
    }
    reply = "none";
  });
  s.report.reply(ok ? 0 : 1, reply, ok ? "" : r.error);
}

}  // namespace crucible
