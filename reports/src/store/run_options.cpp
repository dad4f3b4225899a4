// A run's -c options as its recorded command gave them, filtered to the ones a backend saw.
#include "crucible/reports/run_options.h"

#include <string_view>

#include "crucible/core/option_scope.h"
#include "crucible/core/quote.h"

namespace crucible::reports {

std::vector<std::string> options_reaching(const std::string& command, const std::string& backend) {
  const std::vector<std::string> words = shell_words(command);
  std::vector<std::string> out;
  for (size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    std::string value;
    if ((w == "-c" || w == "--config") && i + 1 < words.size()) {
      value = words[++i];
    } else if (w.rfind("--config=", 0) == 0) {
      value = w.substr(9);
    } else if (w.size() > 2 && w.rfind("-c", 0) == 0) {
      value = w.substr(2);
    } else {
      continue;
    }
    if (option_key_for(std::string_view(value).substr(0, value.find('=')), backend))
      out.push_back(std::move(value));
  }
  return out;
}

}  // namespace crucible::reports
