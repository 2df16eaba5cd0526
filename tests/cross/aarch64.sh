#!/usr/bin/env bash
# Cross-compiles the library and its tests for aarch64 (cmake/toolchain-aarch64.cmake, -Werror)
# into build/aarch64 and runs the ctest suite under qemu-user:
#   neon     qemu -cpu max,sve=off (no SVE): every .neon entry and the ISA-independent tests
#   scalar   the same CPU: the kernel-sensitive subset of the .scalar entries (below)
#   sve128   qemu -cpu max,sve-default-vector-length=16: the subset below, the prefill, bf16
#            compute, int8, NaN, token-major and split decode and threads tests, and the
#            dispatch tests
#   sve256   qemu -cpu max,sve-default-vector-length=32  \  the kernel-sensitive subset:
#   sve512   qemu -cpu max,sve-default-vector-length=64  /  kernels, GEMM, softmax, the layer,
#            decode and variant tests that run in seconds (qemu's length is in bytes)
# qemu-user emulates 256- and 512-bit SVE 10-50x slower than 128-bit, so the whole suite at
# those lengths takes most of an hour; the kernels (where the vector length matters) and the
# drivers' panel widths (which follow it) are covered by the subset. test_kernels runs every
# slot of the kernel table on each ISA, so the tests left out of the SVE runs (DCMHA,
# CollabHead's invariants, paged caches, gating, limits and API checks, no-allocation) run
# the same drivers under NEON here and natively on x86 (the whole suite at 128 bits took
# 115 s of the 385 s stage). The scalar kernels are the C code every native stage runs, and
# the .neon entries run the drivers on aarch64, so of the .scalar entries the subset runs
# here too (the rest took 200 s of the 430 s stage).
# Installs what is missing first (Debian 12: arm64 foreign architecture, cross gcc, qemu-user,
# libsleef-dev:arm64). Ends with one line "aarch64: N passed, N failed, N skipped" over all runs
# and exits non-zero if anything failed.
#
#   MH_CROSS_RUNS="neon sve256"   only these runs (default: neon scalar sve128 sve256 sve512)
#   MH_CROSS_SVE_FULL=1           the whole suite in the SVE runs, every .scalar entry (slow)
#
# qemu-user accepts a guest's setrlimit(RLIMIT_AS) but does not apply it, so a test relying on
# it to provoke MH_ERR_OUT_OF_MEMORY could really allocate many GB and bring in the host's OOM
# killer (test_limits now detects this and skips that part). As a safety net the emulator
# processes run under `ulimit -v` (MH_CROSS_VMEM_KB, default 12 GB of address space).
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
build="$root/build/aarch64"

# ---------------------------------------------------------------- packages (only if missing)
packages=(cmake make pkg-config gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
          libsleef-dev:arm64)
sudo=""
[[ $(id -u) -ne 0 ]] && sudo=sudo
missing=()
for p in "${packages[@]}"; do
  # dpkg-query, not dpkg -s: with arm64 added, a name installed for both architectures is
  # ambiguous to dpkg -s
  dpkg-query -W -f='${Status}\n' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "== installing: ${missing[*]}"
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    $sudo dpkg --add-architecture arm64
  fi
  $sudo apt-get -o DPkg::Lock::Timeout=600 update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get -o DPkg::Lock::Timeout=600 install -y -q "${missing[@]}"
fi

# ---------------------------------------------------------------- build
jobs=$(nproc)
passed=0 failed=0 skipped=0
t_start=$SECONDS
mkdir -p "$root/build"
echo "== aarch64: configure and build ($build)"
if ! cmake -S "$root" -B "$build" -DCMAKE_TOOLCHAIN_FILE="$root/cmake/toolchain-aarch64.cmake" \
       -DMH_WERROR=ON -DMH_QEMU_CPU=max,sve=off >"$build.log" 2>&1 ||
   ! cmake --build "$build" -j "$jobs" >>"$build.log" 2>&1; then
  echo "== aarch64: BUILD FAILED (log: $build.log)"
  tail -n 40 "$build.log"
  echo "aarch64: 0 passed, 1 failed, 0 skipped"
  exit 1
fi
echo "== aarch64: built in $((SECONDS - t_start)) s"

# run NAME QEMU_CPU [ctest args...]: point the emulator at QEMU_CPU (a reconfigure only rewrites
# the test commands), run ctest, add up its summary.
run() {
  local name=$1 cpu=$2
  shift 2
  local t0=$SECONDS out total nfail nskip
  if ! cmake "$build" -DMH_QEMU_CPU="$cpu" >>"$build.log" 2>&1; then
    echo "== $name: reconfigure FAILED (log: $build.log)"
    failed=$((failed + 1))
    return
  fi
  echo "== $name: ctest under qemu -cpu $cpu $*"
  out=$(cd "$build" && ulimit -v "${MH_CROSS_VMEM_KB:-12582912}" &&
        ctest --output-on-failure -j "$jobs" "$@" 2>&1) || true
  echo "$out" | grep -E "Test +#|tests passed|Failed|Skipped|FAIL" || true
  total=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of \([0-9]*\).*/\2/p')
  nfail=$(echo "$out" | sed -n 's/.*tests passed, \([0-9]*\) tests\{0,1\} failed out of.*/\1/p')
  nskip=$(echo "$out" | grep -cE '^[[:space:]]*[0-9]+ - .*\(Skipped\)$' || true)
  if [[ -z "$total" ]]; then
    echo "== $name: ctest produced no summary"
    echo "$out" | tail -n 20
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + total - nfail - nskip))
  failed=$((failed + nfail))
  skipped=$((skipped + nskip))
  echo "== $name: $((total - nfail - nskip)) passed, $nfail failed, $nskip skipped of $total in $((SECONDS - t0)) s"
}

subset='(kernels|gemm|softmax_invariants|decode|gqa_invariants|layer_oracle|overlap|moh|moh_torch_vectors|torch_vectors|collab_oracle|rotary_layers)'
# at 128 bits also prefill, bf16 compute, int8 caches, NaN, token-major and split decode, and
# threads on the SVE kernels
sve_filter=(-R "(${subset}|attention_oracle|bf16_attention|bf16_layers|int8|int8_cache|nan|decode_layouts|partial_attention|threads_bitwise)\\.sve\$|dispatch")
wide_filter=(-R "${subset}\\.sve\$|dispatch")
if [[ "${MH_CROSS_SVE_FULL:-0}" == 1 ]]; then # the whole suite in the SVE runs, every scalar entry
  subset='.*'
  sve_filter=()
  wide_filter=()
fi
for r in ${MH_CROSS_RUNS:-neon scalar sve128 sve256 sve512}; do
  case $r in
    neon) run neon "max,sve=off" -E '\.(scalar|sve)$' ;;
    scalar) run scalar "max,sve=off" -R "${subset}\\.scalar\$" ;;
    sve128) run sve128 "max,sve-default-vector-length=16" "${sve_filter[@]}" ;;
    sve256) run sve256 "max,sve-default-vector-length=32" "${wide_filter[@]}" ;;
    sve512) run sve512 "max,sve-default-vector-length=64" "${wide_filter[@]}" ;;
    *) echo "== unknown run '$r'"; failed=$((failed + 1)) ;;
  esac
done

echo "== aarch64: total $((SECONDS - t_start)) s"
echo "aarch64: ${passed} passed, ${failed} failed, ${skipped} skipped"
((failed == 0))
