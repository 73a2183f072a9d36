"""A project folder's layout: every file and folder name, named once, and the hardware names
shared by the generated hardware and the host code that drives it.

A project written by ``fpgaplace compile``::

    design.json           the record (``fpgaplace.project.record``)
    model.qdq.onnx        the whole int8 QDQ model
    split/manifest.json   the per-device pieces (``fpgaplace.flow.split``), one ONNX file each
    include/              the HLS headers
    cores/<core>/         a core's HLS C++, layers.npz (its arrays) and weights.bin (streamed weights)
    vivado/ or vitis/     the block design's scripts (Zynq) or the link config (Alveo), per node
    ecp5/                 or an ECP5 board's top, UART, pins and the open flow's outputs
    Makefile              make hls, make bitstream / make xclbin, make clean
    host/                 the PYNQ driver (driver.py) and what it reads (hardware.json, samples.npz)
    rtl/, sim/            the cores' Verilog and their cocotb testbenches
    results/              csim.json, sim.json, rtl.json, resources.json once those stages ran
    bitstream/            what ``make bitstream`` / ``make xclbin`` leaves

The Vivado block design (``codegen.blockdesign``), the PYNQ driver (``host``), the flash step and
the report all find a core's IP, its DMAs and the bitstream by these names, so they are
defined once here. Names follow Vivado's rules for cell names (letters, digits, ``_``).
"""

from __future__ import annotations

DESIGN_FILE = "design.json"  # the project's record
MODEL_FILE = "model.qdq.onnx"  # the whole int8 QDQ model
SPLIT_DIR = "split"  # the per-device pieces of the model
MANIFEST_FILE = "manifest.json"  # in the split folder: the pieces in order (``fpgaplace.flow.split``)
SPLIT_MANIFEST = f"{SPLIT_DIR}/{MANIFEST_FILE}"  # design.json's "split"
INCLUDE_DIR = "include"  # the HLS headers every core includes
CORES_DIR = "cores"  # cores/<core>/: one folder per FPGA core
LAYERS_FILE = "layers.npz"  # in a core's folder: its layers' arrays, keyed "<layer index>.<array>"
WEIGHTS_FILE = "weights.bin"  # in a core's folder: the weights it streams from DRAM (when it does)
README_FILE = "README.md"
MAKEFILE = "Makefile"
VIVADO_DIR = "vivado"  # a Zynq node's block design scripts (vivado/<node>/ on clusters)
VITIS_DIR = "vitis"  # an Alveo node's link config and data movers
ECP5_DIR = "ecp5"  # an ECP5 board's top, UART, pins, and what the open flow writes (its build folder)
RTL_DIR = "rtl"  # rtl/<core>/: a core's Verilog top, layers and ROMs
SIM_DIR = "sim"  # sim/<core>/: a core's cocotb job; sim/run_rtl.py runs them
STAGES_FILE = "stages.json"  # in sim/<core>/: each layer's module and stream ports, to simulate it alone
BITSTREAM_DIR = "bitstream"  # in the project: what `make bitstream` / `make xclbin` leaves
BITSTREAM_STEM = "design"  # bitstream/design.bit + design.hwh (Zynq) or design.xclbin (Alveo)
HOST_DIR = "host"  # the driver and what it reads besides design.json and split/
DRIVER_FILE = f"{HOST_DIR}/driver.py"  # the PYNQ driver (python3 host/driver.py --self-test)
HARDWARE_FILE = "hardware.json"  # in host/: the block design's cell names the driver looks up
TENSORS_FILE = f"{HOST_DIR}/tensors.py"  # the drivers' shared quantization and stream order
UART_DRIVER_FILE = f"{HOST_DIR}/uart_driver.py"  # an ECP5 board's driver over its USB UART (pyserial)
UART_FILE = "uart.json"  # in host/: the UART's baud and the model input and output the UART driver sends and reads
SAMPLES_FILE = "samples.npz"  # in host/: sample inputs and the outputs expected for them
HOST_DEVICE = "host"  # design.json's name for the host computer a CPU-less board's inputs come from (its UART)
RESULTS_DIR = "results"  # csim.json, sim.json, rtl.json, resources.json once those stages ran
RTL_DIR, SIM_DIR = "rtl", "sim"  # in the project: each core's Verilog (rtl/<core>/) and cocotb job (sim/<core>/)
JOB_FILE = "job.json"  # sim/<core>/job.json: the core top's stream ports and a first sample for its cocotb job


def core_folder(core: str) -> str:
    """The folder of an FPGA core, relative to the project."""
    return f"{CORES_DIR}/{core}"


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
