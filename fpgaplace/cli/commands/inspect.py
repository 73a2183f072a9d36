"""``fpgaplace inspect``: the model's ops, their shapes, MACs, parameters and where each may run."""

from __future__ import annotations

from typing import Annotated

from rich.table import Table

from fpgaplace.cli.options import JsonOption, ModelArgument, ModelFlags, Only, flag_groups
from fpgaplace.cli.output import human, out, print_json


@flag_groups
def inspect(
    model: ModelArgument,
    flags: Annotated[ModelFlags, Only("optimized", "input_shape", "batch", "precision")] = ModelFlags(),
    as_json: JsonOption = False,
) -> None:
    """Show the model's ops: type, output shape, bits (weights, input -> output: a QONNX quantizer's
    width, else --precision's), MACs, parameters, and where each may run.

    The graph is the one every other command uses: after the graph optimizer unless --no-optimize.

    Example: fpgaplace inspect resnet50.onnx --input-shape data=1x3x224x224
    """
    from fpgaplace.place.cost.fpga import PRECISION_BITS

    design = flags.design(model)
    graph = design.graph
    default_bits = PRECISION_BITS[design.precision]
    rows = [_op_row(graph, graph.ops[name], default_bits) for name in graph.topological_order()]
    totals = {
        "ops": len(rows),
        "macs": graph.total_macs,
        "param_bytes": graph.total_param_bytes,
        "fpga_ops": sum(r["fpga"] for r in rows),
        "cpu_only_ops": sum(not r["fpga"] for r in rows),
    }
    report = design.optimize_report
    inputs = {name: list(graph.tensors[name].shape) for name in graph.inputs if name in graph.tensors}
    if as_json:
        print_json({"model": str(model), "batch": flags.batch, "optimized": flags.optimized, "inputs": inputs,
                    "notes": graph.notes, "optimizer": report.to_dict() if report else None, "ops": rows,
                    "totals": totals})
        return
    table = Table(title=f"{model.name} (batch {flags.batch}{', optimized' if flags.optimized else ''})")
    for column in ("op", "type", "output shape", "bits", "MACs", "params", "runs on"):
        table.add_column(column, justify="right" if column in ("MACs", "params") else "left")
    for r in rows:
        table.add_row(
            r["name"],
            r["type"],
            "x".join(map(str, r["output_shape"])) or "scalar",
            _bits_text(r["bits"]),
            human(r["macs"]),
            human(r["param_bytes"], "B"),
            "FPGA or CPU" if r["fpga"] else "CPU only",
        )
    out.print(table)
    out.print("inputs: " + ", ".join(f"{name} {'x'.join(map(str, shape)) or 'scalar'}"
                                     for name, shape in inputs.items()))
    if report:
        out.print(f"graph optimizer: {report.nodes_before} -> {report.nodes_after} nodes")
    out.print(
        f"{totals['ops']} ops, {human(totals['macs'])} MACs, {human(totals['param_bytes'], 'B')} of parameters, "
        f"{totals['cpu_only_ops']} ops CPU-only"
    )


def _bits_text(bits: dict) -> str:
    """``w4 a8 -> a4``: the weights' bits (a dot product's), the first input's and the output's."""
    weights = f"w{bits['weights']} " if bits["weights"] is not None else ""
    return f"{weights}a{bits['input']} -> a{bits['output']}"


def _op_bits(graph, op, default: int) -> dict:
    """The bits of ``op``'s weights (a dot product's second operand; None otherwise), first input and
    first output: each tensor's own width (a QONNX quantizer's, a narrowed weight's), else ``default``."""
    from fpgaplace.model import ops
    from fpgaplace.place.cost.fpga import op_bits, tensor_bits

    weights, activation = op_bits(op, graph, default)
    dot = len(op.inputs) > 1 and op.inputs[1] and ops.is_dot_product(op.op_type, op.domain)
    output = tensor_bits(graph, op.outputs[0], default) if op.outputs and op.outputs[0] else activation
    return {"weights": weights if dot else None, "input": activation, "output": output}


def _op_row(graph, op, default_bits: int = 8) -> dict:
    from fpgaplace.hw import plan_op

    first = op.outputs[0] if op.outputs else ""
    shape = list(graph.tensors[first].shape) if first in graph.tensors else []
    planned = plan_op(op, graph)
    return {
        "name": op.name,
        "type": op.op_type,
        "output_shape": shape,
        "bits": _op_bits(graph, op, default_bits),
        "macs": op.macs,
        "param_bytes": op.param_bytes,
        "fpga": op.fpga_supported and bool(planned),
        "kernel": planned[0].name if planned else None,
        "cpu_reason": None if planned else planned.reason,
    }
