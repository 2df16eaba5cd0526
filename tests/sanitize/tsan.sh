#!/usr/bin/env bash
# ThreadSanitizer run of the threading tests: builds the library and the tests with clang
# -fsanitize=thread into build/tsan, runs them on every ISA of this target (unavailable ones
# report skipped), and ends with one line "tsan: N passed, N failed, N skipped". Exits non-zero
# if any test fails or TSan reports anything (TSan makes the program exit with 66).
#
# OpenMP under TSan: the library's worker threads are an OpenMP team, and TSan cannot see the
# synchronisation inside an uninstrumented OpenMP runtime, so a plain TSan run reports false
# races between a parallel region and the code after it. LLVM ships the fix with libomp:
# Archer (libarcher.so, an OMPT tool that tells TSan about OpenMP's barriers, fork/join and
# atomics); libomp loads it automatically in a TSan program, and TSAN_OPTIONS=
# ignore_noninstrumented_modules=1 (Archer's own advice) stops reports from inside libomp.
# With Archer active, the tests run as they are, teams included (test_concurrent_layers: 8
# callers x 1-thread contexts and 2 callers x 2-thread contexts; test_threads_bitwise: 1, 2, 3
# and 5 threads). Nothing is suppressed.
# Without Archer (not found, or not loaded), the sound subset runs instead: contexts of one
# thread only (a 1-thread call never forks: `if (nt > 1)`), i.e. test_concurrent_layers
# --no-omp-teams (8 caller threads on one layer), and test_threads_bitwise is not run.
#
#   tests/sanitize/tsan.sh            (env: MH_TSAN_JOBS, default nproc)
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
dir="$root/build/tsan"
jobs=${MH_TSAN_JOBS:-$(nproc)}
mkdir -p "$dir"

flags="-fsanitize=thread -fno-omit-frame-pointer -g"
echo "== tsan: configure and build ($dir)"
if ! cmake -S "$root" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
       -DCMAKE_CXX_COMPILER=clang++ -DMH_WERROR=ON "-DCMAKE_C_FLAGS=$flags" \
       "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=thread" "-DCMAKE_SHARED_LINKER_FLAGS=-fsanitize=thread" \
       >"$dir/build.log" 2>&1 ||
   ! cmake --build "$dir" -j "$jobs" --target test_concurrent_layers test_threads_bitwise \
       >>"$dir/build.log" 2>&1; then
  tail -n 40 "$dir/build.log"
  echo "tsan: 0 passed, 1 failed, 0 skipped"
  exit 1
fi

# the ISAs ctest would run (tests/CMakeLists.txt: MH_TEST_ISAS): the ISA registry's rows
# (src/dispatch/isa_list.h: X(ENUM, name, arch, ...)) for this architecture or any
case "$(uname -m)" in
  x86_64 | amd64) arch=x86_64 ;;
  aarch64 | arm64) arch=aarch64 ;;
  *) arch=none ;;
esac
isas=()
while read -r name row_arch; do
  [[ $row_arch == any || $row_arch == "$arch" ]] && isas+=("$name")
done < <(sed -n 's/^ *X([A-Z0-9_]*, \([a-z0-9_]*\), \([a-z0-9_]*\), .*/\1 \2/p' src/dispatch/isa_list.h)

export TSAN_OPTIONS="halt_on_error=0 exitcode=66 second_deadlock_stack=1 ignore_noninstrumented_modules=1${TSAN_OPTIONS:+ $TSAN_OPTIONS}"
# Archer: next to the clang libraries (libomp loads "libarcher.so" by itself when it is on the
# search path; naming it explicitly makes that independent of the search path)
archer=""
for cand in "$(clang -print-resource-dir 2>/dev/null)/../../libarcher.so" /usr/lib/llvm-*/lib/libarcher.so; do
  [[ -f $cand ]] && archer=$(readlink -f "$cand") && break
done
[[ -n $archer ]] && export OMP_TOOL_LIBRARIES="$archer"
# clang 14's TSan cannot map its shadow with the kernel's full mmap randomisation: run without
# ASLR when setarch can do it
norand=()
setarch "$(uname -m)" -R true 2>/dev/null && norand=(setarch "$(uname -m)" -R)

mode=teams
probe=""
[[ -n $archer ]] &&
  probe=$(ARCHER_OPTIONS=verbose=1 MH_ISA=scalar "${norand[@]}" "$dir/tests/test_threads_bitwise" 2>&1 || true)
if [[ $probe != *"Archer detected OpenMP application with TSan"* ]]; then
  mode=single
  echo "== tsan: Archer not available: running the 1-thread-context subset only"
else
  echo "== tsan: Archer active ($archer): OpenMP teams included"
fi

passed=0 failed=0 skipped=0
run() { # run NAME ISA COMMAND...
  local name=$1 isa=$2
  shift 2
  local log="$dir/$name.$isa.log" rc=0
  MH_ISA=$isa "${norand[@]}" "$@" >"$log" 2>&1 || rc=$?
  if ((rc == 77)); then
    skipped=$((skipped + 1))
    echo "   $name.$isa: skipped"
  elif ((rc == 0)) && ! grep -q "WARNING: ThreadSanitizer" "$log"; then
    passed=$((passed + 1))
    echo "   $name.$isa: passed"
  else
    failed=$((failed + 1))
    echo "   $name.$isa: FAILED (exit $rc, log $log)"
    grep -A 30 "WARNING: ThreadSanitizer" "$log" | head -n 60 || tail -n 30 "$log"
  fi
}

for isa in "${isas[@]}"; do
  if [[ $mode == teams ]]; then
    run test_concurrent_layers "$isa" "$dir/tests/test_concurrent_layers"
    run test_threads_bitwise "$isa" "$dir/tests/test_threads_bitwise"
  else
    run test_concurrent_layers "$isa" "$dir/tests/test_concurrent_layers" --no-omp-teams
  fi
done

echo "tsan: ${passed} passed, ${failed} failed, ${skipped} skipped"
((failed == 0))
