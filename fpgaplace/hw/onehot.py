"""The one-hot kernel: ONNX OneHot of integer indices along the last axis, by comparison.

onnxruntime's quantizer leaves OneHot in float and quantizes what reads it, so in the QDQ model the
op's output goes to one QuantizeLinear: ``out[i, j] = ON if j == ids[i] else OFF`` with ``ON`` and
``OFF`` the int8 values of the op's ``values`` at that QuantizeLinear. The lowering finds them by
running exactly the OneHot and its QuantizeLinear in onnxruntime on every index ``0 .. DEPTH-1``
(and checks the result is that pattern), so the stage equals onnxruntime's QDQ model by
construction. No table: each output lane compares its position with the index.

The indices arrive as the embedding kernel's do (``fpgaplace.hw.gather``): one byte each, read
unsigned, so a depth of at most 256; a negative index (which ONNX counts from the end) is not
supported: it arrives as a byte of 128 or more and gives a row of ``OFF`` where the model gives an
``ON`` at ``DEPTH + id`` (the calibration range of such an input is ``0 .. DEPTH-1``,
``fpgaplace.model.quantize.gather_rows``). Cost: the embedding's lane rule (``SIZE * DEPTH / PE``
cycles), no weights. HLS: ``hls/ops/onehot.j2`` (``fp::onehot``); RTL: ``rtl/embedding.v.j2`` in its
comparison mode (``onehot``: no ROM, each lane compares the index with its position). Lowering is
one onnxruntime run of DEPTH indices, O(DEPTH**2).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
from onnx import TensorProto, helper

from fpgaplace.hw.gather import MAX_ROWS, Embedding
from fpgaplace.hw.geometry import Folding, Geometry, RtlUnit, Unsupported
from fpgaplace.hw.kernel import tensor_shape
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import session

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph


class OneHot(Embedding):
    """A OneHot along the last axis: one byte index in, ``DEPTH`` int8 values (one ``ON``) out."""

    name, template = "onehot", "hls/ops/onehot.j2"

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        if op.op_type != "OneHot" or len(op.inputs) < 3:
            return Unsupported("not a OneHot")
        ids, out = tensor_shape(graph, op.inputs[0]), tensor_shape(graph, op.outputs[0])
        info = graph.tensors.get(op.inputs[0])
        depth = qdq_index(graph.model).constant(op.inputs[1]) if graph.model is not None else None
        if ids is None or out is None or info is None or depth is None or depth.size != 1:
            return Unsupported("unknown shapes or a depth that is not a constant")
        if int(op.attrs.get("axis", -1)) not in (-1, len(out) - 1):
            return Unsupported("a one-hot axis other than the last")
        if not np.issubdtype(np.dtype(info.dtype), np.integer):
            return Unsupported(f"indices '{op.inputs[0]}' are {info.dtype}, expected integers")
        if op.inputs[0] in graph.params:
            return Unsupported("constant indices (a constant, for the host to compute)")
        depth = int(depth.reshape(-1)[0])
        if not 2 <= depth <= MAX_ROWS:
            return Unsupported(f"depth {depth}: indices travel as one byte, so 2 to {MAX_ROWS}")
        return onehot_geometry(math.prod(ids), depth)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        return onehot_rows(inputs[0], config["E"], config["ON"], config["OFF"])

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/embedding.v.j2`` in its comparison mode: one index a beat in, PE values out (PE
        dividing E), ``ON`` where the lane's position in the row is the index. O(1)."""
        c = int_members(config)
        depth, pe = c["E"], fold.pe
        if depth % pe or not 2 <= depth <= MAX_ROWS or not all(-128 <= c[v] <= 127 for v in ("ON", "OFF")):
            raise FpgaplaceError(f"rtl {top}: a one-hot of E={depth} (2..{MAX_ROWS}) values with PE={pe} dividing E "
                                 f"and int8 ON, OFF; got ON={c['ON']} OFF={c['OFF']}")
        values = c | {"name": top, "onehot": True, "PE": pe, "BEATS": depth // pe,
                      "BEAT_BITS": index_bits(depth // pe), "ROW_BITS": 8}
        return RtlUnit("rtl/embedding.v.j2", values, {}, ((PORT_IN, 1, c["SIZE"]),), (PORT_OUT, pe, c["SIZE"] * depth))

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer: the byte indices in, ``ON``/``OFF`` as onnxruntime's OneHot and QuantizeLinear give them."""
        out = ctx.sink(op)
        if out.activations:
            raise FpgaplaceError(f"op '{op.name}': an activation after a one-hot is not supported")
        on, off = on_off_values(ctx, op, out.tensor.name, shape["E"])
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "E": shape["E"], "ROWS": shape["E"], "ON": on, "OFF": off}
        return Layer(op.name, self.name, [op.inputs[0]], out.tensor.name, config)


def onehot_geometry(size: int, depth: int) -> Geometry:
    """The geometry of a one-hot of ``size`` indices into rows of ``depth``: the embedding's lane
    stage over ``size * depth`` values, no weights."""
    return Geometry("onehot", size, depth, 1, stream_elements=size * depth, shape={"SIZE": size, "E": depth,
                                                                                   "ROWS": depth})


def onehot_rows(ids: np.ndarray, depth: int, on: int, off: int) -> np.ndarray:
    """``depth`` int8 values per byte index of ``ids`` (read unsigned), ``on`` at the index, one row
    after another. O(len(ids) * depth)."""
    index = np.asarray(ids).astype(np.int8).view(np.uint8).astype(np.int64).reshape(-1, 1)
    return np.where(np.arange(depth) == index, on, off).astype(np.int8).reshape(-1)


def on_off_values(ctx: LayerContext, op: Op, output: str, depth: int) -> tuple[int, int]:
    """(ON, OFF): onnxruntime's OneHot and the QuantizeLinear ``output`` run on every index, checked
    to be ``ON`` on the diagonal and ``OFF`` elsewhere."""
    exit_q = ctx.index.producer.get(output)
    if exit_q is None or exit_q.op_type != "QuantizeLinear" or exit_q.input[0] != op.outputs[0]:
        raise FpgaplaceError(f"op '{op.name}': expected OneHot -> QuantizeLinear")
    nodes = [helper.make_node("OneHot", ["ids", *op.inputs[1:3]], [op.outputs[0]], axis=-1), exit_q]
    used = {t for n in nodes for t in n.input}
    model = ctx.graph.model
    ids = np.arange(depth).astype(ctx.graph.tensors[op.inputs[0]].dtype)  # onnxruntime's kernels are typed
    elem = helper.np_dtype_to_tensor_dtype(ids.dtype)
    graph = helper.make_graph(nodes, f"onehot_{op.name}", [helper.make_tensor_value_info("ids", elem, [depth])],
                              [helper.make_tensor_value_info(output, TensorProto.INT8, None)],
                              [t for t in model.graph.initializer if t.name in used])
    one = helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)
    (values,) = session(one, f"op '{op.name}': its one-hot values").run([output], {"ids": ids})
    values = np.asarray(values).reshape(depth, depth)
    on, off = int(values[0, 0]), int(values[0, 1])
    if not np.array_equal(values, np.where(np.eye(depth, dtype=bool), on, off)):
        raise FpgaplaceError(f"op '{op.name}': its quantized one-hot rows are not one value on the diagonal and "
                             "one elsewhere")
    return on, off
