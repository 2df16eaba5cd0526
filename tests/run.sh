#!/usr/bin/env bash
# The test command: installs what is missing (Debian 12), builds with -Werror under gcc and
# clang, runs the ctest suite on each build and under ASan+UBSan, and ends with one line
# "N passed, N failed[, N skipped]".
#   tests/run.sh            everything
#   tests/run.sh --fast     the gcc build only
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

fast=0
[[ "${1:-}" == "--fast" ]] && fast=1

# ---------------------------------------------------------------- packages
packages=(cmake make gcc g++ clang libomp-dev pkg-config libbenchmark-dev)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
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

# run_suite NAME CMAKE_ARGS...: configure, build, run ctest, add up the results.
run_suite() {
  local name=$1
  shift
  local dir="$root/build/test-$name"
  echo "== $name: configure and build"
  if ! cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMH_WERROR=ON "$@" >"$dir.log" 2>&1 ||
     ! cmake --build "$dir" -j "$jobs" >>"$dir.log" 2>&1; then
    echo "== $name: BUILD FAILED (log: $dir.log)"
    tail -n 40 "$dir.log"
    failed=$((failed + 1))
    return
  fi
  echo "== $name: ctest"
  local out
  out=$(cd "$dir" && ctest --output-on-failure -j "$jobs" 2>&1) || true
  echo "$out" | grep -E "Test +#|tests passed|Failed|Skipped|FAIL" || true
  local total nfail nskip
  total=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed out of \([0-9]*\).*/\2/p')
  nfail=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests failed out of.*/\1/p')
  nskip=$(echo "$out" | grep -c "\*\*\*Skipped\|Not Run.*Skipped" || true)
  if [[ -z "$total" ]]; then
    echo "== $name: ctest produced no summary"
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + total - nfail - nskip))
  failed=$((failed + nfail))
  skipped=$((skipped + nskip))
}

mkdir -p build
run_suite gcc -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++
if ((!fast)); then
  run_suite clang -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++
  run_suite asan-ubsan -DCMAKE_C_COMPILER=gcc -DCMAKE_CXX_COMPILER=g++ \
    "-DCMAKE_C_FLAGS=-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer" \
    "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
    "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined"
fi

echo "${passed} passed, ${failed} failed, ${skipped} skipped"
((failed == 0))
