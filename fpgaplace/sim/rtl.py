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

Rendering is O(N*K) (the weight file); simulation costs O(cycles) cocotb steps.
"""

from __future__ import annotations

import json
import math
import shutil
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import jinja2
import numpy as np

from fpgaplace.errors import FpgaplaceError
from fpgaplace.hw import reference
from fpgaplace.hw.kernels import KERNELS, LUTRAM_MAX_DEPTH, Folding, Geometry, requantize_units
from fpgaplace.ir import Op, TensorInfo

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
class DenseSimulation:
    config: dict[str, int]
    random: PhaseResult  # random input gaps and output backpressure
    steady: PhaseResult  # back to back, output always ready
    model_cycles: int
    log: Path = field(compare=False)

    @property
    def bit_exact(self) -> bool:
        return self.random.bit_exact and self.steady.bit_exact

    @property
    def cycle_error(self) -> float:
        """(measured - model) / model of the steady-state cycles per vector."""
        return (self.steady.cycles_per_vector - self.model_cycles) / self.model_cycles


def environment() -> jinja2.Environment:
    """The Jinja2 environment over the shipped templates (undefined names are errors)."""
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


def _pack(lanes: np.ndarray, bits: int) -> int:
    """Lane ``j`` of ``lanes`` (two's complement, ``bits`` wide) in bits ``[bits*j +: bits]``."""
    mask = (1 << bits) - 1
    return sum((int(v) & mask) << (bits * j) for j, v in enumerate(lanes))


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
    bias = checked["bias"] - zx * w.astype(np.int64).sum(axis=1)
    acc_magnitude = int(np.abs(checked["bias"]).max()) + k * 255 * 128
    acc_bits = max(signed_bits(acc_magnitude), signed_bits(int(np.abs(bias).max()) + k * PRODUCT_MAGNITUDE))
    if signed_bits(acc_magnitude) > MAX_ACC_BITS:
        raise FpgaplaceError(f"rtl dense: |bias| + K*255*128 = {acc_magnitude} reaches 2**32 (requantize needs less)")
    nf, sf = n // pe, k // simd
    folded = reference.fold_weights(w, pe, simd).reshape(nf * sf, pe * simd)
    channel_bits = acc_bits + 40
    # |v| = |acc * m| < 2**(acc_bits + 30), so every shift s >= V_W - 1 = acc_bits + 31 rounds v to 0
    # (q is 0 or -1 and the remainder test rounds -1 up): clamping s there is exact and keeps the
    # shifter's bit select v[s-1] inside v.
    shifts = np.minimum(checked["shift"], acc_bits + 31)
    channel_words = []
    for fold in range(nf):
        lanes = range(fold * pe, (fold + 1) * pe)
        channel_words.append(sum(
            ((int(shifts[c]) << (acc_bits + 32)) | (int(checked["mult"][c]) << acc_bits)
             | (int(bias[c]) & ((1 << acc_bits) - 1))) << (channel_bits * p) for p, c in enumerate(lanes)))
    weights_file, channels_file = f"{top}_weights.mem", f"{top}_channels.mem"
    values = {m: int(config[m]) for m in DENSE_MEMBERS} | {
        "name": top, "NF": nf, "SF": sf, "macs_per_dsp": macs_per_dsp,
        "PACKED_PE": pe // 2 * 2 if macs_per_dsp == 2 else 0,
        "DOT_W": signed_bits(k * PRODUCT_MAGNITUDE), "ACC_W": acc_bits,
        "RQ": requantize_units(pe, sf), "GROUP_BITS": index_bits(pe // requantize_units(pe, sf)),
        "FIFO_DEPTH": FIFO_DEPTH, "FIFO_BITS": index_bits(FIFO_DEPTH), "CREDIT_BITS": FIFO_DEPTH.bit_length(),
        "SF_BITS": index_bits(sf), "NF_BITS": index_bits(nf), "WA_BITS": index_bits(nf * sf),
        "weights_file": weights_file, "channels_file": channels_file,
        "weights_attribute": "" if nf * sf <= LUTRAM_MAX_DEPTH else '(* rom_style = "block" *) ',
    }
    verilog = environment().get_template("rtl/dense.v.j2").render(**values)
    return RtlModule(top, {
        f"{top}.v": verilog,
        weights_file: _hex_words([_pack(row, 8) for row in folded], 8 * pe * simd),
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


def _run_cocotb(module: RtlModule, folder: Path, job: dict[str, Any], seed: int) -> list[dict[str, Any]]:
    """Build ``module`` with Icarus and run the stream testbench on ``job``; its phase results."""
    from cocotb_tools.check_results import get_results
    from cocotb_tools.runner import get_runner

    if shutil.which("iverilog") is None:
        raise FpgaplaceError("rtl: iverilog is not on PATH; install it (scripts/setup.sh does)")
    sources = module.write(folder)
    job_file, results_file, xml = folder / "job.json", folder / "results.json", folder / "results.xml"
    results_file.unlink(missing_ok=True)
    job_file.write_text(json.dumps(job | {"results": str(results_file)}))
    runner = get_runner("icarus")
    log = folder / "sim.log"
    try:
        runner.build(sources=sources, hdl_toplevel=module.top, build_dir=folder / "sim_build",
                     timescale=("1ns", "1ps"), log_file=folder / "build.log")
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


def _phase(spec: dict[str, Any], result: dict[str, Any], expected: np.ndarray, warmup: int) -> PhaseResult:
    got = np.asarray(result["outputs"], dtype=np.int64).reshape(-1)
    want = expected.reshape(-1).astype(np.int64)
    mismatches = int(np.sum(got != want)) if len(got) == len(want) else len(want)  # a short stream: all wrong
    done = result["done_cycles"]
    steady = (done[-1] - done[warmup]) / (len(done) - 1 - warmup) if len(done) > warmup + 1 else float("nan")
    return PhaseResult(spec["name"], len(expected), mismatches, result["cycles"], steady, done[0] if done else -1)


def simulate_dense(config: dict[str, Any], arrays: dict[str, Any], vectors: np.ndarray, folder: Path,
                   seed: int = 0, gap: float = 0.3, backpressure: float = 0.3, warmup: int = 2,
                   steady_vectors: int | None = None, macs_per_dsp: int = 1) -> DenseSimulation:
    """Simulate the rendered dense unit on ``vectors [V, K]`` (int8) in ``folder``: a phase with
    random input gaps (probability ``gap`` a cycle) and output backpressure, and a back-to-back
    phase (``steady_vectors``, default V) whose cycles per vector after ``warmup`` vectors are
    the steady state. Every output is compared with ``fpgaplace.hw.reference.dense``."""
    vectors = np.asarray(vectors)
    if vectors.dtype != np.int8 or vectors.ndim != 2 or vectors.shape[1] != int(config["K"]):
        raise FpgaplaceError(f"rtl dense: vectors must be int8 of shape (V, {config['K']}), got {vectors.shape}")
    steady_count = steady_vectors or len(vectors)
    if steady_count < warmup + 2:
        raise FpgaplaceError(f"rtl dense: {steady_count} back-to-back vectors leave no steady state after {warmup}")
    steady_inputs = np.resize(vectors, (steady_count, vectors.shape[1]))
    expected = {name: np.stack([reference.dense(v, arrays["w"], arrays["bias"], arrays["mult"], arrays["shift"],
                                                zx=int(config["ZX"]), zy=int(config["ZY"]), lo=int(config["LO"]),
                                                hi=int(config["HI"])) for v in inputs])
                for name, inputs in (("random", vectors), ("steady", steady_inputs))}
    phases = [{"name": "random", "gap": gap, "backpressure": backpressure, "inputs": vectors.tolist()},
              {"name": "steady", "gap": 0.0, "backpressure": 0.0, "inputs": steady_inputs.tolist()}]
    module = render_dense(config, arrays, macs_per_dsp=macs_per_dsp)
    job = {"in_elems": int(config["SIMD"]), "out_elems": int(config["PE"]), "out_len": int(config["N"]),
           "cycle_limit": 64 * model_cycles(config) * max(len(vectors), steady_count) + 1000, "phases": phases}
    results = _run_cocotb(module, folder, job, seed)
    random_phase, steady_phase = (_phase(phase, result, expected[phase["name"]], warmup)
                                  for phase, result in zip(phases, results, strict=True))
    return DenseSimulation({m: int(config[m]) for m in DENSE_MEMBERS}, random_phase, steady_phase,
                           model_cycles(config), folder / "sim.log")
