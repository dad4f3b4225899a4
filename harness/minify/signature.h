// A failure's signature: what kind of failure and its distinguishing trait, taken from the first
// run and then required of every candidate, so a minification never drifts to a different bug.
#pragma once

#include <optional>
#include <string>

#include "crucible/reports/records.h"

namespace crucible::minify {

struct Signature {
  reports::Status status = reports::Status::kPass;
  // fail_accuracy: the first failing output's dtype, and "nonfinite" or the decade of its largest
  // error ("band 0" for errors in [1, 10)); compile/run errors: the first compiler or exception
  // message with paths, numbers and value names taken out; crash: the signal.
  std::string detail;
  int band = 0;  // fail_accuracy only
  // A pass far from fp64 (pass_suspicious): status is pass, detail the dtype of the output
  // farthest from fp64 relative to eager. Minified only when asked (--signature suspicious).
  bool suspicious = false;

  // Any status but pass (and the eager-side ones, which fail no backend), or a suspicious pass.
  bool failing() const;
  // "fail_accuracy f32 band 0", "fail_to_compile: error: no ...", "pass_suspicious f32".
  std::string str() const;
  // Reads back what str() wrote; nullopt when it is not a signature.
  static std::optional<Signature> parse(const std::string& text);
};

// The signature of one accuracy-job result.
Signature signature_of(const reports::ResultRecord& r);

// Whether `got` is the same failure as `locked`: the same status, and the same detail (for
// accuracy: the same dtype, and an error no more than one decade below the locked one, or both
// nonfinite). A suspicious pass is matched by a suspicious pass or an accuracy failure of its
// dtype: the same small error grows past the tolerance once what diluted it is cut away.
bool same_failure(const Signature& locked, const Signature& got);

// An error message reduced to what identifies the failure: the first line that says "error:"
// (from there on), else the first line; paths become <path>, digit runs #, %names %_.
std::string normalize_message(const std::string& message);

}  // namespace crucible::minify
