// Failure signatures (see signature.h).
#include "signature.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <sstream>

namespace crucible::minify {

using reports::Status;

namespace {

bool is_path_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '/' || c == '.' || c == '_' ||
         c == '-';
}

}  // namespace

constexpr std::string_view kSuspicious = "pass_suspicious";

bool Signature::failing() const {
  if (suspicious) return true;
  return status != Status::kPass && status != Status::kEagerFailToRun &&
         status != Status::kEagerTwoRunsDiffer && status != Status::kSkipped &&
         status != Status::kXfail;
}

std::string Signature::str() const {
  if (suspicious)
    return detail.empty() ? std::string(kSuspicious) : fmt::format("{} {}", kSuspicious, detail);
  const std::string_view name = reports::status_name(status);
  if (status == Status::kFailAccuracy) {
    return detail.ends_with("nonfinite") ? fmt::format("{} {}", name, detail)
                                         : fmt::format("{} {} band {}", name, detail, band);
  }
  return detail.empty() ? std::string(name) : fmt::format("{}: {}", name, detail);
}

std::optional<Signature> Signature::parse(const std::string& text) {
  const size_t end = text.find_first_of(" :");
  if (text.substr(0, end) == kSuspicious) {
    Signature s;
    s.suspicious = true;
    if (end != std::string::npos) {
      if (text[end] != ' ' || end + 1 == text.size()) return std::nullopt;
      s.detail = text.substr(end + 1);
    }
    return s;
  }
  const auto status = reports::status_from_name(text.substr(0, end));
  if (!status) return std::nullopt;
  Signature s;
  s.status = *status;
  if (end == std::string::npos) return s;
  if (s.status == Status::kFailAccuracy) {
    std::istringstream in(text.substr(end));
    std::string word;
    in >> s.detail >> word;
    if (word == "nonfinite") {
      s.detail += " nonfinite";
    } else if (word != "band" || !(in >> s.band)) {
      return std::nullopt;
    }
    return s;
  }
  if (text.compare(end, 2, ": ") != 0) return std::nullopt;
  s.detail = text.substr(end + 2);
  return s;
}

std::string normalize_message(const std::string& message) {
  std::istringstream in(message);
  std::string line, chosen;
  while (std::getline(in, line)) {
    if (chosen.empty() && line.find_first_not_of(" \t") != std::string::npos) chosen = line;
    if (const size_t at = line.find("error:"); at != std::string::npos) {
      chosen = line.substr(at);
      break;
    }
  }
  std::string out;
  for (size_t i = 0; i < chosen.size();) {
    const char c = chosen[i];
    if (c == '/' || (c == '.' && i + 1 < chosen.size() && chosen[i + 1] == '/')) {
      while (i < chosen.size() && is_path_char(chosen[i])) ++i;
      out += "<path>";
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      while (i < chosen.size() && std::isdigit(static_cast<unsigned char>(chosen[i]))) ++i;
      out += '#';
    } else if (c == '%') {
      ++i;
      while (i < chosen.size() && (std::isalnum(static_cast<unsigned char>(chosen[i])) ||
                                   chosen[i] == '_' || chosen[i] == '.')) {
        ++i;
      }
      out += "%_";
    } else {
      out += c;
      ++i;
    }
  }
  while (!out.empty() && std::isspace(static_cast<unsigned char>(out.back()))) out.pop_back();
  return out;
}

Signature signature_of(const reports::ResultRecord& r) {
  Signature s;
  s.status = r.status;
  switch (r.status) {
    case Status::kFailAccuracy:
      for (const auto& a : r.accuracy) {
        if (a.passed) continue;
        s.detail = a.dtype;
        if (!std::isfinite(a.max_abs_err)) {
          s.detail += " nonfinite";
        } else {
          s.band =
              a.max_abs_err > 0 ? static_cast<int>(std::floor(std::log10(a.max_abs_err))) : -99;
        }
        break;
      }
      if (s.detail.empty()) s.detail = "shape";  // failed before any element was compared
      break;
    case Status::kCrash:  // "SIGSEGV in phase run of codegen: <log tail>": the tail varies
      s.detail = normalize_message(r.error.substr(0, r.error.find(": ")));
      break;
    case Status::kFailToCompile:
    case Status::kFailToRun:
    case Status::kFailToLoad:
      s.detail = normalize_message(r.error);
      break;
    case Status::kPass:
      if (r.pass_suspicious) {
        s.suspicious = true;
        double worst = -1;
        if (!r.accuracy.empty()) s.detail = r.accuracy.front().dtype;  // when no ratio is finite
        for (const auto& a : r.accuracy) {
          const double ratio = a.rmse_vs_fp64 / std::max(a.rmse_eager_vs_fp64, 1e-300);
          if (std::isfinite(ratio) && ratio > worst) {
            worst = ratio;
            s.detail = a.dtype;
          }
        }
      }
      break;
    default:
      break;
  }
  return s;
}

bool same_failure(const Signature& locked, const Signature& got) {
  if (locked.suspicious) {
    const bool accuracy = got.suspicious || got.status == Status::kFailAccuracy;
    return accuracy && got.detail.substr(0, got.detail.find(' ')) == locked.detail;
  }
  if (got.suspicious) return false;
  if (locked.status != got.status || locked.detail != got.detail) return false;
  if (locked.status != Status::kFailAccuracy || locked.detail.ends_with("nonfinite")) return true;
  // Cutting away the nodes after a bug removes what attenuated its error (a linear with small
  // weights, a normalization), so the same bug shows a larger error in a smaller graph; a smaller
  // one, more than a decade below, is rounding or another bug.
  return got.band >= locked.band - 1;
}

}  // namespace crucible::minify
