"""The embedding kernel: ONNX Gather of rows of a constant table by integer indices (a token or byte
embedding), ``out[i, :] = table[ids[i], :]``.

In the QDQ model the table is an int8 initializer behind a DequantizeLinear and the Gather's output
goes to a QuantizeLinear (``QDQDirect8BitOp``: the table's own scale and zero point), so the stage's
int8 output rows are a function of the index alone: the lowering computes them by running exactly
those three nodes in onnxruntime on every index ``0 .. ROWS-1`` (the same argument as the table
kernel's: equal to onnxruntime's QDQ model by construction, whatever the output's scale).

The indices enter the core as one byte each: the host casts the integer ids to int8 (as it does for
every int8 input it is handed), i.e. ``id mod 256``, and the stage reads the byte as unsigned. So a
table of at most 256 rows (``MAX_ROWS``; a byte vocabulary) runs on a core; a larger vocabulary
would need a wider index stream and is left to a CPU. An index of ``ROWS`` or more (which
onnxruntime refuses) reads the last row.

Cost: a lane stage over its output (``fpgaplace.hw.kernel``): ``SIZE`` indices a sample, ``E`` values
a row, ``PE`` of them a cycle: ``SIZE * E / PE`` cycles; the table is its weights (``ROWS * E`` bytes in
PE banks, BRAM, LUTRAM or URAM by depth). HLS: ``hls/ops/embedding.j2`` (``fp::embedding``); RTL:
``rtl/embedding.v.j2`` (the ROM addressed ``{row, beat}``, each row padded to a power of two of
beats). Lowering is O(ROWS * E) plus one onnxruntime run of ROWS indices.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from fpgaplace.hw.geometry import Folding, Geometry, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import Kernel, tensor_shape
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.memory import LUTRAM_MAX_DEPTH
from fpgaplace.hw.qdq import qdq_index
from fpgaplace.hw.rtl_values import PORT_IN, PORT_OUT, index_bits, int_members
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import session

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

MAX_ROWS = 256  # indices travel as one byte each


class Embedding(Kernel):
    """A Gather of table rows (axis 0) by integer indices: one byte in, ``E`` int8 values out."""

    name, template = "embedding", "hls/ops/embedding.j2"

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        if op.op_type != "Gather" or len(op.inputs) < 2:
            return Unsupported("not a Gather")
        table, ids, out = (tensor_shape(graph, t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
        info = graph.tensors.get(op.inputs[1])
        if table is None or ids is None or out is None or info is None:
            return Unsupported("unknown shapes")
        if int(op.attrs.get("axis", 0)) != 0 or len(table) != 2:
            return Unsupported("an embedding gathers rows (axis 0) of a 2-D table")
        if not np.issubdtype(np.dtype(info.dtype), np.integer):
            return Unsupported(f"indices '{op.inputs[1]}' are {info.dtype}, expected integers")
        if op.inputs[1] in graph.params:
            return Unsupported("constant indices (a constant, for the host to compute)")
        if op.inputs[0] not in graph.params and _table_node(graph, op) is None:
            return Unsupported("the table is not a constant")
        rows, width = table
        if rows > MAX_ROWS:
            return Unsupported(f"a table of {rows} rows: indices travel as one byte, so at most {MAX_ROWS}")
        size = math.prod(ids)
        return Geometry(self.name, size, width, 1, stream_elements=size * width, weights=rows * width,
                        shape={"SIZE": size, "E": width, "ROWS": rows})

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        return embedding_rows(arrays["table"], inputs[0], config["ROWS"], config["E"])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer: the byte indices in, the int8 rows onnxruntime's QDQ nodes give every index out."""
        out = ctx.sink(op)
        if out.activations:
            raise FpgaplaceError(f"op '{op.name}': an activation after an embedding is not supported")
        table = gathered_rows(ctx, op, out.tensor.name, shape["ROWS"])
        config = {"SIZE": shape["SIZE"] // ctx.batch(), "E": shape["E"], "ROWS": shape["ROWS"]}
        return Layer(op.name, self.name, [op.inputs[1]], out.tensor.name, config, {"table": table.reshape(-1)})

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        """One index a beat in, PE values of its row out."""
        return [1], fold.pe

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "L": fold.pe}

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["SIZE"] * config["E"]

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """``rtl/embedding.v.j2``: one index a beat in, PE values out, the table a ROM of
        ``ROWS x 2**BEAT_BITS`` words of PE bytes (padding words zero). O(ROWS * E)."""
        c = int_members(config)
        rows, width, pe = c["ROWS"], c["E"], fold.pe
        table = np.asarray(arrays.get("table", ()), dtype=np.int8).reshape(-1)
        if width % pe or table.size != rows * width or not 1 <= rows <= MAX_ROWS:
            raise FpgaplaceError(f"rtl {top}: a table of ROWS={rows} (1..{MAX_ROWS}) x E={width} values with PE={pe} "
                                 f"dividing E; got {table.size} values")
        beats, beat_bits = width // pe, index_bits(width // pe)
        words = np.zeros((rows, 2**beat_bits, pe), dtype=np.int8)
        words[:, :beats] = table.reshape(rows, beats, pe)
        depth = rows * 2**beat_bits
        values = c | {"name": top, "onehot": False, "PE": pe, "BEATS": beats, "BEAT_BITS": beat_bits,
                      "ROW_BITS": index_bits(rows), "DEPTH": depth, "table_file": f"{top}_table.mem",
                      "table_attribute": "" if depth <= LUTRAM_MAX_DEPTH else '(* rom_style = "block" *) '}
        return RtlUnit("rtl/embedding.v.j2", values, {f"{top}_table.mem": Rom(words.reshape(depth, pe))},
                       ((PORT_IN, 1, c["SIZE"]),), (PORT_OUT, pe, c["SIZE"] * width))


def embedding_rows(table: np.ndarray, ids: np.ndarray, rows: int, width: int) -> np.ndarray:
    """The rows of the flat int8 ``table`` (``rows x width``) at the byte indices ``ids`` (read
    unsigned; past the last row, the last row), one after another. O(len(ids) * width)."""
    index = np.minimum(np.asarray(ids).astype(np.int8).view(np.uint8).astype(np.int64), rows - 1)
    return np.asarray(table, dtype=np.int8).reshape(rows, width)[index].reshape(-1)


def _table_node(graph: OpGraph, op: Op) -> onnx.NodeProto | None:
    """The DequantizeLinear of a constant int8 table that ``op`` reads, or None."""
    index = qdq_index(graph.model)
    node = index.producer.get(op.inputs[0])
    if node is None or node.op_type != "DequantizeLinear" or index.constant(node.input[0]) is None:
        return None
    return node


def gathered_rows(ctx: LayerContext, op: Op, output: str, rows: int) -> np.ndarray:
    """``[rows, E]`` int8: the QuantizeLinear ``output`` of the Gather for every index, run in
    onnxruntime on the table's DequantizeLinear, the Gather and that QuantizeLinear alone."""
    index = ctx.index
    table_dq = _table_node(ctx.graph, op)
    exit_q = index.producer.get(output)
    if table_dq is None or exit_q is None or exit_q.op_type != "QuantizeLinear":
        raise FpgaplaceError(f"op '{op.name}': expected DequantizeLinear(int8 table) -> Gather -> QuantizeLinear")
    nodes = [table_dq, helper.make_node("Gather", [op.inputs[0], "ids"], [exit_q.input[0]], axis=0), exit_q]
    used = {t for n in nodes for t in n.input}
    initializers = [t for t in ctx.graph.model.graph.initializer if t.name in used]
    graph = helper.make_graph(nodes, f"embedding_{op.name}", [helper.make_tensor_value_info("ids", TensorProto.INT64,
                                                                                             [rows])],
                              [helper.make_tensor_value_info(output, TensorProto.INT8, None)], initializers)
    model = helper.make_model(graph, opset_imports=list(ctx.graph.model.opset_import),
                              ir_version=ctx.graph.model.ir_version)
    (values,) = session(model, f"op '{op.name}': its embedding table").run([output], {"ids": np.arange(rows)})
    return np.asarray(values, dtype=np.int8)
