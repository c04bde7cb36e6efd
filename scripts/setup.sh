#!/usr/bin/env bash
# Installs the system packages aiac needs on a Debian machine when they are missing:
# Open MPI with OpenSHMEM (mpirun, oshrun, oshcc, headers), libclang for bindgen, pkg-config,
# SimGrid's SMPI (smpirun, smpicc: aiac's many-rank simulations, scripts/scale) and python3
# (scripts/scale and smpirun itself), and PETSc's example data (the Matrix Market files the
# jacobi crate's reader is tested on: libpetsc3.18-dev-examples, a 4 MB download, 8 MB
# more for libjs-mathjax and its fonts when missing; installed in under 4 s here).
# Idempotent: does nothing when everything is present. Needs root (or sudo) only to install.
set -euo pipefail

need=()
command -v mpirun  >/dev/null 2>&1 || need+=(openmpi-bin)
command -v oshrun  >/dev/null 2>&1 || need+=(openmpi-bin)
command -v mpicc   >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v oshcc   >/dev/null 2>&1 || need+=(libopenmpi-dev)
command -v pkg-config >/dev/null 2>&1 || need+=(pkg-config)
command -v smpirun >/dev/null 2>&1 || need+=(libsimgrid-dev)
command -v smpicc  >/dev/null 2>&1 || need+=(libsimgrid-dev)
command -v python3 >/dev/null 2>&1 || need+=(python3)
if ! ls /usr/share/petsc/*/share/petsc/datafiles/matrices/*.mtx >/dev/null 2>&1; then
  need+=(libpetsc3.18-dev-examples)
fi
# bindgen (rsmpi, openshmem-sys) loads libclang at build time.
if ! ls /usr/lib/llvm-*/lib/libclang.so* /usr/lib/x86_64-linux-gnu/libclang*.so* >/dev/null 2>&1; then
  need+=(libclang-dev)
fi

if [ ${#need[@]} -gt 0 ]; then
  # de-duplicate
  mapfile -t need < <(printf '%s\n' "${need[@]}" | sort -u)
  echo "aiac setup: installing ${need[*]}" >&2
  sudo_cmd=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || { echo "aiac setup: need root or sudo to install ${need[*]}" >&2; exit 1; }
    sudo_cmd=(sudo)
  fi
  export DEBIAN_FRONTEND=noninteractive
  "${sudo_cmd[@]}" apt-get update -q
  "${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${need[@]}"
fi
