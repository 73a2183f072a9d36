"""Event simulation (``fpgaplace.sim.event.simulate`` and ``fpgaplace sim``) on small compiled projects.

Each project (cnn_residual and the MLP, on zcu104 and on the two-board cluster) is compiled once
per module. The expected numbers are worked out here from design.json and the split manifest:
each device's and each link's time per sample, the pipeline's critical path, the DSP peak of the
board; the simulation has to agree with them.
"""

from __future__ import annotations

import json
import math
import shutil
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import pytest
from conftest import FAST_CLUSTER
from typer.testing import CliRunner

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.cli.app import app
from fpgaplace.model import zoo as models
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.sim.event import SimResult, simulate
from fpgaplace.util.errors import FpgaplaceError

SAMPLES = 200
CASES = [("cnn", "zcu104-dpu"), ("mlp", "zcu104-dpu"), ("cnn", "cluster-2x-zcu104"), ("mlp", "cluster-2x-zcu104")]
MODELS = {"cnn": lambda: models.cnn_residual(batch=1), "mlp": lambda: models.mlp(batch=1)}


@dataclass
class Project:
    folder: Path
    design: dict
    manifest: dict
    result: SimResult


@pytest.fixture(scope="module", params=CASES, ids=[f"{m}-{b}" for m, b in CASES])
def project(request, tmp_path_factory) -> Project:
    model, board = request.param
    folder = tmp_path_factory.mktemp(f"{model}-{Path(board).stem}") / "project"
    Design(MODELS[model](), board, profile_cpu=False).compile(folder)
    design = json.loads((folder / "design.json").read_text())
    manifest = json.loads((folder / "split" / "manifest.json").read_text())
    return Project(folder, design, manifest, simulate(folder, SAMPLES))


@pytest.fixture(scope="module")
def cnn_zcu104(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("cnn-errors") / "project"
    Design(models.cnn_residual(batch=1), "zcu104-dpu", profile_cpu=False).compile(folder)
    return folder


# ---- what the pipeline should do, worked out from design.json -----------------------------


def core_us(design: dict, name: str, cycles: float) -> float:
    clock = next(c["clock_mhz"] for c in design["cores"] if c["name"] == name)
    return cycles / clock


def link_of(transfer: dict, nodes: dict[str, str]) -> tuple:
    """Streams join one pair of cores; every other link is one per node (per direction between nodes)."""
    if transfer["link"] == "stream":
        return ("stream", transfer["from_device"], transfer["to_device"])
    return (transfer["link"], nodes[transfer["from_device"]], nodes[transfer["to_device"]])


def per_sample_times(p: Project) -> dict:
    """Every device's and link's busy time per sample: a core its interval, a CPU its compute,
    a link the sum of the transfers it carries."""
    cores = {c["name"]: c for c in p.design["cores"]}
    devices = {d["name"]: d for d in p.design["devices"]}
    nodes = {d["name"]: d["node"] for d in p.design["devices"]}
    times: dict = {}
    for piece in p.manifest["submodels"]:
        name = piece["device"]
        times[name] = (core_us(p.design, name, cores[name]["interval_cycles"]) if name in cores
                       else devices[name]["compute_us"])
    links: dict = defaultdict(float)
    for transfer in p.design["transfers"]:
        links[link_of(transfer, nodes)] += transfer["us"]
    return {**times, **links}


def critical_path_us(p: Project) -> float:
    """The longest path through pieces and transfers, each core taking its latency (design.json's
    ``latency_cycles``: its stages overlapped), each CPU its compute."""
    cores = {c["name"]: c for c in p.design["cores"]}
    devices = {d["name"]: d for d in p.design["devices"]}
    transfers = {(t["tensor"], t["from_submodel"], t["to_submodel"]): t["us"] for t in p.design["transfers"]}
    done: dict[str, float] = {}
    for piece in p.manifest["submodels"]:  # execution order is a topological order
        name = piece["device"]
        own = (core_us(p.design, name, cores[name]["latency_cycles"]) if name in cores
               else devices[name]["compute_us"])
        ready = max((done[source] + transfers.get((tensor, source, piece["name"]), 0.0)
                     for tensor, source in piece["sources"].items() if source), default=0.0)
        done[piece["name"]] = ready + own
    return max(done.values())


def shares_a_link(p: Project) -> bool:
    nodes = {d["name"]: d["node"] for d in p.design["devices"]}
    links = [link_of(t, nodes) for t in p.design["transfers"]]
    return len(links) != len(set(links))


def by_name(result: SimResult) -> dict:
    return {d.name: d for d in result.devices}


# ---- the pipeline's numbers ----------------------------------------------------------------


def test_interval_is_the_slowest_device_or_link(project: Project) -> None:
    expected = max(per_sample_times(project).values())
    assert project.result.interval_us == pytest.approx(expected, rel=1e-9)
    assert project.result.interval_cycles == pytest.approx(expected * project.design["board"]["clock_mhz"], rel=1e-9)


def test_fps_is_one_over_the_interval(project: Project) -> None:
    assert project.design["model"]["batch"] == 1
    assert project.result.fps == pytest.approx(1e6 / project.result.interval_us, rel=1e-12)


def test_latency_covers_the_critical_path(project: Project) -> None:
    path = critical_path_us(project)
    result = project.result
    assert result.latency_us >= path * (1 - 1e-12)
    if not shares_a_link(project):  # nothing of one sample waits for anything else of it
        assert result.latency_us == pytest.approx(path, rel=1e-9)
    assert result.latency_cycles == pytest.approx(result.latency_us * project.design["board"]["clock_mhz"], rel=1e-9)


def test_a_link_carries_its_transfers_one_after_another(project: Project) -> None:
    nodes = {d["name"]: d["node"] for d in project.design["devices"]}
    carried = defaultdict(list)
    for transfer in project.design["transfers"]:
        carried[link_of(transfer, nodes)].append(transfer["us"])
    links = sorted(d.per_sample_us for d in project.result.devices if d.kind == "link")
    assert links == pytest.approx(sorted(sum(us) for us in carried.values()))
    # a shared link never makes one sample faster than its critical path (whether its transfers of
    # one sample also wait for each other depends on where they sit in the pipeline)
    assert project.result.latency_us >= critical_path_us(project) * (1 - 1e-9)


def test_bottleneck_is_busy_all_the_time_and_no_device_beyond(project: Project) -> None:
    result = project.result
    devices = by_name(result)
    bottleneck = devices[result.bottleneck]
    assert bottleneck.utilisation == pytest.approx(1.0, abs=1e-9)
    assert bottleneck.per_sample_us == pytest.approx(result.interval_us, rel=1e-9)
    assert bottleneck.stall_us == pytest.approx(0.0, abs=1e-6)
    for device in result.devices:
        assert 0.0 <= device.utilisation <= 1.0 + 1e-12
        assert device.stall_us == pytest.approx(device.blocked_us + device.starved_us)
        if device.per_sample_us > 0:  # busy N times per sample time, stalled the rest of its window
            window = SAMPLES * device.per_sample_us / device.utilisation
            assert device.stall_us == pytest.approx(window - SAMPLES * device.per_sample_us, rel=1e-6, abs=1e-6)


def test_devices_listed_are_the_pieces_devices_and_links(project: Project) -> None:
    names = {d.name for d in project.result.devices}
    pieces = {piece["device"] for piece in project.manifest["submodels"]}
    assert pieces <= names
    assert len(names) == len(per_sample_times(project))


def test_roofline_from_the_board_dsps(project: Project) -> None:
    entry = project.design["board"]
    board = load_board(entry["source"] if Path(entry["source"]).is_file() else entry["name"])
    macs = sum(layer["macs"] for core in project.design["cores"] for layer in core["layers"])
    if macs == 0:  # nothing placed on the fabric: no roofline to compare with
        assert project.result.roofline_fps is None and project.result.roofline_fraction is None
        return
    peak_macs_per_us = sum(core.dsp * core.macs_per_dsp * core.clock_mhz for core in board.cores)
    result = project.result
    assert result.roofline_fps == pytest.approx(1e6 * peak_macs_per_us / macs, rel=1e-12)
    assert 0.0 < result.roofline_fraction <= 1.0
    assert result.roofline_fraction == pytest.approx(result.fps / result.roofline_fps)
    assert result.fabric_roofline_fps >= result.roofline_fps
    assert result.dram_bound_fps is None or result.dram_bound_fps > 0


# ---- behaviour over the number of samples ---------------------------------------------------


def test_one_sample_has_the_latency_as_interval(project: Project) -> None:
    one = simulate(project.folder, 1)
    assert one.interval_us == pytest.approx(one.latency_us)
    assert one.latency_us == pytest.approx(project.result.latency_us)
    assert one.fps == pytest.approx(1e6 / one.latency_us)


def test_steady_interval_does_not_depend_on_the_run_length(project: Project) -> None:
    assert simulate(project.folder, 40).interval_us == pytest.approx(project.result.interval_us, rel=1e-9)


def test_makespan_of_a_chain_is_latency_plus_intervals(cnn_zcu104: Path) -> None:
    result = simulate(cnn_zcu104, 50)
    assert result.makespan_us == pytest.approx(result.latency_us + 49 * result.interval_us, rel=1e-9)


def test_faster_producer_is_blocked_and_faster_consumer_starved(cnn_zcu104: Path, tmp_path: Path) -> None:
    devices = by_name(simulate(cnn_zcu104, 50))
    assert devices["core1"].blocked_us > 0 and devices["core1"].starved_us == 0  # feeds the slower core0
    folder = tmp_path / "slow-first"
    shutil.copytree(cnn_zcu104, folder)
    document = json.loads((folder / "design.json").read_text())
    first = next(c for c in document["cores"] if c["name"] == "core1")
    first["interval_cycles"] *= 10  # now core1 is the bottleneck and core0 waits for it
    (folder / "design.json").write_text(json.dumps(document))
    slowed = simulate(folder, 50)
    assert slowed.bottleneck == "core1"
    assert slowed.interval_cycles == pytest.approx(first["interval_cycles"], rel=1e-9)
    assert by_name(slowed)["core0"].starved_us > 0 and by_name(slowed)["core0"].blocked_us == 0


def test_to_json_shape(project: Project) -> None:
    document = project.result.to_json()
    for key in ("latency_cycles", "latency_us", "interval_cycles", "fps", "roofline_fps", "roofline_fraction",
                "bottleneck", "devices"):
        assert key in document
    assert document["bottleneck"] in {d["name"] for d in document["devices"]}
    assert all({"name", "utilisation", "stall_us"} <= set(d) for d in document["devices"])
    json.dumps(document)


# ---- errors ---------------------------------------------------------------------------------


def one_line(caught: pytest.ExceptionInfo) -> str:
    message = str(caught.value)
    assert message and "\n" not in message
    return message


@pytest.mark.parametrize("samples", [0, -1, 10**6 + 1])
def test_samples_out_of_range(cnn_zcu104: Path, samples: int) -> None:
    with pytest.raises(FpgaplaceError) as caught:
        simulate(cnn_zcu104, samples)
    assert "samples" in one_line(caught)


def test_not_a_project(tmp_path: Path) -> None:
    with pytest.raises(FpgaplaceError) as caught:
        simulate(tmp_path / "missing", 4)
    assert "missing" in one_line(caught)
    with pytest.raises(FpgaplaceError) as caught:
        simulate(tmp_path, 4)
    assert "design.json" in one_line(caught)


def broken_copy(project: Path, tmp_path: Path, edit) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(project, folder)
    path = folder / "design.json"
    path.write_text(edit(path.read_text()))
    return folder


def test_broken_design_json(cnn_zcu104: Path, tmp_path: Path) -> None:
    folder = broken_copy(cnn_zcu104, tmp_path, lambda text: text[: len(text) // 2])
    with pytest.raises(FpgaplaceError) as caught:
        simulate(folder, 4)
    assert "design.json" in one_line(caught)


def test_design_json_without_a_core_interval(cnn_zcu104: Path, tmp_path: Path) -> None:
    def drop_interval(text: str) -> str:
        document = json.loads(text)
        del document["cores"][0]["interval_cycles"]
        return json.dumps(document)

    folder = broken_copy(cnn_zcu104, tmp_path, drop_interval)
    with pytest.raises(FpgaplaceError) as caught:
        simulate(folder, 4)
    message = one_line(caught)
    assert "interval_cycles" in message and "design.json" in message


def test_transfer_without_time(cnn_zcu104: Path, tmp_path: Path) -> None:
    def drop_us(text: str) -> str:
        document = json.loads(text)
        del document["transfers"][0]["us"]
        return json.dumps(document)

    folder = broken_copy(cnn_zcu104, tmp_path, drop_us)
    with pytest.raises(FpgaplaceError) as caught:
        simulate(folder, 4)
    assert "'us'" in one_line(caught)


# ---- the command ----------------------------------------------------------------------------


def invoke(*args: str):
    return CliRunner().invoke(app, ["sim", *args])


def assert_cli_error(result, *words: str) -> None:
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
    assert all(word in lines[0] for word in words), lines[0]


def test_cli_json(cnn_zcu104: Path) -> None:
    result = invoke(str(cnn_zcu104), "--samples", "30", "--json")
    assert result.exit_code == 0, result.stderr
    document = json.loads(result.stdout)
    expected = simulate(cnn_zcu104, 30).to_json()
    for key in ("latency_us", "interval_us", "fps", "roofline_fps"):
        assert document[key] == pytest.approx(expected[key])
    assert document["samples"] == 30 and document["bottleneck"] == expected["bottleneck"] == "core0"
    assert math.isclose(document["fps"], 1e6 / document["interval_us"])


def test_cli_table(cnn_zcu104: Path) -> None:
    result = invoke(str(cnn_zcu104), "-n", "20")
    assert result.exit_code == 0, result.stderr
    for word in ("core0", "core1", "latency", "interval", "fps", "bottleneck core0", "roofline", "DRAM"):
        assert word in result.stdout


def test_cli_errors(cnn_zcu104: Path, tmp_path: Path) -> None:
    assert_cli_error(invoke(str(cnn_zcu104), "--samples", "0"), "--samples", "1 to 1000000")
    assert_cli_error(invoke(str(cnn_zcu104), "--samples", "1000001"), "--samples")
    assert_cli_error(invoke(str(tmp_path / "nowhere")), "nowhere")
    folder = broken_copy(cnn_zcu104, tmp_path, lambda text: "{")
    assert_cli_error(invoke(str(folder)), "design.json")


def test_design_json_without_a_core_s_layers(cnn_zcu104: Path, tmp_path: Path) -> None:
    def drop_layers(text: str) -> str:
        document = json.loads(text)
        del document["cores"][1]["layers"]
        return json.dumps(document)

    folder = broken_copy(cnn_zcu104, tmp_path, drop_layers)
    with pytest.raises(FpgaplaceError) as caught:
        simulate(folder, 4)
    message = one_line(caught)
    assert "layers" in message and "design.json" in message


@pytest.fixture(scope="module")
def cnn_cluster(tmp_path_factory) -> Path:
    """The residual CNN on the two-board cluster, its classifier on two CPUs (the pool and the
    Flatten on one, the Gemm on another; the placement would keep them on a core): a project that
    ends in CPU pieces."""
    folder = tmp_path_factory.mktemp("cnn-cluster") / "project"
    design = Design(models.cnn_residual(batch=1), FAST_CLUSTER, profile_cpu=False).quantized(random_samples=8)
    device = design.placement.placement.device.copy()
    names = design.problem.names
    kinds = [design.graph.ops[name].op_type for name in names]  # the problem's nodes in topological order
    pool, gemm = kinds.index("GlobalAveragePool"), kinds.index("Gemm")
    cpus = [index for index, name in enumerate(design.device_names()) if "cpu" in name]
    device[pool:gemm], device[gemm:] = cpus[0], cpus[-1]  # with their Q/DQ
    design.set_placement(Placement(device=device, method="given"))
    design.compile(folder)
    return folder


def test_a_cpu_runs_its_pieces_one_sample_at_a_time(cnn_cluster: Path, tmp_path: Path) -> None:
    """Two consecutive CPU pieces moved onto one CPU made slow: that CPU's compute is the interval."""
    folder = tmp_path / "shared-cpu"
    shutil.copytree(cnn_cluster, folder)
    design = json.loads((folder / "design.json").read_text())
    manifest_path = folder / "split" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    cpus = [piece for piece in manifest["submodels"] if piece["device"] not in {c["name"] for c in design["cores"]}]
    assert len(cpus) >= 2, "the cluster CNN is expected to end in CPU pieces"
    first, second = cpus[-2], cpus[-1]
    keep, gone = first["device"], second["device"]
    devices = {d["name"]: d for d in design["devices"]}
    devices[keep]["ops"] += devices[gone]["ops"]
    devices[keep]["compute_us"] = 1000.0
    devices[gone]["ops"], devices[gone]["compute_us"] = [], 0.0
    second["device"] = keep
    for transfer in design["transfers"]:
        for side in ("from_device", "to_device"):
            if transfer[side] == gone:
                transfer[side] = keep
    (folder / "design.json").write_text(json.dumps(design))
    manifest_path.write_text(json.dumps(manifest))
    result = simulate(folder, 30)
    assert result.bottleneck == keep
    assert result.interval_us == pytest.approx(1000.0, rel=1e-9)
    assert by_name(result)[keep].per_sample_us == pytest.approx(1000.0)
    assert gone not in by_name(result)
