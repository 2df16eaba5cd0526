#!/usr/bin/env bash
# The accuracy report (issue 19; docs/benchmarks.md, "Accuracy of trained models"): one small
# byte-level language model per attention variant, trained in PyTorch and scored through the
# library, against KV bytes per token and decode time. Also `bench/run.sh --accuracy [--docs]`.
#
#   bench/accuracy/run.sh [--docs]
#
# Installs the missing Debian packages (python3-torch, python3-matplotlib, fortunes), builds
# mh_accuracy_eval in build/accuracy-build (Release), trains the models with nice -n 10 into
# build/accuracy/ (about 40 minutes on 2 cores; models already there are reused: delete them to
# retrain), scores each through the library (exit status 1 if C and PyTorch disagree on any),
# and writes build/accuracy/report.md and the plot; --docs also docs/benchmarks.md's accuracy
# section and docs/benchmarks/accuracy/.
set -euo pipefail

docs=0
for arg in "$@"; do
  case "$arg" in
    --docs) docs=1 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) echo "accuracy/run.sh: unknown option '$arg'" >&2; exit 2 ;;
  esac
done
cd "$(dirname "${BASH_SOURCE[0]}")/../.."

installed() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Architecture}\n' "$1" 2>/dev/null |
    grep -Eq "^ii +($(dpkg --print-architecture)|all)\$"
}
missing=()
for pkg in cmake gcc make python3 python3-torch python3-matplotlib fortunes; do
  installed "$pkg" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "accuracy/run.sh: installing ${missing[*]}"
  sudo=()
  [[ $(id -u) -ne 0 ]] && sudo=(sudo)
  ${sudo[@]+"${sudo[@]}"} apt-get -o DPkg::Lock::Timeout=600 update
  ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y "${missing[@]}"
fi

echo "== build build/accuracy-build (mh_accuracy_eval)"
cmake -S . -B build/accuracy-build -DCMAKE_BUILD_TYPE=Release -DMH_BUILD_TESTS=ON >/dev/null
cmake --build build/accuracy-build -j "$(nproc)" --target mh_accuracy_eval

cmd="bench/run.sh --accuracy"
args=(--eval build/accuracy-build/tests/accuracy/mh_accuracy_eval --out build/accuracy)
if ((docs)); then
  cmd+=" --docs"
  args+=(--docs docs/benchmarks.md)
fi
# Debian's python3: its python3-torch and python3-matplotlib (a pyenv or venv python3 has neither)
exec nice -n 10 /usr/bin/python3 bench/accuracy/report.py "${args[@]}" --command "$cmd"
