"""``Design``: one pipeline from model and board to placement, split and project.

CPU costs are analytic here (``profile_cpu=False``) so two designs of the same model cost it
identically and the tests compare exact values.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from conftest import WORKLOADS

from fpgaplace import Design, load_board
from fpgaplace.flow.design import QDQ_PASSES, is_workload, load_input, place_problem
from fpgaplace.model import zoo as models
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.problem import Placement
from fpgaplace.util.errors import FpgaplaceError

WORKLOAD = WORKLOADS / "throughput" / "layer-bert24_inference.json"


def analytic(model, board="zcu104-dpu", **options) -> Design:  # two cores, as the device-name tests expect
    return Design(model, board, profile_cpu=False, **options)


@pytest.fixture(scope="module")
def cnn() -> onnx.ModelProto:
    return models.cnn_residual(batch=1)


@pytest.fixture(scope="module")
def placed_cnn(cnn) -> Design:
    design = analytic(cnn)
    design.place()
    return design


def split_placement(design: Design, manifest_dir: Path) -> Placement:
    """The placement a split folder records, read back onto ``design``'s problem by device name."""
    manifest = json.loads((manifest_dir / "manifest.json").read_text())
    device_of_node = {node: sub["device"] for sub in manifest["submodels"] for node in sub["nodes"]}
    names = design.device_names()
    device = np.array([names.index(device_of_node[op]) for op in design.problem.names], dtype=np.int64)
    return Placement(device=device)


def test_place_value_is_the_value_of_the_split_it_writes(cnn, placed_cnn, tmp_path):
    """The 9,905 vs 6,263 class of bug: place costed one graph, split wrote another."""
    manifest, errors = placed_cnn.split(tmp_path / "split")
    assert max(errors.values()) <= 1e-5
    fresh = analytic(cnn)  # what `fpgaplace evaluate` builds from the same flags
    assert fresh.problem.names == placed_cnn.problem.names
    written = evaluate(fresh.problem, split_placement(fresh, tmp_path / "split"))
    assert written.max_load == pytest.approx(placed_cnn.placement.value, rel=1e-12)
    assert {s.device for s in manifest.submodels} <= set(placed_cnn.device_names())


def test_split_places_first_when_not_placed(tmp_path):
    design = analytic(models.mlp(batch=1))
    assert not design.placed
    manifest, _ = design.split(tmp_path / "mlp")
    assert design.placed and manifest.submodels
    written = evaluate(design.problem, split_placement(design, tmp_path / "mlp"))
    assert written.max_load == pytest.approx(design.placement.value, rel=1e-12)


def test_device_names_by_board_identity_on_zcu104(placed_cnn):
    board = placed_cnn.board
    assert placed_cnn.device_names() == [c.name for c in board.cores] + [c.name for c in board.cpus]
    assert placed_cnn.device_names()[:3] == ["core0", "core1", "cpu0"]
    assert all(a is b for a, b in zip(placed_cnn.devices(), [*board.cores, *board.cpus], strict=True))
    on = placed_cnn.op_devices()
    assert set(on) == set(placed_cnn.problem.names)
    device = placed_cnn.placement.placement.device
    for v, op in enumerate(placed_cnn.problem.names):
        assert on[op] is placed_cnn.devices()[int(device[v])]


def test_device_names_on_a_cluster_say_which_node(cnn):
    design = analytic(cnn, "cluster-2x-zcu104")
    names = design.device_names()
    assert names[:4] == ["node0.core0", "node0.core1", "node1.core0", "node1.core1"]
    assert design.problem.device_name(2) == "core2"  # what the problem alone can say
    assert names[4] == "node0.cpu0" and names[-1] == "node1.cpu3"
    design.place()
    document = design.placement_json()
    assert document["deviceNames"] == names
    assignment = design.assignment()
    assert set(assignment.values()) <= set(names)
    assert set(design.graph.model.graph.node[i].name for i in range(len(design.graph.model.graph.node))) <= set(
        assignment
    )


def test_no_optimize_keeps_the_graph_as_loaded(cnn):
    raw, optimized = analytic(cnn, optimize=False), analytic(cnn)
    raw_types = [op.op_type for op in raw.graph.ops.values()]
    optimized_types = [op.op_type for op in optimized.graph.ops.values()]
    assert "BatchNormalization" in raw_types and "BatchNormalization" not in optimized_types
    assert len(optimized_types) < len(raw_types) == len(raw.loaded.ops)
    assert raw.optimize_report is None and optimized.optimize_report.nodes_after == len(optimized_types)
    assert raw.problem.n == len(raw_types) and optimized.problem.n == len(optimized_types)


def test_input_shapes_and_batch_reach_the_front_end():
    design = analytic(models.cnn_residual(), input_shapes={"image": (2, 3, 32, 32)})
    assert design.graph.tensors["image"].shape == (2, 3, 32, 32)
    batched = analytic(models.mlp(batch="N"), batch=4)
    assert batched.graph.tensors["x"].shape[0] == 4
    with pytest.raises(FpgaplaceError, match="'y'"):
        analytic(models.cnn_residual(), input_shapes={"y": (1, 3)}).graph  # noqa: B018


def test_with_cores_shares_the_graph_and_uses_only_those_cores(placed_cnn):
    one = placed_cnn.with_cores(1)
    assert one.graph is placed_cnn.graph and one.costs is placed_cnn.costs
    assert not one.placed and placed_cnn.placed
    assert one.device_names() == ["core0", "cpu0", "cpu1", "cpu2", "cpu3"]
    one.place()
    assert "core1" not in {device.name for device in one.op_devices().values()}
    with pytest.raises(FpgaplaceError, match="cores"):
        placed_cnn.with_cores(3)


def test_place_all_shares_the_time_limit_and_keeps_the_best(cnn):
    design = analytic(cnn)
    results = design.place_all(time_limit=20)
    assert len({r.placement.method for r in results}) == len(results) >= 5
    feasible = [r.value for r in results if r.evaluation.feasible]
    assert design.placement.value == min(feasible)
    assert sum(r.placement.seconds for r in results) < 20 + 5  # one budget, not one per method


def test_place_rejects_a_bad_time_limit_and_all(placed_cnn):
    with pytest.raises(FpgaplaceError, match="time_limit"):
        placed_cnn.place(time_limit=0)
    with pytest.raises(FpgaplaceError, match="place_all"):
        placed_cnn.place(method="all")
    with pytest.raises(FpgaplaceError, match="precision"):
        Design(models.mlp(), precision="int3")


def test_set_placement_is_scored_by_the_evaluator(cnn):
    design = analytic(cnn)
    cpu = [d for d, (k, _) in enumerate(design.problem.devices()) if design.problem.kinds[k].is_cpu][0]
    result = design.set_placement(Placement(device=np.full(design.problem.n, cpu, dtype=np.int64)))
    assert design.placement is result
    assert set(design.assignment().values()) == {"cpu0"}


def test_progress_reports_each_stage(cnn):
    seen: list[str] = []
    design = Design(cnn, profile_cpu=False, progress=seen.append)
    design.place()
    text = "\n".join(seen)
    for stage in ("importing", "graph optimizer", "costing", "placing"):
        assert stage in text, (stage, seen)


def test_workload_is_a_problem_not_a_design():
    assert is_workload(WORKLOAD) and not is_workload("model.onnx")
    problem = load_input(WORKLOAD)
    assert not isinstance(problem, Design) and problem.n > 0
    [result] = place_problem(problem, method="dp")
    assert result.value == pytest.approx(17.78990625, rel=1e-6)
    with pytest.raises(FpgaplaceError, match="board"):
        load_input(WORKLOAD, "zcu104")
    assert isinstance(load_input("model.onnx", load_board("kv260")), Design)


# --------------------------------------------------------------------------- quantization


@pytest.fixture(scope="module")
def qdq_model(cnn) -> onnx.ModelProto:
    from fpgaplace.model.quantize import calibration_inputs, quantize_model

    return quantize_model(cnn, calibration_inputs(cnn, random_samples=4))


def q_dq_count(model: onnx.ModelProto) -> int:
    return sum(node.op_type in ("QuantizeLinear", "DequantizeLinear") for node in model.graph.node)


def test_quantized_is_self_for_a_qdq_model_and_the_optimizer_keeps_q_dq(qdq_model):
    design = analytic(qdq_model)
    assert design.is_qdq and design.quantized() is design
    assert q_dq_count(design.graph.model) == q_dq_count(qdq_model) > 0
    assert [stat.name for stat in design.optimize_report.passes] == list(QDQ_PASSES)
    assert design.place().evaluation.feasible


def test_quantized_float_design_is_placed_again_with_the_same_arguments(placed_cnn):
    quantized = placed_cnn.quantized(random_samples=4)
    assert quantized is not placed_cnn and quantized.is_qdq and quantized.float_design is placed_cnn
    assert quantized.board is placed_cnn.board and quantized.precision == placed_cnn.precision
    assert quantized.placed and quantized.placement.placement.method == placed_cnn.placement.placement.method
    assert not analytic(models.mlp(batch=1)).quantized(random_samples=2).placed


def test_compile_writes_the_placement_that_was_planned(cnn, tmp_path):
    design = analytic(cnn)
    design.place()
    result = design.compile(tmp_path / "project", random_samples=4)
    assert result.quantized_here and result.project == tmp_path / "project"
    planned = json.loads((tmp_path / "project" / "design.json").read_text())["placement"]
    quantized = design.quantized(random_samples=4)  # same calibration: the same QDQ model, placed the same way
    assert planned["devices"] == {op: device.name for op, device in quantized.op_devices().items()}
    assert planned["value"] == pytest.approx(quantized.placement.value, rel=1e-12)
    assert analytic(onnx.load(tmp_path / "project" / "model.qdq.onnx")).compile(tmp_path / "again").quantized_here \
        is False  # a QDQ model is compiled as it is


def test_csim_without_a_project_compiles_into_a_temporary_one(cnn):
    report = analytic(cnn).quantized(random_samples=4).csim()
    assert report.ok and report.cores and all(core.bit_exact for core in report.cores)
    assert not Path(report.project).exists()


def test_quantized_is_built_once_per_calibration_and_follows_a_new_placement():
    design = Design(models.mlp(batch=1, sizes=(16, 64, 32, 5)), "zcu104", profile_cpu=False)
    first = design.quantized(random_samples=4)
    assert design.quantized(random_samples=4) is first
    assert design.quantized(random_samples=5) is not first
    design.place("throughput", "greedy")
    again = design.quantized(random_samples=4)
    assert again is first and again.placement.placement.method == "greedy"


def test_search_never_divides_by_a_batch_the_model_does_not_have():
    from fpgaplace.flow.search import search

    said: list[str] = []
    ranked = search(models.cnn_residual(batch=1), "zcu104", batches=(1, 4), optimizer=(True,), time_limit=20,
                    progress=said.append, profile_cpu=False)
    assert ranked and {r.candidate.batch for r in ranked} == {1}
    assert any("batch 4" in line and "fixed batch of 1" in line for line in said)
    with pytest.raises(FpgaplaceError, match="fixed batch of 1"):
        search(models.cnn_residual(batch=1), "zcu104", batches=(4,), optimizer=(True,), time_limit=5,
               profile_cpu=False)


def test_all_methods_stop_at_the_time_limit_and_say_which_were_skipped():
    problem = load_input(WORKLOAD)
    seen: list[str] = []
    results = place_problem(problem, method="all", time_limit=1e-3, progress=seen.append)
    skipped = [line.split(":")[0] for line in seen if "limit is spent" in line]
    assert len(results) == 1 and len(skipped) >= 5 and results[0].placement.method not in skipped, seen
    assert len(place_problem(problem, method="all", time_limit=60)) > 5


@pytest.mark.parametrize("gap", [-0.1, 1.0, float("nan")])
def test_a_gap_outside_zero_to_one_is_a_one_line_error(gap):
    problem = load_input(WORKLOADS / "latency" / "layer-bert24_inference.json")
    with pytest.raises(FpgaplaceError, match="gap: expected a fraction"):
        place_problem(problem, "latency", "ip", 5, gap=gap)


def test_gap_zero_asks_the_latency_ip_for_proven_optimality():
    """Layer BERT-24's latency optimum is proven (its bound meets the value) when no gap is allowed."""
    problem = load_input(WORKLOADS / "latency" / "layer-bert24_inference.json")
    [result] = place_problem(problem, "latency", "ip", 30, gap=0.0)
    assert result.placement.bound is not None and result.placement.gap is not None
    assert result.placement.gap <= 1e-6
    assert evaluate(problem, result.placement).latency == pytest.approx(result.value)


@pytest.mark.parametrize("what", ["int16 precision", "QONNX Trunc"])
def test_compile_refuses_what_it_cannot_build_in_one_line(tmp_path, what):
    """Costing and placing take int16 and any QONNX; the generated hardware is int8 (int4 and int2
    weights of a float model), or the QONNX quantizers' own widths, and a QONNX Trunc is not lowered yet."""
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    from real_models import qonnx

    if what == "int16 precision":
        design = Design(models.cnn_residual(batch=1), "zcu104", profile_cpu=False, precision="int16")
        expected = "precision int16: compile generates int8 hardware"
    else:
        design = Design(qonnx(), "zcu104", profile_cpu=False)
        expected = r"QONNX Trunc '[^']+': Trunc is not lowered"
    assert design.place().value > 0  # it places
    with pytest.raises(FpgaplaceError, match=expected):
        design.compile(tmp_path / "project")
    assert not (tmp_path / "project").exists()  # nothing half-written
