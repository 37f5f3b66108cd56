#!/usr/bin/env bash
# Installs the system packages the tests need, when they are missing (Debian/Ubuntu, as root):
#   always:      fuse3 (fusermount3, for the real `energon mount` tests) and NASM (the assembler
#                for libjpeg-turbo's x86 SIMD code, which energon-reader builds from source; without
#                it JPEG decodes slower, and corrupt JPEGs may decode differently from Pillow)
#   --features:  also FFmpeg's development libraries, pkg-config and libclang (the `video` feature)
# Without root or apt-get it only says what is missing.
set -euo pipefail
with_features=0
[ "${1:-}" = "--features" ] && with_features=1
packages=()
command -v fusermount3 >/dev/null 2>&1 || packages+=(fuse3)
command -v nasm >/dev/null 2>&1 || packages+=(nasm)
if [ "$with_features" = 1 ]; then
  command -v pkg-config >/dev/null 2>&1 || packages+=(pkg-config)
  if ! pkg-config --exists libavformat libavcodec libavutil libswscale 2>/dev/null; then
    packages+=(libavformat-dev libavcodec-dev libavutil-dev libswscale-dev)
  fi
  if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/*/libclang-[0-9]*.so* 2>/dev/null | grep -q .; then
    packages+=(libclang-dev)
  fi
fi
if [ ! -e /dev/fuse ]; then
  echo "*** /dev/fuse is missing: the energon mount tests will fail (see crates/energon-cli/tests/cli/mount.rs)" >&2
fi
if ((${#packages[@]} == 0)); then
  exit 0
fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing system packages: ${packages[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${packages[@]}" >/dev/null
else
  echo "*** missing system packages (install them to run every test): ${packages[*]}" >&2
fi
