"""Placement-level passes: fewer transfers and fewer synchronization points after placement.

These run on the plan that ``fpgaplace.flow.split`` builds from a placement (op name -> device):

* ``colocate_fused_groups``: a fused group (see ``fpgaplace.model.passes.fuse``) is one kernel, so
  its members follow their head's device; the transfers between head and members that the
  raw placement implied are dead and disappear. O(n).
* ``merge_sync_points``: two pieces on one device with no path between them through another
  piece run back to back on that device; the boundary between them is a synchronization
  point with nothing to wait for, so they merge into one submodel. Greedy in execution
  order; each candidate merge is checked for a path in the piece DAG, O(p * (p + e)) per
  merge for p pieces.
* ``dedupe_transfers``: a tensor goes once to each device that reads it (later readers on
  that device read the local copy); a "transfer" to the device that produced it is no
  transfer at all. O(t) for t transfers.
"""

from __future__ import annotations

from dataclasses import dataclass

import networkx as nx
import onnx

from fpgaplace.model.passes.fuse import fused_head


@dataclass(frozen=True)
class Transfer:
    """One tensor sent from the submodel producing it to a submodel reading it."""

    tensor: str
    source: str  # submodel name
    target: str  # submodel name
    source_device: str
    target_device: str
    nbytes: int | None  # None when the tensor's shape is not static

    def to_dict(self) -> dict:
        return {"tensor": self.tensor, "from_submodel": self.source, "to_submodel": self.target,
                "from_device": self.source_device, "to_device": self.target_device,
                "bytes": self.nbytes}

    @staticmethod
    def from_dict(data: dict) -> Transfer:
        return Transfer(data["tensor"], data["from_submodel"], data["to_submodel"],
                        data["from_device"], data["to_device"], data["bytes"])


def colocate_fused_groups(model: onnx.ModelProto,
                          assignment: dict[str, str]) -> tuple[dict[str, str], int]:
    """Move every fused node to its head's device; return the new assignment and the number
    of nodes moved. Nodes must be named (``graph_tools.name_nodes``)."""
    result = dict(assignment)
    moved = 0
    for node in model.graph.node:
        head = fused_head(node)
        if head is None or head not in result or node.name not in result:
            continue
        if result[node.name] != result[head]:
            result[node.name] = result[head]
            moved += 1
    return result, moved


def merge_sync_points(devices: list[str],
                      edges: set[tuple[int, int]]) -> tuple[list[int], int]:
    """Merge pieces (indexed in execution order, ``devices[i]`` the device of piece i, ``edges``
    the piece DAG) that run back to back on one device.

    Returns ``group[i]`` (the merged piece of piece i, numbered from 0 in execution order) and
    the number of merges. Pieces i < j on one device merge when no path leaves i and reaches j
    through another piece, so the merged DAG stays acyclic."""
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(devices)))
    graph.add_edges_from(edges)
    members: dict[int, list[int]] = {i: [i] for i in range(len(devices))}
    merges = 0
    for j in range(len(devices)):
        if j not in graph:
            continue
        for i in sorted((k for k in graph if k < j and devices[k] == devices[j]), reverse=True):
            if _has_indirect_path(graph, i, j) or _has_indirect_path(graph, j, i):
                continue
            graph = nx.contracted_nodes(graph, i, j, self_loops=False)
            members[i].extend(members.pop(j))
            merges += 1
            break
    order = list(nx.lexicographical_topological_sort(graph))
    group = [0] * len(devices)
    for new_index, kept in enumerate(order):
        for piece in members[kept]:
            group[piece] = new_index
    return group, merges


def _has_indirect_path(graph: nx.DiGraph, source: int, target: int) -> bool:
    """True if a path source -> x -> ... -> target exists with some x != target."""
    for successor in graph.successors(source):
        if successor != target and nx.has_path(graph, successor, target):
            return True
    return False


def dedupe_transfers(transfers: list[Transfer]) -> tuple[list[Transfer], int]:
    """Keep the first transfer of each tensor to each device (transfers in execution order of
    their target); drop transfers whose source and target device are the same. Returns the
    kept transfers and how many were dropped."""
    kept: list[Transfer] = []
    seen: set[tuple[str, str]] = set()
    for transfer in transfers:
        key = (transfer.tensor, transfer.target_device)
        if transfer.source_device == transfer.target_device or key in seen:
            continue
        seen.add(key)
        kept.append(transfer)
    return kept, len(transfers) - len(kept)
