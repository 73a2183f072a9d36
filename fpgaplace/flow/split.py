"""Split an ONNX model by placement into one ONNX model per device piece, plus a manifest.

``split_model`` cuts the graph where the device changes. A device that holds several pieces
gets one submodel per piece. With merging (the default), each device's nodes are first
contracted into one vertex where that keeps the graph acyclic (a convex set, such as every set
of a contiguous placement, is one piece); pieces come from the *stage* rule over that graph: in
topological order,
``stage(v) = max over producers p of stage(p) (same device) or stage(p) + 1 (other device)``,
and a piece is the set of nodes with one (device, stage). Every edge between pieces goes from a
lower to a higher stage, so the pieces form a DAG and run in (stage, first node) order.
O(devices * (n + e)). A node that computes a constant from constants (a DequantizeLinear of a
weight or of a scalar such as HardSwish's 3: no op of the placement, ``frontend.build``) is in no
piece of its own: every piece reading it computes it too, so a constant never crosses devices
whatever device the assignment names for it; so is the QuantizeLinear -> DequantizeLinear of a graph
input placed on an FPGA core (``_input_views``, ``whole``): each piece reading the input computes its
own. Then the placement-level passes of ``fpgaplace.model.passes.transfers`` keep fused groups on
one device, merge pieces that run back to back on one device (synchronization points with nothing
to wait for) and send each tensor once to each device that reads it.

Boundary tensors keep their names from the source model. ``manifest.json`` lists the
submodels in execution order with their device, inputs (and where each comes from) and
outputs, the transfers with their byte sizes, the graph inputs/outputs, and the transfer and
synchronization-point counts before and after the placement passes.

``run_split`` executes the submodels in manifest order with onnxruntime; ``check_split``
compares every boundary tensor and output against the unsplit model on random inputs, like
``numpy.allclose`` with a tolerance scaled to each tensor's range (``Tolerance``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnx
from onnx import helper

from fpgaplace.model.frontend.bind import initializer_names
from fpgaplace.model.frontend.build import constant_flags
from fpgaplace.model.ir import producer_index
from fpgaplace.model.passes.graph_tools import (
    TensorType,
    copy_model,
    name_nodes,
    output_names,
    subgraph_inputs,
    tensor_types,
    topological_indices,
)
from fpgaplace.model.passes.transfers import Transfer, colocate_fused_groups, dedupe_transfers, merge_sync_points
from fpgaplace.project.layout import MANIFEST_FILE
from fpgaplace.project.manifest import Manifest, SubmodelInfo
from fpgaplace.util import onnxrt
from fpgaplace.util.compare import Tolerance, compare_tensors, relative_error
from fpgaplace.util.errors import FpgaplaceError, first_line
from fpgaplace.util.files import new_folder
from fpgaplace.util.graphs import node_on_cycle, topological_order
from fpgaplace.util.onnxrt import random_inputs, run_model

GRAPH_INPUT = ""  # the "source submodel" of a tensor that is a graph input


@dataclass
class _Plan:
    """Pieces of a placement before any model is built."""

    piece_nodes: list[list[int]]  # node positions (topological) per piece, execution order
    piece_devices: list[str]
    transfers: list[Transfer]  # raw: one per (tensor, reading piece) across pieces


def _reads(node: onnx.NodeProto) -> list[str]:
    """The tensors ``node`` reads, its subgraphs' outer-scope reads included (sorted after its inputs)."""
    return list(node.input) + sorted(subgraph_inputs(node))


def _node_edges(model: onnx.ModelProto, order: list[int]) -> list[tuple[int, int]]:
    """(producer, reader) node positions of every tensor read, subgraph reads included, between
    the nodes of ``order``. O(n + e)."""
    graph = model.graph
    producer_of = producer_index(graph.node)
    placed = set(order)
    return sorted({(producer_of[t], i) for i in order for t in _reads(graph.node[i])
                   if producer_of.get(t) in placed})


def _local_constants(model: onnx.ModelProto, order: list[int], on_cores: set[str] = frozenset()) -> set[int]:
    """Positions of the nodes computing a constant (``frontend.build.constant_flags``) or a view of
    a graph input placed on a device of ``on_cores`` (``_input_views``), none of whose outputs is
    a graph output, that another node reads directly or through one another: each piece reading
    one computes it itself (``_with_constants``). O(n + e)."""
    graph = model.graph
    initializers = initializer_names(graph)
    flags = constant_flags([graph.node[i] for i in order], initializers)
    outputs = output_names(graph)
    constant = {i for i, flag in zip(order, flags, strict=True) if flag and not outputs & set(graph.node[i].output)}
    local = constant | {i for i in _input_views(graph, order, constant, initializers) if graph.node[i].name in on_cores}
    return _constants_read(graph, [i for i in order if i not in local], local, producer_index(graph.node))


INPUT_VIEW_OPS = ("QuantizeLinear", "DequantizeLinear")


def _placed_on(assignment: dict[str, str], devices: Sequence[str]) -> set[str]:
    """The nodes ``assignment`` puts on one of ``devices``. O(nodes)."""
    return {node for node, device in assignment.items() if device in set(devices)}


def _input_views(graph: onnx.GraphProto, order: list[int], constant: set[int], initializers: set[str]) -> set[int]:
    """Positions of the QuantizeLinear and DequantizeLinear nodes of a graph input (a QDQ model's
    ``x -> Q -> DQ``), through one another, with constant scales and no graph output. Placed on an
    FPGA core, every piece reading the dequantized input computes it from the graph input itself, as
    the host hands the quantized input to every core that reads it: the core holding them only
    receives that input and has no port to pass it on (on a CPU they run and hand it on). O(n)."""
    known = {out for i in constant for out in graph.node[i].output} | initializers
    available = {i.name for i in graph.input} - initializers
    outputs = output_names(graph)
    views = set()
    for i in order:
        node = graph.node[i]
        if node.op_type in INPUT_VIEW_OPS and node.input[0] in available and not outputs & set(node.output) \
                and all(t in known for t in node.input[1:] if t):
            views.add(i)
            available.update(node.output)
    return views


def _constants_read(graph: onnx.GraphProto, nodes: list[int], constant: set[int],
                    producer_of: dict[str, int]) -> set[int]:
    """The nodes of ``constant`` whose outputs ``nodes`` read, directly or through one another.
    O(size of ``nodes`` and the constants found)."""
    found: set[int] = set()
    stack = [t for i in nodes for t in _reads(graph.node[i])]
    while stack:
        producer = producer_of.get(stack.pop())
        if producer in constant and producer not in found:
            found.add(producer)
            stack += _reads(graph.node[producer])
    return found


def _with_constants(model: onnx.ModelProto, pieces: list[list[int]], local: set[int],
                    order: list[int]) -> list[list[int]]:
    """Each piece with the ``local`` constants it reads (``_local_constants``), in ``order``."""
    rank = {i: r for r, i in enumerate(order)}
    producer_of = producer_index(model.graph.node)
    return [sorted([*piece, *_constants_read(model.graph, piece, local, producer_of)], key=rank.get)
            for piece in pieces]


def _device_groups(order: list[int], edges: list[tuple[int, int]], device: dict[int, str],
                   whole: Sequence[str] = ()) -> dict[int, int]:
    """Node position -> its group: all of one device's nodes when contracting them keeps the
    graph acyclic (their set is convex in the graph contracted so far), the devices ``whole``
    names first (those that must be one piece: FPGA cores), then the others in the order of their
    first node; else each node alone. O(devices * (n + e))."""
    group = {i: i for i in order}
    present = dict.fromkeys(device[i] for i in order)
    for name in [*(d for d in whole if d in present), *(d for d in present if d not in whole)]:
        members = [i for i in order if device[i] == name]
        trial = {**group, **dict.fromkeys(members, members[0])}
        index = {g: k for k, g in enumerate(dict.fromkeys(trial.values()))}
        quotient = {(index[trial[u]], index[trial[v]]) for u, v in edges if trial[u] != trial[v]}
        if node_on_cycle(len(index), sorted(quotient)) is None:
            group = trial
    return group


def _pieces(model: onnx.ModelProto, order: list[int], assignment: dict[str, str], contract: bool = False,
            whole: Sequence[str] = ()) -> tuple[list[list[int]], list[str], set[tuple[int, int]]]:
    """Pieces by the stage rule (module docstring), in execution order, and their DAG; with
    ``contract``, over the graph with each device's nodes contracted where that keeps it acyclic
    (``_device_groups``, ``whole`` first).

    Contracting first keeps a device's convex set in one piece: the stage rule alone parts it
    when an unrelated node of another device, in one piece with a node that reads the set, also
    feeds it, and merging pieces afterwards (``merge_sync_points``) sees that false dependency."""
    graph = model.graph
    device = {i: assignment[graph.node[i].name] for i in order}
    edges = _node_edges(model, order)
    group = _device_groups(order, edges, device, whole) if contract else {i: i for i in order}
    rank = {i: r for r, i in enumerate(order)}
    heads = list(dict.fromkeys(group[i] for i in order))
    position = {g: k for k, g in enumerate(heads)}
    quotient = sorted({(position[group[u]], position[group[v]]) for u, v in edges if group[u] != group[v]})
    preds: list[set[int]] = [set() for _ in heads]
    for u, v in quotient:
        preds[v].add(u)
    stage: list[int] = [0] * len(heads)
    for g in topological_order(len(heads), quotient, key=lambda g: rank[heads[g]]):
        stage[g] = max((stage[p] + (device[heads[p]] != device[heads[g]]) for p in preds[g]), default=0)
    of_node = {i: stage[position[group[i]]] for i in order}
    keys: dict[tuple[int, str], int] = {}
    for i in sorted(order, key=lambda i: (of_node[i], rank[i])):
        keys.setdefault((of_node[i], device[i]), len(keys))
    piece_of = {i: keys[(of_node[i], device[i])] for i in order}
    nodes: list[list[int]] = [[] for _ in keys]
    for i in order:
        nodes[piece_of[i]].append(i)
    devices = [name for (_, name) in sorted(keys, key=keys.get)]
    piece_edges = {(piece_of[u], piece_of[v]) for u, v in edges if piece_of[u] != piece_of[v]}
    return nodes, devices, piece_edges


def _piece_io(model: onnx.ModelProto, nodes: list[int], initializers: set[str],
              local: set[int] = frozenset()) -> tuple[list[str], list[str]]:
    """Tensors a piece reads from outside (not initializers) and tensors it must export (not
    those of ``local`` constants: each piece reading one computes it, ``_local_constants``)."""
    graph = model.graph
    inside = {out for i in nodes for out in graph.node[i].output if out}
    inputs: list[str] = []
    for i in nodes:
        for name in _reads(graph.node[i]):
            if name and name not in inside and name not in initializers and name not in inputs:
                inputs.append(name)
    read_elsewhere = {name for j, node in enumerate(graph.node) if j not in set(nodes) for name in _reads(node)}
    outputs = output_names(graph)
    exported = [out for i in nodes if i not in local for out in graph.node[i].output
                if out and (out in read_elsewhere or out in outputs)]
    if not exported:  # a piece nobody reads (dead code): still export its last outputs
        exported = [out for out in graph.node[nodes[-1]].output if out]
    return inputs, exported


def _merged_pieces(model: onnx.ModelProto, order: list[int], assignment: dict[str, str], merge: bool,
                   whole: Sequence[str] = (), local: set[int] = frozenset()) -> tuple[list[list[int]], list[str], int]:
    """The pieces (node positions, execution order), their devices and how many merges made
    them: of the nodes of ``order`` but the ``local`` constants, which join each piece reading
    them; with ``merge``, device sets contracted (``whole`` first) and sync points merged."""
    computed = [i for i in order if i not in local]
    nodes, devices, edges = _pieces(model, computed, assignment, contract=merge, whole=whole)
    if not merge:
        return _with_constants(model, nodes, local, order), devices, 0
    merges = len(_pieces(model, computed, assignment)[0]) - len(nodes)  # contracted sets
    group, more = merge_sync_points(devices, edges)
    merged: list[list[int]] = [[] for _ in range(max(group, default=-1) + 1)]
    merged_devices = [""] * len(merged)
    for piece, new in enumerate(group):
        merged[new].extend(nodes[piece])
        merged_devices[new] = devices[piece]
    return _with_constants(model, merged, local, order), merged_devices, merges + more


def piece_counts(model: onnx.ModelProto, assignment: dict[str, str], whole: Sequence[str] = ()) -> dict[str, int]:
    """Device -> how many submodels ``split_model`` (defaults, ``whole``) would give it; nothing
    is written. ``assignment`` as ``split_model`` takes it. O(devices * (n + e))."""
    work = copy_model(model)
    name_nodes(work)
    placed, _ = colocate_fused_groups(work, assignment)
    order = topological_indices(work.graph)
    local = _local_constants(work, order, _placed_on(assignment, whole))
    _, devices, _ = _merged_pieces(work, order, placed, True, whole, local)
    return {device: devices.count(device) for device in dict.fromkeys(devices)}


def _plan(model: onnx.ModelProto, order: list[int], assignment: dict[str, str], types: dict[str, TensorType],
          merge: bool, whole: Sequence[str] = (), local: set[int] = frozenset()) -> tuple[_Plan, int]:
    nodes, devices, merges = _merged_pieces(model, order, assignment, merge, whole, local)
    initializers = {t.name for t in model.graph.initializer}
    names = _submodel_names(devices)
    producer_piece = {out: p for p, piece in enumerate(nodes) for i in piece
                      for out in model.graph.node[i].output if out}
    transfers = []
    for p, piece in enumerate(nodes):
        inputs, _ = _piece_io(model, piece, initializers, local)
        for tensor in inputs:
            if tensor in producer_piece:
                source = producer_piece[tensor]
                known = types.get(tensor)
                transfers.append(Transfer(tensor, names[source], names[p], devices[source],
                                          devices[p], known.nbytes() if known else None))
    return _Plan(nodes, devices, transfers), merges


def _submodel_names(devices: list[str]) -> list[str]:
    safe = ["".join(c if c.isalnum() or c in "-_." else "_" for c in d) for d in devices]
    return [f"sub{index:02d}_{device}" for index, device in enumerate(safe)]


def _check_assignment(model: onnx.ModelProto, assignment: dict[str, str],
                      devices: list[str] | None) -> None:
    names = [node.name for node in model.graph.node]
    for node in model.graph.node:
        if node.name not in assignment:
            raise FpgaplaceError(f"assignment: node '{node.name}' ({node.op_type}) has no "
                                 "device; every node needs one")
    unknown = sorted(set(assignment) - set(names))
    if unknown:
        raise FpgaplaceError(f"assignment: node '{unknown[0]}' is not in the model "
                             f"'{model.graph.name}'")
    if devices is not None:
        used = set(assignment.values())
        for device in devices:
            if device not in used:
                raise FpgaplaceError(f"assignment: device '{device}' was requested but no "
                                     "node is placed on it")
        stray = sorted(used - set(devices))
        if stray:
            raise FpgaplaceError(f"assignment: device '{stray[0]}' is not one of the "
                                 f"requested devices {devices}")


def _value_info(name: str, types: dict[str, TensorType], where: str) -> onnx.ValueInfoProto:
    known = types.get(name)
    if known is None:
        raise FpgaplaceError(f"{where}: the type of boundary tensor '{name}' is unknown "
                             "(onnx shape inference could not find it)")
    shape = None if known.shape is None else list(known.shape)
    return helper.make_tensor_value_info(name, known.elem_type, shape)


def _build_submodel(model: onnx.ModelProto, nodes: list[int], inputs: list[str],
                    outputs: list[str], types: dict[str, TensorType],
                    name: str) -> onnx.ModelProto:
    graph = model.graph
    read = {t for i in nodes for t in list(graph.node[i].input) + sorted(
        subgraph_inputs(graph.node[i]))}
    sub_graph = helper.make_graph(
        [graph.node[i] for i in nodes], name,
        [_value_info(t, types, name) for t in inputs],
        [_value_info(t, types, name) for t in outputs],
        initializer=[t for t in graph.initializer if t.name in read],
    )
    sub = helper.make_model(sub_graph, opset_imports=list(model.opset_import),
                            producer_name="fpgaplace.flow.split")
    sub.ir_version = max(model.ir_version, 4)  # initializers need not be listed as inputs
    sub.functions.extend(model.functions)
    return sub


def _io_entries(names: list[str], types: dict[str, TensorType]) -> list[dict]:
    entries = []
    for name in names:
        known = types.get(name)
        entries.append({
            "name": name,
            "dtype": str(helper.tensor_dtype_to_np_dtype(known.elem_type)) if known else None,
            "shape": list(known.shape) if known and known.shape is not None else None,
        })
    return entries


def _transfer_totals(transfers: list[Transfer]) -> dict:
    sizes = [t.nbytes for t in transfers]
    return {"count": len(transfers),
            "bytes": sum(s for s in sizes if s is not None),
            "unknown_size": sum(s is None for s in sizes)}


def check_out_dir(out_dir: Path) -> None:
    """Refuse an output path that is a file, or a folder holding something other than a split."""
    if out_dir.exists() and not out_dir.is_dir():
        raise FpgaplaceError(f"out_dir {out_dir}: is a file; expected a folder for the split")
    if out_dir.is_dir() and any(out_dir.iterdir()) and not (out_dir / MANIFEST_FILE).exists():
        raise FpgaplaceError(f"out_dir {out_dir}: exists and is not a split folder; "
                             "expected an empty folder or a previous split")


def split_model(model: onnx.ModelProto, assignment: dict[str, str], out_dir: Path, *,
                devices: list[str] | None = None, merge_sync: bool = True,
                colocate_fused: bool = True, whole: Sequence[str] = ()) -> Manifest:
    """Write one ONNX model per device piece and ``manifest.json`` into ``out_dir``.

    ``assignment`` maps every node name (empty/duplicate names become "<op_type>_<index>")
    to a device name (a node computing a constant that others read runs in every piece reading
    it, whatever its device: module docstring). ``whole`` names devices whose set is contracted
    first (module docstring): those that must be one piece where they can be, as FPGA cores.
    ``devices``, when given, lists the devices the user asked for: each must receive at least
    one node. The folder is written elsewhere first and moved into place.
    """
    out_dir = Path(out_dir)
    check_out_dir(out_dir)
    work = copy_model(model)
    name_nodes(work)
    _check_assignment(work, assignment, devices)
    order = topological_indices(work.graph)
    local = _local_constants(work, order, _placed_on(assignment, whole))
    types = tensor_types(work)
    naive, _ = _plan(work, order, assignment, types, merge=False, local=local)
    placed, moved = (colocate_fused_groups(work, assignment) if colocate_fused
                     else (dict(assignment), 0))
    colocated, _ = _plan(work, order, placed, types, merge=False, local=local)
    plan, merges = _plan(work, order, placed, types, merge=merge_sync, whole=whole, local=local)
    final_transfers, duplicates = dedupe_transfers(plan.transfers)
    names = _submodel_names(plan.piece_devices)
    initializers = {t.name for t in work.graph.initializer}
    graph_inputs = [i.name for i in work.graph.input if i.name not in initializers]
    graph_outputs = [o.name for o in work.graph.output]
    producer_name = {out: names[p] for p, piece in enumerate(plan.piece_nodes) for i in piece
                     for out in work.graph.node[i].output if out}
    with new_folder(out_dir, check_out_dir) as tmp:
        submodels = []
        for name, device, piece in zip(names, plan.piece_devices, plan.piece_nodes, strict=True):
            inputs, outputs = _piece_io(work, piece, initializers, local)
            sub = _build_submodel(work, piece, inputs, outputs, types, name)
            file = f"{name}.onnx"
            data = sub.SerializeToString()
            onnxrt.session(data, f"submodel '{name}' on device '{device}'")
            (tmp / file).write_bytes(data)
            submodels.append(SubmodelInfo(
                name, file, device, [work.graph.node[i].name for i in piece], inputs, outputs,
                {t: producer_name.get(t, GRAPH_INPUT) for t in inputs}))
        stats = {
            "pieces_before_merge": len(colocated.piece_nodes),
            "submodels": len(submodels),
            "sync_points_removed": merges,
            "fused_nodes_moved": moved,
            "transfers_before": _transfer_totals(naive.transfers),
            "transfers_after_fusion": _transfer_totals(colocated.transfers),
            "duplicate_or_local_transfers_removed": duplicates,
            "transfers_after": _transfer_totals(final_transfers),
        }
        used = list(dict.fromkeys(plan.piece_devices))
        manifest = Manifest(work.graph.name or "model", devices or used,
                            _io_entries(graph_inputs, types), _io_entries(graph_outputs, types),
                            submodels, final_transfers, stats)
        (tmp / MANIFEST_FILE).write_text(json.dumps(manifest.to_dict(), indent=2) + "\n")
    return manifest


def run_split(manifest_dir: Path, inputs: dict[str, np.ndarray],
              keep_intermediates: bool = False) -> dict[str, np.ndarray]:
    """Run the submodels in manifest order; return the graph outputs (and, with
    ``keep_intermediates``, every boundary tensor)."""
    manifest_dir = Path(manifest_dir)
    manifest = Manifest.load(manifest_dir)
    values: dict[str, np.ndarray] = {}
    for entry in manifest.graph_inputs:
        if entry["name"] not in inputs:
            raise FpgaplaceError(f"{manifest_dir / MANIFEST_FILE}: graph input "
                                 f"'{entry['name']}' was not given")
        values[entry["name"]] = inputs[entry["name"]]
    for sub in manifest.submodels:
        what = f"submodel '{sub.name}' on device '{sub.device}'"
        path = manifest_dir / sub.file
        if not path.is_file():
            raise FpgaplaceError(f"{path}: file of {what} is missing")
        session = onnxrt.session(str(path), what)
        missing = [t for t in sub.inputs if t not in values]
        if missing:
            raise FpgaplaceError(f"{what}: input tensor '{missing[0]}' is produced by no "
                                 "earlier submodel")
        try:
            results = session.run(sub.outputs, {t: values[t] for t in sub.inputs})
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises several types
            raise FpgaplaceError(f"{what}: onnxruntime failed: {first_line(exc)}") from exc
        values.update(zip(sub.outputs, results, strict=True))
    if keep_intermediates:
        return values
    return {entry["name"]: values[entry["name"]] for entry in manifest.graph_outputs}


def check_split(model: onnx.ModelProto, manifest_dir: Path, tolerance: Tolerance = Tolerance(),
                seed: int = 0) -> dict[str, float]:
    """Run the model and its split on the same random inputs and compare every submodel output
    (in execution order) with the same tensor of the whole model by ``tolerance`` (see
    ``Tolerance`` for the rule). Raises ``FpgaplaceError`` naming the first submodel and tensor
    that differs, and where; returns each graph output's norm-wise ``relative_error`` (a
    figure to report, not the test)."""
    manifest = Manifest.load(Path(manifest_dir))
    inputs = random_inputs(model, seed)
    boundary = [t for sub in manifest.submodels for t in sub.outputs]
    expected = run_model(model, inputs, boundary)
    actual = run_split(Path(manifest_dir), inputs, keep_intermediates=True)
    for sub in manifest.submodels:
        for tensor in sub.outputs:
            comparison = compare_tensors(actual[tensor], expected[tensor], tolerance)
            if not comparison.agrees:
                raise FpgaplaceError(f"submodel '{sub.name}' on device '{sub.device}': tensor "
                                     f"'{tensor}' differs from the whole model {comparison.describe()}")
    return {entry["name"]: relative_error(actual[entry["name"]], expected[entry["name"]])
            for entry in manifest.graph_outputs}
