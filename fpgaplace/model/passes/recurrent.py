"""Unroll ONNX LSTM and GRU into per-time-step Gemm/Add/Split/Sigmoid/Tanh/Mul nodes, and fold an
``If`` whose condition is a constant into the branch it takes.

Why unroll: onnxruntime's static QDQ quantizer has no QDQ form of LSTM or GRU (neither is in its
QDQ or QLinear registries), so a recurrent op stays in float and no int8 core could run it honestly.
Written out step by step in the ops it is defined by (ONNX operator spec, LSTM-14 and GRU-14),
every part of it is an op the quantizer quantizes and a kernel of ``fpgaplace.hw`` runs: the gate
matrices are dense stages (``Gemm`` of the step's input with ``W``, bias ``Wb + Rb``, plus a ``Gemm``
of the previous hidden state with ``R``, added), the gates are a ``Split`` (slice stages), their
sigmoid and tanh table islands, the state updates elementwise ``Mul``/``Add`` of two activations.
The compiled cores are then bit-exact against onnxruntime's QDQ model of the unrolled graph by the
same argument as for every other op; the unrolled float graph equals the recurrent op within float
rounding (the tests check 1e-5 against onnxruntime's own LSTM and GRU).

What it costs: each time step is its own set of stages with its own copy of the weights (T times
the weights of one step on chip), and the cell state ``C`` is an int8 activation at its own
calibrated scale like every other tensor of the QDQ model (not a wider fixed point: the QDQ model
defines it so). Because every step has its own hardware, a new sample enters step 0 while the
previous one is in a later step: the interval is the slowest stage's, and the recurrence's
loop-carried dependency shows in the latency (step t's stages wait for step t-1's output, a chain
of T steps the event simulation runs through).

Layout: the input ``X [T, B, I]`` (``layout`` 0) is read as one row-major stream; step t's input is
the contiguous block ``[t*B*I, (t+1)*B*I)`` of ``Reshape(X, [1, T*B*I])`` (a channel ``Slice``),
reshaped to ``[B, I]``; the output ``Y [T, D, B, H]`` is the ``Concat`` of the hidden states in
(t, d) order along axis 1, reshaped. ``Y_h`` and ``Y_c`` are the last states per direction.

Handled: directions forward, reverse and bidirectional, default activations, no ``clip``, no
peepholes, no ``sequence_lens`` (or a constant one equal to T everywhere), zero or absent initial
states, ``input_forget`` 0 and GRU's ``linear_before_reset`` either way. Anything else is left as
it is (and runs on a CPU). GRU's ``H = (1 - z) * h~ + z * H_prev`` is written with ``Sub(1, z)`` (an
elementwise function of one int8 tensor: a table island) so that no ``Sub`` of two activations,
which the quantizer leaves in float, appears. One sweep, O(T * D) new nodes per recurrent op.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from fpgaplace.model.passes.graph_tools import (
    add_initializer,
    attribute,
    constant_value,
    rewrites_a_copy,
    sort_nodes,
    tensor_types,
)

TIME_MAJOR_KEY = "fpgaplace.time_major_inputs"
"""Model ``metadata_props`` key ``unroll_recurrent`` writes: the graph inputs (comma-separated) a
recurrence reads as its ``X [T, B, I]`` directly, whose axis 0 is time, not the batch: a run of
the model is one sample of them (``hw.lowering.graph_batch``)."""
GATES = {"LSTM": 4, "GRU": 3}
DEFAULT_ACTIVATIONS = {"LSTM": ["Sigmoid", "Tanh", "Tanh"], "GRU": ["Sigmoid", "Tanh"]}


@dataclass
class _Recurrence:
    """One recurrent node's constants and the nodes and initializers written for it."""

    node: onnx.NodeProto
    steps: int
    batch: int
    inputs: int
    hidden: int
    w: np.ndarray  # [D, G*H, I]
    r: np.ndarray  # [D, G*H, H]
    b: np.ndarray  # [D, 2*G*H]
    nodes: list[onnx.NodeProto] = field(default_factory=list)
    initializers: list[onnx.TensorProto] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return self.node.name or self.node.output[0]

    def add(self, op_type: str, inputs: list[str], tag: str, outputs: int = 1, **attrs) -> list[str]:
        """Append one node named ``<prefix>_<tag>``; its outputs are that name (and ``_k`` for k > 0)."""
        name = f"{self.prefix}_{tag}"
        names = [name if k == 0 else f"{name}_{k}" for k in range(outputs)]
        self.nodes.append(helper.make_node(op_type, inputs, names, name=name, **attrs))
        return names

    def const(self, tag: str, value: np.ndarray) -> str:
        name = f"{self.prefix}_{tag}"
        self.initializers.append(numpy_helper.from_array(np.ascontiguousarray(value), name))
        return name


def _zero_or_absent(model: onnx.ModelProto, node: onnx.NodeProto, position: int) -> bool:
    """Whether input ``position`` of ``node`` is absent or a constant of zeros."""
    if len(node.input) <= position or not node.input[position]:
        return True
    value = constant_value(model, node.input[position])
    return value is not None and not np.any(value)


def _full_lengths(model: onnx.ModelProto, node: onnx.NodeProto, steps: int) -> bool:
    """Whether ``sequence_lens`` is absent or a constant equal to ``steps`` for every batch entry."""
    if len(node.input) <= 4 or not node.input[4]:
        return True
    value = constant_value(model, node.input[4])
    return value is not None and bool(np.all(value == steps))


def _text(value) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _direction(node: onnx.NodeProto) -> str:
    return _text(attribute(node, "direction", "forward"))


def _recurrence(model: onnx.ModelProto, node: onnx.NodeProto, shapes: dict) -> _Recurrence | None:
    """The node's constants when the pass handles it (see the module docstring), else None."""
    if node.op_type not in GATES or node.domain not in ("", "ai.onnx"):
        return None
    lstm, directions = node.op_type == "LSTM", 2 if _direction(node) == "bidirectional" else 1
    activations = attribute(node, "activations")
    if activations is not None and [_text(a) for a in activations] != DEFAULT_ACTIVATIONS[node.op_type] * directions:
        return None
    if attribute(node, "clip") is not None or attribute(node, "layout", 0) or attribute(node, "input_forget", 0):
        return None
    x = shapes.get(node.input[0])
    x = x.static_shape() if x is not None else None
    w, r = (constant_value(model, node.input[i]) for i in (1, 2))
    if x is None or len(x) != 3 or min(x) <= 0 or w is None or r is None:
        return None
    gates, hidden = GATES[node.op_type], r.shape[-1]
    has_bias = len(node.input) > 3 and node.input[3]
    b = constant_value(model, node.input[3]) if has_bias else np.zeros((directions, 2 * gates * hidden), np.float32)
    zero_states = all(_zero_or_absent(model, node, i) for i in ((5, 6, 7) if lstm else (5,)))  # states, peepholes
    if b is None or not zero_states or not _full_lengths(model, node, x[0]):
        return None
    steps, batch, inputs = x
    return _Recurrence(node, steps, batch, inputs, hidden, w.astype(np.float32), r.astype(np.float32),
                       b.astype(np.float32))


def _step_inputs(rec: _Recurrence) -> list[str]:
    """Step t's input ``[B, I]``: a channel slice of the flattened ``X`` (see the module docstring)."""
    size = rec.batch * rec.inputs
    flat = rec.add("Reshape", [rec.node.input[0], rec.const("x_shape", np.array([1, rec.steps * size]))], "x_flat")[0]
    shape = rec.const("step_shape", np.array([rec.batch, rec.inputs]))
    steps = []
    for t in range(rec.steps):
        bounds = [rec.const(f"t{t}_{what}", np.array([v])) for what, v in
                  (("start", t * size), ("end", (t + 1) * size), ("axis", 1))]
        piece = rec.add("Slice", [flat, *bounds], f"t{t}_x")[0]
        steps.append(rec.add("Reshape", [piece, shape], f"t{t}_x_rows")[0])
    return steps


def _gate_inputs(rec: _Recurrence, d: int, x: str, h: str | None, tag: str, used: tuple[int, ...]) -> list[str]:
    """The pre-activations of gates ``used`` (indices in the op's gate order) of direction ``d``:
    ``x W^T + Wb + Rb (+ h R^T)``, one ``[B, H]`` tensor per gate. Only the gates a step reads are
    computed (a step without a previous state skips LSTM's forget gate), so that every output
    reaches a QuantizeLinear. GRU's third gate gets ``x Wh^T + Wbh`` only: the caller adds its
    recurrent part (without a previous state and with ``linear_before_reset`` 0, Rbh is in
    the bias)."""
    hidden, lstm = rec.hidden, rec.node.op_type == "LSTM"
    gates = GATES[rec.node.op_type]
    wb, rb = rec.b[d, : gates * hidden], rec.b[d, gates * hidden:]
    bias = wb + rb
    if not lstm and (h is not None or attribute(rec.node, "linear_before_reset", 0)):
        bias[2 * hidden:] = wb[2 * hidden:]  # Rbh is added inside the reset gate's term (by the caller)
    rows = np.concatenate([np.arange(g * hidden, (g + 1) * hidden) for g in used])
    key = "".join(map(str, used))
    pre = rec.add("Gemm", [x, _shared(rec, f"d{d}_w{key}", rec.w[d][rows]),
                           _shared(rec, f"d{d}_bias{key}", bias[rows])], f"{tag}_gx", transB=1)[0]
    if h is not None and lstm:
        recurrent = rec.add("Gemm", [h, _shared(rec, f"d{d}_r{key}", rec.r[d][rows])], f"{tag}_gh", transB=1)[0]
        pre = rec.add("Add", [pre, recurrent], f"{tag}_gates")[0]
    elif h is not None:  # GRU (every gate used): h R^T for z and r only
        recurrent = rec.add("Gemm", [h, _shared(rec, f"d{d}_rzr", rec.r[d, : 2 * hidden])], f"{tag}_gh", transB=1)[0]
        zr, third = rec.add("Split", [pre, rec.const(f"{tag}_gx_sizes", np.array([2 * hidden, hidden]))],
                            f"{tag}_gx_split", outputs=2, axis=1)
        zr = rec.add("Add", [zr, recurrent], f"{tag}_zr")[0]
        return [*rec.add("Split", [zr, rec.const(f"{tag}_zr_sizes", np.array([hidden, hidden]))],
                         f"{tag}_zr_split", outputs=2, axis=1), third]
    if len(used) == 1:
        return [pre]
    return rec.add("Split", [pre, rec.const(f"{tag}_gate_sizes", np.array([hidden] * len(used)))], f"{tag}_split",
                   outputs=len(used), axis=1)


def _names(rec: _Recurrence) -> set[str]:
    return {t.name for t in rec.initializers}


def _shared(rec: _Recurrence, tag: str, value: np.ndarray) -> str:
    """The initializer ``<prefix>_<tag>`` (written once, read by every step)."""
    name = f"{rec.prefix}_{tag}"
    return name if name in _names(rec) else rec.const(tag, value)


def _lstm_step(rec: _Recurrence, d: int, t: int, x: str, h: str | None, c: str | None) -> tuple[str, str]:
    """(H_t, C_t) of one LSTM step (gate order i, o, f, c)."""
    tag = f"d{d}_t{t}"
    if c is None:  # C_prev = 0: the forget gate multiplies nothing
        i, o, g = _gate_inputs(rec, d, x, h, tag, (0, 1, 3))
    else:
        i, o, f, g = _gate_inputs(rec, d, x, h, tag, (0, 1, 2, 3))
    i, o = (rec.add("Sigmoid", [v], f"{tag}_{n}")[0] for v, n in ((i, "i"), (o, "o")))
    g = rec.add("Tanh", [g], f"{tag}_g")[0]
    cell = rec.add("Mul", [i, g], f"{tag}_ig")[0]
    if c is not None:
        f = rec.add("Sigmoid", [f], f"{tag}_f")[0]
        cell = rec.add("Add", [rec.add("Mul", [f, c], f"{tag}_fc")[0], cell], f"{tag}_c")[0]
    hidden = rec.add("Mul", [o, rec.add("Tanh", [cell], f"{tag}_tanh_c")[0]], f"{tag}_h")[0]
    return hidden, cell


def _one_minus(rec: _Recurrence, z: str, tag: str) -> str:
    """``1 - z``: a Sub of a constant, a function of the one int8 tensor z (a table island)."""
    return rec.add("Sub", [_shared(rec, "one", np.array(1.0, np.float32)), z], f"{tag}_keep")[0]


def _gru_step(rec: _Recurrence, d: int, t: int, x: str, h: str | None) -> str:
    """H_t of one GRU step (gate order z, r, h)."""
    tag, hidden = f"d{d}_t{t}", rec.hidden
    rbh = rec.b[d, 5 * hidden:]
    reset_read = h is not None or (np.any(rbh) and attribute(rec.node, "linear_before_reset", 0))
    if reset_read:
        z, r, xh = _gate_inputs(rec, d, x, h, tag, (0, 1, 2))
    else:
        z, xh = _gate_inputs(rec, d, x, h, tag, (0, 2))
    z = rec.add("Sigmoid", [z], f"{tag}_z")[0]
    if h is None:  # H_prev = 0: the reset gate multiplies nothing but, with linear_before_reset, Rbh
        pre = xh
        if reset_read:
            gate_r = rec.add("Sigmoid", [r], f"{tag}_r")[0]
            term = rec.add("Mul", [gate_r, _shared(rec, f"d{d}_rbh", rbh)], f"{tag}_r_rbh")[0]
            pre = rec.add("Add", [pre, term], f"{tag}_hpre")[0]
        candidate = rec.add("Tanh", [pre], f"{tag}_candidate")[0]
        return rec.add("Mul", [_one_minus(rec, z, tag), candidate], f"{tag}_h")[0]
    gate_r = rec.add("Sigmoid", [r], f"{tag}_r")[0]
    weights = [_shared(rec, f"d{d}_rh", rec.r[d, 2 * hidden:]), _shared(rec, f"d{d}_rbh", rbh)]
    if attribute(rec.node, "linear_before_reset", 0):
        recurrent = rec.add("Mul", [gate_r, rec.add("Gemm", [h, *weights], f"{tag}_hh", transB=1)[0]],
                            f"{tag}_rhh")[0]
    else:
        reset = rec.add("Mul", [gate_r, h], f"{tag}_rh")[0]
        recurrent = rec.add("Gemm", [reset, *weights], f"{tag}_hh", transB=1)[0]
    candidate = rec.add("Tanh", [rec.add("Add", [xh, recurrent], f"{tag}_hpre")[0]], f"{tag}_candidate")[0]
    return rec.add("Add", [rec.add("Mul", [_one_minus(rec, z, tag), candidate], f"{tag}_new")[0],
                           rec.add("Mul", [z, h], f"{tag}_old")[0]], f"{tag}_h")[0]


def _directions(rec: _Recurrence) -> list[bool]:
    """Per direction whether it runs backwards in time."""
    return {"forward": [False], "reverse": [True], "bidirectional": [False, True]}[_direction(rec.node)]


def _unroll(rec: _Recurrence) -> None:
    """Write the steps of every direction and the node's outputs ``Y``, ``Y_h`` (and ``Y_c``)."""
    xs = _step_inputs(rec)
    per_step: dict[tuple[int, int], str] = {}
    last_h, last_c = [], []
    for d, backwards in enumerate(_directions(rec)):
        h = c = None
        for t in (reversed(range(rec.steps)) if backwards else range(rec.steps)):
            if rec.node.op_type == "LSTM":
                h, c = _lstm_step(rec, d, t, xs[t], h, c)
            else:
                h = _gru_step(rec, d, t, xs[t], h)
            per_step[(t, d)] = h
        last_h.append(h)
        last_c.append(c)
    directions = len(last_h)
    outputs = list(rec.node.output) + [""] * (3 - len(rec.node.output))
    ordered = [per_step[(t, d)] for t in range(rec.steps) for d in range(directions)]
    _stack(rec, ordered, outputs[0], [rec.steps, directions, rec.batch, rec.hidden], "y")
    _stack(rec, last_h, outputs[1], [directions, rec.batch, rec.hidden], "y_h")
    if rec.node.op_type == "LSTM":
        _stack(rec, last_c, outputs[2], [directions, rec.batch, rec.hidden], "y_c")


def _stack(rec: _Recurrence, states: list[str], output: str, shape: list[int], tag: str) -> None:
    """``output`` = the ``[B, H]`` ``states`` one after another in row-major order, as ``shape``."""
    if not output:
        return
    if rec.batch != 1:
        row = rec.const(f"{tag}_row", np.array([1, rec.batch * rec.hidden]))
        states = [rec.add("Reshape", [s, row], f"{tag}_{k}_row")[0] for k, s in enumerate(states)]
    joined = states[0] if len(states) == 1 else rec.add("Concat", states, f"{tag}_concat", axis=1)[0]
    rec.nodes.append(helper.make_node("Reshape", [joined, rec.const(f"{tag}_shape", np.array(shape))], [output],
                                      name=f"{rec.prefix}_{tag}"))


@rewrites_a_copy
def unroll_recurrent(model: onnx.ModelProto) -> int:
    """Unroll every LSTM and GRU the module docstring's rules take; returns how many."""
    shapes = tensor_types(model)
    changes = 0
    for node in list(model.graph.node):
        rec = _recurrence(model, node, shapes)
        if rec is None:
            continue
        _unroll(rec)
        position = list(model.graph.node).index(node)
        model.graph.node.remove(node)
        for offset, new in enumerate(rec.nodes):
            model.graph.node.insert(position + offset, new)
        for tensor in rec.initializers:
            add_initializer(model, tensor)
        if rec.node.input[0] in {i.name for i in model.graph.input}:
            _mark_time_major(model, rec.node.input[0])
        changes += 1
    if changes:
        sort_nodes(model.graph)
    return changes


def time_major_inputs(model: onnx.ModelProto) -> set[str]:
    """The graph inputs whose axis 0 is a recurrence's time (``TIME_MAJOR_KEY``). O(metadata)."""
    return {name for p in model.metadata_props if p.key == TIME_MAJOR_KEY for name in p.value.split(",") if name}


def _mark_time_major(model: onnx.ModelProto, name: str) -> None:
    names = sorted(time_major_inputs(model) | {name})
    kept = [p for p in model.metadata_props if p.key != TIME_MAJOR_KEY]
    del model.metadata_props[:]
    model.metadata_props.extend(kept)
    model.metadata_props.add(key=TIME_MAJOR_KEY, value=",".join(names))


@rewrites_a_copy
def fold_constant_if(model: onnx.ModelProto) -> int:
    """Replace every ``If`` whose condition is a constant by the nodes of the branch it takes: the
    branch's initializers join the graph's, its nodes are prefixed with the If's name, and its
    outputs are renamed to the If's outputs. O(nodes of the taken branches)."""
    changes = 0
    for node in list(model.graph.node):
        if node.op_type != "If" or node.domain not in ("", "ai.onnx"):
            continue
        cond = constant_value(model, node.input[0])
        if cond is None or cond.size != 1:
            continue
        branch = attribute(node, "then_branch" if bool(cond.reshape(-1)[0]) else "else_branch")
        _inline(model, node, branch)
        changes += 1
    if changes:
        sort_nodes(model.graph)
    return changes


def _inline(model: onnx.ModelProto, node: onnx.NodeProto, branch: onnx.GraphProto) -> None:
    """Put ``branch``'s nodes and initializers in place of ``node`` (an If), its outputs renamed."""
    local = {t.name for t in branch.initializer} | {o for n in branch.node for o in n.output}
    renamed = {out.name: target for out, target in zip(branch.output, node.output, strict=True)}
    prefix = node.name or node.output[0]

    def name_of(tensor: str) -> str:
        if tensor in renamed:
            return renamed[tensor]
        return f"{prefix}/{tensor}" if tensor in local else tensor

    position = list(model.graph.node).index(node)
    model.graph.node.remove(node)
    for offset, inner in enumerate(branch.node):
        copy = onnx.NodeProto()
        copy.CopyFrom(inner)
        copy.name = f"{prefix}/{inner.name or inner.output[0]}"
        copy.input[:] = [name_of(t) if t else t for t in inner.input]
        copy.output[:] = [name_of(t) if t else t for t in inner.output]
        model.graph.node.insert(position + offset, copy)
    for tensor in branch.initializer:
        copy = onnx.TensorProto()
        copy.CopyFrom(tensor)
        copy.name = name_of(tensor.name)
        add_initializer(model, copy)
    passthrough = [(out.name, target) for out, target in zip(branch.output, node.output, strict=True)
                   if out.name not in local]
    for source, target in passthrough:  # a branch output that is an outer tensor: an Identity
        model.graph.node.insert(position, helper.make_node("Identity", [source], [target], name=f"{prefix}/{target}"))
