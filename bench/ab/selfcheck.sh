#!/usr/bin/env bash
# mh_ab's own checks (tests/run.sh, stage "ab"): the same build against itself gives the same
# bits on every path it times (the library is deterministic, so any difference is the tool's),
# the timing mode runs, and bad usage, a path that is not a library and a bad ISA name are
# refused with their exit status. Usage: bench/ab/selfcheck.sh BUILD_DIR (bench/run.sh's:
# build/release, configured with -DMH_BUILD_BENCH=ON).
set -euo pipefail
build=${1:?usage: bench/ab/selfcheck.sh BUILD_DIR}
ab=$build/bench/mh_ab lib=$build/libmultihead.so
fail=0

# expect STATUS PATTERN ARGS...: mh_ab ARGS exits with STATUS and prints PATTERN (stdout or stderr)
expect() {
  local want=$1 pattern=$2 out rc=0
  shift 2
  out=$("$ab" "$@" 2>&1) || rc=$?
  if [[ $rc -ne $want ]] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: mh_ab $* (exit $rc, expected $want and /$pattern/):"
    echo "$out"
    fail=1
  else
    echo "ok: mh_ab $* -> $(grep -E -- "$pattern" <<<"$out" | head -n 1)"
  fi
}

expect 0 'outputs bitwise equal' --check --m=1000 "$lib" "$lib"
expect 0 'outputs bitwise equal' --check --m=777 --kv=i8 --layout=token --kv-heads=8 "$lib" "$lib"
expect 0 'outputs bitwise equal' --check --mode=prefill --n=200 --heads=8 --dim=64 "$lib" "$lib"
expect 0 'outputs bitwise equal' --check --mode=prefill --n=96 --kv=f16 --layout=head --threads=2 "$lib" "$lib"
expect 0 'outputs bitwise equal' --check --mode=prefill --n=200 --heads=8 --dim=64 --heads-kept=3 "$lib" "$lib"
expect 0 'outputs bitwise equal' --check --mode=layer --n=70 --heads=4 --kv-heads=2 --dim=32 --d-model=1100 "$lib" "$lib"
expect 0 '^B/A [0-9.]+: the median of the 3 adjacent pairs' --rounds=3 --m=512 --copies=2 "$lib" "$lib"
expect 0 '^layer N=9 d_model=128 H=4 Hkv=4 D=32' --rounds=3 --mode=layer --n=9 --heads=4 --dim=32 "$lib" "$lib"
expect 2 'takes no --m' --mode=layer --m=64 "$lib" "$lib"
expect 2 'is for --mode=layer' --d-model=64 "$lib" "$lib"
expect 2 'bad argument' --bogus "$lib" "$lib"
expect 2 'bad argument' --kv=f64 "$lib" "$lib"
expect 2 'at most --heads' --heads-kept=9 --heads=8 "$lib" "$lib"
expect 2 'two library paths' "$lib"
expect 2 'names no ISA' --isa=mmx "$lib" "$lib"
expect 3 'cannot load' /nonexistent/libmultihead.so "$lib"
expect 3 'not a multihead library' "$lib" "$(ldd "$ab" | awk '/libc\.so/ {print $3}')"
((fail == 0)) && echo "mh_ab selfcheck: passed"
exit $fail
