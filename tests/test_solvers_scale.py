"""Method auto on graphs past the DP's state space: a YOLO-style detector and a BERT-base-style
encoder built here with onnx.helper, and a synthetic wide graph. Every answer is feasible by the
trusted evaluator and carries a bound and a gap."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import onnx
import pytest

from fpgaplace import Design
from fpgaplace.model.zoo import _Builder, _conv_bn, _dense, _float_input, _gelu, _layer_norm
from fpgaplace.place.solvers import dp, dp_ideals
from fpgaplace.place.solvers.evaluate import evaluate
from fpgaplace.place.solvers.problem import DeviceKind, PlacementProblem
from fpgaplace.place.solvers.run import SolveOptions, solve
from fpgaplace.util.errors import FpgaplaceError

# ----------------------------------------------------------------------------- model builders


def _conv_silu(b: _Builder, x: str, prefix: str, cin: int, cout: int, k: int, stride: int = 1) -> str:
    y = _conv_bn(b, x, prefix, cin, cout, k, stride)
    return b.node("Mul", [y, b.node("Sigmoid", [y])])


def _c2f(b: _Builder, x: str, prefix: str, cin: int, cout: int, repeats: int, shortcut: bool = True) -> str:
    """YOLOv8's C2f: 1x1 conv, split in two halves, a chain of bottlenecks on one half, every
    intermediate concatenated, 1x1 conv."""
    half = cout // 2
    y = _conv_silu(b, x, f"{prefix}_cv1", cin, 2 * half, 1)
    sizes = b.const(f"{prefix}_split", np.array([half, half], np.int64))
    left, right = f"{prefix}_left", f"{prefix}_right"
    b.nodes.append(onnx.helper.make_node("Split", [y, sizes], [left, right], name=f"{prefix}_split", axis=1))
    parts, last = [left, right], right
    for i in range(repeats):
        z = _conv_silu(b, _conv_silu(b, last, f"{prefix}_m{i}a", half, half, 3), f"{prefix}_m{i}b", half, half, 3)
        last = b.node("Add", [z, last]) if shortcut else z
        parts.append(last)
    return _conv_silu(b, b.node("Concat", parts, axis=1), f"{prefix}_cv2", half * (2 + repeats), cout, 1)


def yolo_detector(image: int = 320, width: int = 16, depth: int = 1, classes: int = 80,
                  seed: int = 7) -> onnx.ModelProto:
    """A YOLOv8-style detector: C2f backbone, SPPF, FPN/PAN neck, three decoupled heads."""
    b = _Builder(seed)
    w = [width * 2**i for i in range(5)]
    x = _conv_silu(b, _conv_silu(b, "image", "stem", 3, w[0], 3, 2), "down1", w[0], w[1], 3, 2)
    x = _c2f(b, x, "c1", w[1], w[1], depth)
    p3 = _c2f(b, _conv_silu(b, x, "down2", w[1], w[2], 3, 2), "c2", w[2], w[2], 2 * depth)
    p4 = _c2f(b, _conv_silu(b, p3, "down3", w[2], w[3], 3, 2), "c3", w[3], w[3], 2 * depth)
    x = _c2f(b, _conv_silu(b, p4, "down4", w[3], w[4], 3, 2), "c4", w[4], w[4], depth)
    pooled = [_conv_silu(b, x, "sppf_cv1", w[4], w[4] // 2, 1)]
    for _ in range(3):
        pooled.append(b.node("MaxPool", [pooled[-1]], kernel_shape=[5, 5], pads=[2] * 4))
    p5 = _conv_silu(b, b.node("Concat", pooled, axis=1), "sppf_cv2", 2 * w[4], w[4], 1)
    scales = b.const("upsample_scales", np.array([1, 1, 2, 2], np.float32))

    def up(t: str) -> str:
        return b.node("Resize", [t, "", scales], mode="nearest")

    n4 = _c2f(b, b.node("Concat", [up(p5), p4], axis=1), "n4", w[4] + w[3], w[3], depth, False)
    o3 = _c2f(b, b.node("Concat", [up(n4), p3], axis=1), "n3", w[3] + w[2], w[2], depth, False)
    o4 = _c2f(b, b.node("Concat", [_conv_silu(b, o3, "pan3", w[2], w[2], 3, 2), n4], axis=1), "o4",
              w[2] + w[3], w[3], depth, False)
    o5 = _c2f(b, b.node("Concat", [_conv_silu(b, o4, "pan4", w[3], w[3], 3, 2), p5], axis=1), "o5",
              w[3] + w[4], w[4], depth, False)
    heads = []
    for i, (o, c) in enumerate(((o3, w[2]), (o4, w[3]), (o5, w[4]))):
        box = _conv_silu(b, _conv_silu(b, o, f"h{i}_box1", c, 64, 3), f"h{i}_box2", 64, 64, 3)
        box = b.node("Conv", [box, b.weight(f"h{i}_box_w", (64, 64, 1, 1))])
        cls = _conv_silu(b, _conv_silu(b, o, f"h{i}_cls1", c, 80, 3), f"h{i}_cls2", 80, 80, 3)
        cls = b.node("Sigmoid", [b.node("Conv", [cls, b.weight(f"h{i}_cls_w", (classes, 80, 1, 1))])])
        shape = b.const(f"h{i}_shape", np.array([0, 64 + classes, -1], np.int64))
        heads.append(b.node("Reshape", [b.node("Concat", [box, cls], axis=1), shape]))
    b.node("Concat", heads, output="detections", axis=2)
    return b.model("yolo_detector", [_float_input("image", [1, 3, image, image])],
                   [_float_input("detections", [1, 64 + classes, "anchors"])])


def bert_base(layers: int = 12, seq: int = 128, hidden: int = 768, heads: int = 12, seed: int = 2) -> onnx.ModelProto:
    """A BERT-base-style encoder: ``layers`` post-LN encoder layers in a chain."""
    b = _Builder(seed)
    head_dim = hidden // heads
    split_shape = b.const("split_heads_shape", np.array([0, seq, heads, head_dim], np.int64))
    merge_shape = b.const("merge_heads_shape", np.array([0, seq, hidden], np.int64))
    scale = b.const("attention_scale", np.array(1.0 / math.sqrt(head_dim), np.float32))
    x = "hidden_states"
    for layer in range(layers):
        p = f"l{layer}_"

        def heads_first(t: str, perm: list[int]) -> str:
            return b.node("Transpose", [b.node("Reshape", [t, split_shape])], perm=perm)

        q = heads_first(_dense(b, x, p + "query", hidden, hidden), [0, 2, 1, 3])
        k = heads_first(_dense(b, x, p + "key", hidden, hidden), [0, 2, 3, 1])
        v = heads_first(_dense(b, x, p + "value", hidden, hidden), [0, 2, 1, 3])
        probs = b.node("Softmax", [b.node("Mul", [b.node("MatMul", [q, k]), scale])], axis=-1)
        context = b.node("Transpose", [b.node("MatMul", [probs, v])], perm=[0, 2, 1, 3])
        context = b.node("Reshape", [context, merge_shape])
        attended = _layer_norm(b, b.node("Add", [_dense(b, context, p + "attn_out", hidden, hidden), x]),
                               p + "ln1", hidden)
        ffn = _dense(b, _gelu(b, _dense(b, attended, p + "ffn_in", hidden, 4 * hidden)), p + "ffn_out",
                     4 * hidden, hidden)
        x = _layer_norm(b, b.node("Add", [ffn, attended]), p + "ln2", hidden,
                        output="encoded" if layer == layers - 1 else None)
    return b.model("bert_base", [_float_input("hidden_states", [1, seq, hidden])],
                   [_float_input("encoded", [1, seq, hidden])])


def wide_problem(branches: int = 12, length: int = 25, seed: int = 0) -> PlacementProblem:
    """A source fanning out into ``branches`` chains of ``length`` nodes joined by a sink: about
    length^branches ideals, far past the DP's state space."""
    rng = np.random.default_rng(seed)
    n = branches * length + 2
    edges = []
    for c in range(branches):
        first = 1 + c * length
        edges.append((0, first))
        edges += [(first + i, first + i + 1) for i in range(length - 1)]
        edges.append((first + length - 1, n - 1))
    kinds = [DeviceKind("fpga", 2, 40.0, False), DeviceKind("cpu", 2, math.inf, True)]
    fpga = rng.uniform(1, 3, n)
    return PlacementProblem(
        names=[f"v{i}" for i in range(n)], ids=list(range(n)), edges=edges, kinds=kinds,
        latency=np.column_stack([fpga, fpga * rng.uniform(2, 8, n)]), size=rng.uniform(0, 1, n),
        transfer=rng.uniform(0, 0.5, n), backward=np.zeros(n, bool), color=np.full(n, -1), source="wide")


# ----------------------------------------------------------------------------- tests


def assert_answer_with_bound(problem: PlacementProblem, result, time_limit: float) -> None:
    evaluation = evaluate(problem, result.placement)
    assert evaluation.feasible and evaluation.contiguous
    assert result.value == pytest.approx(evaluation.max_load, rel=1e-12)
    assert 0 < result.placement.bound <= result.value * (1 + 1e-9)
    assert math.isfinite(result.placement.gap)
    assert result.placement.seconds < time_limit + 5  # the IP model is built after the starts


def test_wide_graph_is_past_the_state_space():
    problem = wide_problem()
    blocks = dp_ideals.build_blocks(problem)
    with pytest.raises(dp_ideals.StateSpaceTooLarge, match="method auto coarsens it"):
        dp_ideals.enumerate_ideals(blocks.count, blocks.edges, limit=20_000)
    assert isinstance(dp_ideals.StateSpaceTooLarge("x"), FpgaplaceError)


def test_coarsened_intervals_are_a_chain_of_convex_sets():
    problem = wide_problem()
    blocks = dp_ideals.build_blocks(problem)
    order = dp_ideals.topological_orders(blocks)[2]
    coarse = dp.coarsen_blocks(problem, blocks, order, 40)
    assert 20 <= coarse.count <= 60
    assert all(a < b for a, b in coarse.edges)  # intervals numbered along the order: edges go forward
    placement = dp.solve_coarsened_dp(problem, time_limit=10)
    evaluation = evaluate(problem, placement)
    assert evaluation.feasible and evaluation.contiguous
    assert placement.value == pytest.approx(evaluation.max_load)
    assert placement.bound <= placement.value
    assert placement.status.startswith("heuristic (DP over")


def test_coarsening_ends_when_no_accelerator_has_memory():
    """A memory of 0 cuts the order at every block with a size: shrinking the pieces alone never
    brings the ideals within the limit (the loop once ran until killed); the last round drops the
    memory cuts, and the split puts every sized node on a CPU."""
    wide = wide_problem()
    problem = replace(wide, kinds=[replace(wide.kinds[0], memory=0.0), wide.kinds[1]])
    placement = dp.solve_coarsened_dp(problem, time_limit=10)
    evaluation = evaluate(problem, placement)
    assert evaluation.feasible and evaluation.contiguous
    assert all(problem.kinds[problem.device_kinds()[d]].is_cpu
               for d, size in zip(placement.device, problem.size, strict=True) if size > 0)


def long_chain(n: int, seed: int = 0) -> PlacementProblem:
    """A chain of ``n`` ops on six accelerators (each holding about a tenth of the chain's bytes)
    and one slow CPU."""
    rng = np.random.default_rng(seed)
    size = rng.uniform(0, 1e6, n)
    kinds = [DeviceKind("fpga", 6, float(size.sum()) / 10, False), DeviceKind("cpu", 1, math.inf, True)]
    fpga = rng.uniform(0.1, 2, n)
    return PlacementProblem(
        names=[f"v{i}" for i in range(n)], ids=list(range(n)), edges=[(i, i + 1) for i in range(n - 1)],
        kinds=kinds, latency=np.column_stack([fpga, rng.uniform(5, 50, n)]), size=size,
        transfer=rng.uniform(0, 0.5, n), backward=np.zeros(n, bool), color=np.full(n, -1), source="chain")


@pytest.mark.parametrize("objective", ["throughput", "latency"])
def test_a_twenty_thousand_op_graph_gets_no_ip_it_cannot_build(objective):
    """The IP of 20,000 ops (about 420,000 variables) takes far longer to build than the limit
    leaves: method ip keeps its best start (the coarse DP's, greedy's) and says why; PipeDream's
    all-pairs table is refused; the latency bounds walk shorter chains (once 300 s and 3 GB)."""
    chain = long_chain(20_000)  # with skip edges, so not a chain (a chain's split needs no IP)
    problem = replace(chain, edges=[*chain.edges, *((i, i + 2) for i in range(0, 19_998, 100))])
    seen: list[str] = []
    result = solve(problem, "ip", SolveOptions(objective=objective, time_limit=3, progress=seen.append))
    evaluation = evaluate(problem, result.placement)
    assert evaluation.feasible and evaluation.contiguous
    assert result.value == pytest.approx(evaluation.latency if objective == "latency" else evaluation.max_load,
                                         rel=1e-12)
    assert result.placement.bound <= result.value
    assert "IP skipped" in result.placement.status
    assert any("pipedream: 20,000 ops is more than" in message for message in seen)


def test_auto_answers_past_the_state_space_with_a_bound():
    problem = wide_problem()
    seen: list[str] = []
    result = solve(problem, "auto", SolveOptions(time_limit=4, progress=seen.append))
    assert_answer_with_bound(problem, result, 4)
    assert result.placement.method == "ip"
    assert any("coarsened" in message for message in seen)
    assert result.value <= min(s.value for s in result.starts) * (1 + 1e-9)
    assert not any("use --method" in message or "method ip" in message for message in seen)


@pytest.mark.slow
def test_auto_places_a_yolo_style_detector():
    design = Design(yolo_detector(), "zcu104", profile_cpu=False, optimize=False)
    problem = design.problem
    blocks = dp_ideals.build_blocks(problem)
    assert 250 <= blocks.count <= 700
    result = design.place("throughput", "auto", time_limit=8)
    assert_answer_with_bound(problem, result, 8)


@pytest.mark.slow
def test_auto_places_a_bert_base_style_encoder():
    design = Design(bert_base(hidden=64, heads=4, seq=16), "zcu104", profile_cpu=False, optimize=False)
    problem = design.problem
    assert 300 <= dp_ideals.build_blocks(problem).count <= 700
    result = design.place("throughput", "auto", time_limit=8)
    assert_answer_with_bound(problem, result, 8)
    latency = design.place("latency", "auto", time_limit=8)
    assert evaluate(problem, latency.placement).feasible
    assert latency.placement.bound <= latency.value * (1 + 1e-9)


def random_chain(seed: int) -> PlacementProblem:
    """A short chain with its ops numbered out of chain order, on two accelerator kinds (one at
    times with no memory, some ops unsupported on each) and at most one CPU."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 16))
    kinds = [DeviceKind("a", int(rng.integers(0, 3)), float(rng.uniform(1, 6)), False),
             DeviceKind("b", int(rng.integers(1, 3)), float(rng.uniform(1, 6)) if seed % 3 else 0.0, False),
             DeviceKind("cpu", int(rng.integers(0, 2)), math.inf, True)]
    latency = np.column_stack([rng.uniform(0.1, 3, n), rng.uniform(0.1, 3, n), rng.uniform(1, 9, n)])
    latency[rng.random((n, 3)) < 0.05] = np.inf
    size = np.where(rng.random(n) < 0.3, 0.0, rng.uniform(0, 1, n))
    position = rng.permutation(n)  # op position[i] is the chain's i-th
    return PlacementProblem(
        names=[f"v{i}" for i in range(n)], ids=list(range(n)),
        edges=[(int(position[i]), int(position[i + 1])) for i in range(n - 1)], kinds=kinds, latency=latency,
        size=size, transfer=rng.uniform(0, 4, n), backward=np.zeros(n, bool), color=np.full(n, -1), source="chain")


def test_a_chain_split_is_the_ideal_dps_optimum(monkeypatch):
    """The linear partition of a chain (``chain.solve_chain``) against the DP over ideals on 40
    short chains: the same optimum by the evaluator, or both find no split."""
    from fpgaplace.place.solvers import chain

    compared = 0
    for seed in range(40):
        problem = random_chain(seed)
        order = chain.chain_order(problem)
        assert order is not None and sorted(order.tolist()) == list(range(problem.n))
        try:
            split = chain.solve_chain(problem, order)
        except FpgaplaceError:
            split = None
        with monkeypatch.context() as patched:
            patched.setattr(dp, "chain_order", lambda _: None)
            try:
                reference = dp.solve_throughput_dp(problem)
            except FpgaplaceError:
                reference = None
        assert (split is None) == (reference is None), seed
        if split is None:
            continue
        evaluation = evaluate(problem, split)
        assert evaluation.feasible and evaluation.contiguous
        assert evaluation.max_load == pytest.approx(reference.value, rel=1e-7)
        assert split.bound <= evaluation.max_load * (1 + 1e-9) and split.status == "optimal"
        compared += 1
    assert compared >= 20


def test_a_dag_or_a_coloured_chain_is_not_a_chain():
    from fpgaplace.place.solvers import chain

    problem = random_chain(1)
    assert chain.chain_order(replace(problem, edges=[*problem.edges, problem.edges[0][::-1]])) is None
    assert chain.chain_order(replace(problem, color=np.zeros(problem.n, dtype=np.int64))) is None
    assert chain.chain_order(wide_problem()) is None


@pytest.mark.parametrize("n", [20_000, pytest.param(200_000, marks=pytest.mark.slow)])
def test_a_long_chain_is_split_optimally_within_the_limit(n):
    """Method auto on a chain of 20,000 (and 200,000) ops: the linear partition's optimum, feasible
    by the evaluator, its lower bound within 1e-9 (the ideals' DP refuses such a chain)."""
    problem = long_chain(n)
    result = solve(problem, "auto", SolveOptions(time_limit=30))
    evaluation = evaluate(problem, result.placement)
    assert evaluation.feasible and evaluation.contiguous
    assert result.value == pytest.approx(evaluation.max_load, rel=1e-12)
    assert result.placement.status == "optimal"
    assert result.value * (1 - 1e-8) <= result.placement.bound <= result.value


def test_a_chains_least_latency_split_is_the_latency_ips_optimum():
    """``chain.solve_chain_latency`` (one interval an accelerator, CPU stretches anywhere) against
    the latency IP solved to optimality on short chains: the same latency by the evaluator."""
    from fpgaplace.place.solvers import chain
    from fpgaplace.place.solvers.ip.latency import solve_latency_ip

    compared = 0
    for seed in range(12):
        problem = random_chain(seed)
        problem = replace(problem, kinds=[*problem.kinds[:2], replace(problem.kinds[2], count=1)])
        order = chain.chain_order(problem)
        try:
            split = chain.solve_chain_latency(problem, order)
        except FpgaplaceError:
            continue
        evaluation = evaluate(problem, split)
        assert evaluation.feasible
        assert evaluation.latency == pytest.approx(split.value, rel=1e-9)
        reference = solve_latency_ip(problem, time_limit=30, gap=0.0)
        assert evaluation.latency == pytest.approx(evaluate(problem, reference).latency, rel=1e-6), seed
        compared += 1
    assert compared >= 6


def test_method_ip_on_a_chain_answers_with_the_chain_split():
    problem = long_chain(2_000)
    for objective in ("throughput", "latency"):
        result = solve(problem, "ip", SolveOptions(objective=objective, time_limit=10))
        evaluation = evaluate(problem, result.placement)
        assert evaluation.feasible
        assert result.placement.status.startswith("optimal") and "chain split" in result.placement.status
        assert result.placement.bound == pytest.approx(result.value, rel=1e-8)
