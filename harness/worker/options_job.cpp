// `crucible worker --job options`: whether a backend can run here and takes a run's -c options,
// and what it declares, asked before the run exists. The backend says what it is missing
// (Backend::unavailable_here) and what the harness must do for it (Backend::declaration); given
// options, it compiles the job's one-node graph with them, and a plugin::OptionError says no.
#include <string>

#include "backend_config.h"
#include "worker_session.h"

namespace crucible {

void options_job(Session& s) {
  const std::string& backend = s.job.backends.at(0);
  reports::ResultRecord r = s.record(backend, "accuracy");
  std::unique_ptr<LoadedBackend> be;
  s.report.phase("load", backend);
  if (!attempt(r, reports::Status::kFailToLoad, [&] { be = s.load(backend); }))
    return s.report.result(r);
  s.report.phase("available", backend);
  std::string missing;
  if (!attempt(r, reports::Status::kFailToLoad,
               [&] { missing = be->backend().unavailable_here(); })) {
    return s.report.result(r);
  }
  if (!missing.empty()) {
    r.status = reports::Status::kFailToLoad;
    r.error = std::string(kBackendUnavailable) + missing;
    return s.report.result(r);
  }
  s.report.phase("declaration", backend);
  plugin::Declaration declared;
  if (!attempt(r, reports::Status::kFailToLoad, [&] { declared = be->backend().declaration(); })) {
    return s.report.result(r);
  }
  s.report.declared(backend, declared);
  r.status = reports::Status::kPass;
  if (backend_config(s.job.config, backend).empty()) return s.report.result(r);
  s.report.phase("compile", backend);
  try {
    s.compile(*be, backend, false);
  } catch (const plugin::OptionError& e) {
    r.status = reports::Status::kFailToCompile;
    r.error = std::string(kOptionRefused) + e.what();
  } catch (const std::bad_alloc&) {
    throw;
  } catch (const std::exception& e) {
    // Not an answer about the options: the models' own results will say what it is.
    r.status = reports::Status::kFailToCompile;
    r.error = e.what();
  }
  s.report.result(r);
}

}  // namespace crucible
