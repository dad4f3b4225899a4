#!/usr/bin/env bash
# check_backend_names.py on a made-up tree: quiet on names in comments or longer text and on the
# reference; a backend's name acted on fails with its file and line, wherever it is.
#   check_backend_names_selftest.sh CHECKER
set -euo pipefail
checker=$1
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree"/plugins/{api,loader,eager,codegen,libtorch} "$tree"/harness/{minify,run/backend_setup,cli}
echo 'if (plan.bisects) bisect();' > "$tree/harness/minify/minify.cpp"
cat > "$tree/harness/cli/help.cpp" <<'CPP'
// the "codegen" backend fuses ops
const char* kHelp = "e.g. -b codegen or libtorch";
if (backend == "eager") reference();
CPP
/usr/bin/python3 "$checker" "$tree" || { echo "selftest: a clean tree failed"; exit 1; }
echo 'if (cfg.backend == "libtorch") probe();' >> "$tree/harness/cli/help.cpp"
if out=$(/usr/bin/python3 "$checker" "$tree"); then echo "selftest: a new name passed"; exit 1; fi
grep -q 'harness/cli/help.cpp:4: acts on backend "libtorch" by name' <<<"$out" ||
  { echo "selftest: wrong message: $out"; exit 1; }
echo 'if (b == "codegen") bisect();' > "$tree/harness/minify/minify.cpp"
if out=$(/usr/bin/python3 "$checker" "$tree"); then echo "selftest: a nested name passed"; exit 1; fi
grep -q 'harness/minify/minify.cpp:1: acts on backend "codegen" by name' <<<"$out" ||
  { echo "selftest: wrong message: $out"; exit 1; }
echo "selftest: ok"
