#!/usr/bin/env bash
# check_symbols.sh HEADER LIBMULTIHEAD.so [LIBMULTIHEAD.a]
#
# The shared library exports exactly the public API:
#   exported = every line of `nm -D --defined-only` whose type letter is one of
#              T D B R G S V W i u (code, data, bss, read-only, small data, weak, ifunc,
#              unique global: symbols defined in a section that the dynamic linker can bind),
#   minus type A (absolute: linker-defined constants and version nodes, not code or data),
#   minus the toolchain's own _init _fini (crti.o) _edata _end __bss_start (linker markers,
#   reported as D/B by recent binutils).
#   Rule 1: every exported name (without an @version suffix) matches ^mh_[a-z0-9_]+$.
#   Rule 2: the exported names are exactly the functions declared MH_API in HEADER (an extra
#           mh_ name is an internal helper that escaped; a missing one lost its MH_API).
# The static library (optional third argument) must not claim names outside the prefix:
#   Rule 3: every external defined symbol of `nm -g --defined-only` on the archive
#           (types T D B R G S V W C i u) matches ^mh_.
set -euo pipefail
export LC_ALL=C
header=$1 so=$2 archive=${3:-}
fail=0
indent() { printf '%s\n' "$1" | sed 's/^/  /'; }

[[ -f $so && -f $header ]] || { echo "FAIL: missing $so or $header"; exit 1; }
exported=$(nm -D --defined-only --format=posix "$so" |
  awk '$2 ~ /^[TDBRGSVWiu]$/ { sub(/@.*/, "", $1); print $1 }' |
  { grep -vxE '_init|_fini|_edata|_end|__bss_start' || true; } | sort -u)
[[ -n $exported ]] || { echo "FAIL: $so exports nothing"; exit 1; }

bad=$(grep -vxE 'mh_[a-z0-9_]+' <<<"$exported" || true)
if [[ -n $bad ]]; then
  echo "FAIL: $so exports symbols outside mh_*:"; indent "$bad"; fail=1
fi

# one declaration per line: the first mh_name( on each MH_API line
declared=$(grep -E '^MH_API ' "$header" | while IFS= read -r line; do
  grep -oE 'mh_[a-z0-9_]+\(' <<<"$line" | head -n 1 | tr -d '('; done | sort -u)
extra=$(comm -23 <(echo "$exported") <(echo "$declared"))
missing=$(comm -13 <(echo "$exported") <(echo "$declared"))
if [[ -n $extra ]]; then
  echo "FAIL: exported but not declared MH_API in $(basename "$header"):"; indent "$extra"; fail=1
fi
if [[ -n $missing ]]; then
  echo "FAIL: declared MH_API but not exported:"; indent "$missing"; fail=1
fi
echo "$(basename "$so"): $(wc -l <<<"$exported") exported symbols, $(wc -l <<<"$declared") declared MH_API"

if [[ -n $archive ]]; then
  globals=$(nm -g --defined-only --format=posix "$archive" 2>/dev/null |
    awk 'NF >= 2 && $2 ~ /^[TDBRGSVWCiu]$/ { print $1 }' | sort -u)
  bad=$(grep -vE '^mh_' <<<"$globals" || true)
  if [[ -n $bad ]]; then
    echo "FAIL: $archive defines global symbols outside mh_*:"; indent "$bad"; fail=1
  else
    echo "$(basename "$archive"): $(wc -l <<<"$globals") global symbols, all mh_*"
  fi
fi
exit $fail
