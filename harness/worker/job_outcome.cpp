// Status mapping for finished workers (see job_outcome.h).
#include "job_outcome.h"

#include <fmt/format.h>
#include <signal.h>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "crucible/core/quote.h"

namespace crucible {

using reports::Status;

namespace {

// The last `bytes` of a log at most: a worker may write gigabytes, or one line without end.
std::string log_end(const std::filesystem::path& log, size_t bytes = 64 << 10) {
  std::ifstream in(log, std::ios::binary | std::ios::ate);
  if (!in) return "";
  const std::streamoff size = in.tellg();
  const std::streamoff start = size > static_cast<std::streamoff>(bytes) ? size - bytes : 0;
  in.seekg(start);
  std::string text(static_cast<size_t>(size - start), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<size_t>(in.gcount()));
  return text;
}

bool log_mentions_bad_alloc(const std::filesystem::path& log) {
  return log_end(log).find("std::bad_alloc") != std::string::npos;
}

bool is_eager_reference_phase(const std::string& phase) {
  return phase == "eager_run" || phase == "eager_fp64";
}

}  // namespace

std::string log_tail(const std::filesystem::path& log, size_t max_lines) {
  constexpr size_t kMaxLine = 400;  // characters kept of each line
  std::istringstream in(log_end(log));
  std::vector<std::string> lines;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    if (line.size() > kMaxLine) line = line.substr(0, kMaxLine) + "...";
    lines.push_back(line);
    if (lines.size() > max_lines) lines.erase(lines.begin());
  }
  std::string out;
  for (const auto& l : lines) out += (out.empty() ? "" : " | ") + escape_controls(l);
  return out;
}

std::vector<reports::ResultRecord> finalize_job(const WorkerJob& job, const ChildOutcome& outcome,
                                                const WorkerReport& report,
                                                const std::filesystem::path& log,
                                                const ChildLimits& limits) {
  const bool accuracy =
      job.job == "reference" || job.job == "outputs" || job.job == "cosim" || job.job == "ties";
  const std::string mode = accuracy ? "accuracy" : "performance";
  std::vector<reports::ResultRecord> out;
  for (const std::string& backend : job.backends) {
    auto it = std::find_if(report.results.begin(), report.results.end(),
                           [&](const reports::ResultRecord& r) { return r.backend == backend; });
    if (it != report.results.end()) {
      out.push_back(*it);
      // In a memory cgroup the OOM killer may pick a process the worker started (the compiler),
      // which the worker then reports as that step's failure: the cause was memory.
      if (outcome.oom_killed && it->status != Status::kPass) {
        out.back().error = fmt::format(
            "out of memory (the kernel's OOM killer ended a process of the worker at its {} MB "
            "resident-memory limit): {}: {}",
            limits.memory_limit_mb, reports::status_name(it->status), it->error);
        out.back().status = Status::kOom;
      }
      continue;
    }
    reports::ResultRecord r =
        reports::make_result(job.suite, job.model, backend, mode, job.batch_size);
    const std::string where =
        report.phase.empty() ? "before the worker started"
                             : fmt::format("during {}{}", escape_controls(report.phase),
                                           report.phase_backend.empty()
                                               ? ""
                                               : " of " + escape_controls(report.phase_backend));
    // In a memory cgroup the kernel says whether it killed for memory; under RLIMIT_AS a SIGKILL
    // near the limit is taken as the system's OOM killer.
    const bool oom_kill =
        outcome.memory_cgroup
            ? outcome.oom_killed
            : outcome.signal == SIGKILL && limits.memory_limit_mb > 0 &&
                  outcome.peak_rss_mb >= 0.9 * static_cast<double>(limits.memory_limit_mb);
    // With no limit of its own, a SIGKILL the harness did not send while the machine's OOM
    // killer ended processes was that killer's, and workers are its first choice (subprocess.cpp).
    const bool machine_oom = !outcome.timed_out && !outcome.memory_cgroup && !oom_kill &&
                             outcome.signal == SIGKILL && outcome.machine_oom_kills > 0;
    if (outcome.timed_out) {
      r.status = Status::kTimeout;
      r.error = fmt::format("no result after {:.0f} s ({})", limits.timeout_s, where);
    } else if (machine_oom) {
      r.status = Status::kOom;
      r.error = fmt::format(
          "out of memory {}: the machine ran out and the kernel's OOM killer ended the worker "
          "(peak RSS {:.0f} MB{}); --memory-limit gives each worker a limit of its own",
          where, outcome.peak_rss_mb,
          limits.memory_limit_mb > 0 ? fmt::format(", limit {} MB", limits.memory_limit_mb) : "");
    } else if ((outcome.exited && outcome.exit_code == kWorkerExitOom) || oom_kill ||
               (outcome.signal == SIGABRT && log_mentions_bad_alloc(log))) {
      r.status = Status::kOom;
      if (outcome.memory_cgroup) {
        r.error = fmt::format(
            "out of memory {} (resident-memory limit {} MB{}, cgroup peak {:.0f} MB, peak RSS "
            "{:.0f} MB)",
            where, limits.memory_limit_mb,
            outcome.oom_killed ? ", killed by the kernel's OOM killer" : "", outcome.cgroup_peak_mb,
            outcome.peak_rss_mb);
      } else {
        r.error = fmt::format("out of memory {} (address-space limit {} MB, peak RSS {:.0f} MB)",
                              where, limits.memory_limit_mb, outcome.peak_rss_mb);
      }
    } else if (!outcome.exited && report.phase == "load" && !report.phase_backend.empty()) {
      // The plugin's constructors or factory killed the process: it did not load.
      r.status = Status::kFailToLoad;
      r.error = fmt::format("{} {}", signal_name(outcome.signal), where);
      const std::string tail = log_tail(log);
      if (!tail.empty()) r.error += ": " + tail;
    } else if (!outcome.exited) {
      r.status = is_eager_reference_phase(report.phase) ? Status::kEagerFailToRun : Status::kCrash;
      r.error = fmt::format("{} {}", signal_name(outcome.signal), where);
      const std::string tail = log_tail(log);
      if (!tail.empty()) r.error += ": " + tail;
    } else {
      r.status =
          is_eager_reference_phase(report.phase) ? Status::kEagerFailToRun : Status::kFailToRun;
      r.error = fmt::format("worker exited with status {} {}: {}", outcome.exit_code, where,
                            log_tail(log));
    }
    out.push_back(std::move(r));
  }
  for (reports::ResultRecord& r : out) {
    if (auto v = report.versions.find(r.backend); v != report.versions.end())
      r.backend_version = v->second;
  }
  return out;
}

}  // namespace crucible
