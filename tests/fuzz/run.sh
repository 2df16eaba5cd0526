#!/usr/bin/env bash
# Builds the libFuzzer target tests/fuzz/fuzz_api.c with clang (-fsanitize=fuzzer,address,
# undefined; the library itself with address,undefined and coverage, its kernels without
# undefined) into build/fuzz, runs every committed input of tests/fuzz/corpus once, then
# fuzzes for a bounded time, and ends
# with one line "fuzz: N passed, N failed, 0 skipped" (the corpus replay and the timed run are
# one item each). Exits non-zero on a crash, a property violation, a timeout or a leak; the
# input that did it is saved under build/fuzz/artifacts/.
#
#   tests/fuzz/run.sh                       60 s of fuzzing (MH_FUZZ_SECONDS overrides)
#   MH_FUZZ_SECONDS=3600 tests/fuzz/run.sh  a long run (docs/testing: "Fuzzing")
#   tests/fuzz/run.sh --update-corpus       also merge what the run found into the corpus
#   tests/fuzz/run.sh FILE...               replay inputs (e.g. a crash artifact) and stop
#
# Env: MH_FUZZ_SECONDS (60), MH_FUZZ_JOBS (1 fuzzing process), MH_FUZZ_BUILD_JOBS (nproc).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
dir="$root/build/fuzz"
corpus="$root/tests/fuzz/corpus"
seconds=${MH_FUZZ_SECONDS:-60}
jobs=${MH_FUZZ_JOBS:-1}
update=0
replay=()
for arg in "$@"; do
  case "$arg" in
    --update-corpus) update=1 ;;
    *) replay+=("$arg") ;;
  esac
done
mkdir -p "$dir"

# ---------------------------------------------------------------- toolchain
# Debian: clang and libFuzzer (libclang-rt-dev); only what is missing is installed
need=()
command -v clang >/dev/null 2>&1 || need+=(clang)
if ! printf 'int LLVMFuzzerTestOneInput(const unsigned char*d,unsigned long n){(void)d;(void)n;return 0;}' |
     clang -x c - -fsanitize=fuzzer,address,undefined -o "$dir/probe" >/dev/null 2>&1; then
  dpkg -s libclang-rt-dev >/dev/null 2>&1 || need+=(libclang-rt-dev)
fi
if ((${#need[@]})); then
  echo "== fuzz: installing ${need[*]}"
  sudo=""
  [[ $(id -u) -ne 0 ]] && sudo=sudo
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q "${need[@]}"
fi

# ---------------------------------------------------------------- build
# -O1 (libFuzzer's usual level) and a Debug build (asserts on): at -O2 clang with ASan, UBSan
# and coverage took 85 s on the bf16-on-FMA GEMM file alone and 47 s on the AVX-512 decode
# kernels, most of this stage; at -O1, 15 and 20 s. The kernel objects leave UBSan out
# (MH_KERNEL_FLAGS): it doubled their compile time (the AVX-512 direct kernels 71 -> 41 s,
# the kernels 236 of the build's 311 CPU seconds), and the asan-ubsan stage runs the whole
# suite, the committed corpus too, with UBSan in the kernels. ASan and the coverage stay.
flags="-O1 -fsanitize=address,undefined,fuzzer-no-link -fno-sanitize-recover=all -fno-omit-frame-pointer -g"
echo "== fuzz: configure and build ($dir)"
if ! cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_COMPILER=clang \
       -DCMAKE_CXX_COMPILER=clang++ -DMH_WERROR=ON -DMH_BUILD_FUZZ=ON "-DCMAKE_C_FLAGS=$flags" \
       -DMH_KERNEL_FLAGS=-fno-sanitize=undefined \
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=address,undefined" \
       "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=address,undefined" >"$dir/build.log" 2>&1 ||
   ! cmake --build "$dir" -j "${MH_FUZZ_BUILD_JOBS:-$(nproc)}" --target fuzz_api >>"$dir/build.log" 2>&1; then
  tail -n 40 "$dir/build.log"
  echo "fuzz: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
fuzzer="$dir/tests/fuzz_api"
export ASAN_OPTIONS="detect_leaks=1${ASAN_OPTIONS:+:$ASAN_OPTIONS}"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1${UBSAN_OPTIONS:+:$UBSAN_OPTIONS}"
mkdir -p "$dir/artifacts"
common=(-timeout=10 -rss_limit_mb=2048 -max_len=512 -artifact_prefix="$dir/artifacts/" -print_final_stats=1)

if ((${#replay[@]})); then
  exec "$fuzzer" "${common[@]}" "${replay[@]}"
fi

passed=0 failed=0
# ---------------------------------------------------------------- the committed corpus
echo "== fuzz: replay tests/fuzz/corpus ($(find "$corpus" -type f | wc -l) inputs)"
if "$fuzzer" "${common[@]}" -runs=0 "$corpus" >"$dir/replay.log" 2>&1; then
  passed=$((passed + 1))
  grep -E "INITED|DONE" "$dir/replay.log" | tail -n 2 || true
else
  failed=$((failed + 1))
  echo "== fuzz: the corpus replay FAILED (log: $dir/replay.log)"
  grep -B 2 -A 30 -E "FAILED|ERROR|runtime error" "$dir/replay.log" | head -n 60 || tail -n 40 "$dir/replay.log"
fi

# ---------------------------------------------------------------- timed fuzzing
# on a scratch copy of the corpus, so the committed one only changes with --update-corpus
work="$dir/corpus"
rm -rf "$work"
mkdir -p "$work"
cp "$corpus"/* "$work"/
echo "== fuzz: fuzzing for ${seconds} s (jobs: $jobs)"
fuzz_args=("${common[@]}" -max_total_time="$seconds" -print_pcs=0 "$work")
((jobs > 1)) && fuzz_args=(-fork="$jobs" "${fuzz_args[@]}") # fork mode: one log, one corpus
if "$fuzzer" "${fuzz_args[@]}" >"$dir/fuzz.log" 2>&1; then
  passed=$((passed + 1))
  grep -E "^#[0-9]+ *DONE|stat::number_of_executed_units|stat::new_units_added|cov: " "$dir/fuzz.log" | tail -n 3 || true
else
  failed=$((failed + 1))
  echo "== fuzz: FAILED (log: $dir/fuzz.log); artifacts:"
  ls -1 "$dir/artifacts" || true
  grep -B 2 -A 30 -E "FAILED|ERROR|runtime error" "$dir/fuzz.log" | head -n 60 || tail -n 40 "$dir/fuzz.log"
fi

if ((update && failed == 0)); then
  # a small set of inputs with the same edge coverage (greedy set cover over edges, not hit
  # counts: a few dozen to a hundred files of ~100 bytes)
  fresh="$dir/corpus.merged"
  rm -rf "$fresh"
  mkdir -p "$fresh"
  "$fuzzer" "${common[@]}" -set_cover_merge=1 -use_counters=0 "$fresh" "$corpus" "$work" >"$dir/merge.log" 2>&1
  rm -f "$corpus"/*
  cp "$fresh"/* "$corpus"/
  echo "== fuzz: corpus updated: $(find "$corpus" -type f | wc -l) inputs, $(cat "$corpus"/* | wc -c) bytes"
fi

echo "fuzz: ${passed} passed, ${failed} failed, 0 skipped"
((failed == 0))
