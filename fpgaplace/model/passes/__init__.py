"""Graph optimizer: passes over ``onnx.ModelProto`` and a manager that runs them to a fixpoint.

Every pass is ``pass(model) -> (new_model, changes)`` and leaves the input model untouched;
``optimize`` applies ``DEFAULT_PASSES`` until nothing changes. The placement-level passes
(one transfer per tensor and device, fused groups kept together, merged synchronization
points) live in ``fpgaplace.model.passes.transfers`` and are applied by ``fpgaplace.flow.split``.
"""

from fpgaplace.model.passes.constant import fold_constants
from fpgaplace.model.passes.eliminate import eliminate_common_subexpressions, eliminate_dead_code
from fpgaplace.model.passes.fold import fold_batchnorm, fold_channel_affine
from fpgaplace.model.passes.fuse import fuse_activations, fuse_elementwise, fused_groups, fused_head
from fpgaplace.model.passes.graph_tools import FUSED_INTO_KEY, name_nodes, op_counts
from fpgaplace.model.passes.heads import heads_to_batch
from fpgaplace.model.passes.layernorm import fuse_layernorm
from fpgaplace.model.passes.manager import DEFAULT_PASSES, OptimizeReport, PassManager, PassStat, optimize
from fpgaplace.model.passes.pools import whole_plane_pools_to_global
from fpgaplace.model.passes.recurrent import fold_constant_if, unroll_recurrent
from fpgaplace.model.passes.simplify import (
    cancel_transpose_pairs,
    collapse_reshape_chains,
    remove_dropout,
    remove_identity,
    remove_noop_cast,
    remove_noop_reshape,
    remove_noop_transpose,
)

__all__ = [
    "DEFAULT_PASSES",
    "FUSED_INTO_KEY",
    "OptimizeReport",
    "PassManager",
    "PassStat",
    "cancel_transpose_pairs",
    "collapse_reshape_chains",
    "eliminate_common_subexpressions",
    "eliminate_dead_code",
    "fold_batchnorm",
    "fold_channel_affine",
    "fold_constant_if",
    "fold_constants",
    "fuse_activations",
    "fuse_elementwise",
    "fused_groups",
    "fuse_layernorm",
    "fused_head",
    "heads_to_batch",
    "name_nodes",
    "op_counts",
    "optimize",
    "remove_dropout",
    "remove_identity",
    "remove_noop_cast",
    "remove_noop_reshape",
    "remove_noop_transpose",
    "unroll_recurrent",
    "whole_plane_pools_to_global",
]
