"""A core's single-sample latency from its kernels' fills (``hw.geometry.Fill``,
``hw.kernel.pipeline_latency``, ``hw.registry.core_latency``): the composition rules on hand-made
stages, every kernel's fill well formed on compiled cores, and (slow) the latency ``sim`` prints
beside the RTL's first-output time, on the small residual CNN and on a deeper chain of convs,
each compiled as one core so that one RTL top holds the whole model; and the placement's latency
objective, which reads the same ``dataflow_latency`` for a core before folding, beside sim's."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import helper
from test_const_add import _model as float_model
from test_const_add import _tensor as float_tensor

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.hw.geometry import Fill
from fpgaplace.hw.kernel import STAGE_DELAY, pipeline_latency, stage_times, unit_fill
from fpgaplace.model import zoo
from fpgaplace.place.solvers.evaluate import unit_compute
from fpgaplace.project.record import load
from fpgaplace.sim.event import simulate
from fpgaplace.sim.rtl_project import simulate_core

ONE_CORE_BOARD = Path(__file__).parent / "boards" / "pynq-z2-one-core.yaml"
LATENCY_TOLERANCE = 0.10
PLANNED_TOLERANCE = 0.30  # the placement's figure for a core before folding, against sim's after
CALIBRATION = 32  # random calibration samples (compile's default)


def lane(cycles: int) -> Fill:
    return Fill(reading=cycles, first=STAGE_DELAY, work=cycles + STAGE_DELAY, tail=STAGE_DELAY)


def test_a_chain_of_streaming_stages_overlaps():
    """Lane stages pass a beat on as it comes: the chain takes the slowest stage plus a delay a
    stage, not the sum."""
    cycles = [100, 400, 250, 400, 100]
    stages = [([f"t{i}"], f"t{i + 1}", lane(c)) for i, c in enumerate(cycles)]
    latency = pipeline_latency(stages, [f"t{len(cycles)}"])
    assert max(cycles) <= latency <= max(cycles) + len(cycles) * 2 * STAGE_DELAY
    assert latency < sum(cycles) / 2


def test_a_buffering_stage_waits_for_its_whole_input():
    """A stage that needs its whole input (a dense layer's vector) starts its outputs after the
    producer's last beat, and its own work follows."""
    dense = unit_fill(300, 1, 20, 0, 280)
    first, last = dense.outputs(10.0, 510.0)
    assert first >= 510.0 and last >= 510.0 + 280
    alone_first, alone_last = dense.outputs(0.0, 0.0)  # input at hand: its own pace
    assert alone_first == 20 + STAGE_DELAY and alone_last == 300 + STAGE_DELAY


def test_of_two_inputs_the_later_counts():
    """An add waits for its later input: a fast skip path does not shorten the slow branch."""
    stages = [(["x"], "slow", lane(900)), (["x"], "fast", lane(50)), (["slow", "fast"], "y", lane(60))]
    assert pipeline_latency(stages, ["y"]) >= 900


def test_an_operand_that_waits_is_buffered_for_the_samples_in_flight():
    """An add's early operand waits for its late one (``hw.buffers.reader_buffers``): its FIFO
    holds what the early producer writes meanwhile, a sample every interval; a forked input
    nothing more than its wait (no whole sample a branch); a concat's inputs a turn (a row of its
    output) beyond their wait; a plain edge nothing beyond its two beats."""
    from fpgaplace.hw.buffers import PLAIN_BEATS, fifo_beats, reader_buffers

    stages = [(["x"], "fast", lane(8)), (["x"], "slow", unit_fill(8, 1, 8, 40, 40)), (["fast", "slow"], "y", lane(8))]
    sizes = {"x": 8, "fast": 8, "slow": 8, "y": 8}
    held = reader_buffers(stages, ["y"], sizes, interval=8)
    assert held["x"] == [0, 0] and held["y"] == [0]
    times = stage_times(stages)
    wait = times["slow"][0] - times["fast"][0]  # the add starts on its later operand's first beat
    assert held["fast"][0] >= 8 * (wait // 8) > 8 * 3 and held["slow"] == [0]
    assert fifo_beats(held["fast"][0], 8) > PLAIN_BEATS == fifo_beats(held["y"][0], 1)
    turned = reader_buffers(stages, ["y"], sizes, interval=8, turns={"y": 6})
    assert turned["fast"] == [held["fast"][0] + 6] and turned["slow"] == [6]
    assert reader_buffers(stages, ["y"], sizes, interval=8, turns={"y": 20})["slow"] == [8]  # at most a sample


@pytest.fixture(scope="module")
def one_core_cnn_design(tmp_path_factory) -> tuple[Path, Design]:
    """The small residual CNN (16 px) compiled as one pynq-z2 core, and the int8 design placed."""
    folder = tmp_path_factory.mktemp("latency") / "cnn"
    design = Design(zoo.cnn_residual(batch=1, image=16), load_board(ONE_CORE_BOARD), profile_cpu=False)
    design.compile(folder, random_samples=CALIBRATION)
    return folder, design.quantized(random_samples=CALIBRATION)


@pytest.fixture(scope="module")
def one_core_cnn(one_core_cnn_design) -> Path:
    return one_core_cnn_design[0]


def test_compiled_core_latency_is_between_the_interval_and_the_sum(one_core_cnn: Path):
    (core,) = load(one_core_cnn).cores
    assert {layer.kernel for layer in core.layers} >= {"conv2d", "maxpool", "add", "dense"}
    total = sum(layer.cycles for layer in core.layers)
    assert core.interval_cycles <= core.latency_cycles < total / 2, (core.latency_cycles, total)


def test_sim_latency_is_design_json_latency(one_core_cnn: Path):
    (core,) = load(one_core_cnn).cores
    result = simulate(one_core_cnn, 1)
    assert result.latency_cycles == pytest.approx(core.latency_cycles, rel=0.01)


def core_figures(design: Design, core) -> tuple[float, float]:
    """(the placement's latency of ``core``'s ops, the old sum of their latencies), in us: the
    evaluator's time for them as one unit, transfers aside (``evaluate.unit_compute``), with the
    stages' fills and without."""
    problem = design.problem
    device = design.device_names().index(core.name)
    members = [v for v in range(problem.n) if design.placement.placement.device[v] == device]
    kind = problem.devices()[device][0]
    preds, succ = problem.predecessors(), problem.successors()
    return (unit_compute(problem, members, kind, preds, succ),
            unit_compute(problem.additive(), members, kind, preds, succ))


def test_placement_latency_of_a_core_is_sims(one_core_cnn_design):
    """The placement's latency objective reads a core's dataflow latency (``hw.kernel.dataflow_latency``,
    as ``sim`` does): before folding, each stage paced at the core's load, it is within
    ``PLANNED_TOLERANCE`` of what ``sim`` takes from the folded stages (+22% measured; the
    foldings land at or below the load), where the sum of the ops' latencies (the old objective,
    the core's load) is less than half of it. The placement's whole figure adds the transfers."""
    project, design = one_core_cnn_design
    (core,) = load(project).cores
    sim_us = simulate(project, 1).latency_us
    assert sim_us == pytest.approx(core.latency_cycles / core.clock_mhz)
    planned, summed = core_figures(design, core)
    assert abs(planned - sim_us) <= PLANNED_TOLERANCE * sim_us, (planned, sim_us)
    assert abs(summed - sim_us) > PLANNED_TOLERANCE * sim_us, (summed, sim_us)
    assert design.placement.evaluation.latency >= planned


def conv_chain_model() -> onnx.ModelProto:
    """A deeper chain: five convs (3x3, 1x1, one of stride 2) with ReLUs, a max pool between,
    a global average pool and a dense classifier."""
    nodes, weights, x = [], [], "x"
    layers = [(8, 4, 3, 1), (8, 8, 3, 1), ("pool",), (8, 8, 3, 1), (16, 8, 1, 1), (16, 16, 3, 2)]
    for i, layer in enumerate(layers):
        if layer == ("pool",):
            nodes.append(helper.make_node("MaxPool", [x], [f"p{i}"], name=f"pool{i}", kernel_shape=[2, 2],
                                          strides=[2, 2]))
            x = f"p{i}"
            continue
        cout, cin, k, stride = layer
        weights.append(float_tensor(f"w{i}", (cout, cin, k, k), seed=i))
        nodes += [helper.make_node("Conv", [x, f"w{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[k, k],
                                   strides=[stride, stride], pads=[k // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}")]
        x = f"r{i}"
    nodes += [helper.make_node("GlobalAveragePool", [x], ["g"], name="gap"),
              helper.make_node("Flatten", ["g"], ["f"], name="flatten", axis=1),
              helper.make_node("Gemm", ["f", "fc"], ["z"], name="fc", transB=1)]
    weights.append(float_tensor("fc", (10, 16), seed=9))
    return float_model(nodes, [1, 4, 16, 16], [1, 10], weights, name="conv_chain")


def assert_sim_latency_is_the_rtl_s(project: Path, tmp_path: Path) -> None:
    """``sim``'s one-sample latency within 10% of the RTL's first output (back to back from reset)."""
    (core,) = load(project).cores
    # the latency is the back-to-back phase's first output: one sample of it
    measured = simulate_core(project, core, tmp_path / "rtl", samples=1, steady=1)
    assert measured.bit_exact
    predicted = simulate(project, 1).latency_cycles
    assert measured.latency_measured is not None
    assert abs(predicted - measured.latency_measured) <= LATENCY_TOLERANCE * measured.latency_measured, (
        predicted, measured.latency_measured)
    total = sum(layer.cycles for layer in core.layers)
    assert measured.latency_measured < total, "the RTL overlaps its stages (the old sum is no estimate)"


@pytest.mark.slow
def test_small_cnn_latency_is_the_rtl_s(tmp_path: Path):
    """The small CNN on an 8 x 8 image (its layers and their overlap as at 16 px, a quarter of the
    RTL's cycles): sim's latency within 10% of the RTL's (3% off it here)."""
    project = tmp_path / "cnn8"
    Design(zoo.cnn_residual(batch=1, image=8), load_board(ONE_CORE_BOARD), profile_cpu=False).compile(
        project, random_samples=CALIBRATION)
    assert_sim_latency_is_the_rtl_s(project, tmp_path)


@pytest.mark.slow
def test_conv_chain_latency_is_the_rtl_s(tmp_path: Path):
    project = tmp_path / "chain"
    Design(conv_chain_model(), load_board(ONE_CORE_BOARD), profile_cpu=False).compile(project, random_samples=4)
    (core,) = load(project).cores
    assert sum(layer.kernel == "conv2d" for layer in core.layers) == 5
    assert_sim_latency_is_the_rtl_s(project, tmp_path)


def test_the_layers_are_folded_around_their_fifos(one_core_cnn_design, tmp_path):
    """A core whose budget holds the layers as first folded but not the FIFOs beside them (the
    residual skip's, ``hw.buffers``): compile folds the layers again in what the FIFOs leave, or
    says in one line that no folding leaves room for them; it never writes a core over budget."""
    from dataclasses import replace

    from fpgaplace.util.errors import FpgaplaceError

    folder, _ = one_core_cnn_design
    (core,) = load(folder).cores
    layers = {key: sum(layer.resources[key] for layer in core.layers) for key in core.resources}
    key = next(key for key in ("bram36", "lut") if core.resources[key] > layers[key])  # the FIFOs' memory
    tight = core.resources[key] - 1
    board = load_board(ONE_CORE_BOARD)
    board = replace(board, cores=[replace(c, **{key: tight}) for c in board.cores])
    design = Design(zoo.cnn_residual(batch=1, image=16), board, profile_cpu=False)
    try:
        design.compile(tmp_path / "tight", random_samples=CALIBRATION)
    except FpgaplaceError as error:
        assert "FIFOs in front of its stages' readers" in str(error) and "\n" not in str(error), error
        assert not (tmp_path / "tight").exists()
    else:
        (folded,) = load(tmp_path / "tight").cores
        assert folded.resources[key] <= tight and folded.resources[key] > sum(
            layer.resources[key] for layer in folded.layers)
