#!/usr/bin/env bash
# Builds and runs the multihead benchmark suite on a Debian 12 machine, then prints a summary.
#
#   bench/run.sh [--quick] [--filter REGEX] [extra mh_bench / --benchmark_* flags...]
#
#   --quick          tiny shapes, well under a minute (mh_bench --mh_quick)
#   --filter REGEX   only the cases whose name matches (--benchmark_filter=REGEX; the names
#                    Google Benchmark matches end in /real_time, /min_time:X or /iterations:N)
#
# Installs only the missing Debian packages (cmake, g++, make, libbenchmark-dev, python3),
# configures ./build in Release with the bench on and the tests off, builds, runs
# build/bench/mh_bench with JSON output to build/bench/results.json, and prints
# bench/summary.py's table. Run it from anywhere; it works in the repository root.
set -euo pipefail

usage() { sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; }

quick=0
filter=""
extra=()
while (($#)); do
  case "$1" in
    --quick) quick=1; shift ;;
    --filter)
      [[ $# -ge 2 ]] || { echo "run.sh: --filter needs a REGEX" >&2; exit 2; }
      filter="$2"; shift 2 ;;
    --filter=*) filter="${1#--filter=}"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) extra+=("$1"); shift ;;
  esac
done

cd "$(dirname "${BASH_SOURCE[0]}")/.."

# ---------------------------------------------------------------- packages
missing=()
for pkg in cmake g++ make libbenchmark-dev python3; do
  if ! dpkg -s "$pkg" 2>/dev/null | grep -q '^Status: install ok installed'; then
    missing+=("$pkg")
  fi
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
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release -DMH_BUILD_BENCH=ON -DMH_BUILD_TESTS=OFF
cmake --build build -j "$(nproc)"

# ---------------------------------------------------------------- run
results=build/bench/results.json
args=(--benchmark_out="$results" --benchmark_out_format=json)
[[ -n $filter ]] && args+=(--benchmark_filter="$filter")
((quick)) && args+=(--mh_quick)
rm -f "$results"
start=$(date +%s)
build/bench/mh_bench "${args[@]}" ${extra[@]+"${extra[@]}"}
end=$(date +%s)

echo
echo "=== summary ($results, $((end - start)) s) ==="
python3 bench/summary.py "$results"
