"""Independent reference: vendor capacities of the boards' FPGA parts.

Typed in from /work/shared/boards-reference.md (AMD/Xilinx product selection guides and the Alveo
data sheets DS962/DS963/DS965), not from the board files, so a wrong number in either shows up.
The U280 LUT/FF counts, unconfirmed in that table, were checked against a second source
(1,303,680 LUTs / 2,607,360 FFs; see boards/alveo-u280.yaml).
The ECP5 parts are from Lattice's family data sheet FPGA-DS-02012 (Table 1.1; LUT4 and FF counts
as nextpnr-ecp5 reports them), block RAM as 18 Kbit EBR / 2 (36 Kbit blocks).
"""

PARTS: dict[str, dict[str, int]] = {
    "xc7z020clg400-1": {"lut": 53_200, "ff": 106_400, "dsp": 220, "bram36": 140, "uram": 0, "slrs": 1},
    "xczu3eg-sbva484-1-i": {"lut": 70_560, "ff": 141_120, "dsp": 360, "bram36": 216, "uram": 0, "slrs": 1},
    "xck26-sfvc784-2LV-c": {"lut": 117_120, "ff": 234_240, "dsp": 1_248, "bram36": 144, "uram": 64, "slrs": 1},
    "xczu7ev-ffvc1156-2-e": {"lut": 230_400, "ff": 460_800, "dsp": 1_728, "bram36": 312, "uram": 96, "slrs": 1},
    "xczu9eg-ffvb1156-2-e": {"lut": 274_080, "ff": 548_160, "dsp": 2_520, "bram36": 912, "uram": 0, "slrs": 1},
    "xcu50-fsvh2104-2-e": {
        "lut": 871_680, "ff": 1_743_360, "dsp": 5_952, "bram36": 1_344, "uram": 640, "slrs": 2,
    },
    "xcu250-figd2104-2L-e": {
        "lut": 1_728_000, "ff": 3_456_000, "dsp": 12_288, "bram36": 2_688, "uram": 1_280, "slrs": 4,
    },
    "xcu280-fsvh2892-2L-e": {
        "lut": 1_303_680, "ff": 2_607_360, "dsp": 9_024, "bram36": 2_016, "uram": 960, "slrs": 3,
    },
    "LFE5U-85F-6BG381C": {"lut": 83_640, "ff": 83_640, "dsp": 156, "bram36": 208 // 2, "uram": 0, "slrs": 1},
    "LFE5U-45F-6BG381C": {"lut": 43_848, "ff": 43_848, "dsp": 72, "bram36": 108 // 2, "uram": 0, "slrs": 1},
}

# The part each shipped single board carries.
BOARD_PARTS: dict[str, str] = {
    "pynq-z1": "xc7z020clg400-1",
    "pynq-z2": "xc7z020clg400-1",
    "ultra96-v2": "xczu3eg-sbva484-1-i",
    "kv260": "xck26-sfvc784-2LV-c",
    "zcu104": "xczu7ev-ffvc1156-2-e",
    "zcu104-dpu": "xczu7ev-ffvc1156-2-e",
    "zcu102": "xczu9eg-ffvb1156-2-e",
    "alveo-u50": "xcu50-fsvh2104-2-e",
    "alveo-u250": "xcu250-figd2104-2L-e",
    "alveo-u280": "xcu280-fsvh2892-2L-e",
    "ulx3s-85f": "LFE5U-85F-6BG381C",
    "ulx3s-45f": "LFE5U-45F-6BG381C",
}

# Shipped clusters: name -> (member board, node count).
CLUSTERS: dict[str, tuple[str, int]] = {
    "cluster-2x-zcu104": ("zcu104-dpu", 2),
}
