#!/usr/bin/env python3
"""Host driver of an fpgaplace project on an ECP5 board: run the model over the board's USB UART
like an onnxruntime session.

The board has no CPU: its top (``ecp5/fp_top.v``) receives one sample's int8 bytes on the UART,
8N1 at the baud compile chose, runs every op on the cores and sends the result's bytes back. The
driver reads only ``host/uart.json`` (the baud, the model input and output names and the two
boundary tensors the UART carries, from design.json) and ``host/tensors.py``; it needs numpy
and pyserial, not fpgaplace.

``run({input: array})`` quantizes the float input as QuantizeLinear does (``clip(rint(x / scale)
+ zp)``), sends it in the core's stream order (channels last per sample), reads as many bytes as
the output holds (a timeout is a one-line ``DriverError``) and returns ``{output: array}``
dequantized, ``(q - zp) * scale``. ``run_many`` runs samples one after the other (the board
holds one sample in its input FIFO) and reports the frames per second.

Command line: ``python3 host/uart_driver.py --port /dev/ttyUSB0 --self-test [--json]`` runs
``host/samples.npz`` (inputs and the outputs onnxruntime computed for them at compile time) and
passes when every output is within one quantization step.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

HOST = Path(__file__).resolve().parent
sys.path.insert(0, str(HOST))
from tensors import DriverError, dequantize, from_stream, quantize, to_stream  # noqa: E402  (host/tensors.py)

UART_FILE, SAMPLES_FILE = "uart.json", "samples.npz"
BYTE_BITS = 10  # 8N1: a start bit, eight data bits, a stop bit
TIMEOUT_MARGIN_S = 2.0  # beyond the bytes' time on the wire: the USB bridge's latency and the fabric


class UartDriver:
    """The model on the board behind ``port`` (a device path, or an open pyserial-like port)."""

    def __init__(self, port, host: Path = HOST, timeout: float | None = None) -> None:
        path = Path(host) / UART_FILE
        try:
            self.config = json.loads(path.read_text())
        except (OSError, ValueError) as error:
            raise DriverError(f"{path}: unreadable ({error}); expected the UART description compile writes") from None
        self.input, self.output = self.config["input"], self.config["output"]
        self.in_bytes = int(np.prod(self.input["sample_shape"]))
        self.out_bytes = int(np.prod(self.output["sample_shape"]))
        wire_s = (self.in_bytes + self.out_bytes) * BYTE_BITS / self.config["baud"]
        self.timeout = timeout if timeout is not None else wire_s + TIMEOUT_MARGIN_S
        self.fps = 0.0
        if isinstance(port, str):
            import serial  # pyserial

            try:
                port = serial.Serial(port, self.config["baud"], timeout=self.timeout)
            except (serial.SerialException, OSError) as error:
                raise DriverError(f"{port}: cannot open the serial port ({error})") from None
        self.port = port

    def close(self) -> None:
        self.port.close()

    def _exchange(self, data: bytes) -> bytes:
        """Send one sample's bytes and read its result's, within the timeout."""
        self.port.reset_input_buffer()
        self.port.write(data)
        self.port.flush()
        received = b""
        deadline = time.monotonic() + self.timeout
        while len(received) < self.out_bytes and time.monotonic() < deadline:
            received += self.port.read(self.out_bytes - len(received))
        if len(received) < self.out_bytes:
            raise DriverError(f"{self.port.name}: {len(received)} of {self.out_bytes} result bytes within "
                              f"{self.timeout:.1f} s; expected the board to answer (bitstream loaded? baud "
                              f"{self.config['baud']}?)")
        return received

    def run(self, inputs: dict) -> dict:
        """One call of the model: {input name: array} -> {output name: array}."""
        return self.run_many([inputs], report=False)[0]

    def run_many(self, samples: list[dict], report: bool = True) -> list[dict]:
        """Calls one after the other; prints the frames per second when ``report``."""
        name, output = self.config["model_input"], self.config["model_output"]
        results = []
        start = time.perf_counter()
        for sample in samples:
            if name not in sample:
                raise DriverError(f"input '{name}' is missing; expected an array of shape {self.input['shape']}")
            array = np.asarray(sample[name])
            if array.size != np.prod(self.input["shape"]):
                raise DriverError(f"input '{name}': shape {list(array.shape)}; expected {self.input['shape']}")
            q = array if array.dtype == np.int8 else quantize(array, self.input["scale"], self.input["zero_point"])
            streams = []
            for part in to_stream(q.reshape(self.input["shape"]), self.input):
                reply = self._exchange(part.astype(np.int8).tobytes())
                streams.append(np.frombuffer(reply, dtype=np.int8))
            values = from_stream(streams, self.output)
            results.append({output: dequantize(values, self.output["scale"], self.output["zero_point"])})
        seconds = time.perf_counter() - start
        self.fps = len(samples) / seconds if seconds > 0 else float("inf")
        if report:
            print(f"{len(samples)} samples in {seconds:.3f} s: {self.fps:.1f} fps", file=sys.stderr)
        return results


def self_test(driver: UartDriver, host: Path = HOST) -> dict:
    """``host/samples.npz`` through the board: the largest error in quantization steps."""
    arrays = np.load(Path(host) / SAMPLES_FILE)
    name, output = driver.config["model_input"], driver.config["model_output"]
    inputs, expected = arrays[f"input.{name}"], arrays[f"expected.{output}"]
    got = driver.run_many([{name: x} for x in inputs], report=False)
    step = driver.config["output_scales"].get(output, driver.output["scale"])
    worst = max(float(np.max(np.abs(g[output].reshape(e.shape) - e))) / step
                for g, e in zip(got, expected, strict=True))
    return {"samples": len(inputs), "max_error_lsb": worst, "fps": driver.fps, "passed": worst <= 1.0 + 1e-6}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Run the project's model on its ECP5 board over the UART.")
    parser.add_argument("--port", required=True, help="the board's serial device, e.g. /dev/ttyUSB0")
    parser.add_argument("--self-test", action="store_true", help="run host/samples.npz and compare")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    try:
        driver = UartDriver(args.port)
        result = self_test(driver) if args.self_test else {"fps": None}
    except DriverError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(result) if args.json else
          f"{result.get('samples', 0)} samples, max error {result.get('max_error_lsb', 0):.2f} LSB, "
          f"{'passed' if result.get('passed') else 'FAILED'}")
    return 0 if result.get("passed", True) else 1


if __name__ == "__main__":
    raise SystemExit(main())
