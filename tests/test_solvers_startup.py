"""Start-up of a small solve: the DP's kernels run as plain Python on small lattices (no numba
import), with the same answers as the compiled kernels, whose machine code is cached on disk;
the real ``fpgaplace place`` on a paper workload imports none of the heavy optional modules and
builds only the command it runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fpgaplace.cli import app as cli
from fpgaplace.place.solvers import dp
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.workload import load_workload

WORKLOADS = Path(__file__).resolve().parent / "workloads"


def test_a_small_solve_does_not_import_numba():
    script = (
        "import sys\n"
        "from fpgaplace.place.workload import load_workload\n"
        "from fpgaplace.place.solvers.run import SolveOptions, solve\n"
        f"problem = load_workload({str(WORKLOADS / 'throughput' / 'layer-bert24_inference.json')!r})\n"
        "result = solve(problem, 'auto', SolveOptions())\n"
        "print(result.value, 'numba' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True).stdout
    value, numba_loaded = out.split()
    assert float(value) == pytest.approx(17.78990625, rel=1e-9)  # the published optimum
    assert numba_loaded == "False"


HEAVY = ("numba", "llvmlite", "onnx", "onnxruntime", "pyscipopt", "scipy", "networkx", "jinja2", "ray")


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_cli_place_on_a_workload_imports_no_heavy_module(objective):
    """The real command's entry point (``cli.main``) on a small paper workload: the latency IP is
    not needed there either, since the greedy start meets the critical-path bound."""
    workload = WORKLOADS / objective / "layer-bert24_inference.json"
    script = (
        "import sys\n"
        f"sys.argv = ['fpgaplace', 'place', {str(workload)!r}, '--objective', {objective!r}, '--json']\n"
        "from fpgaplace.cli import app as cli\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit as done:\n"
        "    assert not done.code, done.code\n"
        f"print(sorted(name for name in {HEAVY!r} if name in sys.modules), file=sys.stderr)\n"
    )
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert run.stderr.strip().splitlines()[-1] == "[]"
    document = json.loads(run.stdout)
    assert document["gap"] == 0  # both are proven optimal


def test_only_the_invoked_command_is_built():
    place = cli._invoked_command_only(["place", "w.json"])
    assert [cli._command_name(info) for info in place.registered_commands] == ["place"]
    assert cli._invoked_command_only(["run-cluster"]).registered_commands[0].callback.__name__ == "run_cluster"
    for argv in ([], ["--help"], ["--version"], ["plac"]):  # the group itself: every command
        assert cli._invoked_command_only(argv) is cli.app
    assert len(cli.app.registered_commands) > 10  # the restriction is a copy
    runner = CliRunner()
    for argv in (["place", "--help"], ["place"], ["place", "--objective"]):
        whole, alone = runner.invoke(cli.app, argv), runner.invoke(place, argv)
        assert (alone.exit_code, alone.output) == (whole.exit_code, whole.output)


def random_problems():
    import math

    import numpy as np
    from test_dp import make_problem

    from fpgaplace.place.solvers.problem import DeviceKind

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
    for name, kernel in dp._compiled.items():  # the machine code is cached beside the source
        cache = Path(kernel.stats.cache_path)
        assert os.access(cache, os.W_OK)
        assert list(cache.glob(f"dp.{name}-*.nbi"))
    monkeypatch.setattr(dp, "_kernel", lambda kernel, work: dp._PYTHON_KERNELS[kernel])
    python = dp.solve_throughput_dp(problem)
    assert python.value == pytest.approx(compiled.value, rel=1e-12)
    assert python.status == compiled.status == "optimal"
    assert evaluate(problem, python).max_load == pytest.approx(python.value, rel=1e-12)
