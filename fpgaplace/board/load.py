"""Boards: the FPGA cores, CPU cores and links a model is placed on, loaded from YAML.

A board file (``boards/*.yaml``, shipped as the package ``fpgaplace.boards``) describes one
FPGA part and how its fabric is cut into cores::

    name: zcu104
    part: xczu7ev-ffvc1156-2-e
    fabric: {lut: 230400, ff: 460800, dsp: 1728, bram36: 312, uram: 96, slrs: 1}
    clock_mhz: 300
    macs_per_dsp: 2                  # int8 MACs per DSP per cycle
    utilisation_cap: 0.8             # or per resource: {lut: 0.7, dsp: 0.9, ...}
    shell: {lut: 8000, ff: 12000, bram36: 8}   # static platform logic (optional)
    cores: 2                         # optional: or a list of cores of different sizes; left out,
                                     # the tool chooses the cut (fpgaplace.board.partition)
    cpu: {kind: cortex-a53, count: 4, ghz: 1.2, gflops: 4.8}   # left out on an ECP5 board (no CPU)
    dram: {type: ddr4, gbytes: 2, gbps: 19.2, latency_us: 0.5}
    stream: {type: axi-stream, gbps: 4.8, latency_us: 0.05}
    host: {type: pcie-gen3x16, gbps: 12, latency_us: 2}   # optional: CPU memory <-> card memory
    vivado: {board_part: "xilinx.com:zcu104:part0:*"}      # optional, Zynq: Vivado's board part
    vitis: {platform: xilinx_u280_gen3x16_xdma_1_202211_1, memory: HBM, banks: 32}   # optional, cards
    ecp5: {device: 85k, package: CABGA381, speed: 6, clock_pin: G2, clock_mhz: 25,  # optional, ECP5:
           uart_tx: L4, uart_rx: M1, baud: 3000000, latency_us: 1000,   # the host link is the UART
           loader: ulx3s}   # optional: openFPGALoader's name of the board (fpgaplace flash)

A cluster file joins boards over a network::

    name: cluster-2x-zcu104
    nodes: [{board: zcu104, count: 2}]      # a shipped board name or a path to a YAML file
    network: {type: 1gbe, gbps: 0.125, latency_us: 50}
Units: ``gbps`` is gigabytes per second, ``latency_us`` microseconds, ``gflops`` per CPU core.

Usable fabric and the split into cores
--------------------------------------
For every resource r (lut, ff, dsp, bram36, uram)::

    usable[r] = floor(cap[r] * (fabric[r] - shell[r]))

The shell (static platform region) is taken off first and the utilisation cap is the share of
what is left that a design can still place and route. ``cores: N`` gives every core
``usable[r] // N`` of each resource (integer floor, so the cores' sum never exceeds the usable
fabric) and puts core i in SLR ``i * slrs // N``: the cores are laid out in order over the SLRs,
so when N is a multiple of the SLR count every SLR holds N / slrs whole cores. When it is not,
a core may straddle two SLRs; it is reported in the SLR where it starts. The shell is counted
against the whole part, not a particular SLR. A list of cores must fit in ``usable`` resource by
resource. Equal cores share a ``kind_key`` and become one ``DeviceKind`` of the placement problem.
Without ``cores`` the board has one core per SLR and ``Board.fixed_cores`` is False: the compile
step and ``search`` then choose the cut among ``fpgaplace.board.partition.partitions``.

Every error a user can cause raises ``FpgaplaceError`` with one line naming the file and field.
Loading a board is O(size of the file + number of cores).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from importlib.resources import files
from pathlib import Path
from typing import Any

import yaml

from fpgaplace.board.model import (
    FABRIC_KEYS,
    RESOURCES,
    Board,
    CpuCore,
    Ecp5Board,
    FpgaCore,
    Link,
    VitisPlatform,
    VivadoBoard,
    family_of,
)
from fpgaplace.util.errors import FpgaplaceError, first_line

BOARD_PACKAGE = "fpgaplace.boards"

# Resources a core or part must have at least one of; URAM is absent on many parts.
_POSITIVE_FABRIC = {"lut", "ff", "dsp", "bram36", "slrs"}

MAX_COUNT = 10**9
"""The largest resource count (LUTs, DSPs, ...) a board file may give: beyond any FPGA made."""
MAX_CORES = 1024
"""The most FPGA cores one board may have (per node of a cluster)."""
MAX_CPUS = 1024
"""The most CPU cores one board may have."""
MAX_NODES = 256
"""The most boards a cluster may join."""
MAX_MACS_PER_DSP = 64
MAX_MEMORY_BANKS = 1024
"""The most memory banks a card's ``vitis.banks`` may give (an HBM stack has 32 pseudo-channels)."""
MEMORY_KINDS = ("HBM", "DDR")
ECP5_DEVICES = tuple(f"{kind}{size}k" for kind in ("", "um-", "um5g-") for size in (25, 45, 85)) + ("12k",)
"""nextpnr-ecp5's device options (``--85k``, ``--um5g-45k``, ...)."""
ECP5_SPEEDS = (6, 7, 8)
MAX_BAUD = 12_000_000  # an FT2232H's UART maximum; an FT231X's is 3 Mbaud
MAX_YAML_DEPTH = 64
"""The deepest nesting of YAML collections a board file may have (board files are 3 deep)."""

_SINGLE_REQUIRED = ("name", "part", "fabric", "clock_mhz", "macs_per_dsp", "utilisation_cap",
                    "dram", "stream")
_SINGLE_OPTIONAL = ("cores", "cpu", "shell", "host", "vivado", "vitis", "ecp5", "description")
_CLUSTER_REQUIRED = ("name", "nodes", "network")
_CLUSTER_OPTIONAL = ("description",)
_CORE_REQUIRED = ("lut", "ff", "dsp", "bram36")
_CORE_OPTIONAL = ("name", "uram", "slr", "clock_mhz")
_LINK_REQUIRED = ("gbps", "latency_us")


def list_boards() -> list[str]:
    """Names of the shipped boards, sorted."""
    folder = files(BOARD_PACKAGE)
    return sorted(
        entry.name.removesuffix(".yaml") for entry in folder.iterdir()
        if entry.name.endswith(".yaml")
    )


def load_board(name_or_path: str | Path) -> Board:
    """Load a shipped board by name (``"zcu104"``) or any board file by path."""
    text, source, folder = _read_board_file(name_or_path)
    data = _parse_yaml(text, source)
    if "nodes" in data:
        return _build_cluster(data, source, folder)
    return _build_board(_read_board_spec(data, source), node="node0", prefix="")


def _looks_like_path(name_or_path: str | Path) -> bool:
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or "/" in text or text.endswith((".yaml", ".yml"))


def _read_board_file(name_or_path: str | Path, base: Path | None = None) -> tuple[str, str, Path]:
    """Text, source name and containing folder of a board given by name or path."""
    if _looks_like_path(name_or_path):
        path = Path(name_or_path)
        if base is not None and not path.is_absolute():
            path = base / path
        if not path.is_file():
            raise FpgaplaceError(f"{path}: board file not found")
        try:
            return path.read_text(encoding="utf-8"), str(path), path.parent
        except (OSError, UnicodeDecodeError) as error:
            raise FpgaplaceError(f"{path}: cannot read board file ({error})") from None
    name = str(name_or_path)
    known = list_boards()
    if name not in known:
        raise FpgaplaceError(f"unknown board '{name}'; known boards: {', '.join(known)}")
    entry = files(BOARD_PACKAGE).joinpath(f"{name}.yaml")
    path = Path(str(entry))
    return entry.read_text(encoding="utf-8"), str(path), path.parent


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects a key repeated in one mapping (a silent typo otherwise),
    aliases (``*name``: an alias bomb expands to billions of items; board files need none) and
    collections nested deeper than ``MAX_YAML_DEPTH`` (before Python's recursion limit)."""

    def compose_node(self, parent, index):
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"alias *{event.anchor} (board files take no anchors or aliases)", event.start_mark)
        depth = getattr(self, "_depth", 0)
        if depth >= MAX_YAML_DEPTH:
            event = self.peek_event()
            raise yaml.composer.ComposerError(
                None, None, f"collections nested deeper than {MAX_YAML_DEPTH} levels", event.start_mark)
        self._depth = depth + 1
        try:
            return super().compose_node(parent, index)
        finally:
            self._depth = depth

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        seen: set = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if key in seen:
                line = key_node.start_mark.line + 1
                raise yaml.constructor.ConstructorError(
                    None, None, f"duplicate key '{key}' (line {line})", key_node.start_mark)
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


_QUOTED_OR_COMMENT = re.compile(r"""'(?:[^']|'')*'|"(?:[^"\\]|\\.)*"|#[^\n]*""")


_FLOW_BRACKETS = re.compile(r"[\[\]{}]")


def _flow_depth(text: str) -> int:
    """The deepest nesting of YAML flow collections (``[...]``, ``{...}``) outside quotes and
    comments, O(len(text)): PyYAML's scanner takes time quadratic in it, so it is checked first."""
    depth = deepest = 0
    for bracket in _FLOW_BRACKETS.findall(_QUOTED_OR_COMMENT.sub("", text)):
        depth = max(depth + (1 if bracket in "[{" else -1), 0)
        deepest = max(deepest, depth)
    return deepest


def _parse_yaml(text: str, source: str) -> dict:
    if _flow_depth(text) > MAX_YAML_DEPTH:
        raise FpgaplaceError(f"{source}: YAML collections nested deeper than {MAX_YAML_DEPTH} levels")
    try:
        data = yaml.load(text, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        problem = getattr(error, "problem", None) or str(error).splitlines()[0]
        raise FpgaplaceError(f"{source}: malformed YAML{where}: {problem}") from None
    except ValueError as error:  # e.g. an integer of more digits than Python converts (4300)
        raise FpgaplaceError(f"{source}: unreadable YAML value: {first_line(error)}") from None
    if data is None:
        raise FpgaplaceError(f"{source}: the board file is empty")
    if not isinstance(data, dict):
        raise FpgaplaceError(
            f"{source}: a board file must be a mapping of fields, got {type(data).__name__}")
    return data


@dataclass(frozen=True)
class _Fields:
    """Reads typed fields of one board file, raising one-line errors that name file and field."""

    source: str

    def fail(self, field_name: str, expected: str, value: Any) -> FpgaplaceError:
        return FpgaplaceError(f"{self.source}: {field_name} must be {expected}, got {_shown(value)}")

    def mapping(self, value: Any, field_name: str, required: Iterable[str],
                optional: Iterable[str] = ()) -> dict:
        """``value`` as a dict with every required key and no key outside required + optional."""
        where = field_name or "the top level"
        if not isinstance(value, dict):
            raise FpgaplaceError(
                f"{self.source}: {where} must be a mapping, got {type(value).__name__}")
        required = tuple(required)
        allowed = (*required, *optional)
        for key in value:
            if key not in allowed:
                raise FpgaplaceError(
                    f"{self.source}: {_join(field_name, str(key))} is not a known field; "
                    f"expected one of: {', '.join(allowed)}")
        for key in required:
            if key not in value:
                raise FpgaplaceError(f"{self.source}: {_join(field_name, key)} is required")
        return value

    def integer(self, value: Any, field_name: str, minimum: int, maximum: int = MAX_COUNT) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not minimum <= value <= maximum:
            expected = "a positive integer" if minimum == 1 else "a non-negative integer"
            raise self.fail(field_name, f"{expected} up to {maximum}", value)
        return value

    def number(self, value: Any, field_name: str, positive: bool) -> float:
        ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        if not ok or value < 0 or (positive and value == 0):
            expected = "a positive number" if positive else "a non-negative number"
            raise self.fail(field_name, expected, value)
        return float(value)

    def text(self, value: Any, field_name: str) -> str:
        if not isinstance(value, str) or not value.strip():
            raise self.fail(field_name, "a non-empty string", value)
        return value

    def fraction(self, value: Any, field_name: str) -> float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if not ok or not 0 < value <= 1:
            raise self.fail(field_name, "a number in (0, 1]", value)
        return float(value)


def _shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters (a value may be a huge nested list); O(limit)
    for strings and numbers, and for containers the repr of at most their first items."""
    if isinstance(value, list | tuple | dict):
        items = list(value.items() if isinstance(value, dict) else value)[:4]
        if len(value) <= 4 and len(repr(items)) <= limit:
            return repr(value)
        return f"a {type(value).__name__} of {len(value)} items"
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 200:
        return f"an integer of {value.bit_length()} bits"
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


def _join(parent: str, key: str) -> str:
    return f"{parent}.{key}" if parent else key


@dataclass(frozen=True)
class _BoardSpec:
    """The validated contents of one single-board file."""

    name: str
    part: str
    source: str
    fabric: dict[str, int]
    shell: dict[str, int]
    cap: dict[str, float]
    usable: dict[str, int]
    clock_mhz: float
    macs_per_dsp: int
    cores: list[dict[str, Any]]  # name, resources, slr and clock of every core
    fixed_cores: bool  # the file gives ``cores``; else one per SLR, and the tool chooses the cut
    cpu: dict[str, Any] | None  # None: no CPU (an ECP5 board)
    dram: Link
    dram_gbytes: float
    stream: Link
    host: Link | None
    vivado: VivadoBoard | None
    vitis: VitisPlatform | None
    ecp5: Ecp5Board | None


def _read_board_spec(data: dict, source: str) -> _BoardSpec:
    fields = _Fields(source)
    fields.mapping(data, "", _SINGLE_REQUIRED, _SINGLE_OPTIONAL)
    fabric = _read_fabric(fields, data["fabric"])
    shell = _read_shell(fields, data.get("shell", {}), fabric)
    cap = _read_cap(fields, data["utilisation_cap"])
    usable = usable_fabric(fabric, shell, cap)
    clock_mhz = fields.number(data["clock_mhz"], "clock_mhz", positive=True)
    macs_per_dsp = fields.integer(data["macs_per_dsp"], "macs_per_dsp", minimum=1, maximum=MAX_MACS_PER_DSP)
    fixed = "cores" in data
    cores = (_read_cores(fields, data["cores"], usable, fabric["slrs"], clock_mhz) if fixed
             else split_equal(usable, fabric["slrs"], fabric["slrs"], clock_mhz, source))
    dram = _read_link(fields, data["dram"], "dram", required_extra=("gbytes",))
    host = _read_link(fields, data["host"], "host") if "host" in data else None
    ecp5 = _read_ecp5(fields, data["ecp5"]) if "ecp5" in data else None
    if ecp5 is not None:
        for key, why in (("host", "its host link is the UART (ecp5.baud)"), ("cpu", "it has no CPU")):
            if key in data:
                raise FpgaplaceError(f"{source}: {key} must be left out on an ECP5 board; {why}")
        host = ecp5.host_link()
    elif "cpu" not in data:
        raise FpgaplaceError(f"{source}: cpu is required")
    return _BoardSpec(
        name=fields.text(data["name"], "name"),
        part=fields.text(data["part"], "part"),
        source=source,
        fabric=fabric,
        shell=shell,
        cap=cap,
        usable=usable,
        clock_mhz=clock_mhz,
        macs_per_dsp=macs_per_dsp,
        cores=cores,
        fixed_cores=fixed,
        cpu=_read_cpu(fields, data["cpu"]) if "cpu" in data else None,
        dram=dram,
        dram_gbytes=fields.number(data["dram"]["gbytes"], "dram.gbytes", positive=True),
        stream=_read_link(fields, data["stream"], "stream"),
        host=host,
        vivado=_read_vivado(fields, data["vivado"]) if "vivado" in data else None,
        vitis=_read_vitis(fields, data["vitis"]) if "vitis" in data else None,
        ecp5=ecp5,
    )


def _read_fabric(fields: _Fields, value: Any) -> dict[str, int]:
    raw = fields.mapping(value, "fabric", FABRIC_KEYS)
    return {
        key: fields.integer(raw[key], f"fabric.{key}", 1 if key in _POSITIVE_FABRIC else 0)
        for key in FABRIC_KEYS
    }


def _read_shell(fields: _Fields, value: Any, fabric: dict[str, int]) -> dict[str, int]:
    raw = fields.mapping(value, "shell", (), RESOURCES)
    shell = {key: fields.integer(raw.get(key, 0), f"shell.{key}", 0) for key in RESOURCES}
    for key in RESOURCES:
        if shell[key] > fabric[key]:
            raise FpgaplaceError(
                f"{fields.source}: shell.{key} must not exceed fabric.{key} "
                f"({fabric[key]}), got {shell[key]}")
    return shell


def _read_cap(fields: _Fields, value: Any) -> dict[str, float]:
    """One cap for every resource, or a mapping (resources it leaves out are not capped)."""
    if isinstance(value, dict):
        raw = fields.mapping(value, "utilisation_cap", (), RESOURCES)
        return {key: fields.fraction(raw.get(key, 1.0), f"utilisation_cap.{key}")
                for key in RESOURCES}
    share = fields.fraction(value, "utilisation_cap")
    return dict.fromkeys(RESOURCES, share)


def usable_fabric(fabric: dict[str, int], shell: dict[str, int],
                  cap: dict[str, float]) -> dict[str, int]:
    """floor(cap * (fabric - shell)) per resource (rounded to 1e-6 first against float noise)."""
    return {key: math.floor(round(cap[key] * (fabric[key] - shell[key]), 6)) for key in RESOURCES}


def _read_cores(fields: _Fields, value: Any, usable: dict[str, int], slrs: int,
                clock_mhz: float) -> list[dict[str, Any]]:
    if isinstance(value, list):
        return _read_core_list(fields, value, usable, slrs, clock_mhz)
    count = fields.integer(value, "cores", minimum=1, maximum=MAX_CORES)
    return split_equal(usable, count, slrs, clock_mhz, fields.source)


def split_equal(usable: dict[str, int], count: int, slrs: int, clock_mhz: float,
                source: str = "board") -> list[dict[str, Any]]:
    """``count`` equal cores: each gets usable // count of every resource; core i in SLR
    i * slrs // count. Raises if a core would be left without DSPs, BRAM or LUTs."""
    share = {key: usable[key] // count for key in RESOURCES}
    for key in ("dsp", "bram36", "lut", "ff"):
        if share[key] == 0:
            raise FpgaplaceError(
                f"{source}: cores: {count} leaves each core 0 {key} "
                f"(usable {key} is {usable[key]}); expected fewer cores")
    return [
        {"name": f"core{i}", **share, "slr": i * slrs // count, "clock_mhz": clock_mhz}
        for i in range(count)
    ]


def _read_core_list(fields: _Fields, entries: list, usable: dict[str, int], slrs: int,
                    clock_mhz: float) -> list[dict[str, Any]]:
    if not entries:
        raise fields.fail("cores", "a positive integer or a non-empty list of cores", entries)
    if len(entries) > MAX_CORES:
        raise fields.fail("cores", f"a list of at most {MAX_CORES} cores", entries)
    cores: list[dict[str, Any]] = []
    for i, entry in enumerate(entries):
        where = f"cores[{i}]"
        raw = fields.mapping(entry, where, _CORE_REQUIRED, _CORE_OPTIONAL)
        core: dict[str, Any] = {
            "name": fields.text(raw.get("name", f"core{i}"), f"{where}.name"),
            **{key: fields.integer(raw.get(key, 0), f"{where}.{key}", 0) for key in RESOURCES},
            "slr": fields.integer(raw.get("slr", 0), f"{where}.slr", 0),
            "clock_mhz": fields.number(raw.get("clock_mhz", clock_mhz), f"{where}.clock_mhz",
                                       positive=True),
        }
        if core["slr"] >= slrs:
            raise fields.fail(f"{where}.slr", f"an SLR index below fabric.slrs ({slrs})",
                              core["slr"])
        if core["name"] in {other["name"] for other in cores}:
            raise fields.fail(f"{where}.name", "a name no other core has", core["name"])
        cores.append(core)
    for key in RESOURCES:
        total = sum(core[key] for core in cores)
        if total > usable[key]:
            raise FpgaplaceError(
                f"{fields.source}: cores need {total} {key} in all, more than the {usable[key]} "
                f"usable (fabric.{key} less shell.{key}, times utilisation_cap)")
    return cores


def _read_cpu(fields: _Fields, value: Any) -> dict[str, Any]:
    raw = fields.mapping(value, "cpu", ("kind", "count", "ghz", "gflops"))
    return {
        "kind": fields.text(raw["kind"], "cpu.kind"),
        "count": fields.integer(raw["count"], "cpu.count", minimum=1, maximum=MAX_CPUS),
        "ghz": fields.number(raw["ghz"], "cpu.ghz", positive=True),
        "gflops": fields.number(raw["gflops"], "cpu.gflops", positive=True),
    }


def _read_vivado(fields: _Fields, value: Any) -> VivadoBoard:
    raw = fields.mapping(value, "vivado", ("board_part",), ("carrier", "connector"))
    carrier = fields.text(raw["carrier"], "vivado.carrier") if "carrier" in raw else ""
    connector = fields.text(raw["connector"], "vivado.connector") if "connector" in raw else ""
    if bool(carrier) != bool(connector):
        raise FpgaplaceError(f"{fields.source}: vivado.carrier and vivado.connector come together; "
                             "expected both or neither")
    return VivadoBoard(fields.text(raw["board_part"], "vivado.board_part"), carrier, connector)


def _read_vitis(fields: _Fields, value: Any) -> VitisPlatform:
    raw = fields.mapping(value, "vitis", ("platform", "memory", "banks"))
    memory = fields.text(raw["memory"], "vitis.memory")
    if memory not in MEMORY_KINDS:
        raise fields.fail("vitis.memory", f"one of {', '.join(MEMORY_KINDS)}", memory)
    return VitisPlatform(fields.text(raw["platform"], "vitis.platform"), memory,
                         fields.integer(raw["banks"], "vitis.banks", minimum=1, maximum=MAX_MEMORY_BANKS))


def _read_ecp5(fields: _Fields, value: Any) -> Ecp5Board:
    keys = ("device", "package", "speed", "clock_pin", "clock_mhz", "uart_tx", "uart_rx", "baud", "latency_us")
    raw = fields.mapping(value, "ecp5", keys, ("loader",))
    if raw["device"] not in ECP5_DEVICES:
        raise fields.fail("ecp5.device", f"one of {', '.join(ECP5_DEVICES)}", raw["device"])
    if raw["speed"] not in ECP5_SPEEDS:
        raise fields.fail("ecp5.speed", f"one of {', '.join(map(str, ECP5_SPEEDS))}", raw["speed"])
    return Ecp5Board(
        device=raw["device"], package=fields.text(raw["package"], "ecp5.package"), speed=raw["speed"],
        clock_pin=fields.text(raw["clock_pin"], "ecp5.clock_pin"),
        clock_mhz=fields.number(raw["clock_mhz"], "ecp5.clock_mhz", positive=True),
        uart_tx=fields.text(raw["uart_tx"], "ecp5.uart_tx"), uart_rx=fields.text(raw["uart_rx"], "ecp5.uart_rx"),
        baud=fields.integer(raw["baud"], "ecp5.baud", minimum=1, maximum=MAX_BAUD),
        latency_us=fields.number(raw["latency_us"], "ecp5.latency_us", positive=False),
        loader=fields.text(raw["loader"], "ecp5.loader") if "loader" in raw else "")


def _read_link(fields: _Fields, value: Any, kind: str,
               required_extra: tuple[str, ...] = ()) -> Link:
    """A link's bandwidth and latency; ``required_extra`` keys are checked here, read by the
    caller (``dram.gbytes``)."""
    raw = fields.mapping(value, kind, (*_LINK_REQUIRED, *required_extra), ("type",))
    return Link(
        kind=kind,
        gbps=fields.number(raw["gbps"], f"{kind}.gbps", positive=True),
        latency_us=fields.number(raw["latency_us"], f"{kind}.latency_us", positive=False),
        type=fields.text(raw["type"], f"{kind}.type") if "type" in raw else "",
    )


def _build_board(spec: _BoardSpec, node: str, prefix: str) -> Board:
    """The Board of one spec; ``prefix`` ("node1.") names its cores and CPUs inside a cluster."""
    cores = [
        FpgaCore(
            name=f"{prefix}{core['name']}",
            dsp=core["dsp"], bram36=core["bram36"], uram=core["uram"],
            lut=core["lut"], ff=core["ff"],
            clock_mhz=core["clock_mhz"], macs_per_dsp=spec.macs_per_dsp,
            region=core["slr"], node=node, family=family_of(spec.part).name,
        )
        for core in spec.cores
    ]
    cpus = [
        CpuCore(name=f"{prefix}cpu{i}", kind=spec.cpu["kind"], ghz=spec.cpu["ghz"],
                gflops=spec.cpu["gflops"], node=node)
        for i in range(spec.cpu["count"] if spec.cpu is not None else 0)
    ]
    return Board(
        name=spec.name, part=spec.part, source=spec.source,
        fabric=dict(spec.fabric), usable=dict(spec.usable), shell=dict(spec.shell),
        utilisation_cap=dict(spec.cap), cores=cores, cpus=cpus,
        dram=spec.dram, stream=spec.stream, network=None, host=spec.host, vivado=spec.vivado, vitis=spec.vitis,
        ecp5=spec.ecp5, fixed_cores=spec.fixed_cores,
        nodes=[node], dram_gbytes=spec.dram_gbytes,
    )


def _build_cluster(data: dict, source: str, folder: Path) -> Board:
    """A cluster: every node's board, cores and CPUs prefixed ``nodeK.``, joined by a network."""
    fields = _Fields(source)
    fields.mapping(data, "", _CLUSTER_REQUIRED, _CLUSTER_OPTIONAL)
    name = fields.text(data["name"], "name")
    entries = data["nodes"]
    if not isinstance(entries, list) or not entries:
        raise fields.fail("nodes", "a non-empty list of {board, count}", entries)
    if len(entries) > MAX_NODES:
        raise fields.fail("nodes", f"a list of at most {MAX_NODES} {{board, count}}", entries)
    node_boards: dict[str, Board] = {}
    parts: list[str] = []
    for i, entry in enumerate(entries):
        raw = fields.mapping(entry, f"nodes[{i}]", ("board",), ("count",))
        board_ref = fields.text(raw["board"], f"nodes[{i}].board")
        count = fields.integer(raw.get("count", 1), f"nodes[{i}].count", minimum=1,
                               maximum=MAX_NODES - len(node_boards))
        spec = _node_spec(board_ref, folder, f"{source}: nodes[{i}].board")
        parts.append(f"{count} x {spec.part}")
        for _ in range(count):
            node = f"node{len(node_boards)}"
            node_boards[node] = _build_board(spec, node=node, prefix=f"{node}.")
    members = list(node_boards.values())
    return Board(
        name=name,
        part=" + ".join(parts),
        source=source,
        fabric={key: sum(b.fabric[key] for b in members) for key in FABRIC_KEYS},
        usable={key: sum(b.usable[key] for b in members) for key in RESOURCES},
        shell={key: sum(b.shell[key] for b in members) for key in RESOURCES},
        utilisation_cap={key: min(b.utilisation_cap[key] for b in members) for key in RESOURCES},
        cores=[core for b in members for core in b.cores],
        cpus=[cpu for b in members for cpu in b.cpus],
        dram=_slowest([b.dram for b in members]),
        stream=_slowest([b.stream for b in members]),
        network=_read_link(fields, data["network"], "network"),
        host=_slowest([b.host for b in members if b.host is not None]),
        nodes=list(node_boards),
        dram_gbytes=sum(b.dram_gbytes for b in members),
        node_boards=node_boards,
    )


def _node_spec(board_ref: str, folder: Path, where: str) -> _BoardSpec:
    """The spec of a cluster member; it must be a single board, not another cluster."""
    try:
        text, node_source, _ = _read_board_file(board_ref, base=folder)
    except FpgaplaceError as error:
        raise FpgaplaceError(f"{where}: {error}") from None
    data = _parse_yaml(text, node_source)
    if "nodes" in data:
        raise FpgaplaceError(f"{where} must name a single board, got the cluster '{board_ref}'")
    return _read_board_spec(data, node_source)


def _slowest(links: list[Link]) -> Link | None:
    """The least bandwidth and the most latency among ``links`` (None if there are none)."""
    if not links:
        return None
    return Link(kind=links[0].kind, gbps=min(link.gbps for link in links),
                latency_us=max(link.latency_us for link in links),
                type="/".join(sorted({link.type for link in links if link.type})))
