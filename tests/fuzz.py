"""A seeded generator of bad and mutated inputs for the ``fpgaplace`` command, and a runner.

Four families, each a list of ``Case``s built from small valid inputs and seeded mutations:

- ``onnx``: tiny models (a Conv net, an MLP) as they are, behind a QONNX Quant, with a gate broadcast
  per channel, per pixel or along W (odd weight scales included) in a two-activation op, with a data movement op of
  fuzzed parameters (a Slice step of 0, a Resize scale of 1e9, ...), and with an unknown
  element type, absurd or negative dims, zero strides, value_info contradicting inference, a
  truncated file, a wrong feature dim, a missing initializer, an unknown op, a QONNX rounding mode
  fpgaplace does not run, random byte flips, ...;
- ``board``: board YAMLs from ``boards/zcu104.yaml`` with huge or negative counts, NaN, missing
  fields, alias bombs ("billion laughs"), Python tags, 5,000-digit integers, deep nesting, ...;
- ``workload``: paper workload JSONs with ``maxFPGAs`` 1e9, NaN, 50,000-deep nesting, 5,000-digit
  integers, huge latencies, dangling edges, splits with extra empty groups, ...;
- ``cli``: arguments such as ``--time-limit inf``, ``--out /``, an unwritable ``--out``, bad
  ``--input-shape`` texts, absurd ``--batch``, a ``--batch`` other than the model's fixed one;
- ``project``: a compiled project (the built-in CNN on zcu104, compiled once per process) with
  its ``design.json`` mutated at a random path (a key removed; a value set to null, NaN, -1,
  10**30, a string, a list or an object of the wrong type) or a project file missing, truncated
  or swapped with another (and an MLP's streamed ``weights.bin`` missing or cut short), each run
  through ``csim``, ``sim``, ``report`` or ``flash``'s local checks (to a closed port). A
  mutation the record's rules (``fpgaplace.project.record``) forbid must end in one error line
  naming design.json and the field.

Every case says whether its input is valid (exit 0 expected), invalid (a non-zero exit and one
``error:`` line naming ``mentions`` expected) or unknown (``valid is None``: a random byte flip may
or may not break a file; only "no traceback, no hang" is asked). ``run_case`` runs one case
in-process through typer's ``CliRunner`` with a SIGALRM timeout; ``scripts/fuzz_report.py`` can run
each in a subprocess instead (catching a C-level hang or a memory blow-up, and onnxruntime's own
log lines on stderr).
"""

from __future__ import annotations

import copy
import functools
import json
import random
import signal
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from unittest import mock

import numpy as np
import onnx
import yaml
from onnx import TensorProto, helper, numpy_helper

REPO = Path(__file__).resolve().parents[1]
FAMILIES = ("onnx", "board", "workload", "cli", "project")
MODEL_FLAGS = ("--cpu-cost", "analytic")
PLACE_FLAGS = ("--time-limit", "1", *MODEL_FLAGS)


@dataclass(frozen=True)
class Case:
    """One command line and the files it reads. ``{dir}`` in ``argv`` is the case's folder."""

    family: str
    name: str
    argv: tuple[str, ...]
    files: tuple[tuple[str, bytes], ...] = ()
    valid: bool | None = False
    mentions: tuple[str, ...] = ()
    """Text the error line must contain (``{dir}`` expanded), e.g. the file and the field."""
    forbidden: tuple[str, ...] = ()
    """Files that must not exist afterwards (a YAML tag that ran code would write one)."""
    project: str = ""
    """A compiled project (``base_project`` of this name) copied to ``{dir}/proj`` before ``files`` are written."""
    removed: tuple[str, ...] = ()
    """Files of the copied project removed before the run (relative to ``{dir}``)."""
    time_limit: float | None = None
    """A placing case's --time-limit: its wall time is judged against it, and on exit 0 the
    placement it wrote (``{dir}/placement.json``) by the trusted evaluator."""


@dataclass
class Outcome:
    """What one case did."""

    case: Case
    exit_code: int | None
    seconds: float
    traceback: bool = False
    hang: bool = False
    stderr: str = ""
    problems: list[str] = field(default_factory=list)
    overran: bool = False  # wall time past the case's time limit (``STARTUP_SECONDS``)
    cpu_seconds: float = 0.0  # this process's CPU time over the case (in-process runs)
    accepted_invalid: bool = False  # exit 0 with a placement the evaluator finds infeasible

    @property
    def exit_zero_on_invalid(self) -> bool:
        return self.case.valid is False and self.exit_code == 0

    @property
    def ok(self) -> bool:
        return not self.problems


# ---- small valid inputs ------------------------------------------------------------------------


def conv_model(channels: int = 4, image: int = 8, classes: int = 5, seed: int = 0) -> onnx.ModelProto:
    """x[1,3,H,W] -> Conv 3x3 -> Relu -> GlobalAveragePool -> Flatten -> Gemm -> y[1,classes]."""
    rng = np.random.default_rng(seed)
    weights = [numpy_helper.from_array(rng.standard_normal((channels, 3, 3, 3)).astype(np.float32), "w"),
               numpy_helper.from_array(rng.standard_normal((classes, channels)).astype(np.float32), "fc"),
               numpy_helper.from_array(rng.standard_normal(classes).astype(np.float32), "fc_bias")]
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                              strides=[1, 1]),
             helper.make_node("Relu", ["c"], ["r"], name="relu"),
             helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
             helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "fc", "fc_bias"], ["y"], name="fc", transB=1)]
    graph = helper.make_graph(nodes, "fuzz_conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                 [1, 3, image, image])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, classes])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def broadcast_model(rng: random.Random) -> onnx.ModelProto:
    """A conv model whose Relu output ``r`` meets a gate computed from it in a Mul, Add, Sub, Max or
    Min (either operand order): one value per channel (GlobalAveragePool), per pixel (a 1x1 Conv
    to one channel), along W only (ReduceMean over H, which no core takes) or of the same shape."""
    model = conv_model(rng.choice([2, 4, 8]), rng.choice([4, 6, 8]), rng.choice([3, 5]), rng.randrange(99))
    graph, channels = model.graph, model.graph.initializer[0].dims[0]
    kind = rng.choice(["channel", "pixel", "width", "same"])
    gate = [helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gate")] if kind == "channel" else [
        helper.make_node("Conv", ["r", "gate_w"], ["g"], name="gate", kernel_shape=[1, 1])] if kind == "pixel" else [
        helper.make_node("ReduceMean", ["r"], ["g"], name="gate", axes=[2], keepdims=1)] if kind == "width" else [
        helper.make_node("Sigmoid", ["r"], ["g"], name="gate")]
    if kind == "pixel":
        scale = rng.choice([1e-6, 1.0, 1e6])  # odd scales reach the quantization
        values = np.random.default_rng(rng.randrange(99)).standard_normal((1, channels, 1, 1)) * scale
        graph.initializer.append(numpy_helper.from_array(values.astype(np.float32), "gate_w"))
    op = rng.choice(["Mul", "Add", "Sub", "Max", "Min"])
    operands = ["r", "g"] if rng.random() < 0.5 else ["g", "r"]
    nodes = list(graph.node)
    nodes[2].input[0] = "gated"  # the pool reads the gated tensor
    del graph.node[:]
    graph.node.extend([*nodes[:2], *gate, helper.make_node(op, operands, ["gated"], name="binary"), *nodes[2:]])
    return model


def mlp_model(sizes: tuple[int, ...] = (8, 16, 4), batch: int | str = 1, seed: int = 0) -> onnx.ModelProto:
    """Gemm/Relu layers of ``sizes``."""
    rng = np.random.default_rng(seed)
    nodes, weights, x = [], [], "x"
    for i, (fan_in, fan_out) in enumerate(zip(sizes, sizes[1:], strict=False)):
        weights.append(numpy_helper.from_array(rng.standard_normal((fan_in, fan_out)).astype(np.float32), f"w{i}"))
        nodes.append(helper.make_node("Gemm", [x, f"w{i}"], [f"h{i}"], name=f"fc{i}"))
        x = f"h{i}"
        if i < len(sizes) - 2:
            nodes.append(helper.make_node("Relu", [x], [f"a{i}"], name=f"relu{i}"))
            x = f"a{i}"
    nodes[-1].output[0] = "y"
    graph = helper.make_graph(nodes, "fuzz_mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                [batch, sizes[0]])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, sizes[-1]])], weights)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def board_data() -> dict:
    return yaml.safe_load((REPO / "boards" / "zcu104.yaml").read_text())


def workload_data(rng: random.Random, n: int = 6) -> dict:
    """A chain of ``n`` nodes in the paper's format (2 accelerators, 1 CPU)."""
    nodes = [{"id": i, "supportedOnFpga": 1, "cpuLatency": round(rng.uniform(1, 10), 3),
              "fpgaLatency": round(rng.uniform(0.1, 1), 3), "isBackwardNode": 0, "size": rng.randint(1, 40)}
             for i in range(n)]
    edges = [{"sourceId": i, "destId": i + 1, "cost": round(rng.uniform(0, 0.5), 3)} for i in range(n - 1)]
    return {"maxSizePerFPGA": 100.0, "maxFPGAs": 2, "maxCPUs": 1, "nodes": nodes, "edges": edges}


def _bytes(model: onnx.ModelProto) -> bytes:
    return model.SerializeToString()


def _json(data) -> bytes:
    return json.dumps(data).encode()


def _yaml(data) -> bytes:
    return yaml.safe_dump(data, sort_keys=False).encode()


# ---- the onnx family -----------------------------------------------------------------------------


def _model_case(name: str, model: onnx.ModelProto | bytes, valid: bool | None, command: int,
                mentions: tuple[str, ...] = ()) -> Case:
    """The model run through one of inspect / cost / place / split (by ``command`` mod 4)."""
    data = model if isinstance(model, bytes) else _bytes(model)
    argv = [("inspect", "{dir}/model.onnx"), ("cost", "{dir}/model.onnx", *MODEL_FLAGS),
            ("place", "{dir}/model.onnx", "--board", "zcu104", *PLACE_FLAGS),
            ("split", "{dir}/model.onnx", "--out", "{dir}/split", *PLACE_FLAGS)][command % 4]
    return Case("onnx", name, tuple(argv), (("model.onnx", data),), valid,
                ("{dir}/model.onnx", *mentions) if valid is False else ())


def _base_model(rng: random.Random) -> onnx.ModelProto:
    if rng.random() < 0.5:
        return conv_model(rng.choice([2, 4, 8]), rng.choice([4, 6, 8]), rng.choice([3, 5]), rng.randrange(99))
    return mlp_model(tuple(rng.choice([4, 8, 16]) for _ in range(rng.choice([2, 3, 4]))), 1, rng.randrange(99))


def _first_input_dims(model: onnx.ModelProto):
    return model.graph.input[0].type.tensor_type.shape.dim


def _mutate_elem_type(model, rng):
    model.graph.input[0].type.tensor_type.elem_type = rng.choice([99, 1000, 12345, 40, 25])
    return ("elem type",)


def _mutate_absurd_dim(model, rng):
    dims = _first_input_dims(model)
    axis = rng.randrange(1, len(dims))
    dims[axis].dim_value = rng.choice([10**9, 2**31, 10**12, 2**40, 2**62])
    return ()


def _mutate_negative_dim(model, rng):
    dims = _first_input_dims(model)
    dims[rng.randrange(len(dims))].dim_value = rng.choice([-2, -7, -(2**40)])  # -1 is read as unknown
    return ()


def _mutate_zero_stride(model, rng):
    conv = next((n for n in model.graph.node if n.op_type == "Conv"), None)
    if conv is None:
        return None
    strides = next(a for a in conv.attribute if a.name == "strides")
    strides.ints[:] = rng.choice([[0, 0], [0, 1], [1, 0], [-1, 1]])
    return ("conv",)


def _mutate_value_info(model, rng):
    """A declared intermediate shape that contradicts what the ops compute."""
    node = model.graph.node[0]
    inferred = onnx.shape_inference.infer_shapes(model).graph.value_info
    known = {v.name: v for v in inferred}
    value = known.get(node.output[0])
    if value is None:
        return None
    wrong = onnx.ValueInfoProto()
    wrong.CopyFrom(value)
    dims = wrong.type.tensor_type.shape.dim
    axis = rng.randrange(1, len(dims))
    dims[axis].dim_value = dims[axis].dim_value + rng.choice([1, 3, 17])
    model.graph.value_info.append(wrong)
    return (node.output[0],)


def _mutate_feature_dim(model, rng):
    """The first weight's fan-in no longer matches the input's features."""
    dims = _first_input_dims(model)
    dims[1].dim_value += rng.choice([1, 2, 5])
    return ()


def _mutate_missing_initializer(model, rng):
    victim = rng.randrange(len(model.graph.initializer))
    del model.graph.initializer[victim]
    return ()


def _mutate_unknown_op(model, rng):
    node = model.graph.node[rng.randrange(len(model.graph.node))]
    node.op_type = rng.choice(["FooBar", "Convv", "RELU", ""])
    return ()


def _mutate_no_nodes(model, rng):
    del model.graph.node[:]
    return ()


def _mutate_cycle(model, rng):
    if len(model.graph.node) < 2:
        return None
    first, last = model.graph.node[0], model.graph.node[-1]
    first.input[0] = last.output[0]
    return ("cycle",)


def _mutate_ir_version(model, rng):
    model.ir_version = rng.choice([0, -3])
    return ()


def _mutate_output_dims(model, rng):
    """A declared graph output of the wrong rank."""
    output = model.graph.output[0].type.tensor_type.shape
    output.dim.add().dim_value = rng.choice([2, 9])
    return ()


QONNX_DOMAIN = "qonnx.custom_op.general"


def with_qonnx_input(model: onnx.ModelProto, rounding_mode: str = "ROUND", bits: float = 4.0) -> onnx.ModelProto:
    """``model`` with a QONNX Quant of ``bits`` bits on its first input, as Brevitas exports."""
    x = model.graph.input[0].name
    for node in model.graph.node:
        node.input[:] = ["x_quant" if t == x else t for t in node.input]
    scalars = {"q_scale": 0.125, "q_zero": 0.0, "q_bits": bits}
    model.graph.initializer.extend(numpy_helper.from_array(np.array(v, np.float32), n) for n, v in scalars.items())
    model.graph.node.insert(0, helper.make_node("Quant", [x, *scalars], ["x_quant"], name="quant_input",
                                                domain=QONNX_DOMAIN, signed=1, narrow=0, rounding_mode=rounding_mode))
    model.opset_import.append(helper.make_opsetid(QONNX_DOMAIN, 1))
    return model


def _mutate_qonnx_rounding(model, rng):
    """A QONNX Quant whose rounding mode fpgaplace does not run."""
    with_qonnx_input(model, rng.choice(["CEIL", "UP", "FLOOR", "HALF_UP", "bogus"]))
    return ("rounding_mode",)


ONNX_MUTATIONS: dict[str, Callable] = {
    "qonnx-rounding": _mutate_qonnx_rounding,
    "elem-type": _mutate_elem_type,
    "absurd-dim": _mutate_absurd_dim,
    "negative-dim": _mutate_negative_dim,
    "zero-stride": _mutate_zero_stride,
    "value-info": _mutate_value_info,
    "feature-dim": _mutate_feature_dim,
    "missing-initializer": _mutate_missing_initializer,
    "unknown-op": _mutate_unknown_op,
    "no-nodes": _mutate_no_nodes,
    "cycle": _mutate_cycle,
    "ir-version": _mutate_ir_version,
    "output-rank": _mutate_output_dims,
}


MOVEMENT_OPS = ("slice", "resize", "split", "pad")


def _movement_node(rng: random.Random, kind: str) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """A data movement op reading the conv model's ``c`` [1, C, H, W] with fuzzed parameters: a
    Slice step of 0 or a huge one, a Resize scale of 1e9, 1.5 or 0, a Split whose sizes do not add
    up, a Pad of 2**40 or a negative one."""
    if kind == "slice":
        step = rng.choice([0, 2**40, -1, 3])
        values = {"starts": [rng.choice([0, 1, -1])], "ends": [rng.choice([2**62, -(2**62), 4])], "axes": [2],
                  "steps": [step]}
        node = helper.make_node("Slice", ["c", *values], ["moved"], name="moved")
    elif kind == "resize":
        values = {"scales": np.array([1, 1, *[rng.choice([1e9, 1.5, 0.0, 2.0, -2.0])] * 2], np.float32)}
        node = helper.make_node("Resize", ["c", "", "scales"], ["moved"], name="moved", mode="nearest")
    elif kind == "split":
        values = {"split": [rng.choice([1, 3, 0, -1, 2**40]), rng.choice([1, 5])]}
        node = helper.make_node("Split", ["c", "split"], ["moved", "moved_rest"], name="moved", axis=1)
    else:
        values = {"pads": [0, 0, rng.choice([1, 2**40, -9]), 1, 0, 0, 1, rng.choice([0, -1, 2**40])]}
        node = helper.make_node("Pad", ["c", "pads"], ["moved"], name="moved", mode="constant")
    constants = [numpy_helper.from_array(np.asarray(v, dtype=np.float32 if k == "scales" else np.int64), k)
                 for k, v in values.items()]
    return node, constants


def _with_movement_op(model: onnx.ModelProto, rng: random.Random, kind: str) -> bool:
    """Add a fuzzed data movement op of ``kind`` (``_movement_node``) reading the conv's output as a second
    graph output; False for a model without the conv."""
    if not any(n.op_type == "Conv" for n in model.graph.node):
        return False
    node, constants = _movement_node(rng, kind)
    model.graph.node.append(node)
    model.graph.initializer.extend(constants)
    model.graph.output.append(helper.make_tensor_value_info("moved", TensorProto.FLOAT, ["m0", "m1", "m2", "m3"]))
    return True


def onnx_cases(rng: random.Random, count: int) -> list[Case]:
    cases: list[Case] = []
    kinds = ["valid", "qonnx", "truncated", "flipped", "broadcast", "movement", *ONNX_MUTATIONS]
    while len(cases) < count:
        kind = kinds[len(cases) % len(kinds)]
        model = _base_model(rng)
        name = f"onnx/{kind}/{len(cases)}"
        command = rng.randrange(4) if kind in ("valid", "qonnx", "flipped") else rng.choice([0, 0, 1, 2, 3])
        if kind == "valid":
            cases.append(_model_case(name, model, True, command))
        elif kind == "broadcast":
            cases.append(_model_case(name, broadcast_model(rng), True, command))
        elif kind == "qonnx":
            cases.append(_model_case(name, with_qonnx_input(model, bits=rng.choice([2.0, 4.0, 8.0])), True, command))
        elif kind == "truncated":
            data = _bytes(model)
            cases.append(_model_case(name, data[: rng.randrange(len(data))], False, command))
        elif kind == "flipped":
            data = bytearray(_bytes(model))
            for _ in range(rng.randint(1, 4)):
                data[rng.randrange(len(data))] = rng.randrange(256)
            cases.append(_model_case(name, bytes(data), None, command))
        elif kind == "movement":  # valid or not by its parameters: a clean error or a result, no traceback
            if _with_movement_op(model, rng, MOVEMENT_OPS[len(cases) // len(kinds) % len(MOVEMENT_OPS)]):
                cases.append(_model_case(name, model, None, command))
        else:
            mentions = ONNX_MUTATIONS[kind](model, rng)
            if mentions is not None:
                cases.append(_model_case(name, model, False, command))
    return cases


# ---- the board family ----------------------------------------------------------------------------

MODEL_FILE = ("model.onnx", _bytes(conv_model()))


def _board_case(name: str, text: bytes, valid: bool | None, place: bool, mentions: tuple[str, ...] = (),
                forbidden: tuple[str, ...] = ()) -> Case:
    files = (("board.yaml", text), MODEL_FILE)
    if place:
        argv = ("place", "{dir}/model.onnx", "--board", "{dir}/board.yaml", *PLACE_FLAGS)
    else:
        argv = ("board", "{dir}/board.yaml")
    return Case("board", name, argv, files, valid, ("{dir}/board.yaml", *mentions) if valid is False else (),
                forbidden)


def _set(data: dict, path: str, value) -> dict:
    keys = path.split(".")
    target = data
    for key in keys[:-1]:
        target = target[key]
    target[keys[-1]] = value
    return data


def _billion_laughs(rng: random.Random) -> bytes:
    levels = rng.choice([8, 10, 12])
    lines = ['a0: &a0 ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]']
    lines += [f"a{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 9)}]" for i in range(1, levels)]
    body = yaml.safe_dump({k: v for k, v in board_data().items() if k != "name"}, sort_keys=False)
    return ("\n".join(lines) + f"\nname: *a{levels - 1}\n" + body).encode()


BOARD_BAD_VALUES = {
    "cpu.count": [10**30, 2**63, -1, 0, 4.5, "four", float("nan"), float("inf")],
    "cores": [0, -2, 10**30, 10**6, 2.5, "two", [], [{"lut": 1}]],
    "clock_mhz": [float("nan"), float("inf"), -300, 0, "fast", None],
    "fabric.dsp": [-1, float("nan"), 10**40, "many"],
    "dram.gbytes": [-2, 0, float("nan"), float("inf")],
    "dram.gbps": [0, -1, float("nan")],
    "stream.latency_us": [-0.5, float("nan"), "slow"],
    "macs_per_dsp": [0, -2, 1.5, 10**30],
    "utilisation_cap": [0, 1.5, -0.1, float("nan")],
    "name": ["", 12, None, ["a", "b"]],
    "cpu.gflops": [0, float("nan"), -4.8],
}


def _board_texts(rng: random.Random) -> Iterator[tuple[str, bytes, bool | None, tuple[str, ...], tuple[str, ...]]]:
    """(kind, text, valid, mentions, forbidden) of the board cases, cycling through the kinds."""
    while True:
        data = board_data()
        yield "valid", _yaml(_set(data, "clock_mhz", rng.choice([100, 250, 300]))), True, (), ()
        field_name = rng.choice(list(BOARD_BAD_VALUES))
        value = rng.choice(BOARD_BAD_VALUES[field_name])
        yield f"bad-{field_name}", _yaml(_set(board_data(), field_name, value)), False, (), ()
        required = rng.choice(["name", "part", "fabric", "cpu", "dram", "stream", "clock_mhz"])
        data = board_data()
        del data[required]
        yield "missing-field", _yaml(data), False, (required,), ()
        yield "billion-laughs", _billion_laughs(rng), False, (), ()
        yield ("python-tag", (b"!!python/object/apply:os.system ['touch {dir}/pwned']\n"), False, (),
               ("pwned",))
        yield ("python-tag-field", _yaml(board_data()).replace(b"name: zcu104", b"name: !!python/object/apply:"
                                                                b"os.getcwd []"), False, (), ())
        yield "huge-int", _yaml(board_data()).replace(b"count: 4", b"count: " + b"9" * 5000), False, (), ()
        depth = rng.choice([1000, 5000])
        yield "deep-nesting", b"name: " + b"[" * depth + b"]" * depth + b"\n", False, (), ()
        yield "not-a-mapping", rng.choice([b"- a\n- b\n", b"42\n", b"\x00\xff\xfe", b"", b"{{{"]), False, (), ()
        yield "unknown-field", _yaml({**board_data(), "warp_drive": 9}), False, ("warp_drive",), ()


def board_cases(rng: random.Random, count: int) -> list[Case]:
    cases = []
    for kind, text, valid, mentions, forbidden in _board_texts(rng):
        if len(cases) >= count:
            break
        place = valid is True and rng.random() < 0.3 or valid is False and rng.random() < 0.15
        cases.append(_board_case(f"board/{kind}/{len(cases)}", text, valid, place, mentions, forbidden))
    return cases


# ---- the workload family -------------------------------------------------------------------------


def _workload_case(name: str, text: bytes, valid: bool | None, rng: random.Random, split: bytes | None = None,
                   mentions: tuple[str, ...] = ()) -> Case:
    files = [("workload.json", text)]
    if split is not None:
        files.append(("split.json", split))
        argv = ("evaluate", "{dir}/workload.json", "--split", "{dir}/split.json")
        where = "{dir}/split.json" if valid is False and mentions[:1] == ("split",) else "{dir}/workload.json"
        mentions = mentions[1:] if mentions[:1] == ("split",) else mentions
    else:
        method = rng.choice(["dp", "ip", "greedy", "auto"])
        argv = ("place", "{dir}/workload.json", "--method", method, "--time-limit", "1")
        where = "{dir}/workload.json"
    return Case("workload", name, argv, tuple(files), valid, (where, *mentions) if valid is False else ())


def _nested(depth: int) -> bytes:
    return b'{"maxFPGAs": 2, "maxCPUs": 1, "maxSizePerFPGA": 1, "edges": [], "nodes": ' + b"[" * depth + \
        b"]" * depth + b"}"


WORKLOAD_BAD_VALUES = {
    "maxFPGAs": [1e9, 10**9, 10**12, -1, 2.5, float("nan"), "two", None],
    "maxCPUs": [10**9, -3, float("inf"), "one"],
    "maxSizePerFPGA": [float("nan"), -5, "big"],
}
NODE_BAD_VALUES = {
    "cpuLatency": [float("nan"), -1, "slow", None, float("inf")],
    "fpgaLatency": [float("nan"), -0.5, [1]],
    "size": [-10, float("nan"), "huge"],
    "supportedOnFpga": [2, "yes", None],
    "id": ["a", 1.5, None],
}


def _workload_texts(rng: random.Random) -> Iterator[tuple[str, bytes, bool | None, bytes | None, tuple]]:
    """(kind, text, valid, split or None, mentions) of the workload cases, cycling through the kinds."""
    while True:
        data = workload_data(rng)
        yield "valid", _json(data), True, None, ()
        n = len(data["nodes"])
        good_split = {"fpgas": [{"nodes": list(range(n // 2))}, {"nodes": list(range(n // 2, n))}],
                      "cpus": [{"nodes": []}]}
        yield "valid-split", _json(data), True, _json(good_split), ()
        key = rng.choice(list(WORKLOAD_BAD_VALUES))
        yield f"bad-{key}", _json({**data, key: rng.choice(WORKLOAD_BAD_VALUES[key])}), False, None, (key,)
        data = workload_data(rng)
        key = rng.choice(list(NODE_BAD_VALUES))
        data["nodes"][rng.randrange(n)][key] = rng.choice(NODE_BAD_VALUES[key])
        yield f"bad-node-{key}", json.dumps(data).encode(), False, None, (key,)
        yield "deep-nesting", _nested(rng.choice([50_000, 100_000])), False, None, ()
        digits = "9" * rng.choice([5000, 6000])
        text = json.dumps(workload_data(rng)).replace('"maxFPGAs": 2', f'"maxFPGAs": {digits}', 1)
        yield "huge-int", text.encode(), False, None, ()
        data = workload_data(rng)
        data["nodes"][0]["cpuLatency"] = rng.choice([1e308, 1.7e308])
        data["nodes"][1]["fpgaLatency"] = 1e308
        yield "huge-latency", _json(data), None, None, ()
        data = workload_data(rng)
        data["edges"].append({"sourceId": 0, "destId": 99, "cost": 1})
        yield "dangling-edge", _json(data), False, None, ("99",)
        data = workload_data(rng)
        del data[rng.choice(["nodes", "edges", "maxFPGAs", "maxCPUs"])]
        yield "missing-field", _json(data), False, None, ()
        text = _json(workload_data(rng))
        yield "truncated", text[: rng.randrange(1, len(text) - 1)], False, None, ()
        data = workload_data(rng)
        extra = {"fpgas": [{"nodes": list(range(n))}] + [{"nodes": []}] * 50, "cpus": [{"nodes": []}] * 50}
        yield "split-extra-empty-groups", _json(data), False, _json(extra), ("split", "groups")
        data = workload_data(rng)
        yield "split-nested", _json(data), False, _nested(50_000).replace(b'"nodes"', b'"fpgas"'), ("split",)
        yield "not-an-object", rng.choice([b"[]", b"42", b'"x"', b"null", b"\xff\xfe"]), False, None, ()


def workload_cases(rng: random.Random, count: int) -> list[Case]:
    cases = []
    for kind, text, valid, split, mentions in _workload_texts(rng):
        if len(cases) >= count:
            break
        cases.append(_workload_case(f"workload/{kind}/{len(cases)}", text, valid, rng, split, mentions))
    return cases


# ---- the cli family ------------------------------------------------------------------------------

WORKLOAD_FILE = ("workload.json", _json(workload_data(random.Random(7))))
SYMBOLIC_FILE = ("symbolic.onnx", _bytes(mlp_model((8, 4), batch="N")))


def _cli_variants(rng: random.Random) -> Iterator[tuple[str, tuple[str, ...], bool | None, tuple[str, ...]]]:
    """(kind, argv, valid, mentions) of the CLI cases, cycling through the kinds. Kinds added later
    draw from their own generator, so the earlier kinds' cases stay what they were."""
    model, workload = "{dir}/model.onnx", "{dir}/workload.json"
    later = random.Random(f"{rng.getstate()}-later-kinds")  # seeded by the family generator, drawing apart from it
    while True:
        limit = rng.choice(["inf", "nan", "-1", "0", "1e308", "-inf", "abc", "1e400"])
        command = rng.choice([("place", workload, "--method", "dp"), ("place", model, *MODEL_FLAGS),
                              ("search", model, *MODEL_FLAGS), ("split", model, "--out", "{dir}/s", *MODEL_FLAGS)])
        yield "time-limit", (*command, "--time-limit", limit), False, ("--time-limit",)
        yield "time-limit-ok", ("place", workload, "--method", "dp", "--time-limit", rng.choice(["1", "2.5"])), \
            True, ()
        out = rng.choice(["/", "/proc/fpgaplace-fuzz/out", "{dir}/model.onnx/sub", "/dev/null/x", "/proc/version"])
        commands = [("place", workload, "--method", "dp", "--time-limit", "1", "--out", out),
                    ("split", model, "--out", out, *PLACE_FLAGS),
                    ("compile", model, "--out", out, "--random", "1", *PLACE_FLAGS),
                    ("quantize", model, "--out", out, "--random", "1")]
        if out != "/":  # a search that wrongly accepted / would write into the root folder
            commands.append(("search", model, "--out", out, "--time-limit", "2", *MODEL_FLAGS))
        yield "out", rng.choice(commands), False, ("--out",)
        shape = rng.choice(["x=", "=1x3", "x=1x-2", "x=1x2x", "x=99999999999999999999x8", "x=1e3x8", "x=0x8",
                            "x=1x8x8", "y=1x8", "x=1.5x8", "x", "x=1x٣", "x=1,,8", "x=1x8=2"])
        yield "input-shape", ("inspect", "{dir}/symbolic.onnx", "--input-shape", shape), False, ("--input-shape",)
        yield "input-shape-ok", ("inspect", "{dir}/symbolic.onnx", "--input-shape", rng.choice(["x=2x8", "x=3,8"])), \
            True, ()
        batch = rng.choice(["0", "-1", str(10**30), "2.5", "1e3", str(2**31)])
        yield "batch", ("inspect", "{dir}/symbolic.onnx", "--batch", batch), False, ("--batch",)
        fixed = later.choice([("inspect", model), ("cost", model, *MODEL_FLAGS), ("place", model, *PLACE_FLAGS)])
        yield "fixed-batch", (*fixed, "--batch", later.choice(["2", "4", "64"])), False, ("--batch", "fixed batch of 1")
        bad = rng.choice([("--precision", "int3"), ("--objective", "speed"), ("--method", "magic"),
                          ("--board", "no-such-board"), ("-q", "0"), ("--cpu-cost", "guess")])
        yield "flag", ("place", model, *PLACE_FLAGS[:2], *bad), False, (bad[1] if bad[0] == "--board" else bad[0],)
        yield "missing-file", ("inspect", "{dir}/absent.onnx"), False, ("{dir}/absent.onnx",)


def cli_cases(rng: random.Random, count: int) -> list[Case]:
    cases = []
    files = (MODEL_FILE, WORKLOAD_FILE, SYMBOLIC_FILE)
    for kind, argv, valid, mentions in _cli_variants(rng):
        if len(cases) >= count:
            break
        cases.append(Case("cli", f"cli/{kind}/{len(cases)}", argv, files, valid, mentions))
    return cases


# ---- the project family --------------------------------------------------------------------------

PROJECT = "proj"  # the copied project's folder in the case's folder
DESIGN = f"{PROJECT}/design.json"
CLOSED_PORT = "9"  # flash's local checks run, then the connection is refused


@functools.cache
def base_project(name: str = "cnn") -> Path:
    """A compiled project (analytic CPU costs, two calibration samples), once per process, in a
    temporary folder removed at exit: ``cnn``, the built-in CNN on zcu104-dpu (two cores); ``streamed``, an MLP
    whose 512 x 256 layer a PYNQ-Z2 core streams from DRAM (its ``weights.bin``)."""
    import atexit
    import shutil

    from fpgaplace import Design
    from fpgaplace.model import zoo

    folder = Path(tempfile.mkdtemp(prefix="fpgaplace-fuzz-project-"))
    atexit.register(shutil.rmtree, folder, True)
    model, board = {"cnn": (zoo.cnn_residual(batch=1), "zcu104-dpu"),
                    "streamed": (zoo.mlp(batch=1, sizes=(16, 512, 256, 5)), "pynq-z2")}[name]
    design = Design(model, board, profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(folder / PROJECT)
    return folder / PROJECT


def _paths(value, path: tuple = ()) -> Iterator[tuple]:
    """Every path into a JSON value (the value itself excluded), depth first."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield (*path, key)
        yield from _paths(item, (*path, key))


def _mutated(document: dict, path: tuple, replacement) -> dict:
    data = copy.deepcopy(document)
    parent = data
    for key in path[:-1]:
        parent = parent[key]
    if replacement is _REMOVE:
        if isinstance(parent, dict):
            del parent[path[-1]]
        else:
            parent.pop(path[-1])
    else:
        parent[path[-1]] = replacement
    return data


_REMOVE = object()
REPLACEMENTS = (_REMOVE, None, float("nan"), -1, 10**30, "fuzz", -1_000_000_000, 0, True, [1, "x"], {"x": 1},
                float("inf"), 2.5)


def _record_error(document: dict) -> str | None:
    """The record's one-line verdict on ``document`` (None when its rules allow it)."""
    from fpgaplace.project.record import DesignRecord
    from fpgaplace.util.errors import FpgaplaceError

    try:
        DesignRecord.from_json(document)
    except FpgaplaceError as error:
        return str(error)
    return None


def _project_command(rng: random.Random, build: bool) -> tuple[str, ...]:
    """One of the commands that read a project; ``csim`` (a g++ build when the project reads) only
    when ``build``."""
    commands = [("sim", PROJECT_DIR, "--samples", "4"), ("report", PROJECT_DIR, "--samples", "4"),
                ("flash", PROJECT_DIR, "--host", "127.0.0.1", "--port", CLOSED_PORT, "--no-bitstream",
                 "--known-hosts", "{dir}/known_hosts")]
    return rng.choice([*commands, ("csim", PROJECT_DIR)] if build else commands)


PROJECT_DIR = "{dir}/" + PROJECT


def _json_cases(rng: random.Random, count: int, csim_budget: list[int]) -> list[Case]:
    document = json.loads((base_project() / "design.json").read_text())
    paths = list(_paths(document))
    cases = []
    while len(cases) < count:
        path = rng.choice(paths)
        replacement = rng.choice(REPLACEMENTS)
        if replacement is _REMOVE and isinstance(path[-1], int) and rng.random() < 0.5:
            replacement = None
        mutated = _mutated(document, path, replacement)
        error = _record_error(mutated)
        keys = [key for key in path if isinstance(key, str)]
        what = "removed" if replacement is _REMOVE else json.dumps(replacement)[:12]
        name = f"project/json/{'.'.join(map(str, path))}={what}/{len(cases)}"
        build = error is not None or csim_budget[0] > 0
        argv = _project_command(rng, build)
        if error is None and argv[0] == "csim":
            csim_budget[0] -= 1
        mentions = ("design.json", keys[-1] if keys and keys[-1] in error else error.split(": ")[1]) if error else ()
        cases.append(Case("project", name, argv, ((DESIGN, json.dumps(mutated).encode()),),
                          False if error else None, mentions, project="cnn"))
    return cases


def _file_cases(rng: random.Random, count: int) -> list[Case]:
    """Project files missing, truncated or swapped; ``valid`` is False where the command reads the file."""
    reads = {"design.json": ("csim", "sim", "report", "flash"), "split/manifest.json": ("csim", "sim"),
             "cores/core0/layers.npz": ("csim",), "cores/core1/layers.npz": ("csim",), "model.qdq.onnx": ("csim",),
             "cores/core0/core0_top.cpp": ("csim",)}
    others = ["split/sub00_core1.onnx", "split/sub01_core0.onnx", "host/hardware.json", "cores/core0/weights.h"]
    swaps = [("cores/core0/layers.npz", "cores/core1/layers.npz"), ("design.json", "split/manifest.json"),
             ("model.qdq.onnx", "split/sub01_core0.onnx"), ("split/sub00_core1.onnx", "split/sub01_core0.onnx")]
    base = base_project()
    cases = []
    while len(cases) < count:
        kind = ("missing", "truncated", "swapped")[len(cases) % 3]
        if kind == "swapped":
            a, b = rng.choice(swaps)
            argv = _project_command(rng, build=False)
            files = ((f"{PROJECT}/{a}", (base / b).read_bytes()), (f"{PROJECT}/{b}", (base / a).read_bytes()))
            valid = False if "design.json" in (a, b) else None
            cases.append(Case("project", f"project/swapped/{a}<->{b}/{len(cases)}", argv, files, valid,
                              ("design.json",) if valid is False else (), project="cnn"))
            continue
        name = rng.choice([*reads, *others])
        argv = _project_command(rng, build=True)
        valid = False if argv[0] in reads.get(name, ()) else None
        mention = Path(name).name
        if kind == "missing":
            cases.append(Case("project", f"project/missing/{name}/{len(cases)}", argv, (), valid,
                              (mention,) if valid is False else (), project="cnn", removed=(f"{PROJECT}/{name}",)))
        else:
            data = (base / name).read_bytes()
            cut = data[: rng.randrange(1, max(2, len(data) - 1))]
            if name.endswith(".cpp"):
                valid = None  # g++ names the file; a cut C++ file may still compile in part
            cases.append(Case("project", f"project/truncated/{name}/{len(cases)}", argv, ((f"{PROJECT}/{name}", cut),),
                              valid, (mention,) if valid is False else (), project="cnn"))
    return cases


def _weights_cases(rng: random.Random, count: int) -> list[Case]:
    """A core's streamed weights (``weights.bin``, which csim embeds) missing or cut short."""
    base = base_project("streamed")
    document = json.loads((base / "design.json").read_text())
    paths = [f"{core['folder']}/weights.bin" for core in document["cores"] if core["streamed_weight_bytes"] > 0]
    cases = []
    while len(cases) < count:
        name, kind = rng.choice(paths), ("missing", "truncated")[len(cases) % 2]
        data = (base / name).read_bytes()
        files = () if kind == "missing" else ((f"{PROJECT}/{name}", data[: rng.randrange(len(data))]),)
        cases.append(Case("project", f"project/{kind}/{name}/w{len(cases)}", ("csim", PROJECT_DIR), files, False,
                          ("weights.bin",), project="streamed",
                          removed=(f"{PROJECT}/{name}",) if kind == "missing" else ()))
    return cases


def project_cases(rng: random.Random, count: int) -> list[Case]:
    """Mutations of a compiled project's design.json (four in five) and of its files."""
    files, weights = max(1, count // 6), max(1, count // 30)
    csim_budget = [4]  # g++ builds of projects the record accepts: a few seconds each
    return (_json_cases(rng, count - files - weights, csim_budget) + _file_cases(rng, files)
            + _weights_cases(rng, weights))


# ---- the scale family ------------------------------------------------------------------------------
# The solvers at sizes and limits the other families never reach, each placed by the CLI with a time
# limit: its wall time is judged against the limit (``overran``) and the placement it writes by the
# trusted evaluator (``accepted_invalid``). Not in FAMILIES (test_fuzz runs those in-process in a
# few minutes); scripts/fuzz_report.py runs it too.

SCALE = "scale"
OVERRUN_FACTOR = 1.1
STARTUP_SECONDS = 5.0
"""A case overran when its wall time (start-up, reading the workload, placing, writing and the
evaluator's check of the answer) exceeded ``--time-limit`` x OVERRUN_FACTOR + STARTUP_SECONDS."""
PLACEMENT = "placement.json"


def large_workload(rng: random.Random, n: int, fan_in: int = 1, window: int = 1, memory_share: float = 0.1,
                   fpgas: int = 4) -> dict:
    """A paper-format workload of ``n`` ops: a chain (``fan_in`` 1), or a dense DAG where op j also
    reads up to ``fan_in`` - 1 more ops among the ``window`` before it; each FPGA holds
    ``memory_share`` of the ops' bytes (0: no FPGA memory at all; a tenth of the ops have none)."""
    nodes = [{"id": i, "supportedOnFpga": int(rng.random() > 0.02), "cpuLatency": round(rng.uniform(1, 10), 3),
              "fpgaLatency": round(rng.uniform(0.1, 1), 3), "isBackwardNode": 0,
              "size": 0 if rng.random() < 0.1 else rng.randint(1, 40)} for i in range(n)]
    edges = {(i, i + 1) for i in range(n - 1)}
    for j in range(2, n):
        for _ in range(fan_in - 1):
            edges.add((rng.randrange(max(0, j - window), j), j))
    memory = memory_share * sum(node["size"] for node in nodes)
    return {"maxSizePerFPGA": memory, "maxFPGAs": fpgas, "maxCPUs": 1, "nodes": nodes,
            "edges": [{"sourceId": u, "destId": v, "cost": round(rng.uniform(0, 0.5), 3)} for u, v in sorted(edges)]}


SCALE_GRAPHS = (  # name, workload arguments, time limit, (objective, method, must answer)
    ("chain-20k", {"n": 20_000}, 10.0,
     [("throughput", m, True) for m in ("auto", "dp", "ip", "greedy", "local-search", "partitioner")]
     + [("throughput", "pipedream", False), ("latency", "auto", True), ("latency", "ip", True)]),
    ("chain-200k", {"n": 200_000}, 30.0,
     [("throughput", m, True) for m in ("auto", "dp", "ip", "greedy", "local-search", "partitioner")]
     + [("latency", "auto", True)]),
    ("dense-dag-2k", {"n": 2_000, "fan_in": 8, "window": 40}, 10.0,
     [("throughput", m, True) for m in ("auto", "ip", "greedy", "local-search", "partitioner", "pipedream")]
     + [("latency", "auto", True), ("latency", "ip", True)]),
    ("zero-memory-dag-500", {"n": 500, "fan_in": 3, "window": 10, "memory_share": 0.0}, 5.0,
     [("throughput", m, True) for m in ("auto", "dp", "ip", "greedy", "pipedream")] + [("latency", "auto", True)]),
    ("zero-memory-chain-20k", {"n": 20_000, "memory_share": 0.0}, 10.0,
     [("throughput", "auto", True), ("latency", "auto", True)]),
)


def scale_cases(rng: random.Random, count: int | None = None) -> list[Case]:
    """Every (graph, objective, method) of SCALE_GRAPHS (``count`` ignored: the list is fixed,
    the graphs seeded). A method that may refuse a size (PipeDream's table) need not exit 0."""
    cases = []
    for name, arguments, limit, runs in SCALE_GRAPHS:
        text = _json(large_workload(rng, **arguments))
        for objective, method, must_answer in runs:
            argv = ("place", "{dir}/workload.json", "--objective", objective, "--method", method,
                    "--time-limit", f"{limit:g}", "--out", f"{{dir}}/{PLACEMENT}")
            cases.append(Case(SCALE, f"{SCALE}/{name}/{objective}-{method}", argv, (("workload.json", text),),
                              True if must_answer else None, time_limit=limit))
    return cases


GENERATORS = {"onnx": onnx_cases, "board": board_cases, "workload": workload_cases, "cli": cli_cases,
              "project": project_cases, SCALE: scale_cases}
DEFAULT_COUNTS = {"onnx": 110, "board": 80, "workload": 80, "cli": 64, "project": 260, SCALE: 0}


def generate(seed: int = 0, counts: dict[str, int] | None = None,
             families: tuple[str, ...] = FAMILIES) -> list[Case]:
    """The cases of ``families``, the same for the same ``seed``."""
    counts = counts or DEFAULT_COUNTS
    return [case for family in families for case in GENERATORS[family](random.Random(f"{seed}-{family}"),
                                                                       counts[family])]


# ---- running ---------------------------------------------------------------------------------------


class CaseTimeout(BaseException):
    """Raised by SIGALRM inside a case that ran past its time (a BaseException, so that the code
    under test cannot swallow it with ``except Exception``)."""


def write_files(case: Case, folder: Path) -> list[str]:
    """Write the case's files into ``folder`` (over a copy of the compiled project for a project
    case); return its argv with ``{dir}`` expanded."""
    if case.project:
        import shutil

        shutil.copytree(base_project(case.project), folder / PROJECT)
        for name in case.removed:
            (folder / name).unlink()
    for name, data in case.files:
        (folder / name).write_bytes(data.replace(b"{dir}", str(folder).encode()))
    return [arg.replace("{dir}", str(folder)) for arg in case.argv]


def judge(case: Case, folder: Path, exit_code: int | None, stderr: str, outcome: Outcome) -> Outcome:
    """Fill ``outcome.problems`` from what the case should have done."""
    if outcome.hang:
        outcome.problems.append("hang")
    if outcome.traceback or "Traceback (most recent call last)" in stderr:
        outcome.traceback = True
        outcome.problems.append("traceback")
    if case.valid is True and exit_code != 0:
        outcome.problems.append(f"exit {exit_code} on valid input")
    if case.valid is False and exit_code == 0:
        outcome.problems.append("exit 0 on invalid input")
    if case.valid is False and exit_code not in (0, None) and not outcome.hang:
        lines = [line for line in stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("error:")]
        if len(errors) != 1 or lines[-1] != errors[0]:
            outcome.problems.append("not one error line at the end")
        else:
            for mention in case.mentions:
                expected = mention.replace("{dir}", str(folder))
                if expected not in errors[0]:
                    outcome.problems.append(f"error does not name {expected!r}")
    for name in case.forbidden:
        if (folder / name).exists():
            outcome.problems.append(f"{name} was created")
    if case.time_limit is not None:
        _judge_placing(case, folder, exit_code, outcome)
    return outcome


def hang_seconds(case: Case, default: float) -> float:
    """How long ``case`` may run before it counts as a hang: ``default``, or for a placing case
    three times its time limit and a minute if that is longer (an overrun is then still measured)."""
    return default if case.time_limit is None else max(default, 3 * case.time_limit + 60)


def _judge_placing(case: Case, folder: Path, exit_code: int | None, outcome: Outcome) -> None:
    """A placing case: its wall time against its limit, and the placement it wrote (on exit 0)
    by the trusted evaluator (feasible; contiguous for throughput by the exact methods and auto,
    which search contiguous splits; the heuristics promise no contiguity)."""
    from fpgaplace.place.solvers.evaluate import evaluate
    from fpgaplace.place.workload import load_split, load_workload
    from fpgaplace.util.errors import FpgaplaceError

    allowed = case.time_limit * OVERRUN_FACTOR + STARTUP_SECONDS
    if outcome.seconds > allowed:
        outcome.overran = True
        outcome.problems.append(f"overran: {outcome.seconds:.1f} s, more than {allowed:.1f} s")
    if exit_code != 0:
        return
    problem = load_workload(folder / "workload.json")
    try:
        evaluation = evaluate(problem, load_split(folder / PLACEMENT, problem))
    except FpgaplaceError as error:
        outcome.accepted_invalid = True
        outcome.problems.append(f"placement unreadable: {error}")
        return
    exact = case.argv[case.argv.index("--method") + 1] in ("auto", "dp", "ip")
    if not evaluation.feasible or (exact and "throughput" in case.argv and not evaluation.contiguous):
        outcome.accepted_invalid = True
        outcome.problems.append(f"accepted an invalid placement: {evaluation.violations[:1] or 'not contiguous'}")


@functools.cache
def _cli_command():
    """The click command of ``fpgaplace.cli.app.app``, built once (typer takes 0.2 s to build it)."""
    import typer.main

    from fpgaplace.cli.app import app

    return typer.main.get_command(app)


def run_case(case: Case, timeout: float = 30.0) -> Outcome:
    """Run ``case`` in-process (typer's CliRunner) in a temporary folder, with a SIGALRM timeout."""
    import typer.testing

    from fpgaplace.cli.app import app

    with tempfile.TemporaryDirectory(prefix="fpgaplace-fuzz-") as tmp, \
            mock.patch.object(typer.testing, "_get_command", lambda _: _cli_command()):
        folder = Path(tmp)
        argv = write_files(case, folder)
        outcome = Outcome(case, None, 0.0)

        def expire(signum, frame):
            raise CaseTimeout(case.name)

        previous = signal.signal(signal.SIGALRM, expire)
        signal.setitimer(signal.ITIMER_REAL, timeout)
        start, cpu = time.perf_counter(), time.process_time()
        try:
            result = typer.testing.CliRunner().invoke(app, argv, catch_exceptions=True)
        except CaseTimeout:
            outcome.hang = True
            result = None
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, previous)
        outcome.seconds, outcome.cpu_seconds = time.perf_counter() - start, time.process_time() - cpu
        if result is not None:
            outcome.exit_code = result.exit_code
            outcome.stderr = result.stderr
            if isinstance(result.exception, CaseTimeout):
                outcome.hang = True
            elif result.exception is not None and not isinstance(result.exception, SystemExit):
                outcome.traceback = True
                outcome.stderr += f"\n{type(result.exception).__name__}: {result.exception}"
        return judge(case, folder, outcome.exit_code, outcome.stderr, outcome)
