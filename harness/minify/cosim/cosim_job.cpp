// The cosim worker job (`crucible worker --job cosim`): eager, the fp64 reference and the backend
// each run the graph once, every node's value taken (the backend's from its own fused code,
// through intermediates()), and the node blame_node picks (cosim_blame.h: the first that diverges
// by itself, not by what it was given) is named in the reply: "node NAME", "none", or
// "unsupported" when the backend gives no intermediates.
#include <fmt/format.h>

#include <algorithm>

#include "accuracy.h"
#include "cosim_blame.h"
#include "crucible/ir/transforms.h"
#include "worker_session.h"

namespace crucible {

namespace {

// Eager's values of the graph's outputs out of every node's (`ev`, in node order): the scale a
// training step's rule takes (output_scale) is the outputs' root mean square, as the verdict that
// failed took it, not every intermediate's (a batch norm's sums of squares would make a wrong
// gradient of 1e-3 pass at a tolerance scaled to them).
std::vector<Tensor> outputs_of(const Session& s, const std::vector<Tensor>& ev) {
  std::vector<Tensor> out;
  for (ValueId o : s.graph.outputs()) {
    const Value& v = s.graph.value(o);
    if (v.kind == ValueKind::kNode) {
      out.push_back(ev.at(static_cast<size_t>(v.node)));
    } else if (v.kind == ValueKind::kInput) {
      const auto& ins = s.graph.inputs();
      out.push_back(
          s.inputs.at(static_cast<size_t>(std::find(ins.begin(), ins.end(), o) - ins.begin())));
    }
  }
  return out;
}

}  // namespace

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
    auto ev =
        eager->backend().compile(s.graph, s.options("eager", false))->intermediates(s.inputs, ids);
    s.report.phase("eager_fp64", "eager");
    const Graph wide = widen_to_f64(s.graph);
    std::vector<ValueId> wide_ids;  // the same values by name: widening renumbers
    for (ValueId id : ids) wide_ids.push_back(*wide.find_value(s.graph.value(id).name));
    auto fv = eager->backend()
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
                               s.job.scaled_tolerance ? output_scale(outputs_of(s, ev)) : 1.0};
    s.report.phase("blame", backend);
    const std::string blamed =
        minify::blame_node(s.graph, s.inputs, {std::move(bv), std::move(ev), std::move(fv)}, opts);
    reply = blamed.empty() ? "none" : "node " + blamed;
  });
  s.report.reply(ok ? 0 : 1, reply, ok ? "" : r.error);
}

}  // namespace crucible
