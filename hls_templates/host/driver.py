#!/usr/bin/env python3
"""PYNQ driver of an fpgaplace project: run the placed model on the board like an onnxruntime session.

Reads only the project's files: ``design.json`` (cores, their boundary tensors with scale and
zero point), ``split/`` (the per-device ONNX pieces and ``manifest.json``, the order they run
in), ``host/hardware.json`` (the block design's cell names) and ``bitstream/design.bit`` (+
``.hwh``). Needs numpy, onnxruntime and pynq; not fpgaplace.

The pieces run in manifest order, as ``fpgaplace csim`` runs them: a CPU piece in onnxruntime on
the board's CPU; a core gets its int8 inputs (an int8 tensor an earlier piece made, or a float
tensor quantized with the input's scale and zero point, ``clip(rint(x / scale) + zp)`` as
QuantizeLinear does), channels last per sample, through ``pynq.allocate`` buffers and the AXI
DMA that feeds each of its input streams; its outputs come back through the DMA that drains
each output stream and are dequantized, ``(q - zp) * scale``, for the pieces after it. A stream
from one core straight into another goes through an AXI-Stream FIFO in the fabric (the core
input has no DMA in the block design) and the driver does not touch it. Cores run with
auto-restart: started once, each processes a sample whenever its input streams hold one.

``run_many`` overlaps samples: the pieces form a pipeline of stages (a CPU piece, or a run of
consecutive cores started together), and at step k stage s works on sample k - s; the DMA
transfers of every core stage are started before the CPU stages of the same step run, and
waited for after, so the fabric computes while the CPU does.

Command line (from anywhere): ``python3 host/driver.py --self-test [--samples N] [--json]`` runs
``host/samples.npz`` (inputs and the outputs onnxruntime computed for them from the whole QDQ
model ``model.qdq.onnx`` at compile time) and compares: a dequantized int8 output passes within
1 quantization step (LSB, as csim checks), a float output within 1e-4 + 1e-3 * max |expected|.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HOST = Path(__file__).resolve().parent
sys.path.insert(0, str(HOST))
from tensors import DriverError, dequantize, from_stream, quantize, to_stream  # noqa: E402  (host/tensors.py)

PROJECT = HOST.parent
HARDWARE_FILE = "hardware.json"
AP_START_AUTO_RESTART = 0x81
FLOAT_ATOL, FLOAT_RTOL = 1e-4, 1e-3


def core_input(tensor: dict, values: dict) -> np.ndarray | None:
    """The int8 value of a core input from what earlier pieces computed, None if none did."""
    if tensor["name"] in values:
        return np.asarray(values[tensor["name"]]).astype(np.int8)
    for view in tensor["views"]:
        if view["name"] in values:
            return quantize(values[view["name"]].reshape(tensor["shape"]), tensor["scale"], tensor["zero_point"])
    if tensor["quantized_from"] in values:
        return quantize(values[tensor["quantized_from"]].reshape(tensor["shape"]), tensor["scale"],
                        tensor["zero_point"])
    return None


def _read_json(path: Path) -> dict:
    if not path.is_file():
        raise DriverError(f"{path}: missing; expected a project written by `fpgaplace compile`")
    try:
        return json.loads(path.read_text())
    except ValueError as error:
        raise DriverError(f"{path}: not readable JSON ({error})") from None


@dataclass
class Port:
    """One stream of a core: its tensor, and the DMA channel and buffer when it has a DMA."""

    tensor: dict
    channel: object | None = None
    buffer: object | None = None

    @property
    def size(self) -> int:
        return int(np.prod(self.tensor["sample_shape"]))


class Core:
    """One core on the fabric: its HLS IP started with auto-restart, and the DMAs of its ports."""

    def __init__(self, record: dict, names: dict, overlay, allocate, host: Path) -> None:
        self.record = record
        self.host = host
        self.name = record["name"]
        ip_name = names["ip"]
        if ip_name not in overlay.ip_dict:
            raise DriverError(f"{self.name}: the bitstream has no IP '{ip_name}' (its .hwh lists "
                              f"{', '.join(sorted(overlay.ip_dict)) or 'none'})")
        self.ip = getattr(overlay, ip_name)
        self.inputs = [self._port(t, names, overlay, allocate, "sendchannel") for t in record["inputs"]]
        self.outputs = [self._port(t, names, overlay, allocate, "recvchannel") for t in record["outputs"]]
        self.weights = self._load_weights(names, overlay, allocate)
        self.ip.write(0x0, AP_START_AUTO_RESTART)

    def _port(self, tensor: dict, names: dict, overlay, allocate, channel: str) -> Port:
        port = Port(tensor)
        dma = names["dma"][tensor["port"]]
        if dma in overlay.ip_dict:
            port.channel = getattr(getattr(overlay, dma), channel)
            if port.channel is None:
                raise DriverError(f"{dma}: the DMA of {self.name}.{tensor['port']} has no {channel} in the bitstream")
            port.buffer = allocate((port.size,), dtype=np.int8)
        return port

    def _load_weights(self, names: dict, overlay, allocate):
        """Streamed weights: ``host/<file>`` into a buffer whose address goes into the IP's
        weight pointer (``wmem`` in the register map the .hwh carries: low word ``wmem_1`` or
        ``wmem``, high word ``wmem_2``)."""
        if self.record.get("streamed_weight_bytes", 0) <= 0:
            return None
        registers = overlay.ip_dict[names["ip"]].get("registers", {})
        low = registers.get("wmem_1") or registers.get("wmem")
        if low is None:
            raise DriverError(f"{self.name}: streams its weights but the .hwh register map of '{names['ip']}' has no "
                              "wmem register; rebuild the bitstream from this project")
        path = self.host / names["weights"]
        if not path.is_file():
            raise DriverError(f"{path}: missing; recompile the project to write the weights {self.name} streams")
        data = np.fromfile(path, dtype=np.int8)
        if data.size != self.record["streamed_weight_bytes"]:
            raise DriverError(f"{path}: {data.size} bytes; expected "
                              f"{self.record['streamed_weight_bytes']} for {self.name}")
        buffer = allocate((data.size,), dtype=np.int8)
        buffer[:] = data
        if hasattr(buffer, "flush"):
            buffer.flush()
        self.ip.write(low["address_offset"], buffer.physical_address & 0xFFFFFFFF)
        if "wmem_2" in registers:
            self.ip.write(registers["wmem_2"]["address_offset"], (buffer.physical_address >> 32) & 0xFFFFFFFF)
        return buffer

    def start(self, streams: list[np.ndarray | None]) -> None:
        """Arm every output DMA, then send every input that has a DMA (one sample)."""
        for port in self.outputs:
            if port.channel is not None:
                port.channel.transfer(port.buffer)
        for port, data in zip(self.inputs, streams, strict=True):
            if port.channel is not None:
                port.buffer[:] = data
                port.channel.transfer(port.buffer)

    def finish(self) -> list[np.ndarray | None]:
        """Wait for the sends and receives; the received bytes of every output with a DMA."""
        for port in self.inputs:
            if port.channel is not None:
                port.channel.wait()
        received = []
        for port in self.outputs:
            if port.channel is None:
                received.append(None)
                continue
            port.channel.wait()
            if port.channel.transferred != port.size:
                raise DriverError(f"{self.name}.{port.tensor['port']}: received {port.channel.transferred} bytes; "
                                  f"expected {port.size}")
            received.append(np.array(port.buffer, dtype=np.int8))
        return received


@dataclass
class FabricStage:
    """Cores started together on one sample (streams between them stay in the fabric)."""

    cores: list[Core]
    pending: list = field(default_factory=list)

    def launch(self, values: dict) -> None:
        """Start the first sample of the batch (the rest run in ``complete``)."""
        self.pending = [self._streams(core, values) for core in self.cores]
        for core, streams in zip(self.cores, self.pending, strict=True):
            core.start([s[0] if s is not None else None for s in streams])

    def complete(self, values: dict) -> None:
        batch = max((len(s) for streams in self.pending for s in streams if s is not None), default=1)
        outputs: dict[int, list[list[np.ndarray | None]]] = {id(c): [] for c in self.cores}
        for sample in range(batch):
            if sample:
                for core, streams in zip(self.cores, self.pending, strict=True):
                    core.start([s[sample] if s is not None else None for s in streams])
            for core in self.cores:
                outputs[id(core)].append(core.finish())
        for core in self.cores:
            for i, port in enumerate(core.outputs):
                if port.channel is None:
                    continue
                q = from_stream([got[i] for got in outputs[id(core)]], port.tensor)
                values[port.tensor["name"]] = q
                for view in port.tensor["views"]:
                    values[view["name"]] = dequantize(q, port.tensor["scale"], port.tensor["zero_point"]).reshape(
                        view["shape"])

    @staticmethod
    def _streams(core: Core, values: dict) -> list[list[np.ndarray] | None]:
        streams = []
        for port in core.inputs:
            if port.channel is None:
                streams.append(None)
                continue
            q = core_input(port.tensor, values)
            if q is None:
                raise DriverError(f"{core.name}: input '{port.tensor['name']}' is computed by no earlier piece")
            streams.append(to_stream(q, port.tensor))
        return streams


@dataclass
class CpuStage:
    """One piece in onnxruntime on the board's CPU."""

    session: object
    inputs: list[str]
    outputs: list[str]

    def run(self, values: dict) -> None:
        results = self.session.run(self.outputs, {name: values[name] for name in self.inputs})
        values.update(zip(self.outputs, results, strict=True))


class Driver:
    """The placed model on the board: ``run(inputs) -> outputs`` like an onnxruntime session."""

    def __init__(self, project: Path = PROJECT, overlay=None) -> None:
        import onnxruntime as ort

        self.project = Path(project)
        self.design = _read_json(self.project / "design.json")
        self.hardware = _read_json(self.project / "host" / HARDWARE_FILE)
        manifest = _read_json(self.project / self.design["split"])
        nodes = sorted({c["node"] for c in self.design["cores"]})
        if len(nodes) > 1:
            raise DriverError(f"{self.project / 'design.json'}: cores on {len(nodes)} nodes ({', '.join(nodes)}); "
                              "this driver runs the design of one board")
        if self.hardware.get("alveo"):
            raise DriverError(f"{self.project / 'design.json'}: board {self.design['board']['name']} is an Alveo card; "
                              "this driver drives the AXI DMAs of a Zynq PYNQ board")
        self.graph_inputs = manifest["graph_inputs"]
        self.graph_outputs = [o["name"] for o in manifest["graph_outputs"]]
        self.overlay = overlay if overlay is not None or not self.design["cores"] else self._overlay()
        records = {c["name"]: c for c in self.design["cores"]}
        self.stages: list[FabricStage | CpuStage] = []
        for sub in manifest["submodels"]:
            if sub["device"] in records:
                self._add_core(records[sub["device"]])
            else:
                options = ort.SessionOptions()
                if self.design["model"].get("from_qonnx"):  # node by node, as qonnx defines the values
                    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
                session = ort.InferenceSession(str(self.project / "split" / sub["file"]), options,
                                               providers=["CPUExecutionProvider"])
                self.stages.append(CpuStage(session, sub["inputs"], sub["outputs"]))
        self.fps: float | None = None

    def _overlay(self):
        bitfile = self.project / self.hardware["bitstream"]
        if not bitfile.is_file() or not bitfile.with_suffix(".hwh").is_file():
            raise DriverError(f"{bitfile}: missing (with its .hwh); run `make bitstream` in the project first")
        try:
            from pynq import Overlay
        except ImportError as error:
            raise DriverError(f"pynq is not importable here ({error}); the driver runs on a PYNQ board") from None
        try:
            return Overlay(str(bitfile))
        except (RuntimeError, OSError, ValueError) as error:  # e.g. "No Devices Found" off a board
            raise DriverError(f"{bitfile}: pynq could not load it ({error})") from None

    def _add_core(self, record: dict) -> None:
        from pynq import allocate

        core = Core(record, self.hardware["cores"][record["name"]], self.overlay, allocate, self.project / "host")
        last = self.stages[-1] if self.stages else None
        fed_by_fifo = any(port.channel is None for port in core.inputs)
        if isinstance(last, FabricStage) and fed_by_fifo:
            last.cores.append(core)
        else:
            self.stages.append(FabricStage([core]))

    def check_inputs(self, inputs: dict) -> dict:
        """The feed of one call: every graph input by name, of its dtype and shape."""
        expected = {i["name"]: i for i in self.graph_inputs}
        unknown = sorted(set(inputs) - set(expected))
        if unknown:
            raise DriverError(f"input '{unknown[0]}': the model has no such input; expected {', '.join(expected)}")
        feed = {}
        for name, info in expected.items():
            if name not in inputs:
                raise DriverError(f"input '{name}' is missing; expected {info['dtype']} of shape {info['shape']}")
            array = np.asarray(inputs[name])
            if list(array.shape) != list(info["shape"]):
                raise DriverError(f"input '{name}': shape {list(array.shape)}; expected {info['shape']}")
            feed[name] = array.astype(info["dtype"], copy=False)
        return feed

    def run(self, inputs: dict) -> dict:
        """One call of the model: {input name: array} -> {output name: array}."""
        return self.run_many([inputs], report=False)[0]

    def run_many(self, samples: list[dict], report: bool = True) -> list[dict]:
        """Many calls with the pieces of successive samples overlapped (module docstring);
        prints the frames per second when ``report``."""
        feeds = [self.check_inputs(sample) for sample in samples]
        values = [dict(feed) for feed in feeds]
        stages = self.stages
        start = time.perf_counter()
        for step in range(len(feeds) + len(stages) - 1):
            active = [(stage, values[step - s]) for s, stage in enumerate(stages) if 0 <= step - s < len(feeds)]
            fabric = [(stage, v) for stage, v in active if isinstance(stage, FabricStage)]
            for stage, v in fabric:
                stage.launch(v)
            for stage, v in active:
                if isinstance(stage, CpuStage):
                    stage.run(v)
            for stage, v in fabric:
                stage.complete(v)
        seconds = time.perf_counter() - start
        self.fps = len(feeds) * self.design["model"]["batch"] / seconds if seconds > 0 else float("inf")
        if report:
            print(f"{len(feeds)} samples in {seconds:.3f} s: {self.fps:.1f} fps", file=sys.stderr)
        missing = [name for name in self.graph_outputs if values and name not in values[0]]
        if missing:
            raise DriverError(f"output '{missing[0]}' is computed by no piece the driver runs")
        return [{name: v[name] for name in self.graph_outputs} for v in values]


@dataclass
class SelfTest:
    ok: bool
    fps: float
    samples: int
    max_abs_diff_lsb: float
    max_abs_diff: float


def self_test(driver: Driver, samples: int | None = None) -> SelfTest:
    """Run ``host/samples.npz`` (cycled to ``samples`` calls) and compare with its expected outputs."""
    path = driver.project / "host" / driver.hardware["samples"]
    if not path.is_file():
        raise DriverError(f"{path}: missing; recompile the project to write its sample inputs")
    data = np.load(path)
    count = data[f"input.{driver.graph_inputs[0]['name']}"].shape[0]
    total = samples or count
    if total < 1:
        raise DriverError(f"samples: expected at least 1, got {total}")
    feeds = [{i["name"]: data[f"input.{i['name']}"][k % count] for i in driver.graph_inputs} for k in range(total)]
    results = driver.run_many(feeds)
    scales = driver.hardware.get("output_scales", {})
    worst_lsb = worst = 0.0
    ok = True
    for k, result in enumerate(results):
        for name, got in result.items():
            want = data[f"expected.{name}"][k % count].astype(np.float64)
            got = np.asarray(got, dtype=np.float64)
            diff = float(np.max(np.abs(got - want), initial=0.0))
            worst = max(worst, diff)
            if name in scales:
                lsb = float(np.max(np.abs(np.rint(got / scales[name]) - np.rint(want / scales[name])), initial=0.0))
                worst_lsb = max(worst_lsb, lsb)
                ok &= lsb <= 1.0
            else:
                ok &= diff <= FLOAT_ATOL + FLOAT_RTOL * float(np.max(np.abs(want), initial=0.0))
    return SelfTest(bool(ok), float(driver.fps or 0.0), total, worst_lsb, worst)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the fpgaplace design on this PYNQ board.")
    parser.add_argument("--self-test", action="store_true", help="run host/samples.npz and compare the outputs")
    parser.add_argument("--samples", type=int, default=None, help="calls to make (the stored samples, cycled)")
    parser.add_argument("--json", action="store_true", help="print one JSON line")
    args = parser.parse_args(argv)
    if not args.self_test:
        parser.print_help()
        return 0
    try:
        result = self_test(Driver(), args.samples)
    except DriverError as error:
        print(f"driver: {error}", file=sys.stderr)
        if args.json:
            print(json.dumps({"ok": False, "fps": 0.0, "samples": 0, "max_abs_diff_lsb": None, "error": str(error)}))
        return 1
    if args.json:
        print(json.dumps({"ok": result.ok, "fps": result.fps, "samples": result.samples,
                          "max_abs_diff_lsb": result.max_abs_diff_lsb}))
    else:
        verdict = "pass" if result.ok else "FAIL"
        print(f"self-test {verdict}: {result.samples} samples, {result.fps:.1f} fps, "
              f"max difference {result.max_abs_diff_lsb:g} LSB ({result.max_abs_diff:g})")
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
