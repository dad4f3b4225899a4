// What a worker tells its parent, written line by line to a report file and flushed at every step,
// so that after a crash the parent still knows which phase (and backend) was running.
#pragma once

#include <cstdio>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "crucible/backend_declaration.h"
#include "crucible/reports/records.h"

namespace crucible {

// Worker side: appends lines to the report file; each call flushes.
class ReportWriter {
 public:
  explicit ReportWriter(const std::filesystem::path& path);
  ~ReportWriter();
  ReportWriter(const ReportWriter&) = delete;
  ReportWriter& operator=(const ReportWriter&) = delete;

  // A phase such as "eager_run", "eager_fp64", "compile", "run", "compare", with the backend it
  // concerns.
  void phase(const std::string& name, const std::string& backend);
  // A backend's plugin loaded, with the version its info() gives; the parent puts it on the
  // backend's result, including one it has to make up after a crash.
  void loaded(const std::string& backend, const std::string& version);
  void result(const reports::ResultRecord& r);
  // What a backend declared (Backend::declaration), for the parent to act on.
  void declared(const std::string& backend, const plugin::Declaration& d);
  // A command run in a worker (run-graph): what it prints and its exit status, one record written
  // when the work is done. Its absence tells the parent the process ended before that.
  void reply(int exit_code, const std::string& out, const std::string& err);

 private:
  void line(const std::vector<std::string>& fields);
  std::FILE* f_;
};

struct CommandReply {
  int exit_code = 0;
  std::string out;  // for stdout
  std::string err;  // for stderr
};

// Parent side: the last phase reached, every complete result and the complete reply, if any.
struct WorkerReport {
  std::string phase;
  std::string phase_backend;
  std::map<std::string, std::string> versions;  // backend -> version, from loaded()
  std::vector<reports::ResultRecord> results;
  std::optional<CommandReply> reply;
  std::map<std::string, plugin::Declaration> declarations;  // backend -> its complete declaration
};
// Reads what a worker wrote; a truncated last record is ignored. A missing file gives an empty
// report.
WorkerReport read_report(const std::filesystem::path& path);

}  // namespace crucible
