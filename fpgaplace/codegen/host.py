"""The project's host code: the PYNQ driver (or an ECP5 board's UART driver) and what it reads
besides design.json and split/.

``host/`` gets
* ``tensors.py``: the quantization and stream order both drivers share (copied unchanged);
* on an ECP5 board (no CPU, no PYNQ) ``uart_driver.py`` (``hls_templates/host/uart_driver.py``,
  copied unchanged, pyserial: ``UartDriver.run``/``run_many`` and ``--port DEV --self-test``) and
  ``uart.json`` (the baud, the model input and output names, the boundary tensors the UART
  carries and the output's quantization step) instead of the next two;
* ``driver.py``: the generic driver (``hls_templates/host/driver.py``, copied unchanged): a
  ``Driver`` class with ``run``/``run_many`` and ``python3 host/driver.py --self-test``;
* ``hardware.json``: the block design's cell names the driver looks up in the overlay (each
  core's HLS IP and the DMA of each of its streams, ``fpgaplace.project.layout``), the bitstream
  (as the build scripts name it), whether it is an Alveo card, the nodes with cores, the
  quantization step of every dequantized int8 graph output, and per core its weight file;
* ``samples.npz``: ``SAMPLE_COUNT`` seeded random inputs (``fpgaplace.flow.split.random_inputs`` with
  seeds 0, 1, ..., as ``fpgaplace csim`` draws them) as ``input.<name>`` and the outputs
  onnxruntime computes for them from the whole QDQ model as ``expected.<name>``, one row per call;
* ``weights_<core>.bin``: the weight bytes of a core that streams them from DRAM over m_axi (int8,
  low-bit ones packed at their width; a copy of the core's ``weights.bin``, the bytes its C
  simulation embeds).

O(model run x SAMPLE_COUNT) for the expected outputs.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import onnx

from fpgaplace.project.board import is_alveo, is_ecp5, project_board
from fpgaplace.project.layout import (
    DRIVER_FILE,
    HARDWARE_FILE,
    HOST_DIR,
    SAMPLES_FILE,
    TENSORS_FILE,
    UART_DRIVER_FILE,
    UART_FILE,
    WEIGHTS_FILE,
    bitstream_files,
    cell_name,
    core_ip_instance,
    dma_instance,
)
from fpgaplace.project.record import Core, DesignRecord
from fpgaplace.util.errors import FpgaplaceError
from fpgaplace.util.templates import template_dir

SAMPLE_COUNT = 4


def _template_dir() -> Path:

    return template_dir() / "host"


def streamed_weights(folder: Path, record: Core) -> np.ndarray:
    """The weights a core streams: its ``weights.bin``, the bytes its C simulation embeds and the
    Vitis HLS testbench reads."""
    path = folder / record.folder / WEIGHTS_FILE
    if not path.is_file():
        raise FpgaplaceError(f"{path}: missing; expected the weights of a core that streams them")
    values = np.fromfile(path, dtype=np.int8)
    if values.size < record.streamed_weight_bytes:
        raise FpgaplaceError(f"{path}: {values.size} bytes; expected {record.streamed_weight_bytes}")
    return values[: record.streamed_weight_bytes]


def _hardware(document: DesignRecord, folder: Path) -> dict:
    nodes = list(dict.fromkeys(c.node for c in document.cores)) or ["node0"]
    alveo = is_alveo(document)
    bitstream = bitstream_files(len(nodes), nodes[0], alveo)[0]
    cores = {}
    for record in document.cores:
        name = record.name
        entry = {"ip": core_ip_instance(name), "dma": {t.port: dma_instance(name, t.port) for t in record.ports},
                 "weights": None}
        if record.streamed_weight_bytes > 0:
            entry["weights"] = f"weights_{cell_name(name)}.bin"
            streamed_weights(folder, record).tofile(folder / HOST_DIR / entry["weights"])
        cores[name] = entry
    return {"bitstream": bitstream, "alveo": alveo, "nodes": nodes, "cores": cores, "samples": SAMPLES_FILE}


def _samples(document: DesignRecord, folder: Path) -> tuple[dict[str, np.ndarray], dict[str, float]]:
    """The sample inputs, their expected outputs (stacked, one row per call) and the output steps."""
    from fpgaplace.hw.qdq import output_scales
    from fpgaplace.util import onnxrt
    from fpgaplace.util.onnxrt import random_inputs

    model = onnx.load(str(folder / document.model.file))
    session = onnxrt.session(model, f"model '{model.graph.name}'")  # one session for every sample
    names = [output.name for output in model.graph.output]
    arrays: dict[str, list[np.ndarray]] = {}
    for seed in range(SAMPLE_COUNT):
        feed = random_inputs(model, seed)
        outputs = dict(zip(names, session.run(names, feed), strict=True))
        for name, value in [*((f"input.{k}", v) for k, v in feed.items()),
                            *((f"expected.{k}", v) for k, v in outputs.items())]:
            arrays.setdefault(name, []).append(value)
    return {name: np.stack(values) for name, values in arrays.items()}, output_scales(model)


def _uart(document: DesignRecord, baud: int, arrays: dict[str, np.ndarray]) -> dict:
    """What the UART driver needs: the baud, the model's input and output names (as the samples
    have them) and the boundary tensors the UART carries (design.json's, of the cores the host
    feeds and drains)."""
    produced = {name for core in document.cores for t in core.outputs for name in t.names}
    consumed = {name for core in document.cores for t in core.inputs for name in t.names}
    source = next(t for core in document.cores for t in core.inputs if not t.names & produced)
    result = next(t for core in document.cores for t in core.outputs if not t.names & consumed)
    names = {kind: [key.split(".", 1)[1] for key in arrays if key.startswith(f"{kind}.")]
             for kind in ("input", "expected")}
    return {"baud": baud, "model_input": names["input"][0], "model_output": names["expected"][0],
            "input": source.to_json(), "output": result.to_json()}


def write_host_driver(document: DesignRecord, folder: Path) -> None:
    """Write ``host/`` (module docstring) of the project whose ``design.json`` is ``document``
    into ``folder``: on an ECP5 board (no CPU, no PYNQ) the UART driver ``uart_driver.py`` and
    ``uart.json`` instead of the PYNQ driver and ``hardware.json``."""
    host = Path(folder) / HOST_DIR
    host.mkdir(exist_ok=True)
    shutil.copyfile(_template_dir() / Path(TENSORS_FILE).name, Path(folder) / TENSORS_FILE)
    arrays, scales = _samples(document, Path(folder))
    np.savez(host / SAMPLES_FILE, **arrays)
    if is_ecp5(document):
        shutil.copyfile(_template_dir() / Path(UART_DRIVER_FILE).name, Path(folder) / UART_DRIVER_FILE)
        uart = _uart(document, project_board(document).ecp5.baud, arrays)
        uart["output_scales"] = {name: float(scale) for name, scale in scales.items()}
        (host / UART_FILE).write_text(json.dumps(uart, indent=2) + "\n")
        return
    shutil.copyfile(_template_dir() / Path(DRIVER_FILE).name, Path(folder) / DRIVER_FILE)
    hardware = _hardware(document, Path(folder))
    hardware["output_scales"] = {name: float(scale) for name, scale in scales.items()}
    (host / HARDWARE_FILE).write_text(json.dumps(hardware, indent=2) + "\n")
