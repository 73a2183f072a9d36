"""QONNX quantizers (``Quant``, ``BipolarQuant``, ``Trunc``) as ONNX model-local functions, so that
onnxruntime runs a QONNX model (Brevitas and FINN exports) as it is: same nodes, same names, one
op per quantizer for the cost model, runnable in profiling, in the split check and in the pieces.

Semantics follow the QONNX spec (arXiv:2206.07527) and the qonnx package's reference execution
(``qonnx.custom_op.general``), which the tests compare against:

- ``Quant(x, scale, zeropt, bitwidth; signed, narrow, rounding_mode)``:
  ``y = x / scale + zeropt``, clamped to the integer range of ``bitwidth`` bits (signed:
  ``[-2^(b-1) + narrow, 2^(b-1) - 1]``, unsigned: ``[0, 2^b - 1 - narrow]``), then rounded, then
  ``(y - zeropt) * scale``; a signed 1-bit Quant is bipolar (+-1 by the sign of ``y``).
- ``BipolarQuant(x, scale)``: ``+-scale`` by the sign of ``x`` (0 counts as +).
- ``Trunc(x, scale, zeropt, in_bits, out_bits; rounding_mode)`` (domain version 1):
  ``round(x / scale + zeropt) / 2^(in_bits - out_bits)``, rounded again, then ``(y - zeropt) * scale``.
  Version 2 (``in_bits, out_scale, out_bits``; ``signed``, ``narrow``) divides by
  ``2^round(log2(out_scale / scale))``, clamps to ``out_bits``, rounds, and rescales by ``out_scale``.

A function's body may not branch on a string attribute, so each function implements its op's
default rounding (``ROUND``, half to even, for Quant; ``FLOOR`` for Trunc); a node asking for
another rounding mode is a one-line error naming it. Cost: O(nodes).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto, helper

from fpgaplace.model.ops import QONNX_DOMAINS
from fpgaplace.util.errors import FpgaplaceError

QONNX_QUANTIZERS = frozenset({"Quant", "BipolarQuant", "Trunc"})
"""QONNX ops that quantize a tensor to a grid of some bits and keep its shape."""
DEFAULT_ROUNDING = {"Quant": ("ROUND", "HALF_EVEN"), "Trunc": ("FLOOR",)}
"""The rounding modes each function implements (the op's default first)."""
MIN_FUNCTION_OPSET = 12
"""The oldest default-domain opset the functions can be written in (a function body uses the model's
opset, as onnx.checker asks; Constant reads an int attribute from opset 12 on)."""


def is_quantizer(node: onnx.NodeProto) -> bool:
    """Whether ``node`` is a QONNX Quant, BipolarQuant or Trunc."""
    return node.domain in QONNX_DOMAINS and node.op_type in QONNX_QUANTIZERS


def domain_version(model: onnx.ModelProto, domain: str) -> int:
    """The version ``model`` imports ``domain`` at (1 when it does not say)."""
    return next((opset.version for opset in model.opset_import if opset.domain == domain), 1)


def attach_functions(model: onnx.ModelProto, source: str) -> int:
    """Add to ``model`` (in place) a function for each QONNX quantizer type its top-level graph uses
    and that it does not define yet; returns how many were added (none on a default opset below
    ``MIN_FUNCTION_OPSET``). A node whose rounding mode the function does not implement is a
    one-line error naming ``source`` and the node."""
    used: dict[tuple[str, str], onnx.NodeProto] = {}
    for node in model.graph.node:
        if is_quantizer(node):
            _check_rounding(node, source)
            used.setdefault((node.domain, node.op_type), node)
    defined = {(function.domain, function.name) for function in model.functions}
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    if opset < MIN_FUNCTION_OPSET and any(key not in defined for key in used):
        return 0
    added = 0
    for domain, op_type in sorted(used):
        if (domain, op_type) in defined:
            continue
        version = domain_version(model, domain)
        model.functions.append(_function(domain, op_type, version, opset))
        added += 1
    return added


def _check_rounding(node: onnx.NodeProto, source: str) -> None:
    if node.op_type not in DEFAULT_ROUNDING:
        return
    mode = next((a.s.decode() for a in node.attribute if a.name == "rounding_mode"), DEFAULT_ROUNDING[node.op_type][0])
    if mode.upper() not in DEFAULT_ROUNDING[node.op_type]:
        raise FpgaplaceError(
            f"{source}: QONNX {node.op_type} '{node.name or node.output[0]}' has rounding_mode {mode!r}; expected "
            f"{DEFAULT_ROUNDING[node.op_type][0]!r} (the only one fpgaplace runs for {node.op_type})"
        )


class _Body:
    """Nodes of a function body under construction, each output named ``t<i>``."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []

    def __call__(self, op_type: str, *inputs: str, **attrs) -> str:
        name = f"t{len(self.nodes)}"
        self.nodes.append(helper.make_node(op_type, list(inputs), [name], **attrs))
        return name

    def constant(self, value: float) -> str:
        return self("Constant", value=helper.make_tensor("v", TensorProto.FLOAT, [], [value]))

    def attribute(self, name: str) -> str:
        """A float scalar of the function's int attribute ``name``."""
        node = helper.make_node("Constant", [], [f"t{len(self.nodes)}"])
        reference = onnx.AttributeProto(name="value_int", ref_attr_name=name, type=onnx.AttributeProto.INT)
        node.attribute.append(reference)
        self.nodes.append(node)
        return self("Cast", node.output[0], to=TensorProto.FLOAT)

    def clamp_to_bits(self, y: str, bits: str, signed: str, narrow: str) -> str:
        """``y`` clamped to the integer range of ``bits`` bits (QONNX min_int/max_int)."""
        one, two = self.constant(1.0), self.constant(2.0)
        half = self("Pow", two, self("Sub", bits, one))
        full = self("Pow", two, bits)
        low = self("Mul", signed, self("Sub", narrow, half))
        unsigned = self("Sub", one, signed)
        high = self("Add", self("Mul", signed, self("Sub", half, one)),
                    self("Mul", unsigned, self("Sub", self("Sub", full, one), narrow)))
        return self("Min", self("Max", y, low), high)

    def bipolar(self, y: str) -> str:
        """+1 where ``y >= 0``, else -1."""
        one = self.constant(1.0)
        return self("Where", self("Less", y, self.constant(0.0)), self("Neg", one), one)


def _function(domain: str, op_type: str, version: int, opset: int) -> onnx.FunctionProto:
    body = _Body()
    if op_type == "Quant":
        inputs, attributes = ["x", "scale", "zeropt", "bitwidth"], ["signed", "narrow", "rounding_mode"]
        signed, narrow = body.attribute("signed"), body.attribute("narrow")
        y = body("Add", body("Div", "x", "scale"), "zeropt")
        rounded = body("Round", body.clamp_to_bits(y, "bitwidth", signed, narrow))
        one = body.constant(1.0)
        is_bipolar = body("And", body("Equal", "bitwidth", one), body("Cast", signed, to=TensorProto.BOOL))
        q = body("Where", is_bipolar, body.bipolar(y), rounded)
        body("Mul", body("Sub", q, "zeropt"), "scale")
    elif op_type == "BipolarQuant":
        inputs, attributes = ["x", "scale"], []
        body("Mul", body.bipolar("x"), "scale")
    elif version < 2:  # Trunc v1
        inputs, attributes = ["x", "scale", "zeropt", "in_bits", "out_bits"], ["rounding_mode"]
        y = body("Round", body("Add", body("Div", "x", "scale"), "zeropt"))
        shift = body("Pow", body.constant(2.0), body("Sub", "in_bits", "out_bits"))
        y = body("Floor", body("Div", y, shift))
        body("Mul", body("Sub", y, "zeropt"), "scale")
    else:  # Trunc v2
        inputs = ["x", "scale", "zeropt", "in_bits", "out_scale", "out_bits"]
        attributes = ["rounding_mode", "signed", "narrow"]
        signed, narrow = body.attribute("signed"), body.attribute("narrow")
        y = body("Round", body("Add", body("Div", "x", "scale"), "zeropt"))
        two = body.constant(2.0)
        log2 = body("Div", body("Log", body("Div", "out_scale", "scale")), body("Log", two))
        shift = body("Pow", two, body("Round", log2))
        y = body("Floor", body.clamp_to_bits(body("Div", y, shift), "out_bits", signed, narrow))
        body("Mul", body("Sub", y, body("Div", "zeropt", shift)), "out_scale")
    body.nodes[-1].output[0] = "y"
    defaults = _attribute_defaults(op_type, attributes)
    function = helper.make_function(domain, op_type, inputs, ["y"], body.nodes,
                                    [helper.make_opsetid("", opset)], [])
    function.attribute_proto.extend(defaults)
    return function


def _attribute_defaults(op_type: str, names: list[str]) -> list[onnx.AttributeProto]:
    """The QONNX defaults of ``names``: signed 1, narrow 0, the op's default rounding mode."""
    values = {"signed": 1, "narrow": 0, "rounding_mode": DEFAULT_ROUNDING.get(op_type, ("ROUND",))[0]}
    return [helper.make_attribute(name, values[name]) for name in names]
