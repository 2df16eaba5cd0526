# Cross build for aarch64 Linux with the Debian cross toolchain (gcc-aarch64-linux-gnu), run
# under qemu-user (qemu-aarch64) by ctest:
#   cmake -S . -B build/aarch64 -DCMAKE_TOOLCHAIN_FILE=cmake/toolchain-aarch64.cmake
#         [-DMH_QEMU_CPU=max,sve-default-vector-length=16]
# Needs gcc-aarch64-linux-gnu, qemu-user, libsleef-dev:arm64 and libgomp1:arm64
# (tests/cross/aarch64.sh installs them).
#
# MH_QEMU_CPU is the emulated CPU (qemu's -cpu). qemu's sve-default-vector-length is in
# BYTES: 16 = 128-bit SVE, 32 = 256-bit, 64 = 512-bit (also qemu-user's default for "max"),
# 256 = 2048-bit. "max,sve=off" is a CPU without SVE (the NEON kernels only). Changing it
# only needs a reconfigure (it goes into the test commands, not into any compiled object).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

set(MH_CROSS_TRIPLE aarch64-linux-gnu)
set(CMAKE_C_COMPILER ${MH_CROSS_TRIPLE}-gcc)
set(CMAKE_CXX_COMPILER ${MH_CROSS_TRIPLE}-g++)

# Headers and libraries of the target: the cross sysroot (libc, libgomp) and Debian's multiarch
# arm64 directories (libsleef-dev:arm64). Programs (pkg-config, ...) come from the host.
set(CMAKE_FIND_ROOT_PATH /usr/${MH_CROSS_TRIPLE})
set(CMAKE_LIBRARY_ARCHITECTURE ${MH_CROSS_TRIPLE})
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE BOTH)

# pkg-config must see the arm64 .pc files only (sleef.pc from libsleef-dev:arm64).
set(ENV{PKG_CONFIG_LIBDIR} /usr/lib/${MH_CROSS_TRIPLE}/pkgconfig:/usr/share/pkgconfig)
set(ENV{PKG_CONFIG_PATH} "")

# ctest runs every test program through qemu-user; -L is the target's root for ld.so and libc.
# LD_LIBRARY_PATH makes the programs load the libc of that same root (libc6-arm64-cross, the one
# they were linked against): otherwise ld.so finds libc6:arm64's /lib/aarch64-linux-gnu/libc.so.6
# first, a different build of glibc than the cross ld.so, and the mix hangs in pthread_create
# (so in every OpenMP region). SLEEF still comes from /usr/lib/aarch64-linux-gnu.
set(MH_QEMU_CPU "max,sve-default-vector-length=32" CACHE STRING
    "qemu -cpu for running the tests (sve-default-vector-length is in bytes: 16/32/64 = 128/256/512-bit SVE; max,sve=off = no SVE)")
find_program(MH_QEMU_AARCH64 NAMES qemu-aarch64 qemu-aarch64-static REQUIRED)
set(CMAKE_CROSSCOMPILING_EMULATOR ${MH_QEMU_AARCH64} -L /usr/${MH_CROSS_TRIPLE}
    -E LD_LIBRARY_PATH=/usr/${MH_CROSS_TRIPLE}/lib -cpu ${MH_QEMU_CPU})
