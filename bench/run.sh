#!/usr/bin/env bash
# Builds and runs the multihead benchmark suite on a Debian 12 machine, then writes the report.
#
#   bench/run.sh --accuracy [--docs]   the accuracy report of trained models (bench/accuracy/run.sh)
#   bench/run.sh [--quick | --long] [--filter REGEX] [--threads N] [--weights FILE [--heads H]]
#                [--docs] [--mh_* and --benchmark_* flags of mh_bench...]
#
#   (none)           the default suite: every variant at the headline shapes, about 6 minutes
#                    on 2 cores (bench/README.md says what each suite covers)
#   --quick          tiny shapes, well under a minute; runs the harness self-check first
#   --long           the default suite plus its long tails (4K-token prefill and encoder
#                    layers, decode through the layer at 16K/32K cached tokens)
#   --filter REGEX   only the cases whose name matches (--benchmark_filter; the names Google
#                    Benchmark matches end in /real_time, /min_time:X or /iterations:N)
#   --threads N      every case at N threads (default: 1, plus a scaling set on every core)
#   --weights FILE   the layer modes start from this attention layer (safetensors, PyTorch
#                    names q_proj/k_proj/v_proj/o_proj[.weight|.bias]; docs/benchmarks.md)
#   --heads H        its number of query heads (if the file's metadata does not say)
#   --docs           also write docs/benchmarks.md and docs/benchmarks/*.png from this run
#                    (do it on a quiet machine: the numbers are only as good as the machine)
#   -h, --help       this text (build/release/bench/mh_bench --help lists the --mh_* flags)
#
# Installs only the missing Debian packages, configures build/release (Release, the bench on,
# the tests off), builds, runs build/release/bench/mh_bench (one table row per case, "case
# k/N" and the time left), and writes under build/bench/: results.json (Google Benchmark JSON
# with the machine limits in its context), report.md and the plots (*.png), by
# bench/report.py, which also prints the comparison tables. Run it from anywhere.
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

quick=0 long=0 docs=0 accuracy=0
filter="" threads="" weights="" heads=""
extra=()
need_value() { [[ $# -ge 2 ]] || { echo "run.sh: $1 needs a value" >&2; exit 2; }; }
while (($#)); do
  case "$1" in
    --quick) quick=1; shift ;;
    --long) long=1; shift ;;
    --docs) docs=1; shift ;;
    --accuracy) accuracy=1; shift ;;
    --filter) need_value "$@"; filter="$2"; shift 2 ;;
    --filter=*) filter="${1#--filter=}"; shift ;;
    --threads) need_value "$@"; threads="$2"; shift 2 ;;
    --threads=*) threads="${1#--threads=}"; shift ;;
    --weights) need_value "$@"; weights="$2"; shift 2 ;;
    --weights=*) weights="${1#--weights=}"; shift ;;
    --heads) need_value "$@"; heads="$2"; shift 2 ;;
    --heads=*) heads="${1#--heads=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    --mh_*|--benchmark_*) extra+=("$1"); shift ;;  # mh_bench checks these itself
    *) echo "run.sh: unknown option '$1' (bench/run.sh --help)" >&2; exit 2 ;;
  esac
done
if ((accuracy)); then
  if ((docs)); then exec "$(dirname "${BASH_SOURCE[0]}")/accuracy/run.sh" --docs; fi
  exec "$(dirname "${BASH_SOURCE[0]}")/accuracy/run.sh"
fi
if ((quick && long)); then
  echo "run.sh: --quick and --long exclude each other" >&2
  exit 2
fi
if [[ -n $threads && ! $threads =~ ^[1-9][0-9]*$ ]]; then
  echo "run.sh: --threads needs a positive integer" >&2
  exit 2
fi
# a relative --weights path is relative to where run.sh was called from
if [[ -n $weights && $weights != /* ]]; then weights="$PWD/$weights"; fi

cd "$(dirname "${BASH_SOURCE[0]}")/.."
start_all=$(date +%s)

# ---------------------------------------------------------------- packages
# dpkg-query, not dpkg -s: a package installed for two architectures (e.g. libsleef-dev for
# amd64 and arm64 next to a cross toolchain) makes `dpkg -s NAME` fail as ambiguous.
# The native (or arch-independent) instance must be installed, not just some architecture's.
installed() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Architecture}\n' "$1" 2>/dev/null |
    grep -Eq "^ii +($(dpkg --print-architecture)|all)\$"
}
missing=()
for pkg in cmake g++ make pkg-config libsleef-dev libbenchmark-dev libcjson-dev libopenblas-dev \
           python3 python3-matplotlib; do
  installed "$pkg" || missing+=("$pkg")
done
if ((${#missing[@]})); then
  echo "run.sh: installing missing packages: ${missing[*]}"
  sudo=()
  if [[ $(id -u) -ne 0 ]]; then
    command -v sudo >/dev/null || { echo "run.sh: not root and no sudo; install ${missing[*]} first" >&2; exit 1; }
    sudo=(sudo)
  fi
  ${sudo[@]+"${sudo[@]}"} apt-get -o DPkg::Lock::Timeout=600 update
  ${sudo[@]+"${sudo[@]}"} env DEBIAN_FRONTEND=noninteractive \
    apt-get -o DPkg::Lock::Timeout=600 install -y "${missing[@]}"
fi

# ---------------------------------------------------------------- build
# build/release, not ./build: build/bench/ holds only this script's outputs, and a ./build a
# developer configured (e.g. with the tests on) is left alone.
echo "== build build/release"
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DMH_BUILD_BENCH=ON -DMH_BUILD_TESTS=OFF >/dev/null
cmake --build build/release -j "$(nproc)"
echo "== build: took $(($(date +%s) - start_all)) s"
bench=build/release/bench/mh_bench

# ---------------------------------------------------------------- run
out=build/bench
mkdir -p "$out"
results=$out/results.json
rm -f "$results"
status=0
if ((quick)); then
  echo "== harness self-check"
  "$bench" --mh_selfcheck || status=1
fi
args=(--benchmark_out="$results" --benchmark_out_format=json)
[[ -n $filter ]] && args+=(--benchmark_filter="$filter")
[[ -n $threads ]] && args+=(--mh_threads="$threads")
[[ -n $weights ]] && args+=(--weights="$weights")
[[ -n $heads ]] && args+=(--heads="$heads")
((quick)) && args+=(--mh_quick)
((long)) && args+=(--mh_long)
echo "== $bench ${args[*]} ${extra[*]:-}"
start=$(date +%s)
"$bench" "${args[@]}" ${extra[@]+"${extra[@]}"} || status=1
end=$(date +%s)
echo "== suite: $((end - start)) s"

# ---------------------------------------------------------------- report
# Debian's python3 has python3-matplotlib; a python3 earlier on PATH (pyenv, venv) may not.
py=python3
if [[ -x /usr/bin/python3 ]] && /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then py=/usr/bin/python3; fi
cmd="bench/run.sh"
((quick)) && cmd+=" --quick"
((long)) && cmd+=" --long"
[[ -n $filter ]] && cmd+=" --filter '$filter'"
[[ -n $threads ]] && cmd+=" --threads $threads"
[[ -n $weights ]] && cmd+=" --weights $weights"
[[ -n $heads ]] && cmd+=" --heads $heads"
((docs)) && cmd+=" --docs"
report=("$py" bench/report.py "$results" --out "$out" --print --command "$cmd")
((docs)) && report+=(--docs docs/benchmarks.md)
if [[ -f $results ]]; then
  echo
  echo "== report: bench/report.py"
  "${report[@]}" || status=1
else
  echo "run.sh: no $results (mh_bench failed before writing it)" >&2
  status=1
fi
echo "== done in $(($(date +%s) - start_all)) s (suite $((end - start)) s); outputs in $out/"
exit "$status"
