"""The stream testbench's Verilog harness (``fpgaplace.sim.harness``, hls_templates/rtl/stream_harness.v.j2)
and the choice of RTL simulator (``fpgaplace.sim.rtl.resolve``).

The harness is checked on a unit whose timing is known by hand: a one-beat register slice that
adds one to each element (``ECHO``). Back to back it passes a beat a cycle, so vector v's last
beat leaves at cycle (v + 1) x beats; under random gaps and backpressure every element still
arrives, in order, and Icarus and Verilator, given the same seed, see the same draws and so the
same cycles."""

from __future__ import annotations

import numpy as np
import pytest

from fpgaplace.sim import harness
from fpgaplace.sim.rtl import AUTO, SPEEDS, resolve, run_cocotb, stream_phases
from fpgaplace.util.errors import FpgaplaceError

ELEMS = 2  # int8 elements a beat
ECHO = """module echo (
  input  wire ap_clk, input wire ap_rst_n,
  input  wire [15:0] s_axis_tdata, input wire s_axis_tvalid, output wire s_axis_tready,
  output reg  [15:0] m_axis_tdata, output reg m_axis_tvalid, input wire m_axis_tready
);
  assign s_axis_tready = ap_rst_n & (!m_axis_tvalid | m_axis_tready);
  always @(posedge ap_clk) begin
    if (!ap_rst_n) m_axis_tvalid <= 1'b0;
    else if (s_axis_tready) begin
      m_axis_tvalid <= s_axis_tvalid;
      m_axis_tdata <= {s_axis_tdata[15:8] + 8'd1, s_axis_tdata[7:0] + 8'd1};
    end
  end
endmodule
"""


def echo_job(vectors: np.ndarray, steady: int, cycle_limit: int = 100_000) -> dict:
    length = vectors.shape[1]
    return {"inputs": [{"port": "s_axis", "elems": ELEMS, "length": length}],
            "outputs": [{"port": "m_axis", "elems": ELEMS, "length": length}],
            "cycle_limit": cycle_limit, "phases": stream_phases([vectors], steady)}


def run_echo(tmp_path, simulator: str, vectors: np.ndarray, steady: int, **job) -> list[dict]:
    folder = tmp_path / simulator
    folder.mkdir()
    (folder / "echo.v").write_text(ECHO)
    return run_cocotb("echo", [folder / "echo.v"], folder, echo_job(vectors, steady, **job), seed=7,
                      simulator_name=simulator)


def wrapped_plus_one(values: np.ndarray) -> list[int]:
    return (((values.astype(np.int64) + 1 + 128) % 256) - 128).reshape(-1).tolist()


def test_the_harness_streams_every_element_and_times_each_vector_on_both_simulators(tmp_path):
    rng = np.random.default_rng(3)
    vectors = rng.integers(-128, 128, size=(4, 12), dtype=np.int64)
    vectors[0, :2] = [127, -128]  # the wrap of int8 and the sign of the high element
    steady = 5
    beats = vectors.shape[1] // ELEMS
    results = {simulator: run_echo(tmp_path, simulator, vectors, steady) for simulator in ("icarus", "verilator")}
    for result in results.values():
        random_phase, steady_phase = result
        assert random_phase["outputs"][0] == wrapped_plus_one(vectors)
        assert steady_phase["outputs"][0] == wrapped_plus_one(np.resize(vectors, (steady, vectors.shape[1])))
        assert steady_phase["done_cycles"] == [(v + 1) * beats for v in range(steady)]
        assert steady_phase["cycles"] == steady * beats + 1
        assert random_phase["done_cycles"][-1] > len(vectors) * beats  # the gaps and backpressure cost cycles
    assert results["icarus"] == results["verilator"]


def test_outputs_short_of_the_cycle_limit_are_one_line(tmp_path):
    vectors = np.zeros((2, 8), dtype=np.int64)
    with pytest.raises(FpgaplaceError) as caught:
        run_echo(tmp_path, "icarus", vectors, 3, cycle_limit=3)
    message = str(caught.value)
    assert "\n" not in message and message.startswith("rtl: echo, phase random: m_axis gave ") and "within 3" in message


def test_a_job_without_phases_is_one_line(tmp_path):
    with pytest.raises(FpgaplaceError, match=r"the job for echo has no phases; expected inputs, outputs"):
        harness.write("echo", {"inputs": [], "outputs": [], "cycle_limit": 9}, tmp_path, 0)


def test_beats_pack_element_i_in_bits_8i_and_read_back():
    words = harness.beat_hex([[1, -1, 2], [3, 4, -128]], 2)
    assert words == ["ff01", "0002", "0403", "0080"]  # a vector's last beat is short: zero above
    (tmp_path_lines) = [*words, harness.PHASE_END]
    spec = {"port": "m", "elems": 2, "length": 4}
    assert harness._elements(tmp_path_lines, spec, "steady") == [1, -1, 2, 0, 3, 4, -128, 0]
    with pytest.raises(FpgaplaceError, match="unknown value"):
        harness._elements(["0x01"], spec, "steady")


def test_auto_takes_icarus_for_short_runs_and_verilator_for_long_ones(monkeypatch):
    monkeypatch.delenv("FPGAPLACE_RTL_SIMULATOR", raising=False)
    size = 4000.0
    icarus, verilator = SPEEDS["icarus"], SPEEDS["verilator"]
    crossing = ((verilator.build_s + verilator.build_s_per_size * size
                 - icarus.build_s - icarus.build_s_per_size * size)
                / (icarus.run_s_per_cycle + icarus.run_s_per_size_cycle * size
                   - verilator.run_s_per_cycle - verilator.run_s_per_size_cycle * size))
    assert crossing > 0
    assert resolve(None, size, crossing / 2) == "icarus"
    assert resolve(AUTO, size, crossing * 2) == "verilator"
    assert resolve("icarus", size, crossing * 2) == "icarus"
    monkeypatch.setenv("FPGAPLACE_RTL_SIMULATOR", "verilator")
    assert resolve(None, size, 1.0) == "verilator"
    with pytest.raises(FpgaplaceError, match="expected one of icarus, verilator, auto, got 'xcelium'"):
        resolve("xcelium", size, 1.0)


def test_the_forecast_reads_in_seconds_then_minutes():
    from fpgaplace.sim.rtl_project import duration

    assert (duration(38.4), duration(89), duration(919)) == ("38 s", "89 s", "15 min")
