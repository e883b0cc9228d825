# Cross-compiles the course for 64-bit Arm with Debian's g++-aarch64-linux-gnu, against the arm64
# -dev packages that multiarch installs beside the host's (/usr/lib/aarch64-linux-gnu), so no
# separate sysroot is needed. scripts/platforms/aarch64.sh configures with it:
#
#   cmake -S . -B build/platforms/aarch64 --toolchain scripts/platforms/aarch64-toolchain.cmake
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
# find_package then reads arm64's CMake files (fmt, GTest, benchmark), never the host's; Eigen,
# CLI11 and nlohmann-json are header-only and architecture-independent.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# ctest, and gtest_discover_tests when it lists a test program's tests after the build, run
# the arm64 programs under user-mode emulation. No -L: the arm64 loader and libraries
# (libc6:arm64 and the rest) are installed at their multiarch paths, where qemu finds them.
find_program(ATTN_QEMU_AARCH64 qemu-aarch64-static REQUIRED
             DOC "user-mode emulator for arm64 programs (Debian package qemu-user-static)")
set(CMAKE_CROSSCOMPILING_EMULATOR ${ATTN_QEMU_AARCH64})
