#!/usr/bin/env bash
# The packaging test: builds the library (Release, -Werror) in build/package, installs it to
# build/package/prefix with `cmake --install`, then checks, each a pass/fail item:
#   build-install       configure (-DMH_WERROR=ON, tests off), build, cmake --install
#   install-layout      the installed files exist: header, libmultihead.so.X.Y.Z with its
#                       .so.X/.so links, libmultihead.a, multiheadConfig.cmake,
#                       multiheadConfigVersion.cmake, the exported targets, multihead.pc;
#                       the SONAME is libmultihead.so.<major> (<major>.<minor> while major is 0)
#   symbols-selftest    check_symbols.sh rejects a library exporting a non-mh_ symbol
#   symbols             the installed .so exports exactly the MH_API functions of multihead.h
#                       and nothing outside mh_*; the .a defines no global outside mh_*
#   cmake-consumer      tests/package/consumer configures with find_package(multihead 0.2
#                       COMPONENTS shared static) from the prefix, builds against
#                       multihead::multihead and multihead::multihead_static, and both
#                       programs run and pass; the shared one loads libmultihead from the
#                       prefix, the static one does not need it at all
#   cmake-version       find_package(multihead <major+1>.0) is refused (SameMajorVersion)
#   pkgconfig-shared    cc main.c $(pkg-config --cflags --libs multihead) builds and runs
#                       (rpath to the prefix's libdir), loading libmultihead from the prefix
#   pkgconfig-static    cc main.c $(pkg-config --cflags multihead) with the archive and
#                       $(pkg-config --static --libs multihead) builds and runs
#   clang-library-gcc-consumer  (when gcc and clang with OpenMP are installed) the library built by clang,
#                       installed to build/package/prefix-clang, consumed by gcc: the static
#                       program links and runs through find_package and through pkg-config
# Ends with one line "package: N passed, N failed, 0 skipped"; exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
start=$SECONDS
out=$root/build/package
prefix=$out/prefix
consumer=$root/tests/package/consumer
jobs=$(nproc 2>/dev/null || echo 2)
passed=0 failed=0
mkdir -p "$out"

# check NAME COMMAND...: one pass/fail item; its output goes to build/package/NAME.log. The
# command runs in a subshell with errexit on (inside an `if` bash would ignore set -e), so
# any failing line of a check function fails the check.
check() {
  local name=$1 rc=0
  shift
  set +e
  (set -e; "$@") >"$out/$name.log" 2>&1
  rc=$?
  set -e
  if ((rc == 0)); then
    echo "== $name: ok"
    passed=$((passed + 1))
  else
    echo "== $name: FAILED (log: build/package/$name.log)"
    tail -n 30 "$out/$name.log" | sed 's/^/   /'
    failed=$((failed + 1))
  fi
}

summary() {
  echo "package: took $((SECONDS - start)) s"
  echo "package: ${passed} passed, ${failed} failed, 0 skipped"
  ((failed == 0))
}

build_and_install() {
  cmake -S "$root" -B "$out/build" -DCMAKE_BUILD_TYPE=Release -DMH_WERROR=ON \
    -DMH_BUILD_TESTS=OFF -DMH_BUILD_BENCH=OFF \
    -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib -DCMAKE_INSTALL_INCLUDEDIR=include
  cmake --build "$out/build" -j "$jobs"
  rm -rf "$prefix"
  cmake --install "$out/build" --prefix "$prefix"
}
check build-install build_and_install
if ((failed)); then summary; exit 1; fi

version=$(sed -n 's/^#define MH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/multihead.h | paste -sd.)
major=${version%%.*}
# the soname's version: MAJOR, or MAJOR.MINOR while MAJOR is 0 (see CMakeLists.txt)
if [[ $major == 0 ]]; then sover=${version%.*}; else sover=$major; fi
lib=$prefix/lib

install_layout() {
  local ok=0 f
  for f in include/multihead.h lib/libmultihead.so.$version lib/libmultihead.a \
           lib/cmake/multihead/multiheadConfig.cmake lib/cmake/multihead/multiheadConfigVersion.cmake \
           lib/cmake/multihead/multiheadTargets.cmake lib/cmake/multihead/multiheadStaticTargets.cmake \
           lib/pkgconfig/multihead.pc; do
    [[ -f $prefix/$f && ! -L $prefix/$f ]] || { echo "missing file: $f"; ok=1; }
  done
  [[ $(readlink "$lib/libmultihead.so.$sover") == "libmultihead.so.$version" ]] ||
    { echo "libmultihead.so.$sover does not point at libmultihead.so.$version"; ok=1; }
  [[ $(readlink "$lib/libmultihead.so") == "libmultihead.so.$sover" ]] ||
    { echo "libmultihead.so does not point at libmultihead.so.$sover"; ok=1; }
  local soname
  soname=$(readelf -d "$lib/libmultihead.so.$version" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
  echo "version $version, SONAME $soname"
  [[ $soname == "libmultihead.so.$sover" ]] || { echo "SONAME is '$soname'"; ok=1; }
  ar t "$lib/libmultihead.a" | grep -q . || { echo "empty archive"; ok=1; }
  return $ok
}
check install-layout install_layout

symbols_selftest() {
  local d=$out/selftest
  mkdir -p "$d"
  printf '%s\n' '__attribute__((visibility("default"))) unsigned mh_version_number(void) { return 1; }' \
    '__attribute__((visibility("default"))) int leaked_helper(void) { return 2; }' >"$d/leak.c"
  cc -shared -fPIC -o "$d/libleak.so" "$d/leak.c"
  if tests/package/check_symbols.sh include/multihead.h "$d/libleak.so"; then
    echo "the checker accepted a library exporting leaked_helper"
    return 1
  fi
  echo "(the failure above is expected: the checker refused the leaking library)"
}
check symbols-selftest symbols_selftest
check symbols tests/package/check_symbols.sh "$prefix/include/multihead.h" "$lib/libmultihead.so" "$lib/libmultihead.a"

# resolves_in_prefix EXE: libmultihead.so.X is loaded from the prefix's libdir.
resolves_in_prefix() {
  local where
  where=$(ldd "$1" | awk '/libmultihead\.so/ { print $3 }')
  echo "$1: libmultihead from ${where:-nowhere}"
  [[ $(realpath "$where") == "$(realpath "$lib/libmultihead.so.$version")" ]]
}
# no_multihead_needed EXE: a statically linked consumer has no DT_NEEDED on libmultihead.
no_multihead_needed() {
  if readelf -d "$1" | grep -q 'NEEDED.*libmultihead'; then
    echo "$1 needs libmultihead.so"
    return 1
  fi
}

cmake_consumer() {
  local d=$out/consumer-cmake
  rm -rf "$d"
  cmake -S "$consumer" -B "$d" -DCMAKE_PREFIX_PATH="$prefix" -DMH_REQUEST_VERSION=0.2 | tee "$d.configure.log"
  grep -q "found multihead $version in $prefix/lib/cmake/multihead" "$d.configure.log"
  cmake --build "$d"
  "$d/consumer_shared"
  "$d/consumer_static"
  resolves_in_prefix "$d/consumer_shared"
  no_multihead_needed "$d/consumer_static"
}
check cmake-consumer cmake_consumer

cmake_version() {
  local d=$out/consumer-version
  rm -rf "$d"
  if cmake -S "$consumer" -B "$d" -DCMAKE_PREFIX_PATH="$prefix" -DMH_REQUEST_VERSION=$((major + 1)).0 \
       >"$d.log" 2>&1; then
    cat "$d.log"
    echo "find_package(multihead $((major + 1)).0) accepted version $version"
    return 1
  fi
  cat "$d.log"
  # refused for the version, not for anything else
  tr -s ' \n' '  ' <"$d.log" | grep -q "compatible with requested version"
  echo "(the failure above is expected: version $((major + 1)).0 was refused)"
}
check cmake-version cmake_version

export PKG_CONFIG_PATH=$lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}
pkgconfig_shared() {
  local d=$out/consumer-pkgconfig
  mkdir -p "$d"
  [[ $(pkg-config --modversion multihead) == "$version" ]]
  local flags
  flags=$(pkg-config --cflags --libs multihead)
  echo "pkg-config --cflags --libs multihead: $flags"
  # shellcheck disable=SC2086
  cc -std=c11 -Wall -Wextra -Werror -o "$d/consumer_shared" "$consumer/main.c" $flags \
    -Wl,-rpath,"$(pkg-config --variable=libdir multihead)"
  "$d/consumer_shared"
  resolves_in_prefix "$d/consumer_shared"
}
check pkgconfig-shared pkgconfig_shared

pkgconfig_static() {
  local d=$out/consumer-pkgconfig
  mkdir -p "$d"
  local cflags libs
  cflags=$(pkg-config --cflags multihead)
  # -l:libmultihead.a picks the archive where -lmultihead would pick the .so
  libs=$(pkg-config --static --libs multihead | sed 's/-lmultihead\b/-l:libmultihead.a/')
  echo "pkg-config --static --libs multihead (archive forced): $libs"
  # shellcheck disable=SC2086
  cc -std=c11 -Wall -Wextra -Werror -o "$d/consumer_static" "$consumer/main.c" $cflags $libs
  "$d/consumer_static"
  no_multihead_needed "$d/consumer_static"
}
check pkgconfig-static pkgconfig_static

# A static library built by clang calls LLVM's OpenMP runtime (__kmpc_*), which gcc's libgomp
# does not provide: the package must hand a gcc consumer the archive's own runtime.
mixed_compilers() {
  local b=$out/build-clang p=$out/prefix-clang d=$out/consumer-mixed
  CC=clang cmake -S "$root" -B "$b" -DCMAKE_BUILD_TYPE=Release -DMH_BUILD_TESTS=OFF \
    -DMH_BUILD_BENCH=OFF -DCMAKE_INSTALL_LIBDIR=lib
  cmake --build "$b" -j "$jobs"
  rm -rf "$p" "$d"
  cmake --install "$b" --prefix "$p"
  CC=gcc cmake -S "$consumer" -B "$d" -DCMAKE_PREFIX_PATH="$p"
  cmake --build "$d"
  "$d/consumer_static"
  "$d/consumer_shared"
  local libs
  libs=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --static --libs multihead | sed 's/-lmultihead\b/-l:libmultihead.a/')
  echo "clang-built archive, gcc, pkg-config --static: $libs"
  # shellcheck disable=SC2086
  gcc -std=c11 -o "$d/consumer_static_pc" "$consumer/main.c" -I"$p/include" $libs
  "$d/consumer_static_pc"
}
if command -v clang >/dev/null && command -v gcc >/dev/null &&
   echo 'int main(void) { return 0; }' | clang -fopenmp -x c - -o "$out/omp-probe" >/dev/null 2>&1; then
  check clang-library-gcc-consumer mixed_compilers
fi

summary
