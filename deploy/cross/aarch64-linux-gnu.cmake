# Toolchain for 64-bit ARM Linux (Raspberry Pi OS 64-bit, Debian 12 arm64) on a Debian 12 PC.
# Compilers come from crossbuild-essential-arm64; libraries are Debian's `:arm64` multiarch
# packages, installed beside the native ones in /usr/lib/aarch64-linux-gnu with the shared
# /usr/include. protoc runs on the build machine (protobuf-compiler) while the code links arm64
# libprotobuf; ctest and doctest_discover_tests run the arm64 programs under qemu-user.
# deploy/cross/build-arm64.sh installs all of it and drives the build.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(TERN_CROSS_TRIPLET aarch64-linux-gnu)

set(CMAKE_C_COMPILER ${TERN_CROSS_TRIPLET}-gcc)
set(CMAKE_CXX_COMPILER ${TERN_CROSS_TRIPLET}-g++)
set(CMAKE_LIBRARY_ARCHITECTURE ${TERN_CROSS_TRIPLET})

# Two -dev packages (libyaml-cpp-dev, prometheus-cpp-dev) are not co-installable with their amd64
# twins, so the build script unpacks their arm64 versions into this folder instead; its files take
# precedence, the rest is found in the multiarch locations under /.
set(TERN_CROSS_OVERLAY "/opt/tern-cross/${TERN_CROSS_TRIPLET}" CACHE PATH
    "Unpacked arm64 -dev packages that cannot be installed beside the native ones")
# try_compile projects re-read this file without the cache: hand the overlay on to them.
list(APPEND CMAKE_TRY_COMPILE_PLATFORM_VARIABLES TERN_CROSS_OVERLAY)

# Everything is searched in the overlay, then in / with the arm64 library directories only
# (CMAKE_LIBRARY_ARCHITECTURE picks lib/aarch64-linux-gnu; the x86_64 ones are never looked at).
set(CMAKE_FIND_ROOT_PATH ${TERN_CROSS_OVERLAY} /)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
# Programs run on the build machine: the host protoc generates the code (the generated sources do
# not depend on the architecture; protoc and libprotobuf are the same Debian version).
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config (libsystemd) reads only the arm64 and architecture-independent .pc files.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/${TERN_CROSS_TRIPLET}/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# qemu-user runs the test programs: with -L it loads the arm64 dynamic loader and libc from the
# cross toolchain's tree and falls back to / (the :arm64 libraries) for the rest.
find_program(TERN_QEMU_AARCH64 NAMES qemu-aarch64-static qemu-aarch64)
if(TERN_QEMU_AARCH64)
  set(CMAKE_CROSSCOMPILING_EMULATOR ${TERN_QEMU_AARCH64} -L /usr/${TERN_CROSS_TRIPLET})
endif()
