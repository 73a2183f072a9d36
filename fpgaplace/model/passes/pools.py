"""A pool whose one window is its whole unpadded plane becomes the global pool.

An ``AveragePool`` whose ``kernel_shape`` is its input's spatial dims, with no padding (``pads``
all 0, ``auto_pad`` NOTSET or VALID), no dilation and ``ceil_mode`` 0 has one output per channel,
the mean of its plane: exactly ``GlobalAveragePool`` (the strides never move the window;
``count_include_pad`` means nothing without padding). ResNet-50 ends in one (7 x 7 over 7 x 7).
The op library builds a ``GlobalAveragePool`` as the global pool (``hw.pool``, kernel
``globalavgpool``: ``rtl/globalpool.v.j2``, the HLS kernel's whole-plane branch) and a windowed
``AveragePool`` as the window unit, whose read lanes each keep a copy of the line buffer (49
copies of a 7-row x 2,048-channel buffer for ResNet-50's: 29,175 LUTs and 1,569 BRAM36 in yosys
synth_xilinx against 190 LUTs and 25 BRAM36 priced). So the rewrite makes cost, code, simulators
and report see the one kernel that fits. Only the op type and its attributes change: the node
keeps its name, inputs and outputs, so a QDQ DequantizeLinear -> AveragePool -> QuantizeLinear
stays that pattern around the global pool.

``MaxPool`` of the whole plane is left alone: the op library has no global max pool kernel
(``GlobalMaxPool`` runs on CPUs), while the window unit builds a max pool. One sweep over the
nodes, O(n), plus one shape inference when the graph holds an unpadded ``AveragePool``.
"""

from __future__ import annotations

import onnx

from fpgaplace.model.passes.graph_tools import TensorType, attribute, rewrites_a_copy, tensor_types


@rewrites_a_copy
def whole_plane_pools_to_global(model: onnx.ModelProto) -> int:
    """Turn every ``AveragePool`` whose window is its whole unpadded input plane into
    ``GlobalAveragePool`` (same name, inputs and outputs); return how many. O(n), plus one shape
    inference when an ``AveragePool`` has no padding (a windowed one of a padded model costs none)."""
    pools = [node for node in model.graph.node
             if node.op_type == "AveragePool" and node.domain in ("", "ai.onnx") and unpadded_window(node)]
    if not pools:
        return 0
    types = tensor_types(model)
    changes = 0
    for node in pools:
        if spans_the_plane(node, types.get(node.input[0])):
            del node.attribute[:]
            node.op_type = "GlobalAveragePool"
            changes += 1
    return changes


def unpadded_window(node: onnx.NodeProto) -> bool:
    """Whether the pool ``node`` takes windows without padding (``pads`` 0, ``auto_pad`` NOTSET or
    VALID), dilation or ``ceil_mode``: each output the pool of a window inside its input. O(rank)."""
    auto_pad = attribute(node, "auto_pad", b"NOTSET")
    auto_pad = auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad
    return (not any(attribute(node, "pads", [])) and all(d == 1 for d in attribute(node, "dilations", []))
            and not attribute(node, "ceil_mode", 0) and auto_pad in ("NOTSET", "VALID"))


def spans_the_plane(node: onnx.NodeProto, x: TensorType | None) -> bool:
    """Whether the kernel of the pool ``node`` is the (known) spatial dims of its input of type ``x``.
    O(rank)."""
    shape = x.static_shape() if x is not None else None
    return shape is not None and len(shape) >= 3 and list(attribute(node, "kernel_shape", [])) == list(shape[2:])
