"""Names shared by the generated hardware and the host code that drives it.

The Vivado block design (``build_scripts``), the PYNQ driver (``host``), the flash step and
the report all find a core's IP, its DMAs and the bitstream by these names, so they are
defined once here. Names follow Vivado's rules for cell names (letters, digits, ``_``).
"""

from __future__ import annotations

BITSTREAM_DIR = "bitstream"  # in the project: what `make bitstream` / `make xclbin` leaves
BITSTREAM_STEM = "design"  # bitstream/design.bit + design.hwh (Zynq) or design.xclbin (Alveo)
HOST_DIR = "host"  # the driver and what it reads besides design.json and split/
RESULTS_DIR = "results"  # csim.json, sim.json, rtl.json, resources.json once those stages ran
RTL_DIR, SIM_DIR = "rtl", "sim"  # in the project: each core's Verilog (rtl/<core>/) and cocotb job (sim/<core>/)


def cell_name(text: str) -> str:
    """``text`` as a Vivado cell name: other characters become ``_``; never starts with a digit."""
    name = "".join(ch if (ch.isascii() and ch.isalnum()) or ch == "_" else "_" for ch in text)
    return name if name[:1].isalpha() else f"c_{name}"


def core_ip_instance(core: str) -> str:
    """The block-design instance of a core's HLS IP (its top is ``<core>_top``)."""
    return cell_name(core)


def dma_instance(core: str, port: str) -> str:
    """The AXI DMA that feeds or drains ``port`` of ``core`` (one DMA per stream that enters or
    leaves the fabric)."""
    return cell_name(f"dma_{core}_{port}")


def fifo_instance(producer: str, consumer: str, tensor_index: int) -> str:
    """The AXI-Stream FIFO between two cores, for the ``tensor_index``-th tensor they share."""
    return cell_name(f"fifo_{producer}_{consumer}_{tensor_index}")


def bitstream_files(node_count: int, node: str, alveo: bool) -> list[str]:
    """The bitstream files of ``node`` relative to the project (per-node folders on clusters)."""
    folder = BITSTREAM_DIR if node_count <= 1 else f"{BITSTREAM_DIR}/{cell_name(node)}"
    suffixes = (".xclbin",) if alveo else (".bit", ".hwh")
    return [f"{folder}/{BITSTREAM_STEM}{suffix}" for suffix in suffixes]
