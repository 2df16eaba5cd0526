#!/usr/bin/env bash
# The packaging test: runs the README's "Build and install" block (it builds build/lib and
# installs to $HOME/.local, with HOME=build/package/home), then checks, each a pass/fail item:
#   readme-install      the README block marked <!-- package-test: install --> runs as written
#   install-layout      the installed files exist: header, libmultihead.so.X.Y.Z with its
#                       .so.X/.so links, libmultihead.a, multiheadConfig.cmake,
#                       multiheadConfigVersion.cmake, the exported targets, multihead.pc,
#                       multihead-static.pc; the SONAME is libmultihead.so.<major>
#                       (<major>.<minor> while major is 0)
#   symbols-selftest    check_symbols.sh rejects a library exporting a non-mh_ symbol
#   symbols             the installed .so exports exactly the MH_API functions of multihead.h
#                       and nothing outside mh_*; the .a defines no global outside mh_*
#   cmake-consumer      tests/package/consumer configures with find_package(multihead 0.4
#                       COMPONENTS shared static) from the prefix, builds against
#                       multihead::multihead and multihead::multihead_static, and both
#                       programs run and pass; the shared one loads libmultihead from the
#                       prefix, the static one does not need it at all
#   cmake-consumer-cxx  the same as a C++-only project (-DMH_CONSUMER_LANG=CXX: project(...
#                       CXX) and main.cc; the package finds OpenMP for C++)
#   cmake-version       find_package(multihead <major+1>.0) is refused (SameMajorVersion)
#   examples-standalone docs/examples configured on its own against the prefix, built, and
#                       its ctest passes
#   readme-pkgconfig    the README block marked <!-- package-test: pkg-config --> runs as
#                       written on app.c (= consumer/main.c): the shared program runs and loads
#                       libmultihead from the prefix (the block's rpath), the static one runs and
#                       has no libmultihead.so in `readelf -d`
#   subproject          add_subdirectory(multihead) in a parent project: its build has the
#                       library and no test or example target (configured, not built)
#   clang-library-gcc-consumer  (when gcc and clang with OpenMP are installed) the library built by clang,
#                       installed to build/package/prefix-clang, consumed by gcc: the static
#                       program links and runs through find_package and through pkg-config
# Ends with one line "package: N passed, N failed, 0 skipped"; exits non-zero on a failure.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
start=$SECONDS
out=$root/build/package
prefix=$out/home/.local # the README installs to $HOME/.local
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

# readme_block NAME: the shell lines of README.md's ```sh block after <!-- package-test: NAME -->.
readme_block() {
  awk -v m="<!-- package-test: $1 -->" '$0 == m { f = 1; next } f && /^```sh/ { f = 2; next }
    f == 2 && /^```/ { exit } f == 2 { print }' README.md
}

readme_install() {
  local block
  block=$(readme_block install)
  [[ -n $block ]] || { echo "README.md has no install block"; return 1; }
  echo "$block"
  rm -rf "${out:?}/home"
  mkdir -p "$out/home"
  HOME=$out/home bash -euo pipefail -c "$block"
}
check readme-install readme_install
if ((failed)); then summary; exit 1; fi

version=$(sed -n 's/^#define MH_VERSION_\(MAJOR\|MINOR\|PATCH\) \([0-9]*\)$/\2/p' include/multihead.h | paste -sd.)
major=${version%%.*}
# the soname's version: MAJOR, or MAJOR.MINOR while MAJOR is 0 (see CMakeLists.txt)
if [[ $major == 0 ]]; then sover=${version%.*}; else sover=$major; fi
# the libdir GNUInstallDirs chose (lib, lib64, ...)
lib=$(dirname "$(find "$prefix" -name libmultihead.a | head -n 1)")
libdir=${lib#"$prefix"/}

install_layout() {
  local ok=0 f
  for f in include/multihead.h "$libdir/libmultihead.so.$version" "$libdir/libmultihead.a" \
           "$libdir/cmake/multihead/multiheadConfig.cmake" "$libdir/cmake/multihead/multiheadConfigVersion.cmake" \
           "$libdir/cmake/multihead/multiheadTargets.cmake" "$libdir/cmake/multihead/multiheadStaticTargets.cmake" \
           "$libdir/pkgconfig/multihead.pc" "$libdir/pkgconfig/multihead-static.pc"; do
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
  cmake -S "$consumer" -B "$d" -DCMAKE_PREFIX_PATH="$prefix" -DMH_REQUEST_VERSION=0.4 | tee "$d.configure.log"
  grep -q "found multihead $version in $lib/cmake/multihead" "$d.configure.log"
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

cmake_consumer_cxx() {
  local d=$out/consumer-cxx
  rm -rf "$d"
  cmake -S "$consumer" -B "$d" -DCMAKE_PREFIX_PATH="$prefix" -DMH_CONSUMER_LANG=CXX
  cmake --build "$d"
  "$d/consumer_shared"
  "$d/consumer_static"
  no_multihead_needed "$d/consumer_static"
}
check cmake-consumer-cxx cmake_consumer_cxx

examples_standalone() {
  local d=$out/examples
  rm -rf "$d"
  cmake -S "$root/docs/examples" -B "$d" -DCMAKE_PREFIX_PATH="$prefix"
  cmake --build "$d" -j "$jobs"
  (cd "$d" && ctest --output-on-failure)
}
check examples-standalone examples_standalone

readme_pkgconfig() {
  local d=$out/consumer-pkgconfig block
  block=$(readme_block pkg-config)
  [[ -n $block ]] || { echo "README.md has no pkg-config block"; return 1; }
  echo "$block"
  rm -rf "$d"
  mkdir -p "$d"
  cp "$consumer/main.c" "$d/app.c"
  (cd "$d" && HOME=$out/home bash -euo pipefail -c "$block")
  "$d/app"
  resolves_in_prefix "$d/app"
  "$d/app_static"
  no_multihead_needed "$d/app_static"
  readelf -d "$d/app_static" | grep NEEDED
}
check readme-pkgconfig readme_pkgconfig

# add_subdirectory(multihead): the parent's build gets the libraries, no test targets.
subproject() {
  local d=$out/subproject
  rm -rf "$d"
  mkdir -p "$d/src"
  printf '%s\n' 'cmake_minimum_required(VERSION 3.20)' 'project(parent C)' \
    "add_subdirectory(\"$root\" multihead)" 'add_executable(app main.c)' \
    'target_link_libraries(app PRIVATE multihead::multihead)' >"$d/src/CMakeLists.txt"
  cp "$consumer/main.c" "$d/src/main.c"
  cmake -S "$d/src" -B "$d/build"
  local targets
  targets=$(cmake --build "$d/build" --target help)
  grep -q '\.\.\. app$' <<<"$targets"
  grep -q '\.\.\. multihead$' <<<"$targets"
  if grep -E '\.\.\. (test_|example_)' <<<"$targets"; then
    echo "the parent's build has the test targets above"
    return 1
  fi
}
check subproject subproject

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
  libs=$(PKG_CONFIG_PATH=$p/lib/pkgconfig pkg-config --libs multihead-static)
  echo "clang-built archive, gcc, pkg-config multihead-static: $libs"
  # shellcheck disable=SC2086
  gcc -std=c11 -o "$d/consumer_static_pc" "$consumer/main.c" -I"$p/include" $libs
  "$d/consumer_static_pc"
}
if command -v clang >/dev/null && command -v gcc >/dev/null &&
   echo 'int main(void) { return 0; }' | clang -fopenmp -x c - -o "$out/omp-probe" >/dev/null 2>&1; then
  check clang-library-gcc-consumer mixed_compilers
fi

summary
