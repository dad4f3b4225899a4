// The worker report's line format: tab-separated fields with \t, \n and \\ escaped; a result is the
// lines between "result" and "end" and counts only when "end" was written.
#include "worker_report.h"

#include <fmt/format.h>

#include <cstdio>
#include <fstream>

#include "crucible/core/error.h"

namespace crucible {

namespace {

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '\t') {
      out += "\\t";
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\\') {
      out += "\\\\";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 1 < s.size()) {
      char n = s[++i];
      out += n == 't' ? '\t' : n == 'n' ? '\n' : n;
    } else {
      out += s[i];
    }
  }
  return out;
}

std::vector<std::string> split(const std::string& line) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t tab = line.find('\t', start);
    out.push_back(unescape(line.substr(start, tab - start)));
    if (tab == std::string::npos) return out;
    start = tab + 1;
  }
}

std::string num(double v) { return fmt::format("{}", v); }

// The per-call series a result carries, by the name their report lines use.
using Series = std::vector<double> reports::ResultRecord::*;
constexpr std::pair<const char*, Series> kSeries[] = {
    {"instructions", &reports::ResultRecord::instructions},
    {"cycles", &reports::ResultRecord::cycles},
    {"page_faults", &reports::ResultRecord::page_faults},
    {"cpu_ms", &reports::ResultRecord::cpu_ms},
    {"sim_instructions", &reports::ResultRecord::sim_instructions},
    {"sim_d1_misses", &reports::ResultRecord::sim_d1_misses},
    {"sim_ll_misses", &reports::ResultRecord::sim_ll_misses},
};

// One line of a declaration record into `d` (the lines ReportWriter::declared writes).
void read_declaration_line(const std::vector<std::string>& f, plugin::Declaration& d) {
  const std::string& k = f.at(0);
  if (k == "load_env" && f.size() >= 6) {
    d.load_env = plugin::LoadEnvChoice{f[1], f[2], f[3], f[4], f[5], {}, {}};
  } else if (k == "probe_config" && f.size() >= 3 && d.load_env) {
    d.load_env->probe_config[f[1]] = f[2];
  } else if (k == "candidate" && f.size() >= 3 && d.load_env) {
    plugin::LoadEnvCandidate c{f[1], {}, f[2]};
    for (size_t i = 3; i < f.size(); ++i) {
      const size_t eq = f[i].find('=');
      if (eq == std::string::npos) {
        c.env[f[i].substr(1)] = std::nullopt;  // "-KEY"
      } else {
        c.env[f[i].substr(0, eq)] = f[i].substr(eq + 1);
      }
    }
    d.load_env->candidates.push_back(std::move(c));
  } else if (k == "pass" && f.size() >= 5) {
    plugin::PassSwitch p{f[1], f[2], f[3], {f.begin() + 5, f.end()}, f[4] == "1"};
    d.bisection.passes.push_back(std::move(p));
  } else if (k == "bisection" && f.size() >= 3) {
    d.bisection.node_fallback_key = f[1];
    d.bisection.code_file = f[2];
  }
}

}  // namespace

ReportWriter::ReportWriter(const std::filesystem::path& path) : f_(std::fopen(path.c_str(), "a")) {
  if (f_ == nullptr) throw Error(fmt::format("{}: cannot write the worker report", path.string()));
}

ReportWriter::~ReportWriter() { std::fclose(f_); }

void ReportWriter::line(const std::vector<std::string>& fields) {
  std::string s;
  for (size_t i = 0; i < fields.size(); ++i) s += (i ? "\t" : "") + escape(fields[i]);
  s += "\n";
  std::fwrite(s.data(), 1, s.size(), f_);
  std::fflush(f_);
}

void ReportWriter::phase(const std::string& name, const std::string& backend) {
  line({"phase", name, backend});
}

void ReportWriter::loaded(const std::string& backend, const std::string& version) {
  line({"loaded", backend, version});
}

void ReportWriter::result(const reports::ResultRecord& r) {
  // The worker's log is the first place a user looks: the reason goes there as well as to the
  // report the harness reads back.
  if (!r.error.empty()) {
    fmt::print(stderr, "{}/{} {} {}: {}: {}\n", r.suite, r.model, r.backend, r.mode,
               reports::status_name(r.status), r.error);
  }
  line({"result", r.suite, r.model, r.backend, r.mode, std::to_string(r.batch_size)});
  line({"status", std::string(reports::status_name(r.status))});
  if (!r.error.empty()) line({"error", r.error});
  for (double s : r.samples_ms) line({"sample", num(s)});
  if (r.compile_s) line({"compile_s", num(*r.compile_s)});
  if (r.compile_warm_s) line({"compile_warm_s", num(*r.compile_warm_s)});
  if (r.peak_rss_mb) line({"peak_rss_mb", num(*r.peak_rss_mb)});
  for (const auto& a : r.accuracy) {
    line({"acc", std::to_string(a.index), a.dtype, a.shape, num(a.max_abs_err), num(a.max_rel_err),
          std::to_string(a.mismatches), std::to_string(a.first_mismatch), num(a.rmse_vs_fp64),
          num(a.rmse_eager_vs_fp64), num(a.cosine), a.passed ? "1" : "0"});
  }
  // Optional figures as "-" when absent, so each keeps its column.
  auto optional = [](const std::optional<double>& v) { return v ? num(*v) : std::string("-"); };
  for (const auto& k : r.kernels) {
    line({"kernel", k.name, std::to_string(k.calls), std::to_string(k.total_ns),
          optional(k.instructions), optional(k.flops), optional(k.bytes)});
  }
  if (r.pass_suspicious) line({"pass_suspicious"});
  if (r.calls_per_sample > 0) {
    line({"timing", std::to_string(r.calls_per_sample), num(r.timer_overhead_ns),
          std::to_string(r.attempts)});
  }
  if (!r.audit.empty()) line({"audit", r.audit});
  if (r.audit_share && r.audit_coverage)
    line({"audit_cost", num(*r.audit_share), num(*r.audit_coverage)});
  if (!r.disturbed_by.empty()) line({"disturbed_by", r.disturbed_by});
  for (const auto& [name, member] : kSeries) {
    const std::vector<double>* series = &(r.*member);
    if (series->empty()) continue;
    std::vector<std::string> fields{"series", name};
    for (double v : *series) fields.push_back(num(v));
    line(fields);
  }
  if (!r.counters_unavailable.empty()) line({"counters_unavailable", r.counters_unavailable});
  if (r.contention) {
    const auto& c = *r.contention;
    line({"contention", num(c.run_delay), num(c.other_cpu), num(c.steal),
          std::to_string(c.involuntary_switches), num(c.canary_before_ms), num(c.canary_after_ms),
          num(c.triad_before_gbs), num(c.triad_after_gbs), num(c.working_set_mb)});
  }
  if (r.noisy) line({"noisy", r.noise_reason});
  if (r.roofline) {
    const auto& rl = *r.roofline;
    line({"roofline", num(rl.flops), num(rl.min_bytes), num(rl.peak_gflops), num(rl.triad_gbs),
          num(rl.l1.gbs), num(rl.l1.bytes), num(rl.l2.gbs), num(rl.l2.bytes), num(rl.l3.gbs),
          num(rl.l3.bytes)});
  }
  line({"end"});
}

void ReportWriter::declared(const std::string& backend, const plugin::Declaration& d) {
  line({"declared", backend});
  if (d.load_env) {
    const plugin::LoadEnvChoice& l = *d.load_env;
    line({"load_env", l.option, l.default_from, l.version_fact, l.reason_var, l.probe_graph});
    for (const auto& [key, value] : l.probe_config) line({"probe_config", key, value});
    for (const auto& c : l.candidates) {
      std::vector<std::string> fields{"candidate", c.name, c.expect};
      for (const auto& [key, value] : c.env)
        fields.push_back(value ? key + "=" + *value : "-" + key);
      line(fields);
    }
  }
  for (const auto& p : d.bisection.passes) {
    std::vector<std::string> fields{"pass", p.name, p.key, p.value, p.only_when_set ? "1" : "0"};
    fields.insert(fields.end(), p.ops.begin(), p.ops.end());
    line(fields);
  }
  line({"bisection", d.bisection.node_fallback_key, d.bisection.code_file});
  line({"end"});
}

void ReportWriter::reply(int exit_code, const std::string& out, const std::string& err) {
  line({"reply", std::to_string(exit_code)});
  line({"stdout", out});
  line({"stderr", err});
  line({"end"});
}

// Long as the report format is: one branch per line kind, in the order write() emits them, so the
// writer and this reader can be read side by side.
WorkerReport read_report(const std::filesystem::path& path) {
  WorkerReport rep;
  std::ifstream in(path);
  std::string text;
  reports::ResultRecord cur;
  CommandReply reply;
  bool open = false, open_reply = false, open_declaration = false;
  std::string declaring;
  plugin::Declaration declaration;
  auto d = [](const std::string& s) { return std::stod(s); };
  auto i64 = [](const std::string& s) { return static_cast<int64_t>(std::stoll(s)); };
  auto optional_d = [&](const std::vector<std::string>& f, size_t i) -> std::optional<double> {
    if (i >= f.size() || f[i] == "-") return std::nullopt;
    return d(f[i]);
  };
  while (std::getline(in, text)) {
    if (in.eof() && !text.empty()) break;  // no newline yet: the writer died mid-line
    auto f = split(text);
    try {
      const std::string& k = f[0];
      if (k == "phase" && f.size() >= 3) {
        rep.phase = f[1];
        rep.phase_backend = f[2];
      } else if (k == "loaded" && f.size() >= 3) {
        rep.versions[f[1]] = f[2];
      } else if (k == "declared" && f.size() >= 2) {
        declaring = f[1];
        declaration = {};
        open_declaration = true;
        open = open_reply = false;
      } else if (open_declaration) {
        if (k == "end") {
          rep.declarations[declaring] = std::move(declaration);
          open_declaration = false;
        } else {
          read_declaration_line(f, declaration);
        }
      } else if (k == "reply" && f.size() >= 2) {
        reply = {};
        reply.exit_code = static_cast<int>(i64(f[1]));
        open_reply = true;
        open = false;
      } else if (open_reply) {
        if (k == "stdout") {
          reply.out = f.at(1);
        } else if (k == "stderr") {
          reply.err = f.at(1);
        } else if (k == "end") {
          rep.reply = std::move(reply);
          open_reply = false;
        }
      } else if (k == "result" && f.size() >= 6) {
        cur = {};
        cur.suite = f[1];
        cur.model = f[2];
        cur.backend = f[3];
        cur.mode = f[4];
        cur.batch_size = i64(f[5]);
        open = true;
      } else if (!open) {
        continue;
      } else if (k == "status") {
        const auto status = reports::status_from_name(f.at(1));
        if (!status) throw Error("unknown status '" + f.at(1) + "'");
        cur.status = *status;
      } else if (k == "error") {
        cur.error = f.at(1);
      } else if (k == "sample") {
        cur.samples_ms.push_back(d(f.at(1)));
      } else if (k == "compile_s") {
        cur.compile_s = d(f.at(1));
      } else if (k == "compile_warm_s") {
        cur.compile_warm_s = d(f.at(1));
      } else if (k == "peak_rss_mb") {
        cur.peak_rss_mb = d(f.at(1));
      } else if (k == "acc" && f.size() >= 12) {
        reports::OutputAccuracy a;
        a.index = static_cast<int>(i64(f[1]));
        a.dtype = f[2];
        a.shape = f[3];
        a.max_abs_err = d(f[4]);
        a.max_rel_err = d(f[5]);
        a.mismatches = i64(f[6]);
        a.first_mismatch = i64(f[7]);
        a.rmse_vs_fp64 = d(f[8]);
        a.rmse_eager_vs_fp64 = d(f[9]);
        a.cosine = d(f[10]);
        a.passed = f[11] == "1";
        cur.accuracy.push_back(a);
      } else if (k == "kernel" && f.size() >= 4) {
        reports::KernelTiming kt(f[1], i64(f[2]), i64(f[3]), optional_d(f, 4));
        kt.flops = optional_d(f, 5);
        kt.bytes = optional_d(f, 6);
        cur.kernels.push_back(std::move(kt));
      } else if (k == "pass_suspicious") {
        cur.pass_suspicious = true;
      } else if (k == "timing" && f.size() >= 4) {
        cur.calls_per_sample = i64(f[1]);
        cur.timer_overhead_ns = d(f[2]);
        cur.attempts = static_cast<int>(i64(f[3]));
      } else if (k == "audit") {
        cur.audit = f.at(1);
      } else if (k == "audit_cost" && f.size() >= 3) {
        cur.audit_share = d(f[1]);
        cur.audit_coverage = d(f[2]);
      } else if (k == "disturbed_by") {
        cur.disturbed_by = f.at(1);
      } else if (k == "series" && f.size() >= 2) {
        std::vector<double>* series = nullptr;
        for (const auto& [name, member] : kSeries) {
          if (f[1] == name) series = &(cur.*member);
        }
        if (series == nullptr) throw Error("unknown series '" + f[1] + "'");
        for (size_t i = 2; i < f.size(); ++i) series->push_back(d(f[i]));
      } else if (k == "counters_unavailable") {
        cur.counters_unavailable = f.at(1);
      } else if (k == "contention" && f.size() >= 10) {
        cur.contention = reports::Contention{d(f[1]), d(f[2]), d(f[3]), i64(f[4]), d(f[5]),
                                             d(f[6]), d(f[7]), d(f[8]), d(f[9])};
      } else if (k == "noisy") {
        cur.noisy = true;
        cur.noise_reason = f.at(1);
      } else if (k == "roofline" && f.size() >= 5) {
        cur.roofline = reports::Roofline{d(f[1]), d(f[2]), d(f[3]), d(f[4]), {}, {}, {}};
        if (f.size() >= 11) {  // the cache levels: L1, L2, L3
          cur.roofline->l1 = {d(f[5]), d(f[6])};
          cur.roofline->l2 = {d(f[7]), d(f[8])};
          cur.roofline->l3 = {d(f[9]), d(f[10])};
        }
      } else if (k == "end") {
        rep.results.push_back(std::move(cur));
        open = false;
      }
    } catch (const std::exception&) {
      open = open_reply = open_declaration = false;  // a garbled record is dropped, never half-used
    }
  }
  return rep;
}

}  // namespace crucible
