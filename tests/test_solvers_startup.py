"""Start-up of a small solve: the DP's kernels run as plain Python on small lattices (no numba
import), with the same answers as the compiled kernels."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fpgaplace.solvers import dp
from fpgaplace.solvers.evaluate import evaluate
from fpgaplace.workload import load_workload

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def test_a_small_solve_does_not_import_numba():
    script = (
        "import sys\n"
        "from fpgaplace.workload import load_workload\n"
        "from fpgaplace.solvers.run import SolveOptions, solve\n"
        f"problem = load_workload({str(WORKLOADS / 'throughput' / 'layer-bert24_inference.json')!r})\n"
        "result = solve(problem, 'auto', SolveOptions())\n"
        "print(result.value, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    value, numba_loaded = out.split()
    assert float(value) == pytest.approx(17.78990625, rel=1e-9)  # the published optimum
    assert numba_loaded == "False"


def random_problems():
    import math

    import numpy as np
    from test_dp import make_problem

    from fpgaplace.solvers.problem import DeviceKind

    kinds = [DeviceKind("fpga", 2, 6.0, False), DeviceKind("cpu", 1, math.inf, True)]
    for seed in range(3):
        rng = np.random.default_rng(seed)
        edges = sorted({(int(a), int(b)) for a, b in rng.integers(0, 9, (12, 2)) if a < b})
        yield make_problem(9, edges, rng, kinds)


@pytest.mark.parametrize("problem", [load_workload(WORKLOADS / "throughput" / "layer-bert24_inference.json"),
                                     *random_problems()], ids=lambda p: p.source)
def test_python_and_compiled_kernels_agree(monkeypatch, problem):
    with monkeypatch.context() as patch:
        patch.setattr(dp, "PYTHON_WORK", -1)  # every kernel compiled
        compiled = dp.solve_throughput_dp(problem)
    assert dp._compiled
    monkeypatch.setattr(dp, "_kernel", lambda kernel, work: dp._PYTHON_KERNELS[kernel])
    python = dp.solve_throughput_dp(problem)
    assert python.value == pytest.approx(compiled.value, rel=1e-12)
    assert python.status == compiled.status == "optimal"
    assert evaluate(problem, python).max_load == pytest.approx(python.value, rel=1e-12)
