#!/usr/bin/env bash
# The PYNQ test environment ./.venv-pynq: pynq 4.0 with what the generated driver needs on a board
# (numpy < 2, onnxruntime) and the stand-in board of tests/pynq_standin, which the environment
# imports at start-up only when FPGAPLACE_PYNQ_STANDIN=1 (a .pth file).
# pynq 4.0 pins numpy<2 and grpcio 1.64 (which breaks onnx >= 1.23) and pycparser clashes with
# paramiko's, so pynq stays out of ./.venv. Safe to run again: quick when everything is there.
set -euo pipefail
# Parallel test workers may run this at once: one at a time (a lock held on this script), so two
# never create or fill the environment together.
exec 9<"${BASH_SOURCE[0]}"
flock 9
cd "$(dirname "$0")/.."
repo="$(pwd)"
venv=.venv-pynq
requirements=("pynq==4.0.0" "numpy<2" "onnxruntime")

if [[ ! -x "$venv/bin/python" ]]; then
  echo "setup_pynq_env: creating $venv"
  python3 -m venv "$venv"
fi
if ! "$venv/bin/python" - <<'EOF' 2>/dev/null
import importlib.metadata as m
assert m.version("pynq") == "4.0.0" and int(m.version("numpy").split(".")[0]) < 2
import onnxruntime  # noqa: F401
EOF
then
  echo "setup_pynq_env: installing ${requirements[*]} into $venv"
  "$venv/bin/python" -m pip install -q "${requirements[@]}"
fi
site="$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
pth="$site/fpgaplace_pynq_standin.pth"
wanted="$repo/tests/pynq_standin
import os; os.environ.get('FPGAPLACE_PYNQ_STANDIN') == '1' and __import__('fpgaplace_pynq_standin')"
if [[ ! -f "$pth" || "$(cat "$pth")" != "$wanted" ]]; then
  printf '%s\n' "$wanted" > "$pth"
fi
echo "setup_pynq_env: done ($venv/bin/python)"
