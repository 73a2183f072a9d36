"""``Design``: the one pipeline from a model and a board to a placement, a split and a project.

    model.onnx -> front end -> graph optimizer -> OpGraph -> cost model (board) -> PlacementProblem
        -> solver -> Placement -> split (one ONNX per device) | compile (HLS project) -> csim

Every ``fpgaplace`` command that reads a model, and every Python user, goes through a
``Design``, so the graph that is placed is the graph that is split and compiled (the placement
is never costed on one graph and written out for another). Each stage is computed on first use
and cached; a later stage asks for the one before it (``split()`` places with the defaults if
``place()`` has not run), as hls4ml's ``build()`` writes the project first. Each stage is one
call into its own module; this file only chains them and names devices by board identity.

Device names: ``PlacementProblem.device_name`` knows only a kind and an ordinal ("core1");
a ``Design`` maps every device index of its problem back to the board's own ``FpgaCore`` or
``CpuCore`` (``devices()``), so results say "core1" on a zcu104 and "node1.core1" on a
cluster, never "core3".

Quantized (QDQ) models: the full graph optimizer would break the QuantizeLinear /
DequantizeLinear pattern the cores' integer arithmetic is read from (``fold_constants``
evaluates the DequantizeLinear of every constant int8 weight into a float initializer;
``fold_batchnorm``/``fold_channel_affine`` rewrite float weights that no longer exist as such;
common-subexpression elimination may merge Q/DQ nodes that belong to different consumers).
On a QDQ model, ``optimize=True`` therefore runs ``QDQ_PASSES`` only: dead-code elimination, a
pool whose window is its whole unpadded plane made the global pool (``passes.pools``: the op type
alone changes, its Q/DQ neighbours and every tensor stay), and the fusion annotations, which add
node metadata and change no tensor.

A paper workload JSON is a placement problem, not a model: ``load_input`` returns it as a
problem without a ``Design``, and ``place_problem`` solves either kind with the same options.
"""

from __future__ import annotations

import copy
import dataclasses
import math
import tempfile
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fpgaplace.place.solvers.problem import Placement, PlacementProblem
from fpgaplace.place.solvers.run import METHODS, Result, SolveOptions, solve
from fpgaplace.util.errors import FpgaplaceError

# The model stages (onnx, the front end, the cost model and its op library) load on first use:
# placing a paper workload needs none of them, and `fpgaplace place workload.json` starts fast.

if TYPE_CHECKING:
    import onnx

    from fpgaplace.board.model import Board, CpuCore, FpgaCore

    BoardDevice = FpgaCore | CpuCore

    from fpgaplace.model.ir import OpGraph
    from fpgaplace.model.passes.manager import OptimizeReport
    from fpgaplace.place.cost.problem import CostOptions, OpCost
    from fpgaplace.project.manifest import Manifest

DEFAULT_BOARD = "zcu104"
QDQ_PASSES = ("eliminate_dead_code", "whole_plane_pools_to_global", "fuse_elementwise")
"""What ``optimize=True`` runs on a QDQ model (see the module docstring): these passes of
``fpgaplace.model.passes``, by name."""

Progress = Callable[[str], None]


# --------------------------------------------------------------------------- solving


def place_problem(
    problem: PlacementProblem,
    objective: str = "throughput",
    method: str = "auto",
    time_limit: float = 60.0,
    *,
    subgraphs_per_device: int = 1,
    contiguous: bool = True,
    gap: float = 0.01,
    progress: Progress | None = None,
) -> list[Result]:
    """Solve ``problem`` by ``method`` ("auto", "all" or one of ``solvers.run.METHODS``).

    ``time_limit`` is the total seconds the placement may take. With "all", every method that
    applies to the objective runs in turn and each gets an even share of the time still left
    (a fast heuristic leaves its unused share to the methods after it); a method that does not
    apply, and every method after the limit is spent (the first always runs), is reported
    through ``progress`` and left out. ``gap`` is the relative gap at which
    the integer programs stop (0 asks for proven optimality). Returns one result, or one per method.
    """
    if not (isinstance(time_limit, int | float) and math.isfinite(time_limit) and time_limit > 0):
        raise FpgaplaceError(f"time_limit: expected a number of seconds > 0, got {time_limit!r}")
    if not (isinstance(gap, int | float) and math.isfinite(gap) and 0 <= gap < 1):
        raise FpgaplaceError(f"gap: expected a fraction from 0 to below 1 (0.01 = 1%), got {gap!r}")
    options = SolveOptions(
        objective=objective,
        time_limit=float(time_limit),
        gap=float(gap),
        subgraphs_per_device=subgraphs_per_device,
        contiguous=contiguous,
        progress=progress,
    )
    if method != "all":
        return [solve(problem, method, options)]
    methods = [m for m in METHODS if not (m == "dp" and objective == "latency")]
    deadline = time.perf_counter() + time_limit
    results = []
    for done, name in enumerate(methods):
        if results and time.perf_counter() >= deadline:
            if progress:
                progress(f"{name}: skipped: the time limit is spent")
            continue
        share = max(0.1, (deadline - time.perf_counter()) / (len(methods) - done))
        try:
            results.append(solve(problem, name, dataclasses.replace(options, time_limit=share)))
        except FpgaplaceError as error:
            if progress:
                progress(f"{name}: {error}")
    if not results:
        raise FpgaplaceError(f"{problem.source or 'the problem'}: no placement method applies")
    return results


def with_cores(problem: PlacementProblem, cores: int) -> PlacementProblem:
    """The same problem with only the first ``cores`` FPGA cores (in kind order) available.

    Each kind keeps its first cores, so device (kind, ordinal) still names the same board core.
    """
    kinds, left = [], cores
    for kind in problem.kinds:
        if kind.is_cpu:
            kinds.append(kind)
            continue
        take = min(kind.count, left)
        left -= take
        kinds.append(dataclasses.replace(kind, count=take))
    return dataclasses.replace(problem, kinds=kinds)


# --------------------------------------------------------------------------- inputs


def is_workload(path: str | Path) -> bool:
    """A paper workload JSON (a placement problem), as opposed to an ONNX model."""
    return Path(path).suffix.lower() == ".json"


def load_input(
    path: str | Path, board: str | Path | Board | None = None, **design_options: Any
) -> Design | PlacementProblem:
    """A paper workload JSON as its ``PlacementProblem``, or an ONNX model as a ``Design`` for
    ``board`` (default zcu104) with ``design_options`` (the ``Design`` keywords)."""
    from fpgaplace.place.workload import load_workload

    if is_workload(path):
        for name, value in (("board", board), ("input_shapes", design_options.get("input_shapes"))):
            if value is not None:
                raise FpgaplaceError(f"{path}: {name} applies to ONNX models, not to a workload JSON")
        return load_workload(path)
    return Design(path, board or DEFAULT_BOARD, **design_options)


def placement_json(problem: PlacementProblem, result: Result, device_names: list[str] | None = None) -> dict:
    """``workload.placement_to_json`` of ``result``; for a model (``device_names`` given, the
    board identity of each device index) also ``deviceNames``, ``nodeNames`` (op name of each
    node id) and board names in ``devices``."""
    from fpgaplace.place.workload import placement_to_json

    document = placement_to_json(problem, result.placement, result.evaluation)
    if device_names is None:
        return document
    document["deviceNames"] = list(device_names)
    document["nodeNames"] = {str(i): name for i, name in zip(problem.ids, problem.names, strict=True)}
    for group, name in zip(document.get("devices", []), device_names, strict="devices" in document):
        group["name"] = name
    return document


# --------------------------------------------------------------------------- the design


WEIGHT_PRECISIONS = {"int4": 4, "int2": 2}
"""Precisions a float model is quantized at for compile: weights at these bits (symmetric, int8
storage, ``quantize.narrow_weights``), activations int8."""


class Design:
    """A model on a board: graph, costs, problem, placement, split, project, C simulation.

    ``model`` is an ONNX file or a ``ModelProto``; ``board`` a shipped board name, a board YAML
    file or a ``Board``. ``input_shapes`` fixes graph input shapes by name and ``batch`` binds
    symbolic batch dims (both checked by the front end). ``optimize`` runs the graph optimizer
    (on a QDQ model only ``QDQ_PASSES``). ``precision`` is what the FPGA cores compute (int8
    by default; ``cost.PRECISION_BYTES`` lists the others). ``profile_cpu`` measures CPU op
    times with onnxruntime (else analytic). ``progress`` receives one line per stage started
    and the solvers' progress. ``source`` names an in-memory model in messages.
    ``lstm_cell_bits`` (8 or 16; None: what the model's metadata says, else 8) is the LSTM cell
    state's width, written into the model's metadata (``hw.lstm_cell.CELL_BITS_KEY``): 16 holds
    the state in int16 (nearer the float LSTM, further from onnxruntime's int8 QDQ model).
    """

    def __init__(
        self,
        model: str | Path | onnx.ModelProto,
        board: str | Path | Board = DEFAULT_BOARD,
        *,
        input_shapes: dict[str, tuple[int, ...]] | None = None,
        batch: int = 1,
        optimize: bool = True,
        precision: str = "int8",
        profile_cpu: bool = True,
        progress: Progress | None = None,
        source: str | None = None,
        lstm_cell_bits: int | None = None,
    ) -> None:
        import onnx

        from fpgaplace.hw.lstm_cell import CELL_BITS
        from fpgaplace.place.cost.fpga import PRECISION_BYTES

        if precision not in PRECISION_BYTES:
            raise FpgaplaceError(f"precision: expected one of {', '.join(PRECISION_BYTES)}, got {precision!r}")
        if lstm_cell_bits is not None and lstm_cell_bits not in CELL_BITS:
            raise FpgaplaceError(f"lstm_cell_bits: expected one of {', '.join(map(str, CELL_BITS))}, "
                                 f"got {lstm_cell_bits!r}")
        self.lstm_cell_bits = lstm_cell_bits
        self.model = model if isinstance(model, onnx.ModelProto) else Path(model)
        default_name = (model.graph.name or "<model>") if isinstance(model, onnx.ModelProto) else str(model)
        self.name = source or default_name
        self.input_shapes = dict(input_shapes) if input_shapes else None
        self.batch = batch
        self.optimize = optimize
        self.precision = precision
        self.profile_cpu = profile_cpu
        self.progress = progress
        self.float_design: Design | None = None  # the float design this one was quantized from
        self._board = board
        self._result: Result | None = None
        self._place_args: dict[str, Any] | None = None
        self._quantized: dict[tuple, Design] = {}  # quantized() by calibration, built once each

    def __repr__(self) -> str:
        return (f"Design({self.name!r}, board={self.board.name!r}, optimize={self.optimize}, "
                f"precision={self.precision!r})")

    def _say(self, message: str) -> None:
        if self.progress:
            self.progress(message)

    # ---- stages, each computed once ----------------------------------------------------
    @cached_property
    def board(self) -> Board:
        from fpgaplace.board.load import load_board
        from fpgaplace.board.model import Board

        return self._board if isinstance(self._board, Board) else load_board(self._board)

    @cached_property
    def loaded(self) -> OpGraph:
        """The model as the front end reads it, before the graph optimizer."""
        import onnx

        from fpgaplace.hw.lstm_cell import cell_bits, set_cell_bits
        from fpgaplace.model.frontend.load import from_model, load_onnx

        self._say(f"importing {self.name}")
        if isinstance(self.model, onnx.ModelProto):
            graph = from_model(self.model, batch=self.batch, source=self.name, input_shapes=self.input_shapes)
        else:
            graph = load_onnx(self.model, batch=self.batch, input_shapes=self.input_shapes)
        self._say_notes(graph.notes)
        if self.lstm_cell_bits is not None:  # the bound model is the front end's own copy
            set_cell_bits(graph.model, self.lstm_cell_bits)
        cell_bits(graph.model)  # a one-line error for a value of the key it does not take
        return graph

    def _say_notes(self, notes: list[str], shown: int = 8) -> None:
        """The front end's notes (an assumption it made, a fixed batch kept) as progress lines."""
        distinct = list(dict.fromkeys(notes))
        for note in distinct[:shown]:
            self._say(f"note: {note}")
        if len(distinct) > shown:
            self._say(f"note: … and {len(distinct) - shown} more")

    @cached_property
    def is_qdq(self) -> bool:
        """Whether the model is quantized in QDQ form (QuantizeLinear/DequantizeLinear pairs)."""
        from fpgaplace.model.qdq import is_qdq

        return is_qdq(self.loaded.model)

    @cached_property
    def is_qonnx(self) -> bool:
        """Whether the model carries QONNX quantizers (``compile`` lowers them, ``model.qonnx_qdq``)."""
        from fpgaplace.model.qonnx_qdq import is_qonnx

        return is_qonnx(self.loaded.model)

    @cached_property
    def _optimized(self) -> tuple[OpGraph, OptimizeReport | None]:
        from fpgaplace.model.frontend.load import from_model
        from fpgaplace.model.passes import eliminate, fuse, pools
        from fpgaplace.model.passes.manager import DEFAULT_PASSES, optimize

        if not self.optimize:
            return self.loaded, None
        self._say("running the graph optimizer" + (" (QDQ: dead code, whole-plane pools, fusion annotations)"
                                                   if self.is_qdq else ""))
        qdq_passes = (eliminate.eliminate_dead_code, pools.whole_plane_pools_to_global,
                      fuse.fuse_elementwise)  # QDQ_PASSES
        model, report = optimize(self.loaded.model, qdq_passes if self.is_qdq else DEFAULT_PASSES)
        return from_model(model, batch=self.batch, source=self.name), report  # input dims are bound by now

    @property
    def graph(self) -> OpGraph:
        """The graph every later stage uses: optimized when ``optimize``, else as loaded."""
        return self._optimized[0]

    @property
    def optimize_report(self) -> OptimizeReport | None:
        """What the graph optimizer changed; None when it did not run."""
        return self._optimized[1]

    @property
    def cost_options(self) -> CostOptions:
        from fpgaplace.place.cost.problem import CostOptions

        return CostOptions(precision=self.precision, profile_cpu=self.profile_cpu)

    @cached_property
    def costs(self) -> list[OpCost]:
        """Every op's cost on every device kind of the board, in topological order."""
        from fpgaplace.place.cost.problem import op_costs

        graph = self.graph
        self._say(f"costing {len(graph.ops)} ops on {self.board.name}")
        return op_costs(graph, self.board, self.cost_options)

    @cached_property
    def problem(self) -> PlacementProblem:
        from fpgaplace.place.cost.problem import build_problem

        return build_problem(self.graph, self.board, self.cost_options, costs=self.costs)

    # ---- placement ---------------------------------------------------------------------
    def place(
        self,
        objective: str = "throughput",
        method: str = "auto",
        time_limit: float = 60.0,
        *,
        subgraphs_per_device: int = 1,
        contiguous: bool = True,
        gap: float = 0.01,
    ) -> Result:
        """Place the problem by ``method`` (see ``place_problem``; not "all": use ``place_all``)
        within ``time_limit`` seconds in total, the integer programs stopping at relative
        ``gap``; the result becomes this design's placement."""
        if method == "all":
            raise FpgaplaceError("method: 'all' gives several results; call place_all()")
        arguments = {"objective": objective, "method": method, "time_limit": time_limit,
                     "subgraphs_per_device": subgraphs_per_device, "contiguous": contiguous, "gap": gap}
        problem = self.problem
        self._say(f"placing ({method}, {objective})")
        [result] = place_problem(problem, progress=self.progress, **arguments)
        self._result, self._place_args = result, arguments
        return result

    def place_all(
        self,
        objective: str = "throughput",
        time_limit: float = 60.0,
        *,
        subgraphs_per_device: int = 1,
        contiguous: bool = True,
        gap: float = 0.01,
    ) -> list[Result]:
        """Every method that applies, sharing ``time_limit`` seconds; the best feasible result
        (lowest value) becomes this design's placement."""
        problem = self.problem
        self._say(f"placing (every method, {objective})")
        results = place_problem(problem, objective, "all", time_limit, subgraphs_per_device=subgraphs_per_device,
                                contiguous=contiguous, gap=gap, progress=self.progress)
        feasible = [r for r in results if r.evaluation.feasible] or results
        self._result = min(feasible, key=lambda r: r.value)
        self._place_args = {"objective": objective, "method": self._result.placement.method,
                            "time_limit": time_limit, "subgraphs_per_device": subgraphs_per_device,
                            "contiguous": contiguous, "gap": gap}
        return results

    def set_placement(self, placement: Placement, arguments: dict[str, Any] | None = None) -> Result:
        """Make a given ``placement`` of this design's problem (e.g. read with
        ``workload.load_split``) its placement, scored by the trusted evaluator; ``arguments``
        are the ``place()`` arguments it was solved with when it is a solved placement adjusted
        (``flow.settle``), so the refinement may place again."""
        from fpgaplace.place.solvers.evaluate import evaluate

        if len(placement.device) != self.problem.n:
            raise FpgaplaceError(f"{self.name}: the placement has {len(placement.device)} nodes, "
                                 f"the problem {self.problem.n}")
        self._result, self._place_args = Result(placement, evaluate(self.problem, placement)), arguments
        return self._result

    @property
    def placement(self) -> Result:
        """The current placement; placed with the defaults if ``place()`` has not run."""
        if self._result is None:
            self.place()
        assert self._result is not None
        return self._result

    @property
    def placed(self) -> bool:
        return self._result is not None

    def with_cores(self, cores: int) -> Design:
        """The same design (graph and costs shared, not recomputed) with only its first
        ``cores`` FPGA cores available, not yet placed."""
        if not 1 <= cores <= len(self.board.cores):
            raise FpgaplaceError(f"cores: expected 1..{len(self.board.cores)} on {self.board.name}, got {cores}")
        problem = with_cores(self.problem, cores)  # computes the shared stages before the copy
        restricted = copy.copy(self)
        restricted.__dict__["problem"] = problem
        restricted._result = restricted._place_args = None
        restricted._quantized = {}  # a quantized design of this view has its own cores
        return restricted

    def on_board(self, board: Board) -> Design:
        """The same design (model, graph and options shared) on another ``board``, e.g. the same
        fabric cut into other cores (``fpgaplace.board.partition``): costed again, not placed."""
        moved = copy.copy(self)
        for stage in ("board", "costs", "problem"):
            moved.__dict__.pop(stage, None)
        moved._board = board
        moved._result = moved._place_args = None
        moved._quantized = {}
        return moved

    def refined(self, factors: dict[tuple[int, int], float], sizes: dict[int, float] | None = None,
                added: dict[int, float] | None = None) -> Design:
        """The same design with node v's latency on device kind k multiplied by ``factors[v, k]``
        (``inf``: v cannot run there), its on-chip size by ``sizes[v]`` and then ``added[v]`` bytes
        more (what the folding of a placement measured, ``flow.refine``), not yet placed."""
        latency, size = self.problem.latency.copy(), self.problem.size.copy()
        for (v, kind), factor in factors.items():
            latency[v, kind] = math.inf if math.isinf(factor) else latency[v, kind] * factor
        for v, factor in (sizes or {}).items():
            size[v] *= factor
        for v, extra in (added or {}).items():
            size[v] += extra
        refined = copy.copy(self)
        refined.__dict__["problem"] = dataclasses.replace(self.problem, latency=latency, size=size)
        refined._result = None
        return refined

    def take_placement(self, other: Design) -> None:
        """Make ``other``'s placement, and the problem it was solved on, this design's: compile
        keeps the placement it refined by the folding (``flow.refine``), so the design then
        holds what was built. ``costs`` stay the cost model's own; where ``other`` is on another
        cut of the board (``on_board``), its board and costs come along."""
        if other.board is not self.board:
            self.__dict__.update(board=other.board, costs=other.costs)
            self._board = other.board
        self.__dict__["problem"] = other.problem
        self._result, self._place_args = other._result, other._place_args

    # ---- devices by board identity -----------------------------------------------------
    def devices(self) -> list[BoardDevice]:
        """The board's core or CPU of each device index of the problem, in problem order."""
        from fpgaplace.place.cost.cpu import cpu_kinds
        from fpgaplace.place.cost.fpga import fpga_core_kinds

        problem = self.problem
        by_kind: list[list[BoardDevice]] = [list(cores) for _, cores in fpga_core_kinds(self.board)]
        by_kind += [list(cpus) for _, cpus in cpu_kinds(self.board)]
        if len(by_kind) != len(problem.kinds):
            raise FpgaplaceError(f"{self.name}: the problem has {len(problem.kinds)} device kinds, "
                                 f"board {self.board.name} has {len(by_kind)}")
        return [by_kind[kind][ordinal] for kind, ordinal in problem.devices()]

    def device_names(self) -> list[str]:
        """Board identity of each device index: "core0", "node1.core0", "cpu2", "node0.cpu1"."""
        return [device.name for device in self.devices()]

    def op_devices(self) -> dict[str, BoardDevice]:
        """Op name -> the board device the placement puts it on."""
        devices, placement = self.devices(), self.placement.placement
        return {name: devices[int(placement.device[v])] for v, name in enumerate(self.problem.names)}

    def assignment(self) -> dict[str, str]:
        """Every node of the ONNX model -> device name, as ``split.split_model`` wants it.

        Ops take their placement's device. Nodes the front end folded into parameters
        (constants computed from constants) are not ops: each goes to the device of the first
        op that reads what it computes, directly or through other folded nodes (the split then
        computes it in every piece that reads it). O(nodes + edges).
        """
        import onnx

        from fpgaplace.model.passes.graph_tools import name_nodes

        model = onnx.ModelProto()
        model.CopyFrom(self.graph.model)
        name_nodes(model)
        assignment = {name: device.name for name, device in self.op_devices().items()}
        readers: dict[str, list[str]] = {}
        for node in model.graph.node:
            for tensor in node.input:
                readers.setdefault(tensor, []).append(node.name)
        fallback = next(iter(assignment.values()), None)
        for node in reversed(model.graph.node):  # readers come after writers: resolve back to front
            if node.name in assignment:
                continue
            devices = [assignment[r] for out in node.output for r in readers.get(out, []) if r in assignment]
            if not devices and fallback is None:
                raise FpgaplaceError(f"{self.name}: node {node.name!r} has no placed reader")
            assignment[node.name] = devices[0] if devices else fallback
        return assignment

    def placement_json(self, result: Result | None = None) -> dict:
        """The placement (``result`` or the current one) as JSON, devices by board identity."""
        return placement_json(self.problem, result or self.placement, self.device_names())

    # ---- later stages ------------------------------------------------------------------
    def split(self, out_dir: str | Path, check: bool = True) -> tuple[Manifest, dict[str, float]]:
        """Write one ONNX model per device piece of the placement and a manifest into
        ``out_dir``; with ``check``, run it against the whole model (relative error per output)."""
        from fpgaplace.flow.split import check_out_dir, check_split, split_model

        out_dir = Path(out_dir)
        check_out_dir(out_dir)
        assignment = self.assignment()
        self._say(f"splitting into {out_dir}")
        manifest = split_model(self.graph.model, assignment, out_dir, whole=[core.name for core in self.board.cores])
        if not check:
            return manifest, {}
        self._say("checking the split against the whole model")
        return manifest, check_split(self.graph.model, out_dir)

    def core_pieces(self) -> dict[str, int]:
        """FPGA core -> how many pieces of the split its ops form under the placement (a core
        builds one dataflow, so compile needs 1 each; ``split.piece_counts``)."""
        from fpgaplace.flow.split import piece_counts

        cores = [core.name for core in self.board.cores]
        counts = piece_counts(self.graph.model, self.assignment(), whole=cores)
        return {name: count for name, count in counts.items() if name in cores}

    def quantized(self, *, calib_dir: str | Path | None = None, random_samples: int = 32, seed: int = 0,
                  input_ranges: dict[str, tuple[float, float]] | None = None) -> Design:
        """This design when its model is already QDQ; else a new design on the int8 QDQ model
        of this design's graph (optimized if ``optimize``), calibrated on the ``.npy`` inputs
        in ``calib_dir`` or on ``random_samples`` random inputs (each input's values in its
        ``input_ranges`` entry, ``quantize.calibration_inputs``), with the same board and
        options, and placed again with the same ``place()`` arguments if this one was placed."""
        from fpgaplace.model.qonnx_qdq import qonnx_to_qdq
        from fpgaplace.model.quantize import calibration_inputs, narrow_weights, quantize_model

        if self.is_qdq:
            return self
        _ = self.board  # an unknown board is an error before any quantization work
        key = (str(calib_dir) if calib_dir else None, None if calib_dir else random_samples, seed,
               tuple(sorted((input_ranges or {}).items())))
        if self.is_qonnx:
            key = ("qonnx",)  # its own quantizers say everything; no calibration
        cached = self._quantized.get(key)
        if cached is not None:
            if self._place_args is not None and cached._place_args != self._place_args:
                cached.place(**self._place_args)
            return cached
        if self.is_qonnx:
            self._say("lowering the QONNX quantizers to integer QDQ")
            model = qonnx_to_qdq(self.loaded.model, self.name)
        else:
            float_model = self.graph.model
            self._say("quantizing to int8 (QDQ) with " + (f"calibration inputs from {calib_dir}" if calib_dir
                                                          else f"{random_samples} random calibration inputs"))
            feeds = calibration_inputs(float_model, calib_dir=calib_dir,
                                       random_samples=None if calib_dir else random_samples, seed=seed,
                                       input_ranges=input_ranges)
            model = quantize_model(float_model, feeds)
            if self.precision in WEIGHT_PRECISIONS:
                self._say(f"narrowing the weights to {self.precision}")
                model = narrow_weights(model, WEIGHT_PRECISIONS[self.precision])
        quantized = Design(
            model,
            self.board,
            batch=self.batch,
            optimize=self.optimize,
            precision="int8" if self.precision in WEIGHT_PRECISIONS else self.precision,
            profile_cpu=self.profile_cpu,
            progress=self.progress,
            source=f"{self.name} ({'QONNX as ' if self.is_qonnx else ''}int8 QDQ)",
            lstm_cell_bits=self.lstm_cell_bits,
        )
        quantized.float_design = self
        if self._place_args is not None:
            quantized.place(**self._place_args)
        self._quantized[key] = quantized
        return quantized

    def quantize_file(self, out_path: str | Path, *, calib_dir: str | Path | None = None,
                      random_samples: int | None = None, seed: int = 0,
                      input_ranges: dict[str, tuple[float, float]] | None = None):
        """Write the model as loaded (input dims bound by ``input_shapes``/``batch``, not
        optimized) quantized to int8 QDQ to ``out_path`` with ``quantize.quantize_file``;
        returns its ``(Drift, path)``. The bound model passes through a temporary file of the
        same name, since ``quantize_file`` reads a file."""
        import onnx

        from fpgaplace.model.quantize import quantize_file

        name = self.model.name if isinstance(self.model, Path) else "model.onnx"
        with tempfile.TemporaryDirectory(prefix="fpgaplace-quantize-") as tmp:
            bound = Path(tmp) / name
            onnx.save(self.loaded.model, bound)
            self._say("quantizing to int8 (QDQ)")
            return quantize_file(bound, out_path, calib_dir=calib_dir, random_samples=random_samples, seed=seed,
                                 input_ranges=input_ranges, weight_bits=WEIGHT_PRECISIONS.get(self.precision, 8))

    def compile(self, out_dir: str | Path, *, calib_dir: str | Path | None = None, random_samples: int = 32,
                input_ranges: dict[str, tuple[float, float]] | None = None, fps: float | None = None):
        """Write the HLS project of the placement into ``out_dir`` (``flow.compile.compile_design``)
        for the int8 QDQ model (``quantized()``); with ``fps``, each core folded only as fast as that
        rate needs, on the least resources. The result's ``quantized_here`` says whether
        fpgaplace quantized the model (it was given as a float model), here or by an earlier
        ``quantized()``."""
        from fpgaplace.flow.compile import check_fps, compile_design

        self._check_compilable()
        check_fps(fps)
        quantized = self.quantized(calib_dir=calib_dir, random_samples=random_samples, input_ranges=input_ranges)
        result = compile_design(quantized, Path(out_dir), progress=self.progress, fps=fps)
        result.quantized_here = quantized.float_design is not None
        return result

    def _check_compilable(self) -> None:
        """Code generation builds the widths of a QONNX model's quantizers, int8, or the int4 and int2
        weights (int8 activations) of a float model it quantizes (``WEIGHT_PRECISIONS``); another
        precision costs and places but does not compile."""
        if self.is_qonnx or self.precision == "int8" or (self.precision in WEIGHT_PRECISIONS and not self.is_qdq):
            return
        raise FpgaplaceError(f"{self.name}: precision {self.precision}: compile generates int8 hardware, or int4 and "
                             "int2 weights of a float model it quantizes (cost, place and split take any); expected "
                             f"int8{'' if self.is_qdq else ', int4 or int2'}")

    def csim(self, project: str | Path | None = None, samples: int = 1, seed: int = 0):
        """C-simulate ``project`` (``sim.csim.run_csim``); without one, compile this design
        into a temporary project first."""
        from fpgaplace.sim.csim import run_csim

        if project is not None:
            return run_csim(Path(project), samples=samples, seed=seed, progress=self.progress)
        with tempfile.TemporaryDirectory(prefix="fpgaplace-csim-") as tmp:
            folder = Path(tmp) / "project"
            self.compile(folder)
            return run_csim(folder, samples=samples, seed=seed, progress=self.progress)

    # The later stages read the project folder and nothing else (design.json is their record);
    # these give a Python user the same entry points as the commands.

    @staticmethod
    def sim(project: str | Path, samples: int = 256):
        """Event-simulate ``project`` (``sim.event.simulate``): latency, interval, fps, stalls."""
        from fpgaplace.sim.event import simulate

        return simulate(Path(project), samples)

    def report(self, project: str | Path, out: str | Path | None = None, samples: int = 256):
        """Write the HTML report of ``project`` (``report.write_report``)."""
        from fpgaplace.report.page import write_report

        return write_report(Path(project), Path(out) if out is not None else None, progress=self.progress,
                            samples=samples)

    def flash(self, project: str | Path, host: str, **options):
        """Copy ``project`` to a PYNQ board over SSH and optionally self-test it there
        (``deploy.pynq.flash``; ``options`` as its parameters: port, user, key, dest, ...)."""
        from fpgaplace.deploy.pynq import flash

        return flash(Path(project), host, progress=self.progress, **options)


__all__ = ["DEFAULT_BOARD", "QDQ_PASSES", "Design", "Placement", "is_workload", "load_input", "place_problem",
           "placement_json", "with_cores"]
