"""The table kernel: an island of elementwise ops of one int8 tensor as a 256-entry lookup.

An island (``fpgaplace.hw.islands``: SiLU as ``x * sigmoid(x)``, HardSwish as exported, GELU,
Tanh, a LeakyRelu, a chain of them with their own Q/DQ pairs...) reads one int8 tensor ``x`` and
ends in one QuantizeLinear, so its output is ``table[x + 128]``. The table is computed by running
exactly the island's nodes in onnxruntime on the 256 values of ``x`` (the same session options as
every other run of the model), so the stage equals onnxruntime's QDQ model by construction.

The island's exit op carries the stage; its other ops are free members (``Free("island")``).
Cycles follow the lane rule of ``fpgaplace.hw.kernel`` (PE x MMV lanes a cycle); each lane reads
its own copy of the table, a 256 x 8-bit ROM in LUTs (``TABLE_LUTS_PER_LANE``: 8 output bits,
each an 8-input function, 4 LUT6 and their F7/F8 muxes). Integer reference, HLS template
(``hls/ops/table.j2``, ``fp::table``) and RTL values (``rtl/elementwise.v.j2``, kind ``table``)
are here. Lowering is O(island nodes) plus one onnxruntime run of 256 elements.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
from onnx import TensorProto, helper

from fpgaplace.hw.elementwise import Elementwise, lane_geometry
from fpgaplace.hw.geometry import Folding, Geometry, Resources, Rom, Unsupported
from fpgaplace.hw.islands import Island, islands
from fpgaplace.hw.kernel import LANE_FF_BASE, LANE_FF_PER_PE, LANE_LUT_BASE, tensor_shape
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.qdq import QTensor, check_scale
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.onnxrt import session

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph

TABLE_LUTS_PER_LANE = 32  # a 256 x 8 ROM: per output bit four LUT6 (64 entries each) and their muxes

INT8_VALUES = np.arange(-128, 128, dtype=np.int8)


class Table(Elementwise):
    """The exit op of a table island: one int8 stream in, ``table[x + 128]`` out."""

    name, template, inputs = "table", "hls/ops/table.j2", 1

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        island = islands(graph.model, graph.tensors).exit_op(op.name)
        if island is None or island.kernel != self.name:
            return Unsupported("not the last op of an elementwise island of one int8 tensor")
        out, x = tensor_shape(graph, op.outputs[0]), tensor_shape(graph, island.source)
        if out is None or x is None:
            return Unsupported("unknown shapes")
        if int(np.prod(out)) != int(np.prod(x)):
            return Unsupported(f"the island's output {list(out)} is not elementwise on its input {list(x)}")
        return lane_geometry(self.name, out, out[1] if len(out) >= 2 else out[0], {"CHANNELS": [x[1] if len(x) > 1
                                                                                                else x[0]]})

    def resources(self, g: Geometry, fold: Folding, core: FpgaCore | None = None, resident: bool = True) -> Resources:
        lanes = fold.lanes
        return Resources(0, 0, 0, LANE_LUT_BASE + TABLE_LUTS_PER_LANE * lanes, LANE_FF_BASE + LANE_FF_PER_PE * lanes)

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        return table_lookup(arrays["table"], inputs[0])

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of the island ``op`` ends: its source, its output and its table."""
        island = islands(ctx.graph.model, ctx.graph.tensors).exit_op(op.name)
        if island is None:
            raise FpgaplaceError(f"op '{op.name}': not the last op of a table island")
        x = island_source(ctx, op, island)
        table = island_table(ctx.graph.model, island, f"op '{op.name}'")
        size = shape["SIZE"] // ctx.batch()
        return Layer(op.name, self.name, [x.name], island.output, {"SIZE": size}, {"table": table})

    def rtl_kind(self, c: dict[str, int], arrays: dict[str, Any], elems: int, top: str,
                 roms: dict[str, Rom]) -> tuple[str, dict[str, Any], dict[str, Any], int]:
        """A ROM of the 256 outputs, indexed by ``x + 128`` (the input with its sign bit flipped)."""
        values = np.asarray(arrays.get("table", ()), dtype=np.int64).reshape(-1)
        if values.size != 256:
            raise FpgaplaceError(f"rtl {top}: a table needs 256 values, got {values.size}")
        roms[f"{top}_table.mem"] = Rom([int(v) & 0xFF for v in values], 8)
        return "table", {"table_file": f"{top}_table.mem"}, {}, 1


def table_lookup(table: np.ndarray, x: np.ndarray) -> np.ndarray:
    """``table[x + 128]`` elementwise for int8 ``x`` (a one-line error for a table not of 256)."""
    table = np.asarray(table).reshape(-1)
    if table.size != 256:
        raise ValueError(f"a table has 256 entries, got {table.size}")
    return table.astype(np.int8)[np.asarray(x).astype(np.int16) + 128]


def island_source(ctx: LayerContext, op: Op, island: Island) -> QTensor:
    """The int8 source of ``island`` with the scale and zero point its DequantizeLinears read."""
    reader = next(n for n in ctx.index.consumers.get(island.source, []) if n.op_type == "DequantizeLinear")
    q = ctx.index.int_source(reader.output[0])
    if q is None:
        raise FpgaplaceError(f"op '{op.name}': input '{island.source}' is not a per-tensor int8 tensor")
    check_scale(q.scale, f"op '{op.name}': input '{island.source}'")
    return q


def island_model(model: onnx.ModelProto, island: Island) -> onnx.ModelProto:
    """The island's nodes as a model of their own: input the source as int8 [256], output the
    exit's int8 tensor; the initializers they read; the model's opsets. O(island + initializers)."""
    index_nodes = {n.name: n for n in model.graph.node}
    nodes = [index_nodes[name] for name in island.nodes]
    used = {t for n in nodes for t in n.input}
    initializers = [t for t in model.graph.initializer if t.name in used]
    graph = helper.make_graph(nodes, f"island_{island.exit_op}",
                              [helper.make_tensor_value_info(island.source, TensorProto.INT8, [256])],
                              [helper.make_tensor_value_info(island.output, TensorProto.INT8, None)], initializers)
    return helper.make_model(graph, opset_imports=list(model.opset_import), ir_version=model.ir_version)


def island_table(model: onnx.ModelProto, island: Island, where: str) -> np.ndarray:
    """The island's output for each of the 256 int8 inputs (-128 first), run in onnxruntime."""
    runner = session(island_model(model, island), f"{where}: its elementwise island")
    (out,) = runner.run([island.output], {island.source: INT8_VALUES})
    values = np.asarray(out).reshape(-1)
    if values.size != 256 or values.dtype != np.int8:
        raise FpgaplaceError(f"{where}: its elementwise island gave {values.size} {values.dtype} values for the 256 "
                             "int8 inputs; expected 256 int8")
    return values
