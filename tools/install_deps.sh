#!/usr/bin/env bash
# tools/install_deps.sh — installs the Debian packages modattn needs to build and test.
# Idempotent: does nothing (and needs no network) when every package is already installed.
set -euo pipefail
PKGS=(
  build-essential cmake pkg-config clang libclang-rt-14-dev
  libjansson-dev libutf8proc-dev libopenblas-dev libdnnl-dev
  libsqlite3-dev libxxhash-dev libpoppler-glib-dev libxml2-dev
  # issue 40's formats: libarchive (zip containers of DOCX/XLSX/PPTX/ODF/EPUB, ZIP/TAR archives,
  # gzip/bzip2/xz/zstd) and GMime 3.0 (e-mail: .eml and mbox); zstd makes the tests' .zst fixture
  libarchive-dev libgmime-3.0-dev zstd
  # legacy Word 97-2003 .doc: libgsf opens the OLE2 compound file (pipeline/fmt_doc.c reads the text)
  libgsf-1-dev
  # issue 40's stop words: the Snowball lists for 13 languages (pipeline/CMakeLists.txt reads them at
  # configure time into a generated header)
  liblingua-stopwords-perl
  # python3-dev: the Python binding (python/, a CPython extension; only a Recommends of python3-pip)
  python3 python3-pip python3-dev unzip ca-certificates valgrind
  # test_flash_neon_cross: the NEON kernel cross-compiled for AArch64 and run under user-mode qemu
  # (libc6-dev-arm64-cross is only a Recommends of the compiler, and recommends are not installed)
  gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user
  # the OpenCL device: headers, the ICD loader, PoCL (OpenCL on this CPU, so CI runs the device
  # suites) and CLBlast for the GEMMs; clinfo to see what the loader finds
  opencl-headers ocl-icd-opencl-dev pocl-opencl-icd libclblast-dev clinfo
  # `modattn serve`: libmicrohttpd (GLib for base64 comes with poppler-glib); its tests: wrk, curl,
  # python3-venv for the openai and schemathesis clients from PyPI
  libmicrohttpd-dev libglib2.0-dev wrk curl python3-venv
  # issue 41: the search page's browser test (tests/server/test_page.py) drives headless Chromium
  # over its DevTools protocol on loopback
  chromium
  # issue 16: FAISS for approximate search (static libfaiss, OpenMP and BLAS behind it) and Open MPI
  # for `index --mpi` / `search --mpi` (mpirun from openmpi-bin)
  libfaiss-dev libopenmpi-dev openmpi-bin
)
cd "$(dirname "$0")/.."
# The XLA device's CPU plugin and its header (tools/pjrt-requirements.txt: pinned by version and
# sha256), unpacked under .deps/pjrt/ (ignored by git). Needs python3-pip, hence after the packages.
pjrt() {
  local dir=.deps/pjrt
  if [ -f "$dir/wheel/xla_plugins/xla_cpu_pjrt/include/pjrt_c_api.h" ] && [ -f "$dir/wheel/xla_plugins/xla_cpu_pjrt/xla_cpu_pjrt.so" ]; then
    echo "deps: the PJRT CPU plugin is in $dir"
    return 0
  fi
  mkdir -p "$dir"
  python3 -m pip download --quiet --no-deps --require-hashes -r tools/pjrt-requirements.txt -d "$dir"
  rm -rf "$dir/wheel"
  unzip -q -o "$dir"/xla_cpu_pjrt-*.whl -d "$dir/wheel"
  echo "deps: the PJRT CPU plugin (xla-cpu-pjrt) unpacked in $dir"
}
missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then missing+=("$p"); fi
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "deps: all ${#PKGS[@]} Debian packages present"
  pjrt
  exit 0
fi
echo "deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null; then SUDO=sudo; else
    echo "deps: need root (or sudo) to install: ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
pjrt
