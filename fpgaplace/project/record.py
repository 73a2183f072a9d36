"""``design.json``, the project's record, typed: dataclasses for the design, its devices, cores,
layers, stages, boundary tensors and transfers, a validating reader and ``to_json`` for the writer.

``load(project)`` reads and checks the record: types, ranges (no negative or absurd folding,
shapes, cycles or bytes; finite numbers) and cross-references (a layer reads tensors that exist
in its core, a stage computes a layer of its core, a transfer joins devices of the design and
names a port of the core it enters or leaves). Anything else is one ``FpgaplaceError`` line
naming the file, the field path and what was expected, e.g.
``proj/design.json: cores.core1.layers[3].pe: expected an int >= 1, got -1000000000``.
Versioned by ``format`` (``DESIGN_FORMAT``). Light on imports: the later stages (sim, report,
flash) read projects without loading the compile step.

Cost: one pass over the document, O(size of design.json).
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fpgaplace.project.layout import DESIGN_FILE, HOST_DEVICE, MODEL_FILE, SPLIT_MANIFEST, core_folder
from fpgaplace.util.errors import FpgaplaceError

DESIGN_FORMAT = 1
MAX_ELEMENTS = 2**31  # elements of one tensor (or its sample)
MAX_COUNT = 2**31  # folding factors, rows, beats
MAX_CYCLES = 10**15
MAX_BYTES = 2**48
MAX_US = 1e15
CONFIG_RANGE = (-(2**31), 2**31 - 1)  # a kernel's template parameter
RESOURCE_NAMES = ("dsp", "bram36", "uram", "lut", "ff")


class RecordError(Exception):
    """A field of the record is missing or holds what the rules forbid (``path``: where)."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


# ---- field readers: each checks one value at a path ------------------------------------------


def _got(value: Any) -> str:
    text = json.dumps(value, allow_nan=True) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 40 else f"{text[:37]}..."


def _fail(path: str, expected: str, value: Any) -> RecordError:
    return RecordError(path, f"expected {expected}, got {_got(value)}")


def _object(value: Any, path: str) -> dict:
    if not isinstance(value, dict):
        raise _fail(path, "an object", value)
    return value


def _get(data: dict, key: str, path: str, read: Callable[[Any, str], Any], default: Any = ...) -> Any:
    """``data[key]`` read by ``read``; a missing key is an error unless a default is given."""
    where = f"{path}.{key}" if path else key
    if key not in data:
        if default is ...:
            raise RecordError(where, f"missing; expected {getattr(read, 'expects', 'a value')}")
        return default
    return read(data[key], where)


def _reader(expects: str, check: Callable[[Any], bool], convert: Callable[[Any], Any] = lambda v: v):
    def read(value: Any, path: str) -> Any:
        if not check(value):
            raise _fail(path, expects, value)
        return convert(value)

    read.expects = expects  # type: ignore[attr-defined]
    return read


def _int(low: int = 0, high: int = MAX_COUNT):
    """An int in ``low..high`` (the message names the bound the value passes)."""
    def read(value: Any, path: str) -> int:
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise _fail(path, f"an int >= {low}", value)
        if value > high:
            raise _fail(path, f"an int <= {high}", value)
        return value

    read.expects = f"an int >= {low}"  # type: ignore[attr-defined]
    return read


def _number(low: float = 0.0, high: float = MAX_US, above: bool = False):
    expects = f"a finite number {'>' if above else '>='} {low:g}"
    return _reader(expects, lambda v: isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
                   and (v > low if above else v >= low) and v <= high, float)


def _optional(read):
    def wrapped(value: Any, path: str) -> Any:
        return None if value is None else read(value, path)

    wrapped.expects = f"{getattr(read, 'expects', 'a value')} or null"  # type: ignore[attr-defined]
    return wrapped


_str = _reader("a non-empty string", lambda v: isinstance(v, str) and v != "")
_text = _reader("a string", lambda v: isinstance(v, str))
_bool = _reader("true or false", lambda v: isinstance(v, bool))
_real = _reader("a number (not NaN)", lambda v: isinstance(v, int | float) and not isinstance(v, bool)
                and not math.isnan(v), float)


def _list(read, at_least: int = 0):
    def read_list(value: Any, path: str) -> list:
        if not isinstance(value, list) or len(value) < at_least:
            raise _fail(path, f"a list of {at_least} or more" if at_least else "a list", value)
        return [read(item, f"{path}[{index}]") for index, item in enumerate(value)]

    read_list.expects = "a list"  # type: ignore[attr-defined]
    return read_list


def _mapping(read):
    def read_mapping(value: Any, path: str) -> dict:
        return {key: read(item, f"{path}.{key}") for key, item in _object(value, path).items()}

    read_mapping.expects = "an object"  # type: ignore[attr-defined]
    return read_mapping


def _shape(value: Any, path: str) -> list[int]:
    dims = _list(_int(1))(value, path)
    if math.prod(dims) > MAX_ELEMENTS:
        raise _fail(path, f"a shape of at most {MAX_ELEMENTS} elements", value)
    return dims


_shape.expects = "a list of ints >= 1"  # type: ignore[attr-defined]


def _config_value(value: Any, path: str) -> Any:
    if isinstance(value, list):
        return [_config_value(item, f"{path}[{index}]") for index, item in enumerate(value)]
    return _int(*CONFIG_RANGE)(value, path)


def _resources(value: Any, path: str) -> dict[str, int]:
    data = _object(value, path)
    return {name: _get(data, name, path, _int(0, MAX_BYTES)) for name in RESOURCE_NAMES} | {
        key: item for key, item in data.items() if key not in RESOURCE_NAMES}


_resources.expects = "an object of dsp, bram36, uram, lut, ff"  # type: ignore[attr-defined]


def _relative_path(value: Any, path: str) -> str:
    text = _str(value, path)
    if text.startswith(("/", "\\")) or ".." in Path(text).parts:
        raise _fail(path, "a path inside the project", value)
    return text


_relative_path.expects = "a path inside the project"  # type: ignore[attr-defined]


# ---- the record ----------------------------------------------------------------------------


@dataclass
class ModelInfo:
    name: str
    file: str = MODEL_FILE
    batch: int = 1
    from_qonnx: bool = False  # rewritten from QONNX: its CPU pieces run without onnxruntime's graph optimizations

    def to_json(self) -> dict:
        return {"name": self.name, "file": self.file, "batch": self.batch, "from_qonnx": self.from_qonnx}


@dataclass
class BoardInfo:
    name: str
    part: str | None = None
    clock_mhz: float | None = None
    source: str | None = None
    cores: int | None = None  # the equal cores the compile step cut a board without fixed cores into

    def to_json(self) -> dict:
        document = {"name": self.name, "part": self.part, "clock_mhz": self.clock_mhz, "source": self.source}
        return document | ({"cores": self.cores} if self.cores is not None else {})


@dataclass
class PlacementInfo:
    method: str
    value: float | None
    bound: float | None
    gap: float | None
    unit: str = "us"
    devices: dict[str, str] = field(default_factory=dict)  # op -> device name
    refinement: dict | None = None  # the placement <-> folding rounds (``flow.refine``)
    compared: list[dict] | None = None  # every method tried, when the caller recorded them

    def to_json(self) -> dict:
        document = {"method": self.method, "value": self.value, "bound": self.bound, "gap": self.gap,
                    "unit": self.unit, "devices": self.devices}
        if self.refinement is not None:
            document["refinement"] = self.refinement
        if self.compared is not None:
            document["compared"] = self.compared
        return document


@dataclass
class DeviceInfo:
    """A device of the board with its ops and its planned load and compute (us per sample)."""

    name: str
    kind: str = ""  # "fpga" or "cpu"
    node: str | None = None
    ops: list[str] = field(default_factory=list)
    load_us: float | None = None
    compute_us: float | None = None

    def to_json(self) -> dict:
        return {"name": self.name, "kind": self.kind, "node": self.node, "ops": self.ops, "load_us": self.load_us,
                "compute_us": self.compute_us}


@dataclass
class View:
    """A dequantized (float) view of a boundary tensor, under its own name and shape."""

    name: str
    shape: list[int]

    def to_json(self) -> dict:
        return {"name": self.name, "shape": self.shape}


@dataclass
class BoundaryTensor:
    """A tensor entering or leaving a core through a stream port (int8, stream order)."""

    name: str
    port: str
    beat: int  # elements per beat
    shape: list[int]
    sample_shape: list[int]
    channels_last: bool
    scale: float
    zero_point: int
    views: list[View] = field(default_factory=list)
    quantized_from: str | None = None

    @property
    def names(self) -> set[str]:
        """Its own name and its views' (a transfer may carry either)."""
        return {self.name, *(view.name for view in self.views)}

    @property
    def samples(self) -> int:
        """How many samples (core runs) it holds: its elements over a sample's."""
        return max(1, math.prod(self.shape) // max(1, math.prod(self.sample_shape)))

    def to_json(self) -> dict:
        return {"name": self.name, "port": self.port, "beat": self.beat, "shape": self.shape,
                "sample_shape": self.sample_shape, "channels_last": self.channels_last, "scale": self.scale,
                "zero_point": self.zero_point, "views": [v.to_json() for v in self.views],
                "quantized_from": self.quantized_from}


@dataclass
class LayerWidths:
    """The bit widths a layer computes at: its weights' (None without weights), each input's and its
    output's (QONNX quantizers' or narrowed weights' widths, else 8), its output stage
    (``requantize`` or ``thresholds`` for a dot product, ``fpgaplace.hw.threshold``; else None), and
    whether each input's codes are signed (a QONNX quantizer's ``signed``; None in a record written
    before signedness was recorded: all signed). The RTL lanes (``Kernel.width_members``) and the
    folding's price of them read the widths here."""

    weights: int | None
    inputs: list[int]
    output: int
    output_stage: str | None = None
    inputs_signed: list[bool] | None = None

    def to_json(self) -> dict:
        return {"weights": self.weights, "inputs": self.inputs, "output": self.output,
                "output_stage": self.output_stage, "inputs_signed": self.inputs_signed}

    def text(self) -> str:
        """``w4 a4u -> a4 (thresholds)``: weights, inputs (``u``: unsigned codes), output and the output stage."""
        weights = f"w{self.weights} " if self.weights is not None else ""
        stage = f" ({self.output_stage})" if self.output_stage else ""
        signed = self.inputs_signed or [True] * len(self.inputs)
        inputs = "/".join(f"{bits}{'' if s else 'u'}" for bits, s in zip(self.inputs, signed, strict=False))
        return f"{weights}a{inputs} -> a{self.output}{stage}"


@dataclass
class Layer:
    """One op of a core as its kernel computes it: folding, cycles and resources from the op library."""

    op: str
    kernel: str
    inputs: list[str]
    output: str
    config: dict[str, Any]
    pe: int
    simd: int
    mmv: int
    uram: bool
    rows: int
    beats: dict[str, Any]  # elements per beat: {"inputs": [...], "output": n}
    resident: bool
    cycles: int
    macs: int
    resources: dict[str, int]
    arrays: list[str]  # its arrays in layers.npz ("<index>.<name>")
    widths: LayerWidths | None = None  # None in a record written before widths were recorded

    def to_json(self) -> dict:
        return {"op": self.op, "kernel": self.kernel, "inputs": self.inputs, "output": self.output,
                "config": self.config, "pe": self.pe, "simd": self.simd, "mmv": self.mmv, "uram": self.uram,
                "rows": self.rows, "beats": self.beats, "resident": self.resident, "cycles": self.cycles,
                "macs": self.macs, "resources": self.resources, "arrays": self.arrays,
                "widths": self.widths.to_json() if self.widths else None}


@dataclass
class Stage:
    """One dataflow stage of a core: its kernel and the layer it computes (none for forks, width
    converters and constants) with that layer's model cycles."""

    stage: int
    kernel: str
    op: str | None = None
    cycles_model: int | None = None

    def to_json(self) -> dict:
        return {"stage": self.stage, "kernel": self.kernel, "op": self.op, "cycles_model": self.cycles_model}


@dataclass
class Core:
    """An FPGA core of the design: its HLS top, layers, ports, stages and what it costs."""

    name: str
    folder: str
    top: str
    node: str
    part: str
    slr: int | None
    clock_mhz: float
    ops: list[str]
    layers: list[Layer]
    inputs: list[BoundaryTensor]
    outputs: list[BoundaryTensor]
    stages: list[Stage]
    aliases: dict[str, str]  # an output tensor -> the tensor that holds its values
    streamed_weight_bytes: int
    resources: dict[str, int]
    budget: dict[str, int]
    compute_interval_cycles: int
    dram_cycles: int
    binding: list[str]
    interval_cycles: int
    interval_us: float
    planned_load_us: float
    planned_compute_us: float
    latency_cycles: int | None = None  # a sample's first input beat to its last output beat (hw.pipeline_latency)
    # elements the FIFO in front of each reader of a tensor holds (hw.buffers.reader_buffers; readers:
    # the layers' inputs in order, then the outputs); {} in a record written before it (a whole sample
    # a forked branch, two beats elsewhere)
    buffers: dict[str, list[int]] = field(default_factory=dict)
    # the memory of those FIFOs (part of ``resources``); {} in a record written before it
    fifo_resources: dict[str, int] = field(default_factory=dict)
    # the deep FIFOs packed into URAM (hw.buffers.fifo_storage); False in a record written before it
    fifo_uram: bool = False
    # how its 2-4-bit lanes are built (FpgaCore.narrow_lanes: "dsp", "lut", or "" as the op library
    # prices them); "" in a record written before it
    narrow_lanes: str = ""

    @property
    def ports(self) -> list[BoundaryTensor]:
        return [*self.inputs, *self.outputs]

    @property
    def sample_latency_cycles(self) -> float:
        """A sample's cycles through the core: ``latency_cycles`` (its stages' fills overlapped), or
        for a project written before it the sum of its layers' cycles, at least the interval."""
        return self.latency_cycles or max(sum(layer.cycles for layer in self.layers), self.interval_cycles)

    def to_json(self) -> dict:
        return {"name": self.name, "folder": self.folder, "top": self.top, "node": self.node, "part": self.part,
                "slr": self.slr, "clock_mhz": self.clock_mhz, "ops": self.ops,
                "layers": [layer.to_json() for layer in self.layers],
                "inputs": [t.to_json() for t in self.inputs], "outputs": [t.to_json() for t in self.outputs],
                "stages": [s.to_json() for s in self.stages], "aliases": self.aliases,
                "streamed_weight_bytes": self.streamed_weight_bytes, "resources": self.resources,
                "budget": self.budget, "compute_interval_cycles": self.compute_interval_cycles,
                "dram_cycles": self.dram_cycles, "binding": self.binding, "interval_cycles": self.interval_cycles,
                "interval_us": self.interval_us, "planned_load_us": self.planned_load_us,
                "planned_compute_us": self.planned_compute_us, "latency_cycles": self.latency_cycles,
                "buffers": self.buffers, "fifo_resources": self.fifo_resources, "fifo_uram": self.fifo_uram,
                "narrow_lanes": self.narrow_lanes}


@dataclass
class TransferInfo:
    """A tensor crossing devices: the split's pieces and devices it joins, the link, bytes and time."""

    tensor: str
    from_device: str
    to_device: str
    from_submodel: str | None = None
    to_submodel: str | None = None
    bytes: int | None = None
    int8: bool = False
    link: str | None = None  # "stream", "dram", "host" or "network"; None when not timed
    link_type: str | None = None
    us: float | None = None  # None when the tensor's size is not static

    def to_json(self) -> dict:
        document = {"tensor": self.tensor, "from_submodel": self.from_submodel, "to_submodel": self.to_submodel,
                    "from_device": self.from_device, "to_device": self.to_device, "bytes": self.bytes,
                    "int8": self.int8}
        if self.link is not None:
            document.update(link=self.link, link_type=self.link_type, us=self.us)
        return document


@dataclass
class Implementation:
    """What place and route measured of the built design (``fpgaplace.sim.nextpnr`` writes it after
    ``make bitstream``): the tool, the clock planned and achieved (nextpnr's Fmax), the slowest path
    when it misses, per resource used, available and the op library's estimate (the cores' sum),
    and each step's seconds (synth, pnr, pack)."""

    tool: str
    target_mhz: float
    achieved_mhz: float
    critical_path: str
    resources: dict[str, dict[str, float]]
    seconds: dict[str, float]

    @property
    def met(self) -> bool:
        return self.achieved_mhz >= self.target_mhz

    @property
    def clock_mhz(self) -> float:
        """The clock the built design runs at: the planned one when place and route met it (the
        board's oscillator gives no more without a PLL), else the achieved Fmax, the fastest it
        runs reliably."""
        return min(self.target_mhz, self.achieved_mhz)

    def clock_text(self) -> str:
        """The clock achieved against the planned one, by how much and where it misses."""
        target, achieved = self.target_mhz, self.achieved_mhz
        if self.met:
            return f"{achieved:g} MHz achieved, {target:g} MHz planned: met"
        return (f"{achieved:g} MHz achieved, {target:g} MHz planned: misses by {target - achieved:.2f} MHz "
                f"({1e3 / achieved - 1e3 / target:.2f} ns) on {self.critical_path or 'an unnamed path'}")

    def summary(self) -> str:
        """One line: ``clock_text`` and each resource used of available beside the estimate."""
        used = ", ".join(f"{key} {r['used']:g}/{r['available']:g} (estimate {r['estimate']:g})"
                         for key, r in self.resources.items())
        return f"{self.tool}: {self.clock_text()}; {used}"

    def to_json(self) -> dict:
        return {"tool": self.tool, "target_mhz": self.target_mhz, "achieved_mhz": self.achieved_mhz,
                "met": self.met, "critical_path": self.critical_path, "resources": self.resources,
                "seconds": self.seconds}


@dataclass
class DesignRecord:
    """Everything ``fpgaplace compile`` decided, as ``design.json`` holds it."""

    fpgaplace: str
    model: ModelInfo
    board: BoardInfo
    precision: str
    placement: PlacementInfo
    devices: list[DeviceInfo]
    cores: list[Core]
    cpu_ops: list[str]
    transfers: list[TransferInfo]
    interval_us: float
    fps: float | None
    split: str = SPLIT_MANIFEST
    host_ops: list[str] | None = None
    format: int = DESIGN_FORMAT
    implementation: Implementation | None = None  # once the open flow built the bitstream

    def core(self, name: str) -> Core | None:
        return next((c for c in self.cores if c.name == name), None)

    def to_json(self) -> dict:
        document = {
            "format": self.format, "fpgaplace": self.fpgaplace, "model": self.model.to_json(),
            "board": self.board.to_json(), "precision": self.precision, "placement": self.placement.to_json(),
            "devices": [d.to_json() for d in self.devices], "cores": [c.to_json() for c in self.cores],
            "cpu_ops": self.cpu_ops, "split": self.split, "transfers": [t.to_json() for t in self.transfers],
            "interval_us": self.interval_us, "fps": self.fps,
        }
        if self.host_ops is not None:
            document["host_ops"] = self.host_ops
        if self.implementation is not None:
            document["implementation"] = self.implementation.to_json()
        return document

    @staticmethod
    def from_json(document: Any, where: str = DESIGN_FILE) -> DesignRecord:
        """The record of ``document`` (design.json's content), checked; a violation is one
        ``FpgaplaceError`` line ``<where>: <field path>: expected ..., got ...``."""
        if not isinstance(document, dict) or document.get("format") != DESIGN_FORMAT or "cores" not in document:
            raise FpgaplaceError(f"{where}: not a design.json of format {DESIGN_FORMAT}")
        try:
            record = _design(document)
            _check_references(record)
        except RecordError as error:
            raise FpgaplaceError(f"{where}: {error}") from None
        return record


# ---- reading -------------------------------------------------------------------------------


def _model(value: Any, path: str) -> ModelInfo:
    data = _object(value, path)
    return ModelInfo(_get(data, "name", path, _text), _get(data, "file", path, _relative_path, MODEL_FILE),
                     _get(data, "batch", path, _int(1), 1), _get(data, "from_qonnx", path, _bool, False))


def _board(value: Any, path: str) -> BoardInfo:
    data = _object(value, path)
    return BoardInfo(_get(data, "name", path, _str), _get(data, "part", path, _optional(_str), None),
                     _get(data, "clock_mhz", path, _optional(_number(0, 1e6)), None),
                     _get(data, "source", path, _optional(_text), None),
                     _get(data, "cores", path, _optional(_int(1)), None))


def _placement(value: Any, path: str) -> PlacementInfo:
    data = _object(value, path)
    return PlacementInfo(
        _get(data, "method", path, _str), _get(data, "value", path, _optional(_real), None),
        _get(data, "bound", path, _optional(_real), None), _get(data, "gap", path, _optional(_real), None),
        _get(data, "unit", path, _str, "us"), _get(data, "devices", path, _mapping(_str), {}),
        _get(data, "refinement", path, _optional(_object), None),
        _get(data, "compared", path, _optional(_list(_object)), None))


def _device(value: Any, path: str) -> DeviceInfo:
    data = _object(value, path)
    return DeviceInfo(_get(data, "name", path, _str), _get(data, "kind", path, _text, ""),
                      _get(data, "node", path, _optional(_str), None), _get(data, "ops", path, _list(_str), []),
                      _get(data, "load_us", path, _optional(_number()), None),
                      _get(data, "compute_us", path, _optional(_number()), None))


def _view(value: Any, path: str) -> View:
    data = _object(value, path)
    return View(_get(data, "name", path, _str), _get(data, "shape", path, _shape))


def _tensor(value: Any, path: str) -> BoundaryTensor:
    data = _object(value, path)
    tensor = BoundaryTensor(
        _get(data, "name", path, _str), _get(data, "port", path, _str), _get(data, "beat", path, _int(1)),
        _get(data, "shape", path, _shape), _get(data, "sample_shape", path, _shape),
        _get(data, "channels_last", path, _bool), _get(data, "scale", path, _number(0, 1e30, above=True)),
        _get(data, "zero_point", path, _int(-128, 255)), _get(data, "views", path, _list(_view), []),
        _get(data, "quantized_from", path, _optional(_str), None))
    elements, per_sample = math.prod(tensor.shape), math.prod(tensor.sample_shape)
    if elements % per_sample:
        raise _fail(f"{path}.sample_shape", f"a divisor of shape {tensor.shape}", tensor.sample_shape)
    if tensor.channels_last and (len(tensor.shape) != 4 or per_sample % math.prod(tensor.shape[1:])):
        # a sample is whole images of axis 0 (one, or all of a recurrence's time steps)
        raise _fail(f"{path}.shape", "a 4-d NCHW shape for a channels-last tensor", tensor.shape)
    for index, view in enumerate(tensor.views):
        if math.prod(view.shape) != elements:
            raise _fail(f"{path}.views[{index}].shape", f"{elements} elements as the tensor has", view.shape)
    return tensor


def _beats(value: Any, path: str) -> dict:
    data = _object(value, path)
    return {**data, "inputs": _get(data, "inputs", path, _list(_int(1))), "output": _get(data, "output", path, _int(1))}


def _layer(value: Any, path: str) -> Layer:
    data = _object(value, path)
    return Layer(
        _get(data, "op", path, _str), _get(data, "kernel", path, _str), _get(data, "inputs", path, _list(_str)),
        _get(data, "output", path, _str), _get(data, "config", path, _mapping(_config_value)),
        _get(data, "pe", path, _int(1)), _get(data, "simd", path, _int(1)), _get(data, "mmv", path, _int(1)),
        _get(data, "uram", path, _bool, False), _get(data, "rows", path, _int(1)),
        _get(data, "beats", path, _beats, {"inputs": [], "output": 1}), _get(data, "resident", path, _bool, True),
        _get(data, "cycles", path, _int(0, MAX_CYCLES)), _get(data, "macs", path, _int(0, MAX_CYCLES), 0),
        _get(data, "resources", path, _resources), _get(data, "arrays", path, _list(_str), []),
        _get(data, "widths", path, _optional(_widths), None))


WIDTH_BITS = _int(1, 32)
OUTPUT_STAGES = ("requantize", "thresholds")
_output_stage = _reader(" or ".join(OUTPUT_STAGES), lambda v: v in OUTPUT_STAGES)
NARROW_LANES = ("", "dsp", "lut")  # FpgaCore.narrow_lanes
_narrow_lanes = _reader('"dsp", "lut" or ""', lambda v: v in NARROW_LANES)


def _widths(value: Any, path: str) -> LayerWidths:
    data = _object(value, path)
    return LayerWidths(_get(data, "weights", path, _optional(WIDTH_BITS), None),
                       _get(data, "inputs", path, _list(WIDTH_BITS)), _get(data, "output", path, WIDTH_BITS),
                       _get(data, "output_stage", path, _optional(_output_stage), None),
                       _get(data, "inputs_signed", path, _optional(_list(_bool)), None))


def _stage(value: Any, path: str) -> Stage:
    data = _object(value, path)
    return Stage(_get(data, "stage", path, _int(0)), _get(data, "kernel", path, _str),
                 _get(data, "op", path, _optional(_str), None),
                 _get(data, "cycles_model", path, _optional(_int(0, MAX_CYCLES)), None))


def _core(value: Any, path: str) -> Core:
    data = _object(value, path)
    name = _get(data, "name", path, _str)
    path = f"cores.{name}"
    cycles = _int(0, MAX_CYCLES)
    return Core(
        name, _get(data, "folder", path, _relative_path, core_folder(name)), _get(data, "top", path, _str),
        _get(data, "node", path, _str, "node0"), _get(data, "part", path, _str),
        _get(data, "slr", path, _optional(_int(0)), None), _get(data, "clock_mhz", path, _number(0, 1e6, above=True)),
        _get(data, "ops", path, _list(_str), []), _get(data, "layers", path, _list(_layer, at_least=1)),
        _get(data, "inputs", path, _list(_tensor)), _get(data, "outputs", path, _list(_tensor, at_least=1)),
        _get(data, "stages", path, _list(_stage), []), _get(data, "aliases", path, _mapping(_str), {}),
        _get(data, "streamed_weight_bytes", path, _int(0, MAX_BYTES), 0), _get(data, "resources", path, _resources),
        _get(data, "budget", path, _resources), _get(data, "compute_interval_cycles", path, cycles),
        _get(data, "dram_cycles", path, cycles, 0), _get(data, "binding", path, _list(_str), []),
        _get(data, "interval_cycles", path, _int(1, MAX_CYCLES)),
        _get(data, "interval_us", path, _number(0, MAX_US, above=True)),
        _get(data, "planned_load_us", path, _number()), _get(data, "planned_compute_us", path, _number()),
        _get(data, "latency_cycles", path, _optional(_int(1, MAX_CYCLES)), None),
        _get(data, "buffers", path, _mapping(_list(_int(0, MAX_BYTES))), {}),
        _get(data, "fifo_resources", path, _resources, {}), _get(data, "fifo_uram", path, _bool, False),
        _get(data, "narrow_lanes", path, _narrow_lanes, ""))


def _transfer(value: Any, path: str) -> TransferInfo:
    data = _object(value, path)
    return TransferInfo(
        _get(data, "tensor", path, _str), _get(data, "from_device", path, _str), _get(data, "to_device", path, _str),
        _get(data, "from_submodel", path, _optional(_str), None),
        _get(data, "to_submodel", path, _optional(_str), None),
        _get(data, "bytes", path, _optional(_int(0, MAX_BYTES)), None), _get(data, "int8", path, _bool, False),
        _get(data, "link", path, _optional(_str), None), _get(data, "link_type", path, _optional(_text), None),
        _get(data, "us", path, _optional(_number()), None))


def _design(data: dict) -> DesignRecord:
    return DesignRecord(
        fpgaplace=_get(data, "fpgaplace", "", _text, ""), model=_get(data, "model", "", _model),
        board=_get(data, "board", "", _board), precision=_get(data, "precision", "", _str, "int8"),
        placement=_get(data, "placement", "", _placement), devices=_get(data, "devices", "", _list(_device)),
        cores=_get(data, "cores", "", _list(_core)), cpu_ops=_get(data, "cpu_ops", "", _list(_str), []),
        transfers=_get(data, "transfers", "", _list(_transfer)),
        interval_us=_get(data, "interval_us", "", _number()),
        fps=_get(data, "fps", "", _optional(_number()), None), split=_get(data, "split", "", _relative_path,
                                                                          SPLIT_MANIFEST),
        host_ops=_get(data, "host_ops", "", _optional(_list(_str)), None), format=data["format"],
        implementation=_get(data, "implementation", "", _optional(_implementation), None))


def _implementation(value: Any, path: str) -> Implementation:
    data = _object(value, path)
    return Implementation(
        _get(data, "tool", path, _str), _get(data, "target_mhz", path, _number(0, 1e6, above=True)),
        _get(data, "achieved_mhz", path, _number(0, 1e6)), _get(data, "critical_path", path, _text, ""),
        _get(data, "resources", path, _mapping(_mapping(_number(0, MAX_BYTES)))),
        _get(data, "seconds", path, _mapping(_number(0, MAX_US))))


def _unique(names: list[str], path: str) -> None:
    seen: set[str] = set()
    for index, name in enumerate(names):
        if name in seen:
            raise RecordError(f"{path}[{index}]", f"expected a name used once, got {name!r} again")
        seen.add(name)


def _check_references(record: DesignRecord) -> None:
    """The cross-references: names once; a layer reads tensors of its core; a stage computes a
    layer of its core; an alias and an output name tensors the core holds; a transfer joins
    devices of the design (or the host, ``HOST_DEVICE``) and, into or out of a core, names one of
    its ports."""
    _unique([d.name for d in record.devices], "devices")
    _unique([c.name for c in record.cores], "cores")
    devices = {d.name for d in record.devices} | {c.name for c in record.cores} | {HOST_DEVICE}
    for core in record.cores:
        path = f"cores.{core.name}"
        _unique([t.port for t in core.ports], f"{path}.ports")
        known = {t.name for t in core.inputs}
        for index, layer in enumerate(core.layers):
            for slot, tensor in enumerate(layer.inputs):
                if tensor not in known:
                    raise RecordError(f"{path}.layers[{index}].inputs[{slot}]",
                                      f"expected a core input or an earlier layer's output, got {tensor!r}")
            known.add(layer.output)
        for source, target in core.aliases.items():
            if target not in known:
                raise RecordError(f"{path}.aliases.{source}", f"expected a tensor of the core, got {target!r}")
        for index, tensor in enumerate(core.outputs):
            if core.aliases.get(tensor.name, tensor.name) not in known:
                raise RecordError(f"{path}.outputs[{index}].name",
                                  f"expected a tensor a layer computes, got {tensor.name!r}")
        ops = {layer.op for layer in core.layers}
        for index, stage in enumerate(core.stages):
            if stage.op is not None and stage.op not in ops:
                raise RecordError(f"{path}.stages[{index}].op",
                                  f"expected an op of the core's layers, got {stage.op!r}")
    cores = {c.name: c for c in record.cores}
    for index, transfer in enumerate(record.transfers):
        for side in ("from_device", "to_device"):
            device = getattr(transfer, side)
            if device not in devices:
                raise RecordError(f"transfers[{index}].{side}", f"expected a device of the design, got {device!r}")
        for side, ports in (("from_device", "outputs"), ("to_device", "inputs")):
            core = cores.get(getattr(transfer, side))
            if core is not None and not any(transfer.tensor in t.names or t.quantized_from == transfer.tensor
                                            for t in getattr(core, ports)):
                raise RecordError(f"transfers[{index}].tensor", f"expected a port of {core.name}'s {ports}, got "
                                  f"{transfer.tensor!r}")


def read_document(project: Path) -> tuple[Path, Any]:
    """The parsed JSON of ``project``'s design.json (unchecked) and its path; one-line errors for a
    missing or unreadable file."""
    path = Path(project) / DESIGN_FILE
    if not path.is_file():
        raise FpgaplaceError(f"{project}: no {DESIGN_FILE}; expected a folder written by `fpgaplace compile`")
    try:
        document = json.loads(path.read_text())
    except (OSError, ValueError, RecursionError) as error:
        raise FpgaplaceError(f"{path}: not readable JSON ({str(error).splitlines()[0][:200]})") from None
    return path, document


def load(project: Path) -> DesignRecord:
    """The checked record of ``project`` (see the module docstring)."""
    path, document = read_document(project)
    return DesignRecord.from_json(document, str(path))


def load_design(project: Path) -> dict:
    """``project``'s design.json as a dict, checked as ``load`` checks it: for readers that still
    take the plain document (the RTL project, ``codegen.rtl_project``)."""
    path, document = read_document(project)
    DesignRecord.from_json(document, str(path))
    return document


def transfer_channel(transfer: TransferInfo, nodes: dict[str, str | None]) -> str:
    """The physical link a transfer occupies (transfers on one channel take turns): an AXI
    stream is point to point; DRAM and host links are one per node; the network one per
    direction between two nodes, and a link to the host computer (``HOST_DEVICE``: a UART, full
    duplex) one per direction. ``nodes`` maps device names to their node."""
    kind, source, target = transfer.link or "link", transfer.from_device, transfer.to_device
    if kind == "stream":
        return f"stream {source}->{target}"
    if HOST_DEVICE in (source, target):
        return f"{kind} link {'in' if source == HOST_DEVICE else 'out'}"
    a, b = nodes.get(source) or "?", nodes.get(target) or "?"
    return f"{kind} {a}" if a == b else f"{kind} {a}->{b}"
