"""Run the RTL testbench of every core of this project (cocotb runner, Icarus Verilog).

Usage: python sim/run_rtl.py   (from the project folder; needs fpgaplace, cocotb and iverilog)
Each sim/<core>/job.json streams random samples through rtl/<core>/<core>_rtl.v with random
gaps and backpressure, then back to back; `fpgaplace sim . --rtl` also checks every output
against the integer reference and writes results/rtl.json.
"""

from pathlib import Path

from fpgaplace.sim.rtl_project import simulate_project_rtl

if __name__ == "__main__":
    print(simulate_project_rtl(Path(__file__).resolve().parent.parent, progress=print).to_json())
