// Per-backend environment specs and their scoped application (see backend_env.h).
#include "backend_env.h"

#include <fmt/format.h>

#include <cstdlib>

#include "crucible/core/error.h"

namespace crucible {

namespace {

// A POSIX-portable variable name: letters, digits, '_', not starting with a digit.
bool valid_name(const std::string& key) {
  if (key.empty() || std::isdigit(static_cast<unsigned char>(key[0]))) return false;
  for (unsigned char c : key) {
    if (!std::isalnum(c) && c != '_') return false;
  }
  return true;
}

void set_or_unset(const std::string& key, const std::optional<std::string>& value) {
  if (value) {
    ::setenv(key.c_str(), value->c_str(), 1);
  } else {
    ::unsetenv(key.c_str());
  }
}

}  // namespace

BackendEnv parse_backend_env(const std::vector<std::string>& specs) {
  BackendEnv out;
  for (const std::string& spec : specs) {
    const auto bad = [&](const char* why) {
      return Error(fmt::format(
          "--backend-env '{}': {} (expected BACKEND:KEY=VALUE or BACKEND:-KEY)", spec, why));
    };
    const size_t colon = spec.find(':');
    if (colon == std::string::npos || colon == 0) throw bad("no BACKEND: before the variable");
    const std::string backend = spec.substr(0, colon);
    std::string rest = spec.substr(colon + 1);
    if (!rest.empty() && rest[0] == '-') {
      rest.erase(0, 1);
      if (!valid_name(rest)) throw bad("not a variable name after '-'");
      out[backend][rest] = std::nullopt;
      continue;
    }
    const size_t eq = rest.find('=');
    if (eq == std::string::npos) throw bad("no '=' after the variable");
    const std::string key = rest.substr(0, eq);
    if (!valid_name(key)) throw bad("not a variable name before '='");
    out[backend][key] = rest.substr(eq + 1);
  }
  return out;
}

std::vector<std::string> backend_env_specs(const BackendEnv& env) {
  std::vector<std::string> out;
  for (const auto& [backend, changes] : env) {
    for (const auto& [key, value] : changes)
      out.push_back(value ? fmt::format("{}:{}={}", backend, key, *value)
                          : fmt::format("{}:-{}", backend, key));
  }
  return out;
}

std::string describe_env(const EnvChanges& changes) {
  std::string out;
  for (const auto& [key, value] : changes) {
    if (!out.empty()) out += ' ';
    out += value ? fmt::format("{}={}", key, *value) : "-" + key;
  }
  return out;
}

EnvChanges overlay(EnvChanges base, const EnvChanges& over) {
  for (const auto& [key, value] : over) base[key] = value;
  return base;
}

ScopedEnv::ScopedEnv(const EnvChanges& changes) {
  for (const auto& [key, value] : changes) {
    const char* old = std::getenv(key.c_str());
    saved_[key] = old ? std::optional<std::string>(old) : std::nullopt;
    set_or_unset(key, value);
  }
}

ScopedEnv::~ScopedEnv() {
  for (const auto& [key, value] : saved_) set_or_unset(key, value);
}

}  // namespace crucible
