"""The C++ kernels (hls_templates/hls/include/fpgaplace/kernels.h) are bit-exact with the numpy
reference (fpgaplace.hw.reference) on many configurations of every kernel.

All cases are compiled into one harness binary (tests/cpp/kernel_harness.cpp) with the flags the
generated projects use; the build is cached in the temp dir under a hash of the sources, the
case configs and the flags. Each test writes a case's inputs as raw arrays, runs the harness on
them and compares its output streams with the reference, element for element.
"""

from __future__ import annotations

import hashlib
import math
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from hw_spec import conv_ticks, sliding_ticks

from fpgaplace.hw import reference
from fpgaplace.hw.quant import quantize_multiplier, requantize, requantize2, tie_bits

ROOT = Path(__file__).resolve().parents[1]
INCLUDE_DIR = ROOT / "hls_templates" / "hls" / "include"
HARNESS_SOURCE = ROOT / "tests" / "cpp" / "kernel_harness.cpp"
CXX = shutil.which("g++") or "g++"
CXXFLAGS = ("-std=c++17", "-O2", "-Wall", "-Werror", "-Wno-unknown-pragmas", "-DFP_COUNT_TICKS")
CASES_HEADER = "harness_cases.h"

# Config members of each kernel, as the spec names them (the order they are written in).
CONFIG_MEMBERS: dict[str, tuple[str, ...]] = {
    "conv2d": ("H", "W", "CIN", "COUT", "KH", "KW", "SH", "SW", "PT", "PL", "PB", "PR", "DH", "DW", "GROUPS", "HO",
               "WO", "ZX", "ZY", "LO", "HI", "PE", "SIMD", "MMV", "IW", "OW", "STAGE"),
    "dense": ("K", "N", "ZX", "ZY", "LO", "HI", "PE", "SIMD", "STAGE"),
    "maxpool": ("H", "W", "C", "KH", "KW", "SH", "SW", "PT", "PL", "PB", "PR", "HO", "WO", "ZX", "ZY", "LO", "HI", "M",
                "S", "PE", "MMV", "STAGE"),
    "add": ("SIZE", "ZA", "MA", "ZB", "MB", "S", "ZY", "LO", "HI", "L", "STAGE"),
    "requant": ("SIZE", "ZX", "M", "S", "ZY", "LO", "HI", "L", "STAGE"),
    "concat2": ("PIXELS", "C0", "C1", "Z0", "M0", "S0", "Z1", "M1", "S1", "ZY", "LO", "HI", "L", "STAGE"),
    "fork": ("SIZE", "L", "STAGE"),
    "regroup": ("SIZE", "A", "B", "STAGE"),
    "broadcast": ("SIZE", "C", "L", "STAGE"),
    "binary": ("SIZE", "C", "MODE", "OP", "ZX", "MX", "SX", "ZG", "MG", "SG", "S", "ZY", "LO", "HI", "L", "G", "BUFFER",
               "STAGE"),
}
CONFIG_MEMBERS["avgpool"] = (*CONFIG_MEMBERS["maxpool"], "TIE")


# ---------------------------------------------------------------- cases


@dataclass(frozen=True)
class Case:
    """One kernel configuration: ``config`` holds every spec member of the kernel's struct."""

    kernel: str
    id: int
    config: dict[str, int] = field(hash=False)

    def struct(self) -> str:
        members = "".join(f"  static constexpr int {name} = {self.config[name]};\n"
                          for name in CONFIG_MEMBERS[self.kernel])
        return f"struct {self.kernel}_case_{self.id} {{\n{members}}};\n"

    @property
    def name(self) -> str:
        return f"{self.kernel}{self.id}"


def cases_header(cases: list[Case]) -> str:
    """The harness's config structs and its case list (data only; the logic is in the .cpp)."""
    listing = " ".join(f"X({case.kernel}, {case.id})" for case in cases)
    return "".join(case.struct() for case in cases) + f"#define FPGAPLACE_HARNESS_CASES(X) {listing}\n"


def output_bounds(rng: np.random.Generator, zy: int) -> tuple[int, int]:
    """A plain, ReLU or clipped (lo, hi) for an output with zero point ``zy``."""
    choice = rng.integers(3)
    if choice == 0:
        return -128, 127
    if choice == 1:
        return max(-128, zy), 127
    lo = int(rng.integers(-128, 0))
    return lo, int(rng.integers(lo, 128))


def zero_point(rng: np.random.Generator) -> int:
    return int(rng.choice([-128, 127, 0, int(rng.integers(-128, 128))]))


def conv_config(rng: np.random.Generator, h, w, cin, cout, kernel, stride=(1, 1), pads=(0, 0, 0, 0), dilation=(1, 1),
                groups=1, pe=1, simd=1, mmv=1) -> dict[str, int]:
    zy = zero_point(rng)
    lo, hi = output_bounds(rng, zy)
    return {
        "H": h, "W": w, "CIN": cin, "COUT": cout, "KH": kernel[0], "KW": kernel[1], "SH": stride[0], "SW": stride[1],
        "PT": pads[0], "PL": pads[1], "PB": pads[2], "PR": pads[3], "DH": dilation[0], "DW": dilation[1],
        "GROUPS": groups, "HO": reference.output_size(h, kernel[0], stride[0], pads[0], pads[2], dilation[0]),
        "WO": reference.output_size(w, kernel[1], stride[1], pads[1], pads[3], dilation[1]),
        "ZX": zero_point(rng), "ZY": zy, "LO": lo, "HI": hi, "PE": pe, "SIMD": simd, "MMV": mmv,
    }


def divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def random_conv_config(rng: np.random.Generator) -> dict[str, int]:
    """A random small conv with a folding the kernel accepts."""
    groups = int(rng.choice([1, 1, 2, 0]))  # 0: depthwise
    cin = int(rng.integers(1, 7)) * max(groups, 1)
    cout = cin if groups == 0 else int(rng.integers(1, 5)) * max(groups, 1)
    groups = cin if groups == 0 else groups
    kernel = (int(rng.choice([1, 2, 3, 5])), int(rng.choice([1, 2, 3])))
    dilation = (int(rng.choice([1, 1, 2])), 1)
    pads = tuple(int(rng.integers(0, k)) for k in (kernel[0], kernel[1], kernel[0], kernel[1]))
    span = dilation[0] * (kernel[0] - 1) + 1
    h, w = int(rng.integers(max(1, span - pads[0] - pads[2]), 12)), int(rng.integers(max(1, kernel[1]), 12))
    simd = int(rng.choice(divisors(kernel[0] * kernel[1] * cin // groups)))
    return conv_config(rng, h, w, cin, cout, kernel, (int(rng.integers(1, 3)), int(rng.integers(1, 3))), pads,
                       dilation, groups, int(rng.choice(divisors(cout))), simd)


def pool_config(rng: np.random.Generator, h, w, c, kernel, stride, pads=(0, 0, 0, 0), identity=False,
                average=False, same_scale=False) -> dict[str, int]:
    """A pool's config; an average's rescale is ratio / window (ratio random, or 1 with
    ``same_scale``: the output keeps the input's scale) with its midpoint band TIE."""
    zx = zero_point(rng)
    zy = zx if identity else zero_point(rng)
    window = kernel[0] * kernel[1] if average else 1
    ratio = 1.0 if same_scale else float(rng.uniform(0.3, 1.5))
    m, s = (2**30, 30) if identity else quantize_multiplier(ratio / window)
    lo, hi = (-128, 127) if identity else output_bounds(rng, zy)
    config = {"H": h, "W": w, "C": c, "KH": kernel[0], "KW": kernel[1], "SH": stride[0], "SW": stride[1],
              "PT": pads[0], "PL": pads[1], "PB": pads[2], "PR": pads[3],
              "HO": reference.output_size(h, kernel[0], stride[0], pads[0], pads[2]),
              "WO": reference.output_size(w, kernel[1], stride[1], pads[1], pads[3]),
              "ZX": zx, "ZY": zy, "LO": lo, "HI": hi, "M": m, "S": s}
    return config | ({"TIE": 0 if identity else tie_bits(ratio, 1.0, window, m, s)} if average else {})


def rescale(rng: np.random.Generator) -> tuple[int, int]:
    return quantize_multiplier(float(np.exp(rng.uniform(-2, 1))))


def binary_config(rng: np.random.Generator, op: int, mode: int, c: int, pixels: int, lanes: int,
                  gate: int) -> dict[str, int]:
    """A ``fp::binary`` case: op code ``op`` (add, sub, mul, max, min), ``mode`` (0 same shape, 1
    per channel, 2 per pixel), ``c`` channels of ``pixels`` pixels, ``lanes`` x and ``gate`` g a beat."""
    zy = zero_point(rng)
    lo, hi = output_bounds(rng, zy)
    if op == 2:  # mul: one multiplier of the product (about 1/128: products of int8 spread over int8)
        (mx, s), mg = quantize_multiplier(float(rng.uniform(0.3, 1.5)) / 128), 0
    else:  # one shift shared by both operands' multipliers
        (mx, s), (mg, _) = rescale(rng), rescale(rng)
        mg >>= 1
    sx, sg = (1, -1) if op == 1 and rng.random() < 0.5 else ((-1, 1) if op == 1 else (1, 1))
    size = c * pixels
    return {"SIZE": size, "C": c, "MODE": mode, "OP": op, "ZX": zero_point(rng), "MX": mx, "SX": sx,
            "ZG": zero_point(rng), "MG": mg, "SG": sg, "S": s, "ZY": zy, "LO": lo, "HI": hi, "L": lanes, "G": gate,
            "BUFFER": (0, 2, 1)[mode] * size // lanes}


def build_cases() -> list[Case]:
    rng = np.random.default_rng(2024)
    specs: list[tuple[str, dict[str, int]]] = []

    def conv(*args, **kwargs):
        specs.append(("conv2d", conv_config(rng, *args, **kwargs)))

    conv(7, 9, 3, 8, (3, 3), pads=(1, 1, 1, 1), pe=2, simd=9)  # SIMD lanes span three pixels
    conv(8, 8, 4, 6, (3, 3), (2, 2), (1, 0, 1, 2), groups=2, pe=3, simd=6)
    conv(9, 7, 6, 6, (3, 3), (1, 2), (1, 1, 1, 1), groups=6, pe=2, simd=3)  # depthwise, PE over groups
    conv(10, 10, 8, 8, (3, 3), (2, 2), (1, 1, 1, 1), groups=8, pe=8, simd=9)  # depthwise, fully unrolled
    conv(10, 10, 5, 7, (1, 1), (2, 2), pe=7, simd=5)  # the last input row is read by no window
    conv(11, 8, 4, 4, (3, 2), pads=(2, 1, 0, 1), dilation=(2, 3), pe=4, simd=2)
    conv(12, 12, 3, 4, (7, 7), (2, 2), (3, 3, 3, 3), simd=21)
    conv(6, 6, 8, 16, (2, 2), (2, 1), (0, 1, 1, 0), groups=4, pe=8, simd=4)  # PE spans two groups
    conv(5, 6, 4, 6, (3, 1), pads=(1, 0, 1, 0), groups=2, pe=2, simd=3)  # PE straddles a group boundary
    conv(5, 5, 2, 3, (5, 5), pads=(4, 4, 4, 4), pe=3, simd=5)  # windows mostly padding
    conv(3, 3, 2, 2, (1, 1), pads=(2, 2, 2, 2), simd=2)  # whole rows of outputs are pure bias
    conv(9, 9, 3, 4, (2, 2), (3, 3), pe=2, simd=6)  # stride above the kernel: rows skipped
    conv(4, 5, 1, 1, (1, 1))
    for _ in range(8):
        specs.append(("conv2d", random_conv_config(rng)))
    # ResNet-50 / MobileNet-sized layers (about 0.1 s each in the harness)
    conv(56, 56, 64, 64, (3, 3), pads=(1, 1, 1, 1), pe=16, simd=32)
    conv(28, 28, 128, 128, (3, 3), (2, 2), (1, 1, 1, 1), groups=128, pe=4, simd=9)
    conv(64, 64, 3, 32, (7, 7), (2, 2), (3, 3, 3, 3), pe=8, simd=49)

    for k, n, pe, simd in ((300, 37, 1, 300), (64, 10, 5, 16), (7, 3, 3, 7), (1, 1, 1, 1), (2048, 100, 4, 32)):
        zy = zero_point(rng)
        lo, hi = output_bounds(rng, zy)
        specs.append(("dense", {"K": k, "N": n, "ZX": zero_point(rng), "ZY": zy, "LO": lo, "HI": hi, "PE": pe,
                                "SIMD": simd}))

    pool_shapes = [
        ((8, 8, 5), (2, 2), (2, 2), (0, 0, 0, 0)),
        ((9, 7, 3), (3, 3), (2, 2), (1, 1, 1, 1)),
        ((7, 10, 4), (3, 2), (1, 3), (1, 0, 2, 1)),
        ((7, 7, 6), (7, 7), (1, 1), (0, 0, 0, 0)),  # global
        ((8, 8, 3), (1, 1), (2, 2), (0, 0, 0, 0)),  # the last row is read by no window
        ((5, 6, 2), (5, 6), (1, 1), (1, 1, 1, 1)),  # the whole image, padded: windowed, not global
    ]
    for kernel in ("maxpool", "avgpool"):
        for (h, w, c), window, stride, pads in pool_shapes:
            specs.append((kernel, pool_config(rng, h, w, c, window, stride, pads, average=kernel == "avgpool")))
        specs.append((kernel, pool_config(rng, 9, 9, 4, (3, 3), (2, 2), (1, 1, 1, 1), identity=True,
                                          average=kernel == "avgpool")))
    specs.append(("avgpool", pool_config(rng, 7, 7, 2048, (7, 7), (1, 1), average=True)))  # ResNet-50's last pool
    # the input's scale kept: sums over 6 elements land on exact midpoints, rounded to even through TIE
    specs.append(("avgpool", pool_config(rng, 7, 10, 4, (3, 2), (1, 3), (1, 0, 2, 1), average=True, same_scale=True)))

    for size in (1, 37, 210):
        (ma, sa), (mb, _) = rescale(rng), rescale(rng)
        zy = zero_point(rng)
        lo, hi = output_bounds(rng, zy)
        specs.append(("add", {"SIZE": size, "ZA": zero_point(rng), "MA": ma, "ZB": zero_point(rng),
                              "MB": mb >> 1, "S": sa, "ZY": zy, "LO": lo, "HI": hi}))
    for size in (1, 100, 333):
        m, s = rescale(rng)
        zy = zero_point(rng)
        lo, hi = output_bounds(rng, zy)
        specs.append(("requant", {"SIZE": size, "ZX": zero_point(rng), "M": m, "S": s, "ZY": zy, "LO": lo, "HI": hi}))
    for pixels, c0, c1, identity in ((12, 3, 5, False), (1, 7, 2, False), (6, 4, 4, True)):
        (m0, s0), (m1, s1) = ((2**30, 30), (2**30, 30)) if identity else (rescale(rng), rescale(rng))
        zy = zero_point(rng)
        z0, z1 = (zy, zy) if identity else (zero_point(rng), zero_point(rng))
        lo, hi = (-128, 127) if identity else output_bounds(rng, zy)
        specs.append(("concat2", {"PIXELS": pixels, "C0": c0, "C1": c1, "Z0": z0, "M0": m0, "S0": s0, "Z1": z1,
                                  "M1": m1, "S1": s1, "ZY": zy, "LO": lo, "HI": hi}))
    for size in (1, 50):
        specs.append(("fork", {"SIZE": size}))
    specs.append(("conv2d", conv_config(rng, 6, 8, 3, 4, (3, 3), pads=(1, 1, 1, 1), pe=4, simd=9, mmv=4)))  # MMV
    specs.append(("conv2d", conv_config(rng, 5, 6, 4, 6, (3, 3), (1, 1), (1, 1, 1, 1), pe=2, simd=12, mmv=3)))
    specs.append(("conv2d", conv_config(rng, 6, 6, 2, 8, (1, 1), (1, 1), pe=4, simd=2, mmv=2)))  # 2 folds, 16 out
    specs.append(("conv2d", conv_config(rng, 5, 7, 3, 4, (3, 3), pads=(1, 1, 1, 1), pe=2, simd=9, mmv=3)))  # 3+3+1
    specs.append(("conv2d", conv_config(rng, 4, 5, 2, 6, (1, 1), pe=6, simd=1, mmv=2)))  # PE == COUT, short group
    specs.append(("maxpool", {**pool_config(rng, 8, 8, 3, (2, 2), (2, 2)), "PE": 3, "MMV": 2}))  # whole pixels a beat
    for size, a, b in ((48, 3, 16), (48, 16, 3), (60, 12, 10), (7, 7, 1)):
        specs.append(("regroup", {"SIZE": size, "A": a, "B": b}))
    specs.append(("broadcast", {"SIZE": 24, "C": 6, "L": 4}))
    # two activations (fpgaplace.hw.binary): op, mode (same / per channel / per pixel), C, pixels, L, G
    for op, mode, c, pixels, lanes, gate in (
            (0, 0, 6, 10, 4, 4), (1, 0, 6, 10, 1, 1), (2, 0, 5, 7, 35, 35), (3, 0, 6, 10, 6, 6), (4, 0, 3, 4, 2, 2),
            (2, 1, 12, 10, 3, 3), (2, 1, 12, 10, 24, 12), (1, 1, 8, 9, 8, 4), (3, 1, 5, 6, 5, 5), (4, 1, 12, 10, 12, 6),
            (2, 2, 12, 10, 3, 1), (2, 2, 12, 10, 60, 5), (0, 2, 8, 6, 8, 1), (3, 2, 4, 9, 12, 3), (4, 2, 7, 4, 7, 1)):
        specs.append(("binary", binary_config(rng, op, mode, c, pixels, lanes, gate)))
    specs = [(kernel, with_widths(kernel, config, rng)) for kernel, config in specs]
    return [Case(kernel, index, config) for index, (kernel, config) in enumerate(specs)]


def with_widths(kernel: str, config: dict[str, int], rng: np.random.Generator) -> dict[str, int]:
    """``config`` with the stream widths a case leaves open drawn at random (any width the kernel
    accepts), and its stage number."""
    c = dict(config, STAGE=0)
    if kernel == "conv2d":
        c.setdefault("IW", int(rng.choice([d for d in divisors(c["W"] * c["CIN"]) if d <= 64])))
        last = c["WO"] - (-(-c["WO"] // c["MMV"]) - 1) * c["MMV"]
        if c["MMV"] > 1 and (c["PE"] < c["COUT"] or last < c["MMV"]):  # a reorder buffer: a width in time
            steps = c["COUT"] // c["PE"] * (c["KH"] * c["KW"] * c["CIN"] // c["GROUPS"] // c["SIMD"])
            group = c["MMV"] * c["COUT"]
            widths = [d for d in divisors(group) if d * steps >= group and (last * c["COUT"]) % d == 0]
            c.setdefault("OW", int(rng.choice(widths)))
        c.setdefault("OW", c["PE"] * c["MMV"])
    elif kernel in ("maxpool", "avgpool"):
        c.setdefault("PE", int(rng.choice(divisors(c["C"]))))
        c.setdefault("MMV", 1)
    elif kernel in ("add", "requant", "fork"):
        c.setdefault("L", int(rng.choice(divisors(c["SIZE"]))))
    elif kernel == "concat2":
        c.setdefault("L", int(rng.choice(divisors(math.gcd(c["C0"], c["C1"])))))
    return c


CASES = build_cases()


def params(kernels: tuple[str, ...]) -> list:
    return [pytest.param(case, id=case.name) for case in CASES if case.kernel in kernels]


# ---------------------------------------------------------------- building and running


def compile_harness(cases: list[Case], output: Path, *extra_flags: str) -> subprocess.CompletedProcess:
    """Write the cases header next to ``output`` and compile the harness to ``output``."""
    (output.parent / CASES_HEADER).write_text(cases_header(cases))
    command = [CXX, *CXXFLAGS, *extra_flags, "-I", str(INCLUDE_DIR), "-I", str(output.parent), str(HARNESS_SOURCE),
               "-o", str(output)]
    return subprocess.run(command, capture_output=True, text=True, timeout=300)


def source_digest(cases: list[Case], *extra_flags: str) -> str:
    digest = hashlib.sha256()
    for path in sorted((INCLUDE_DIR / "fpgaplace").glob("*.h")) + [HARNESS_SOURCE]:
        digest.update(path.read_bytes())
    digest.update(cases_header(cases).encode())
    digest.update(" ".join((CXX, *CXXFLAGS, *extra_flags)).encode())
    return digest.hexdigest()[:20]


def cached_harness(cases: list[Case], *extra_flags: str) -> Path:
    """The harness binary with ``cases``, built once per source/config/flags version."""
    build_dir = Path(tempfile.gettempdir()) / "fpgaplace-hls-harness" / source_digest(cases, *extra_flags)
    binary = build_dir / "kernel_harness"
    if not binary.exists():
        build_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(dir=build_dir))
        result = compile_harness(cases, scratch / "kernel_harness", *extra_flags)
        assert result.returncode == 0, f"harness does not compile:\n{result.stderr[-4000:]}"
        os.replace(scratch / "kernel_harness", binary)
        shutil.rmtree(scratch, ignore_errors=True)
    return binary


@pytest.fixture(scope="session")
def harness() -> Path:
    """The harness with every case, as C simulation builds it (kernels.h's FP_CSIM_FAST shortcuts)."""
    return cached_harness(CASES)


@pytest.fixture(scope="session")
def literal_harness() -> Path:
    """The convolution cases built with -DFP_CSIM_LITERAL: g++ runs the very step Vitis HLS
    synthesizes (the line buffer re-read every fold) instead of the C-simulation shortcut."""
    return cached_harness([case for case in CASES if case.kernel == "conv2d"], "-DFP_CSIM_LITERAL")


def run_harness(binary: Path, kernel: str, case_id: int, directory: Path, inputs: dict[str, np.ndarray],
                outputs: tuple[str, ...] = ("y",)) -> list[np.ndarray]:
    """Write ``inputs`` as raw little-endian files, run one case, read back the int8 outputs."""
    for name, values in inputs.items():
        np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<")).tofile(directory / f"{name}.bin")
    result = subprocess.run([str(binary), kernel, str(case_id), str(directory)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return [np.fromfile(directory / f"{name}.bin", dtype=np.int8) for name in outputs]


def ticks(directory: Path) -> int:
    """The loop iterations the case's stage counted (the harness writes them after the kernel ran)."""
    return int(np.fromfile(directory / "ticks.bin", dtype=np.int64)[0])


def random_int8(rng: np.random.Generator, shape) -> np.ndarray:
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def channel_rescale(rng: np.random.Generator, channels: int, length: int) -> tuple[np.ndarray, np.ndarray]:
    """Per-channel multipliers and shifts that map a dot product of ``length`` terms of uniform
    int8 values to roughly +-50 (so outputs use the int8 range, with some saturation)."""
    spread = 74.0 * 74.0 * math.sqrt(length)  # std of a sum of length products of uniform int8
    pairs = [quantize_multiplier(50.0 / spread * float(f)) for f in rng.uniform(0.3, 3.0, size=channels)]
    return np.array([p[0] for p in pairs], dtype=np.int32), np.array([p[1] for p in pairs], dtype=np.int8)


def assert_bit_exact(got: np.ndarray, expected: np.ndarray) -> None:
    expected = expected.reshape(-1)
    assert got.shape == expected.shape
    mismatches = np.flatnonzero(got != expected)
    assert mismatches.size == 0, f"{mismatches.size} of {got.size} differ, first at {mismatches[:5]}"


# ---------------------------------------------------------------- kernels


@pytest.mark.parametrize("build", ["csim", "literal"])
@pytest.mark.parametrize("case", params(("conv2d",)))
def test_conv2d_matches_reference(case: Case, build: str, request: pytest.FixtureRequest, tmp_path: Path):
    """Both builds of the kernel, the C-simulation shortcut and the synthesized step, are bit-exact
    and loop the documented iterations."""
    harness = request.getfixturevalue("harness" if build == "csim" else "literal_harness")
    cfg, rng = case.config, np.random.default_rng(case.id)
    cin_per_group = cfg["CIN"] // cfg["GROUPS"]
    x = random_int8(rng, (cfg["H"], cfg["W"], cfg["CIN"]))
    w = random_int8(rng, (cfg["COUT"], cfg["KH"], cfg["KW"], cin_per_group))
    bias = rng.integers(-(2**14), 2**14, size=cfg["COUT"], dtype=np.int32)
    mult, shift = channel_rescale(rng, cfg["COUT"], cfg["KH"] * cfg["KW"] * cin_per_group)
    expected = reference.conv2d(
        x, w, bias, mult, shift, zx=cfg["ZX"], zy=cfg["ZY"], lo=cfg["LO"], hi=cfg["HI"], stride=(cfg["SH"], cfg["SW"]),
        pads=(cfg["PT"], cfg["PL"], cfg["PB"], cfg["PR"]), dilation=(cfg["DH"], cfg["DW"]), groups=cfg["GROUPS"])
    (got,) = run_harness(harness, "conv2d", case.id, tmp_path, {
        "x": x, "w": reference.fold_weights(w, cfg["PE"], cfg["SIMD"]), "bias": bias, "mult": mult, "shift": shift})
    assert_bit_exact(got, expected)
    assert ticks(tmp_path) == conv_ticks(cfg, cfg["IW"], cfg["OW"])


@pytest.mark.parametrize("case", params(("dense",)))
def test_dense_matches_reference(case: Case, harness: Path, tmp_path: Path):
    cfg, rng = case.config, np.random.default_rng(case.id)
    x, w = random_int8(rng, (cfg["K"],)), random_int8(rng, (cfg["N"], cfg["K"]))
    bias = rng.integers(-(2**20), 2**20, size=cfg["N"], dtype=np.int32)
    mult, shift = channel_rescale(rng, cfg["N"], cfg["K"])
    expected = reference.dense(x, w, bias, mult, shift, zx=cfg["ZX"], zy=cfg["ZY"], lo=cfg["LO"], hi=cfg["HI"])
    (got,) = run_harness(harness, "dense", case.id, tmp_path, {
        "x": x, "w": reference.fold_weights(w, cfg["PE"], cfg["SIMD"]), "bias": bias, "mult": mult, "shift": shift})
    assert_bit_exact(got, expected)
    assert ticks(tmp_path) == cfg["N"] // cfg["PE"] * (cfg["K"] // cfg["SIMD"])  # the MVAU count, nothing more


@pytest.mark.parametrize("case", params(("maxpool", "avgpool")))
def test_pool_matches_reference(case: Case, harness: Path, tmp_path: Path):
    cfg, rng = case.config, np.random.default_rng(case.id)
    x = random_int8(rng, (cfg["H"], cfg["W"], cfg["C"]))
    pool: Callable[..., np.ndarray] = reference.maxpool if case.kernel == "maxpool" else reference.avgpool
    expected = pool(x, kernel=(cfg["KH"], cfg["KW"]), stride=(cfg["SH"], cfg["SW"]),
                    pads=(cfg["PT"], cfg["PL"], cfg["PB"], cfg["PR"]), zx=cfg["ZX"], m=cfg["M"], s=cfg["S"],
                    zy=cfg["ZY"], lo=cfg["LO"], hi=cfg["HI"], **({"tie": cfg["TIE"]} if "TIE" in cfg else {}))
    (got,) = run_harness(harness, case.kernel, case.id, tmp_path, {"x": x})
    assert_bit_exact(got, expected)
    lanes = cfg["PE"] * cfg["MMV"]
    if cfg["KH"] == cfg["H"] and cfg["KW"] == cfg["W"] and not any(cfg[p] for p in ("PT", "PL", "PB", "PR")):
        assert ticks(tmp_path) == (cfg["H"] * cfg["W"] + 1) * cfg["C"] // lanes  # global: read, then write
    else:
        steps = cfg["WO"] // cfg["MMV"] * (cfg["C"] // cfg["PE"])
        assert ticks(tmp_path) == sliding_ticks(cfg, cfg["C"], lanes, cfg["KH"], steps)
    if cfg["M"] == 2**30 and cfg["S"] == 30 and cfg["ZY"] == cfg["ZX"] and case.kernel == "maxpool":
        assert set(got.tolist()) <= set(x.reshape(-1).tolist())  # identity rescale: values are inputs


@pytest.mark.parametrize("case", params(("add",)))
def test_add_matches_reference(case: Case, harness: Path, tmp_path: Path):
    cfg, rng = case.config, np.random.default_rng(case.id)
    a, b = random_int8(rng, (cfg["SIZE"],)), random_int8(rng, (cfg["SIZE"],))
    expected = reference.add(a, b, za=cfg["ZA"], ma=cfg["MA"], zb=cfg["ZB"], mb=cfg["MB"], s=cfg["S"], zy=cfg["ZY"],
                             lo=cfg["LO"], hi=cfg["HI"])
    (got,) = run_harness(harness, "add", case.id, tmp_path, {"a": a, "b": b})
    assert_bit_exact(got, expected)
    assert ticks(tmp_path) == cfg["SIZE"] // cfg["L"]


@pytest.mark.parametrize("case", params(("requant",)))
def test_requant_matches_reference(case: Case, harness: Path, tmp_path: Path):
    cfg, rng = case.config, np.random.default_rng(case.id)
    x = random_int8(rng, (cfg["SIZE"],))
    expected = reference.requant(x, zx=cfg["ZX"], m=cfg["M"], s=cfg["S"], zy=cfg["ZY"], lo=cfg["LO"], hi=cfg["HI"])
    (got,) = run_harness(harness, "requant", case.id, tmp_path, {"x": x})
    assert_bit_exact(got, expected)
    assert ticks(tmp_path) == cfg["SIZE"] // cfg["L"]


@pytest.mark.parametrize("case", params(("concat2",)))
def test_concat2_matches_reference(case: Case, harness: Path, tmp_path: Path):
    cfg, rng = case.config, np.random.default_rng(case.id)
    x0, x1 = random_int8(rng, (cfg["PIXELS"], cfg["C0"])), random_int8(rng, (cfg["PIXELS"], cfg["C1"]))
    # PIXELS > 1: images [PIXELS, 1, C_i]; PIXELS = 1: vectors [C_i]
    inputs = [x.reshape(cfg["PIXELS"], 1, -1) if cfg["PIXELS"] > 1 else x.reshape(-1) for x in (x0, x1)]
    expected = reference.concat(inputs, zxs=[cfg["Z0"], cfg["Z1"]], ms=[cfg["M0"], cfg["M1"]],
                                ss=[cfg["S0"], cfg["S1"]], zy=cfg["ZY"], lo=cfg["LO"], hi=cfg["HI"])
    (got,) = run_harness(harness, "concat2", case.id, tmp_path, {"x0": x0, "x1": x1})
    assert_bit_exact(got, expected)


@pytest.mark.parametrize("case", params(("regroup",)))
def test_regroup_keeps_the_order_and_takes_about_the_busier_sides_beats(case: Case, harness: Path, tmp_path: Path):
    cfg = case.config
    x = random_int8(np.random.default_rng(case.id), (cfg["SIZE"],))
    (got,) = run_harness(harness, "regroup", case.id, tmp_path, {"x": x})
    assert_bit_exact(got, x)
    beats = max(cfg["SIZE"] // cfg["A"], cfg["SIZE"] // cfg["B"])
    assert beats <= ticks(tmp_path) <= beats + math.ceil(cfg["B"] / cfg["A"]) + 1


@pytest.mark.parametrize("case", params(("binary",)))
def test_binary_matches_reference(case: Case, harness: Path, tmp_path: Path):
    """x and g (same shape, one value per channel or per pixel) against the reference on g spread
    over x's elements in stream order; the stage's ticks are x's beats plus, per channel, g's."""
    cfg, rng = case.config, np.random.default_rng(case.id)
    size, c, mode = cfg["SIZE"], cfg["C"], cfg["MODE"]
    x = random_int8(rng, (size,))
    g = random_int8(rng, ((size, c, size // c)[mode],))
    spread = (g, np.tile(g, size // c), np.repeat(g, c))[mode]
    op = ("add", "sub", "mul", "max", "min")[cfg["OP"]]
    expected = reference.binary(op, x, spread, zx=cfg["ZX"], mx=cfg["MX"], sx=cfg["SX"], zg=cfg["ZG"], mg=cfg["MG"],
                                sg=cfg["SG"], s=cfg["S"], zy=cfg["ZY"], lo=cfg["LO"], hi=cfg["HI"])
    (got,) = run_harness(harness, "binary", case.id, tmp_path, {"x": x, "g": g})
    assert_bit_exact(got, expected)
    assert ticks(tmp_path) == size // cfg["L"] + (c // cfg["G"] if mode == 1 else 0)


@pytest.mark.parametrize("case", params(("broadcast",)))
def test_broadcast_repeats_the_channel_values(case: Case, harness: Path, tmp_path: Path):
    cfg = case.config
    values = random_int8(np.random.default_rng(case.id), (cfg["C"],))
    (got,) = run_harness(harness, "broadcast", case.id, tmp_path, {"values": values})
    assert_bit_exact(got, np.tile(values, cfg["SIZE"] // cfg["C"]))


@pytest.mark.parametrize("case", params(("fork",)))
def test_fork_copies_the_stream_into_both_outputs(case: Case, harness: Path, tmp_path: Path):
    x = random_int8(np.random.default_rng(case.id), (case.config["SIZE"],))
    got0, got1 = run_harness(harness, "fork", case.id, tmp_path, {"x": x}, outputs=("y0", "y1"))
    assert_bit_exact(got0, x)
    assert_bit_exact(got1, x)


def test_cases_cover_the_folding_and_geometry_features():
    """The case list exercises what the kernels must get right (guards against edits that drop them)."""
    convs = [c.config for c in CASES if c.kernel == "conv2d"]
    assert any(c["GROUPS"] == c["CIN"] == c["COUT"] > 1 and c["PE"] > 1 for c in convs)  # depthwise, PE > 1
    assert any(1 < c["GROUPS"] < c["CIN"] for c in convs)
    assert any(c["SH"] == 2 for c in convs) and any(c["DH"] > 1 for c in convs)
    assert any(min(c["PT"], c["PL"], c["PB"], c["PR"]) > 0 for c in convs)
    assert any(c["PE"] > 1 and c["SIMD"] > 1 for c in convs)
    assert any(c["SIMD"] > c["CIN"] // c["GROUPS"] for c in convs)  # SIMD lanes across pixels
    assert any(c["MMV"] > 1 and c["PE"] == c["COUT"] for c in convs)  # whole pixels a beat
    assert any(c["MMV"] > 1 and c["PE"] < c["COUT"] for c in convs)  # through the reorder buffer
    assert any(c["WO"] % c["MMV"] != 0 for c in convs)  # a short last group
    assert any(c["H"] % 2 == 1 for c in convs) and any(c["LO"] > -128 for c in convs)


# ---------------------------------------------------------------- requantize on edge values


def requantize_edge_values(rng: np.random.Generator, n: int) -> dict[str, np.ndarray]:
    """Random accumulators over the whole legal range plus exact ties, s = 1 and s = 62."""
    acc = rng.integers(-(2**32) + 1, 2**32, size=n, dtype=np.int64)
    acc[: n // 4] = rng.integers(-300, 300, size=n // 4)
    m = rng.integers(0, 2**31, size=n, dtype=np.int64)
    s = rng.integers(1, 63, size=n, dtype=np.int64)
    ties = np.arange(n // 8)
    acc[ties], m[ties], s[ties] = 2 * (ties - n // 16) + 1, 2**30, 31  # acc * 0.5: every one a tie
    s[n // 8 : n // 4] = 1
    s[n // 4 : n // 4 + 50], m[n // 4 : n // 4 + 50] = 62, 2**31 - 1
    return {"acc": acc, "m": m, "s": s}


def zero_points_and_bounds(rng: np.random.Generator, n: int) -> np.ndarray:
    """[n][3] (zero point, lo, hi) from a few fixed settings."""
    settings = np.array([(0, -128, 127), (-128, -128, 127), (10, 10, 127), (-5, -20, 30), (127, -128, 127)])
    return settings[rng.integers(len(settings), size=n)]


def test_cpp_requantize_equals_numpy_on_edge_values(harness: Path, tmp_path: Path):
    rng, n = np.random.default_rng(11), 20000
    values, bounds = requantize_edge_values(rng, n), zero_points_and_bounds(rng, n)
    expected = np.empty(n, dtype=np.int8)
    for setting in np.unique(bounds, axis=0):
        rows = (bounds == setting).all(axis=1)
        expected[rows] = requantize(values["acc"][rows], values["m"][rows], values["s"][rows], *map(int, setting))
    (got,) = run_harness(harness, "requantize", n, tmp_path, {
        "acc": values["acc"], "m": values["m"].astype(np.int32), "s": values["s"].astype(np.int32),
        "params": bounds.astype(np.int32)})
    assert_bit_exact(got, expected)


def test_cpp_requantize2_equals_numpy(harness: Path, tmp_path: Path):
    rng, n = np.random.default_rng(12), 20000
    a = rng.integers(-(2**31) + 1, 2**31, size=n, dtype=np.int64)
    b = rng.integers(-(2**31) + 1, 2**31, size=n, dtype=np.int64)
    a[: n // 2], b[: n // 2] = rng.integers(-255, 256, size=(2, n // 2))
    ma, mb = rng.integers(0, 2**31, size=(2, n), dtype=np.int64)
    s = rng.integers(1, 63, size=n, dtype=np.int64)
    bounds = zero_points_and_bounds(rng, n)
    expected = np.empty(n, dtype=np.int8)
    for setting in np.unique(bounds, axis=0):
        rows = (bounds == setting).all(axis=1)
        expected[rows] = requantize2(a[rows], ma[rows], b[rows], mb[rows], s[rows], *map(int, setting))
    (got,) = run_harness(harness, "requantize2", n, tmp_path, {
        "a": a, "b": b, "ma": ma.astype(np.int32), "mb": mb.astype(np.int32), "s": s.astype(np.int32),
        "params": bounds.astype(np.int32)})
    assert_bit_exact(got, expected)


# ---------------------------------------------------------------- compile-time checks


def invalid_config(kernel: str, **changes: int) -> Case:
    base = next(case for case in CASES if case.kernel == kernel)
    return Case(kernel, 0, {**base.config, **changes})


@pytest.mark.parametrize(
    "case, message",
    [
        (invalid_config("conv2d", COUT=8, PE=3), "PE must divide COUT"),
        (invalid_config("conv2d", SIMD=4), "SIMD must divide"),
        (invalid_config("conv2d", HO=99), "HO mismatch"),
        (invalid_config("dense", LO=5, HI=4), "LO <= HI"),
        (invalid_config("maxpool", PT=5), "pads < kernel"),
    ],
    ids=["pe", "simd", "ho", "bounds", "pool-pads"],
)
def test_invalid_configs_fail_to_compile_with_a_message(case: Case, message: str, tmp_path: Path):
    result = compile_harness([case], tmp_path / "harness", "-fsyntax-only")
    assert result.returncode != 0
    assert message in result.stderr
