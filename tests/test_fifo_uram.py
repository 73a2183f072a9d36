"""Deep FIFOs packed into URAM (``hw.buffers.fifo_storage``): the priced blocks of one FIFO in each
store, the core's choice of store in ``codegen.lower`` (BRAM unless BRAM squeezes the layers, then
the store of the least interval), and a bottleneck block whose residual skip fits only in URAM,
compiled, bit-exact in C simulation and in RTL (``fp_fifo_uram`` between gearboxes), its latency
the model's."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.board.model import BRAM36_BYTES
from fpgaplace.hw.buffers import URAM_FIFO_MIN_WORDS, URAM_WORD_BITS, buffer_memory, fifo_storage
from fpgaplace.hw.memory import URAM_SHAPE, memory_blocks
from fpgaplace.model import zoo
from fpgaplace.project.record import load
from fpgaplace.sim.csim import run_csim
from fpgaplace.sim.rtl_project import simulate_core

FEW_BRAM_BOARD = Path(__file__).parent / "boards" / "zu-few-bram-one-core.yaml"
SKIP = 56 * 56 * 256  # a sample of ResNet-50's first residual tensor
SKIP_HELD = 61_032  # what its skip holds on zcu104 (four rows and a bit, one element a beat)


def test_a_deep_skip_takes_fewer_blocks_packed_into_uram():
    """ResNet-50's skip: one-byte beats in BRAM36 of the cheapest aspect, or eight a word in URAM."""
    core = load_board("zcu104").cores[0]
    in_bram = fifo_storage(SKIP_HELD, 1, SKIP, uram=False)
    packed = fifo_storage(SKIP_HELD, 1, SKIP, uram=True)
    assert (in_bram.pack, in_bram.words, in_bram.uram) == (1, SKIP_HELD, False)
    assert packed.uram and packed.pack * 8 <= URAM_WORD_BITS and SKIP % packed.pack == 0
    assert all(SKIP % more for more in range(packed.pack + 1, URAM_WORD_BITS // 8 + 1))  # the most that divide
    assert packed.words == math.ceil(SKIP_HELD / packed.pack)
    bram = buffer_memory({"skip": [0, SKIP_HELD]}, {"skip": 1}, core, sizes={"skip": SKIP})
    uram = buffer_memory({"skip": [0, SKIP_HELD]}, {"skip": 1}, core, sizes={"skip": SKIP}, uram=True)
    assert (bram.bram36, bram.uram) == (memory_blocks(8, SKIP_HELD)[0], 0)
    assert (uram.bram36, uram.uram) == (0, math.ceil(packed.words / URAM_SHAPE[1]))
    assert uram.uram < bram.bram36


def test_a_packed_word_divides_the_sample_and_shallow_fifos_stay_in_bram():
    """A sample that eight do not divide packs fewer (nothing waits in the packer at a sample's
    end); a beat as wide as a URAM word is not packed; a FIFO shallow enough for LUTRAM stays there."""
    assert fifo_storage(9_000, 1, 7 * 7 * 3, uram=True).pack == 7
    wide = fifo_storage(40_000, 16, 16 * 4096, uram=True)
    assert wide.uram and wide.pack == 16 and wide.words == 2500
    shallow = fifo_storage(8 * (URAM_FIFO_MIN_WORDS - 1), 1, SKIP, uram=True)
    assert not shallow.uram and shallow.pack == 1
    core = load_board("zcu104").cores[0]  # 602 packed words: one URAM, though weights need 2,048 words to go there
    short = buffer_memory({"t": [0, 4809]}, {"t": 4}, core, sizes={"t": 8 * 8 * 128}, uram=True)
    assert (short.bram36, short.uram) == (0, 1)


@pytest.fixture(scope="module")
def few_bram(tmp_path_factory) -> Path:
    """The bottleneck block (8 x 8 x 128, 16 inside) compiled for a one-core fabric of one usable
    BRAM36 and six URAM: its skip holds 4,809 elements, two BRAM36 of one-byte words."""
    folder = tmp_path_factory.mktemp("fifo-uram") / "bottleneck"
    Design(zoo.bottleneck(channels=128, inner=16), load_board(FEW_BRAM_BOARD), profile_cpu=False).compile(
        folder, random_samples=4)
    return folder


def test_a_skip_that_bram_cannot_hold_is_packed_into_uram(few_bram: Path):
    (core,) = load(few_bram).cores
    assert {layer.kernel for layer in core.layers} >= {"conv2d", "add"}
    assert core.fifo_uram and core.fifo_resources["uram"] >= 1
    held = max(max(readers) for readers in core.buffers.values())
    assert held > core.budget["bram36"] * BRAM36_BYTES  # a byte an element: more than every BRAM36 of the core
    assert all(core.resources[key] <= core.budget[key] for key in core.budget), (core.resources, core.budget)
    top = (few_bram / core.folder / f"{core.top}.cpp").read_text()
    assert "type=fifo impl=uram" in top


@pytest.mark.slow
def test_the_packed_skip_is_bit_exact_in_c_and_rtl(few_bram: Path, tmp_path: Path):
    """csim (the HLS top's regroups around the packed stream) and the RTL top (``fp_fifo_uram``
    between gearboxes; Icarus, about 90 s here) bit-exact, the RTL's first sample within 10 %
    of the modelled latency."""
    csim = run_csim(few_bram, samples=2)
    assert csim.ok and all(core.bit_exact and core.built for core in csim.cores), csim
    (core,) = load(few_bram).cores
    measured = simulate_core(few_bram, core, tmp_path / "rtl", samples=1, steady=1)
    assert measured.bit_exact
    assert measured.latency_measured == pytest.approx(measured.latency_model, rel=0.10)
