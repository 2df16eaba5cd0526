#!/usr/bin/env bash
# The test command: installs what is missing (Debian 12), builds with -Werror under gcc and
# clang, runs the ctest suite on each build (every ISA this CPU has; the others report
# Skipped) and under ASan+UBSan, runs the benchmark harness's quick suite, the packaging test,
# the threading tests under ThreadSanitizer and a minute of libFuzzer, cross-builds for
# aarch64 and runs the suite under qemu (NEON, SVE at 128/256/512 bits), and ends with one
# line "N passed, N failed, N skipped". 13-25 minutes on 2 cores (the host's load); each stage
# prints its name when it starts and its time when it ends, its log goes to build/
# (docs/testing.md).
#
#   tests/run.sh            everything
#   tests/run.sh --fast     the gcc build and its ctest only (about 2 minutes)
#   tests/run.sh --help     this text
set -euo pipefail

usage() { awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; }

fast=0
for arg in "$@"; do
  case "$arg" in
    --fast) fast=1 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "tests/run.sh: unknown option '$arg' (tests/run.sh --help)" >&2; exit 2 ;;
  esac
done

cd "$(dirname "$0")/.."
root=$(pwd)
start_all=$SECONDS

# The stages, for "stage k/N" (the order below).
if ((fast)); then nstages=1; else nstages=9; fi
stage=0
# stage_begin NAME: announces the next stage; stage_end NAME: its duration.
stage_begin() {
  stage=$((stage + 1))
  stage_start=$SECONDS
  echo "== [$stage/$nstages] $1 ($(date +%H:%M:%S), $((SECONDS - start_all)) s in)"
}
stage_end() { echo "== [$stage/$nstages] $1: took $((SECONDS - stage_start)) s"; }

# ---------------------------------------------------------------- packages
# python3-torch: docs/examples/gen_tiny_decoder.py, the tiny_decoder examples' fixture (required);
# with fortunes (its English text), bench/accuracy/train.py in the accuracy_smoke test (required);
# openmpi-bin, libopenmpi-dev: the MPI examples (docs/examples/mpi_*), run by ctest on 2 ranks;
# qemu-user: the gcc and clang stages' tests on a CPU without AVX (qemu-x86_64 -cpu Nehalem),
# which register only where qemu is installed before those stages configure
packages=(cmake make gcc g++ clang libomp-dev libclang-rt-dev pkg-config libsleef-dev libbenchmark-dev python3
          python3-torch openmpi-bin libopenmpi-dev fortunes qemu-user)
# dpkg-query, not dpkg -s: a package installed for two architectures (libsleef-dev for amd64
# and arm64 once the aarch64 cross build has run) makes `dpkg -s NAME` fail as ambiguous.
# The native (or arch-independent) instance must be installed, not just some architecture's.
installed() {
  dpkg-query -W -f='${db:Status-Abbrev} ${Architecture}\n' "$1" 2>/dev/null |
    grep -Eq "^ii +($(dpkg --print-architecture)|all)\$"
}
missing=()
for p in "${packages[@]}"; do
  installed "$p" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q "${missing[@]}"
fi

jobs=$(nproc)
passed=0 failed=0 skipped=0

# run_suite NAME CTEST_EXCLUDE CMAKE_ARGS...: configure, build, run ctest (without the tests
# matching the regex CTEST_EXCLUDE, if not empty), add up the results.
run_suite() {
  local name=$1 exclude=$2
  shift 2
  local dir="$root/build/test-$name"
  stage_begin "$name: configure, build, ctest (log: build/test-$name.log)"
  if ! cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMH_WERROR=ON "$@" >"$dir.log" 2>&1 ||
     ! cmake --build "$dir" -j "$jobs" >>"$dir.log" 2>&1; then
    echo "== $name: BUILD FAILED (log: $dir.log)"
    tail -n 40 "$dir.log"
    failed=$((failed + 1))
    stage_end "$name"
    return
  fi
  echo "== $name: ctest"
  local out
  out=$(cd "$dir" && ctest --output-on-failure -j "$jobs" ${exclude:+-E "$exclude"} 2>&1) || true
  echo "$out" | grep -E "Test +#|tests passed|Failed|Skipped|FAIL" || true
  local total nfail nskip
  total=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p')
  nfail=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p')
  nskip=$(echo "$out" | grep -c "\*\*\*Skipped\|Not Run.*Skipped" || true)
  if [[ -z "$total" ]]; then
    echo "== $name: ctest produced no summary"
    failed=$((failed + 1))
    stage_end "$name"
    return
  fi
  passed=$((passed + total - nfail - nskip))
  failed=$((failed + nfail))
  skipped=$((skipped + nskip))
  stage_end "$name"
}

mkdir -p build
run_suite gcc "" -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
if ((!fast)); then
  run_suite clang "" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
  # Not the cases under the other decode prefetch rules (NAME.<isa>_pfl1, _pfall, _pfturn): the rules
  # differ only in prefetch instructions, which the sanitizers do not see, so those runs would
  # repeat the default rule's accesses (40 s of this stage's test time); the gcc and clang
  # stages run every rule.
  run_suite asan-ubsan '_pf(l1|all|turn)$' -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
    "-DCMAKE_C_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined"
fi

# run_step NAME COMMAND...: one pass/fail item for a command outside ctest.
run_step() {
  local name=$1
  shift
  stage_begin "$name (log: build/$name.run.log)"
  if "$@" >"$root/build/$name.run.log" 2>&1; then
    passed=$((passed + 1))
    tail -n 3 "$root/build/$name.run.log"
  else
    echo "== $name: FAILED (log: build/$name.run.log)"
    tail -n 40 "$root/build/$name.run.log"
    failed=$((failed + 1))
  fi
  stage_end "$name"
}

# run_summary NAME COMMAND...: a script that ends with "NAME: N passed, N failed, N skipped";
# its counts are added to the totals (a non-zero exit without a counted failure counts as one).
# Its output goes to build/NAME.run.log (the scripts keep build logs of their own, e.g.
# build/aarch64.log, which must not be shared).
run_summary() {
  local name=$1
  shift
  stage_begin "$name (log: build/$name.run.log)"
  local rc=0 log="$root/build/$name.run.log" line p f s
  "$@" >"$log" 2>&1 || rc=$?
  line=$(grep -E "^$name: [0-9]+ passed, [0-9]+ failed, [0-9]+ skipped" "$log" | tail -n 1 || true)
  if [[ -z $line ]]; then
    echo "== $name: no summary (log: build/$name.run.log)"
    tail -n 40 "$log"
    failed=$((failed + 1))
    stage_end "$name"
    return
  fi
  echo "$line"
  read -r p f s < <(echo "$line" | sed -E "s/^$name: ([0-9]+) passed, ([0-9]+) failed, ([0-9]+) skipped/\\1 \\2 \\3/")
  passed=$((passed + p)) failed=$((failed + f)) skipped=$((skipped + s))
  if ((rc != 0 && f == 0)); then failed=$((failed + 1)); fi
  stage_end "$name"
}

if ((!fast)); then
  # the benchmark harness must keep building and running (tiny shapes, under a minute)
  run_step bench-quick bench/run.sh --quick
  # mh_ab, the A/B timing tool bench/run.sh built beside the harness: its own checks
  run_step ab bench/ab/selfcheck.sh build/release
  # the installed package: CMake and pkg-config consumers, exported symbols
  run_summary package tests/package/run.sh
  # the threading tests under ThreadSanitizer (clang; OpenMP made visible to TSan by Archer)
  run_summary tsan tests/sanitize/tsan.sh
  # libFuzzer: the committed corpus, then a bounded run (MH_FUZZ_SECONDS, default 60)
  run_summary fuzz tests/fuzz/run.sh
  # aarch64: cross build, the whole suite under qemu (NEON; SVE at 128/256/512 bits)
  run_summary aarch64 tests/cross/aarch64.sh
fi

echo "== all stages: took $((SECONDS - start_all)) s"
echo "${passed} passed, ${failed} failed, ${skipped} skipped"
((failed == 0))
