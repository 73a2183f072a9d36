"""2-D convolution (ONNX Conv, ConvInteger, QLinearConv, FusedConv): FINN's sliding-window MVAU.

Everything about the op is here: its geometry (``Conv2d.geometry``), foldings (PE output
channels, SIMD reduction elements, MMV pixels of a row, a reorder buffer where a cycle's
outputs are not whole beats), cycles (``sliding_cycles``: the line buffer's first rows, then per
output row the larger of its compute steps and its refill), fill latency, resources (the shared
dot-product rules of ``fpgaplace.hw.kernel``; the MAC pairing of ``paired_lanes``), the integer
reference (``fpgaplace.hw.reference.conv2d``), the C++ config of ``hls/ops/conv2d.j2`` and the
values of the RTL window unit (``rtl/window.v.j2``, ``fpgaplace.hw.window``) with its weight and
channel ROMs, its lanes at the layer's widths as the dense unit builds them (``window_lanes``:
XNOR, LUT or packed DSP lanes, or int8 products) and its requantizers or threshold stage. A
transposed convolution (ONNX ConvTranspose) is this kernel behind a zero-inserting front
(``transposed_window``): the conv of stride 1 over the input with zeros inserted, every cost
counted on that input (its zeros are multiplied too); in the RTL the front is a wrapper's
second module (``rtl/conv_transposed.v.j2``). Cycles are O(HO); the RTL values O(weights).
"""

from __future__ import annotations

import math
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from fpgaplace.board.model import core_family
from fpgaplace.hw import reference, threshold
from fpgaplace.hw.dense import (
    adder_tree,
    lane_code,
    lane_range,
    lane_thresholds,
    lane_values,
    lane_widths,
    weight_words,
)
from fpgaplace.hw.geometry import Fill, Folding, Geometry, Resources, Rom, RtlUnit, Unsupported
from fpgaplace.hw.kernel import (
    MAX_LINE_WIDTH,
    divisors,
    dot_bits,
    group_dsps,
    ints,
    narrow_lanes,
    probe,
    requantize_plan,
    sliding_cycles,
    tensor_shape,
    threshold_table_apart,
    window_fill,
    window_members,
)
from fpgaplace.hw.lowering import Layer
from fpgaplace.hw.memory import rom_style
from fpgaplace.hw.rtl_values import (
    DOT_ARRAYS,
    PORT_IN,
    index_bits,
    int_members,
    per_channel_arrays,
    requant_channels,
    weight_rom_module,
    weights_apart,
)
from fpgaplace.hw.window import (
    WindowKernel,
    checked_window_shape,
    line_buffer,
    probe_frame,
    spanning_lane_share,
    window_folds,
    window_logic_luts,
)
from fpgaplace.util.errors import FpgaplaceError

if TYPE_CHECKING:
    from fpgaplace.board.model import FpgaCore
    from fpgaplace.hw.lowering import LayerContext
    from fpgaplace.model.ir import Op, OpGraph




class Conv2d(WindowKernel):
    name, template, uses_dsp = "conv2d", "hls/ops/conv2d.j2", True
    window_kind = "conv"

    def geometry(self, op: Op, graph: OpGraph) -> Geometry | Unsupported:
        x, w, out = (tensor_shape(graph, t) for t in (op.inputs[0], op.inputs[1], op.outputs[0]))
        if op.inputs[1] not in graph.params:
            return Unsupported("weights are not constant")
        if x is None or w is None or out is None or len(x) != 4 or len(w) != 4:
            return Unsupported("only 2-D convolutions (4-D NCHW tensors) run on a core")
        groups = int(op.attrs.get("group", 1))
        if op.op_type == "ConvTranspose":
            transposed = transposed_window(op, x, w, out)
            if isinstance(transposed, Unsupported):
                return transposed
            window, w, (dh, dw) = transposed
            x = (x[0], x[1], window["H"], window["W"])  # the zero-inserted input the conv slides over
        else:
            dh, dw = ints(op.attrs.get("dilations"), 2, 1)
            window = window_members(op, graph, x, out, (w[2], w[3]), (dh, dw))
            if isinstance(window, Unsupported):
                return window
        cout, cin_g, kh, kw = w
        n, cin = x[0], x[1]
        pixels = n * window["HO"] * window["WO"]
        shape = {**window, "CIN": cin, "COUT": cout, "KH": kh, "KW": kw, "DH": dh, "DW": dw, "GROUPS": groups,
                 "T": threshold.count(op, graph)}
        return Geometry(
            self.name, pixels, cout, kh * kw * cin_g,
            stream_elements=max(math.prod(x), math.prod(out)),
            weights=math.prod(w),
            linebuffer_bytes=(dh * (kh - 1) + 1) * (window["W"] + window["PL"] + window["PR"]) * cin if kh > 1 else 0,
            row=window["WO"],
            macs=pixels * cout * kh * kw * cin_g,
            shape=shape,
        )

    def paired_lanes(self, g: Geometry, fold: Folding) -> int:
        """Multipliers when two int8 lanes sharing an operand share one (WP486), as the RTL pairs
        them: pixel pairs share the weight when MMV >= 2 (``ceil(MMV / 2) * PE * SIMD``), else
        channel pairs share the input in an ungrouped conv (``ceil(PE / 2) * SIMD``), else none."""
        if fold.mmv >= 2:
            return math.ceil(fold.mmv / 2) * fold.pe * fold.simd
        if fold.pe >= 2 and g.shape["GROUPS"] == 1:
            return math.ceil(fold.pe / 2) * fold.simd
        return fold.lanes

    def mac_dsps(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> int:
        """``Kernel.mac_dsps``, but packed narrow lanes of a grouped conv are one a multiplier:
        every channel reads its own group's input, so no two share one (``window_lanes``), each
        ``group_dsps`` of one product (none on Xilinx below 9 product bits: LUTs)."""
        lanes = self.unit_lanes(g, fold, core)
        if g.shape.get("GROUPS", 1) > 1 and lanes.kind == "dsp" and g.lane_bits < 8:
            return fold.simd * fold.mmv * fold.pe * group_dsps(lanes, 1, core)
        return super().mac_dsps(g, fold, core)

    def input_sharing(self, g: Geometry, fold: Folding) -> int:
        """Channels reading each input: PE, but one in a grouped conv (each channel reads its own
        group's input, ``window_lanes``)."""
        return 1 if g.shape.get("GROUPS", 1) > 1 else fold.pe

    def row_steps(self, g: Geometry, fold: Folding) -> int:
        """Compute cycles of one output row: ceil(WO/MMV) pixel groups of COUT/PE x KKG/SIMD folds."""
        return math.ceil(g.row / fold.mmv) * (g.channels // fold.pe) * (g.reduction // fold.simd)

    def input_width(self, g: Geometry, fold: Folding) -> int:
        """Input elements a beat: the narrowest width dividing an input row (W x CIN) with which
        the rows of the next output row arrive within the current row's compute steps (so the
        refill hides behind the MVAU), at most ``MAX_LINE_WIDTH``; behind a zero-inserting front
        (a transposed conv) a divisor of CIN, so that a beat is part of one pixel."""
        s = g.shape
        row = s["W"] * s["CIN"]
        fitting = [d for d in divisors(s["CIN"] if upsampled(s) else row) if d <= MAX_LINE_WIDTH]
        steps = self.row_steps(g, fold)
        return next((d for d in fitting if s["SH"] * row <= d * steps), fitting[-1])

    def reorders(self, g: Geometry, fold: Folding) -> bool:
        """Whether a cycle's MMV x PE outputs are not whole consecutive beats (fewer than every
        channel, or a row's short last group), so that a pixel group's outputs leave through a
        double buffer (kernels.h ``ConvStep``)."""
        return fold.mmv > 1 and (fold.pe < g.channels or g.row % fold.mmv != 0)

    def last_group(self, g: Geometry, fold: Folding) -> int:
        """Pixels in a row's last group."""
        return g.row - (math.ceil(g.row / fold.mmv) - 1) * fold.mmv

    def output_width(self, g: Geometry, fold: Folding) -> int:
        """Output elements a beat: PE x MMV, or with a reorder buffer the narrowest width that
        divides a group's outputs (a short group's too) and lets them leave within the next
        group's COUT/PE x KKG/SIMD steps; 0 when none does (the folding is not offered)."""
        if not self.reorders(g, fold):
            return fold.pe * fold.mmv
        group, short = fold.mmv * g.channels, self.last_group(g, fold) * g.channels
        steps = g.channels // fold.pe * (g.reduction // fold.simd)
        return next((d for d in divisors(group) if short % d == 0 and group <= d * steps), 0)

    def foldings(self, g: Geometry) -> list[Folding]:
        return [f for f in super().foldings(g) if self.output_width(g, f)]

    def cycles(self, g: Geometry, fold: Folding) -> int:
        """The line buffer's first rows, then per output row the compute steps (or the refill,
        when it takes longer), per sample (``sliding_cycles``); a reorder buffer drains its last
        group after them."""
        s = g.shape
        samples = g.pixels // (s["HO"] * s["WO"])
        row_beats = s["W"] * s["CIN"] // self.input_width(g, fold)
        drain = self.last_group(g, fold) * g.channels // self.output_width(g, fold) if self.reorders(g, fold) else 0
        return samples * (sliding_cycles(s, s["DH"] * (s["KH"] - 1) + 1, row_beats, self.row_steps(g, fold)) + drain)

    def fill(self, g: Geometry, fold: Folding) -> Fill:
        """The line buffer's first rows, then one fold (SF steps) to the first PE outputs, or
        every fold of a pixel group behind a reorder buffer; after the last input row, the last
        output row's steps and the reorder buffer's drain (``window_fill``)."""
        s = g.shape
        folds = g.reduction // fold.simd
        drain = self.last_group(g, fold) * g.channels // self.output_width(g, fold) if self.reorders(g, fold) else 0
        first = folds * (g.channels // fold.pe) + drain if self.reorders(g, fold) else folds
        row_beats = s["W"] * s["CIN"] // self.input_width(g, fold)
        return window_fill(s, s["DH"] * (s["KH"] - 1) + 1, self.cycles(g, fold), row_beats,
                           self.row_steps(g, fold) + drain, first, g.pixels // (s["HO"] * s["WO"]))

    def fill_factor(self, g: Geometry) -> float:
        """The line buffer's first rows are read before any output: with the refill just hidden
        behind the compute (``input_width``), reading one input row takes about 1/SH of an output
        row's compute, so the stage runs (HO + first rows / SH) rows' worth of compute."""
        s = g.shape
        first = max(0, min(s["H"], s["DH"] * (s["KH"] - 1) + 1 - s["PT"]))
        return (s["HO"] + first / s["SH"]) / s["HO"]

    def reference(self, config: dict, arrays: dict, inputs: list[np.ndarray], rows: int = 1) -> np.ndarray:
        c = config
        x = zero_inserted(inputs[0], c) if upsampled(c) else inputs[0].reshape(c["H"], c["W"], c["CIN"])
        window = {"stride": (c["SH"], c["SW"]), "pads": (c["PT"], c["PL"], c["PB"], c["PR"]),
                  "dilation": (c["DH"], c["DW"]), "groups": c["GROUPS"]}
        if "thresholds" in arrays:  # a threshold output stage (fpgaplace.hw.threshold)
            acc = reference.conv2d_accumulate(x, arrays["w"], arrays["bias"], zx=c["ZX"], **window)
            return threshold.multithreshold(acc, arrays["thresholds"], c["ZY"], threshold.code_step(c))
        return reference.conv2d(x, arrays["w"], arrays["bias"], arrays["mult"], arrays["shift"], zx=c["ZX"],
                                zy=c["ZY"], lo=c["LO"], hi=c["HI"], **window)

    def lower(self, ctx: LayerContext, op: Op, shape: dict) -> Layer:
        """The layer of ``op``: its config members and arrays from the QDQ graph (``fpgaplace.hw.lowering``);
        a transposed conv's weights flipped and transposed into the conv's, and its zero insertion."""
        x = ctx.source(op, op.inputs[0])
        weight = ctx.index.weight(op.inputs[1])
        channel_axis = 1 if op.op_type == "ConvTranspose" else 0
        if weight.scale.size not in (1, shape["COUT"]) or (weight.scale.size > 1 and weight.axis != channel_axis):
            raise FpgaplaceError(f"op '{op.name}': weight scales must be per tensor or per output channel")
        values = conv_weights(weight.values, shape["GROUPS"]) if channel_axis else weight.values
        w = np.transpose(values, (0, 2, 3, 1))  # [Cout, Cin/g, KH, KW] -> [Cout, KH, KW, Cin/g]
        y, arrays, output_stage = ctx.dot_output(op, x, w, weight.scale, shape["COUT"])
        config = {k: shape[k] for k in ("H", "W", "CIN", "COUT", "KH", "KW", "SH", "SW", "PT", "PL", "PB", "PR",
                                        "DH", "DW", "GROUPS", "HO", "WO", *(UPSAMPLING if upsampled(shape) else ()))}
        config.update(ZX=x.zero_point, **output_stage)
        return Layer(op.name, "conv2d", [x.name], y.name, config, arrays)

    def resources(self, g: Geometry, fold: Folding, core=None, resident: bool = True) -> Resources:
        """The dot product's resources (``Kernel.resources``), a threshold output stage's where it has
        one (``threshold``) and the window unit's own logic around narrow lanes (``window_logic``)."""
        acc_bits = dot_bits(g.reduction, g.weight_bits, g.activation_bits)
        stage = threshold.stage_resources(g, fold, acc_bits, threshold_table_apart(core), narrow_lanes(g, core))
        return super().resources(g, fold, core, resident) + stage + self.window_logic(g, fold, core)

    def window_logic(self, g: Geometry, fold: Folding, core: FpgaCore | None) -> Resources:
        """LUTs of the window unit's read lanes and line-buffer banks (``window_logic_luts``) where
        the lanes are narrow (``narrow_lanes``) on a family Vivado builds from HLS; none elsewhere:
        the int8 fit holds them, and on ECP5 the RTL op library's coefficients do. O(lanes x folds,
        cached: ``line_buffer``)."""
        family = core_family(core)
        if family.rtl_built or not narrow_lanes(g, core):
            return Resources()
        c = self.window_shape(g.shape, fold)
        banks = line_buffer(c, self.priced_input_width(g, fold)).banks
        return Resources(lut=round(family.lut_scale * window_logic_luts(c, banks, g.activation_bits)))

    def lane_scale(self, g: Geometry, fold: Folding, core: FpgaCore | None, resident: bool = True) -> float:
        """The share of ``lane_luts`` a narrow lane takes (``narrow_dot_luts``): less where the SIMD
        spans window positions (``spanning_lane_share``, its weight ROM PE x SIMD weights a word) on
        a family Vivado builds from HLS, as ``window_logic`` is priced; all of it elsewhere. O(1)."""
        if core_family(core).rtl_built:
            return 1.0
        words = math.ceil(g.weights / (fold.pe * fold.simd))
        lanes = self.unit_lanes(g, fold, core)
        return spanning_lane_share(self.window_shape(g.shape, fold), lanes, words)

    def width_members(self, widths: dict[str, Any] | None, arrays: dict[str, Any]) -> dict[str, int]:
        """The lane widths ``WB, XB, XU`` of the layer, as a dense layer's (``dense.lane_widths``):
        what the folding prices its lanes and weight memory at and C++ stores its weights at."""
        return lane_widths(widths, arrays.get("w"))

    def config_macs(self, config: dict[str, int], rows: int = 1) -> int:
        c = config
        return c["HO"] * c["WO"] * c["COUT"] * c["KH"] * c["KW"] * c["CIN"] // c["GROUPS"]

    # ---- HLS ----

    def stream_widths(self, g: Geometry, fold: Folding, inputs: int) -> tuple[list[int], int]:
        """The line buffer's share of an input row in (``input_width``), PE x MMV or the reorder
        buffer's beat out (``output_width``)."""
        return [self.input_width(g, fold)], self.output_width(g, fold)

    def hls_config(self, config: dict[str, int], g: Geometry, fold: Folding) -> dict[str, int]:
        return {**config, "PE": fold.pe, "SIMD": fold.simd, "MMV": fold.mmv, "IW": self.input_width(g, fold),
                "OW": self.output_width(g, fold)}

    def output_size(self, config: dict[str, int], arrays: dict[str, np.ndarray], rows: int = 1) -> int:
        return config["HO"] * config["WO"] * config["COUT"]

    # ---- RTL ----

    def config_geometry(self, c: dict[str, Any]) -> Geometry:
        """The geometry of a one-sample conv with the config members ``c`` (and T, thresholds per
        channel, where the config has them)."""
        pads = [c.get(p, 0) for p in ("PT", "PL", "PB", "PR")]
        shapes = {"x": (1, c["CIN"], c["H"], c["W"]), "w": (c["COUT"], c["CIN"] // c["GROUPS"], c["KH"], c["KW"]),
                  "y": (1, c["COUT"], c["HO"], c["WO"])}
        attrs = {"strides": [c["SH"], c["SW"]], "pads": pads, "dilations": [c["DH"], c["DW"]], "group": c["GROUPS"]}
        g = probe(self, "Conv", attrs, ["x", "w"], shapes, ("w",))
        return replace(g, shape={**g.shape, "T": int(c.get("T", 0))})

    def probe_layer(self, config: dict[str, Any], arrays: dict[str, Any],
                    fold: Folding) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The conv cut to ``probe_frame`` (a few output rows of one MMV pixel group each) and,
        ungrouped, to PE output channels (the weights' first PE filters): the same lanes, pairing
        and requantizers (``Kernel.probe_layer``). None behind a zero-inserting front or where the
        frame would have no input row or column."""
        c = config
        frame = probe_frame(c, fold)
        if upsampled(c) or frame is None:
            return None
        cout = fold.pe if c["GROUPS"] == 1 else c["COUT"]
        return ({**c, **frame, "COUT": cout},
                {name: (np.asarray(value)[:cout] if name in DOT_ARRAYS else value) for name, value in arrays.items()})

    def window_shape(self, config: dict[str, Any], fold: Folding) -> dict[str, int]:
        return checked_window_shape(self.name, config, {"PE": fold.pe, "SIMD": fold.simd, "MMV": fold.mmv})

    def rtl(self, config: dict[str, Any], arrays: dict[str, Any], fold: Folding, top: str, model_cycles: int,
            macs_per_dsp: int = 1, core: FpgaCore | None = None) -> RtlUnit:
        """The window unit; for a transposed conv (``upsampled``) the window unit named ``{top}_conv``
        behind its zero-inserting front (``rtl/conv_transposed.v.j2``), which takes the input itself."""
        if not upsampled(config):
            return super().rtl(config, arrays, fold, top, model_cycles, macs_per_dsp, core)
        c = int_members(config)
        unit = super().rtl(config, arrays, fold, f"{top}_conv", model_cycles, macs_per_dsp, core)
        in_e = unit.values["IN_E"]
        if c["CIN"] % in_e or c["H"] != (c["XH"] - 1) * c["UH"] + 1 or c["W"] != (c["XW"] - 1) * c["UW"] + 1:
            raise FpgaplaceError(f"rtl {top}: the zero-inserting front needs beats ({in_e}) dividing CIN={c['CIN']} "
                                 "and H, W the zero-inserted XH, XW")
        values = unit.values | {"name": top, "conv_name": f"{top}_conv", "FRONT_BEATS": c["CIN"] // in_e,
                                "index_bits_h": index_bits(c["H"]) - 1, "index_bits_w": index_bits(c["W"]) - 1,
                                "index_bits_b": index_bits(c["CIN"] // in_e) - 1}
        return RtlUnit("rtl/conv_transposed.v.j2", values, unit.roms, ((PORT_IN, in_e, c["XH"] * c["XW"] * c["CIN"]),),
                       unit.output)

    def window_input_width(self, c: dict[str, int], fold: Folding) -> int:
        g = self.config_geometry(c)
        return self.input_width(replace(g, shape={**g.shape, **{k: c[k] for k in UPSAMPLING if k in c}}), fold)

    def window_values(self, c: dict[str, int], arrays: dict[str, Any], top: str, nf: int, sf: int,
                      macs_per_dsp: int, xp: int, roms: dict[str, Rom],
                      core: FpgaCore | None = None) -> dict[str, Any]:
        """The MAC lanes (``window_lanes``), accumulator widths and the weight ROM (at the weights'
        width, ``dense.weight_words``) and channel ROM: per output fold the PE requantizers' words
        (``requant_channels``), or with a threshold stage its table (``dense.lane_thresholds``,
        ``threshold.table_words``: the dense unit's words), compared by ``rtl/threshold.v.j2`` with
        the PE x MMV dot products of a fold. O(weights)."""
        pe, simd, mmv = c["PE"], c["SIMD"], c["MMV"]
        missing = [a for a in DOT_ARRAYS if a not in arrays]
        if missing:
            raise FpgaplaceError(f"rtl conv2d: arrays lack {', '.join(missing)}")
        w = np.asarray(arrays["w"])
        if w.dtype != np.int8 or w.shape != (c["COUT"], c["KH"], c["KW"], c["CIN"] // c["GROUPS"]):
            raise FpgaplaceError(f"rtl conv2d: w must be int8 of shape (COUT, KH, KW, CIN/GROUPS), got {w.dtype} "
                                 f"{w.shape}")
        lane = window_lanes(c, w, macs_per_dsp, xp, core)
        per_channel = per_channel_arrays(arrays, c["COUT"]) | threshold.checked_table(c, arrays, c["COUT"], "conv2d")
        acc_bits, channel_words, channel_bits = requant_channels(w.reshape(c["COUT"], -1), per_channel,
                                                                c["ZX"] - lane["XOFF"], pe, "conv2d")
        dot_w = dot_bits(sf * simd, lane["WB"], lane["XB"])
        stage: dict[str, int] = {"T": 0}
        if "thresholds" in per_channel:  # the channel ROM holds thresholds in place of the requantizers' words
            stored, _, _ = lane_thresholds(c, per_channel | {"w": w}, lane)
            channel_words = threshold.table_words(stored, dot_w, pe)
            stage = {"T": int(stored.shape[1]), "TH_W": threshold.stored_bits(dot_w), "TH_LANES": pe * mmv,
                     "STEP": threshold.code_step(c)}
            channel_bits = stage["T"] * stage["TH_W"]
        roms[f"{top}_weights.mem"] = weight_words(reference.fold_weights(w, pe, simd).reshape(nf * sf, pe * simd),
                                                  lane["WB"])
        roms[f"{top}_channels.mem"] = Rom(channel_words, channel_bits * pe)
        units, cycles = requantize_plan(pe * mmv, sf) if not stage["T"] else (pe * mmv, 1)
        values = lane | stage | {
            "DOT_W": dot_w, "ACC_W": acc_bits, "RQ": units, "RQ_CYCLES": cycles, "SLICES": pe * mmv // units,
            "SLICE_BITS": index_bits(pe * mmv // units),
            "weights_file": f"{top}_weights.mem", "channels_file": f"{top}_channels.mem",
            "WEIGHTS_APART": weights_apart(c), "weights_module": weight_rom_module(top),
            "weights_attribute": rom_style(nf * sf), "channels_attribute": rom_style(nf)}
        return values

    def pipeline_latency(self, c: dict[str, int]) -> int:
        """``WindowKernel.pipeline_latency``: nine stages and one a slice of the fold's results
        through the requantizers (``requantize_plan``; one slice behind a threshold stage,
        ``c["T"]``). O(PE x MMV)."""
        results = c["PE"] * c["MMV"]
        units = results if c.get("T") else requantize_plan(results, window_folds(c)[1])[0]
        return 9 + results // units


def window_lanes(c: dict[str, int], w: np.ndarray, macs_per_dsp: int, xp: int,
                 core: FpgaCore | None) -> dict[str, Any]:
    """The window unit's MAC lanes for the members ``c`` (widths ``WB, XB, XU``, 8-bit signed where
    absent): the dense unit's lane values (``dense.lane_values``: ``lane_choice`` on ``core``, the
    cost model's decision) and ``INT8_LANES`` where an operand is 8 bits and neither is 1 (the int8
    products, narrower operands sign-extended, with the pairing ``PACK``: pixel pairs sharing the
    weight when MMV >= 2, else channel pairs of an ungrouped conv, two MACs to a DSP48E2; the op
    library's ``paired_lanes``) and the SIMD adder tree's levels over their products (``tree``,
    ``dense.adder_tree``: 16-bit int8 products). Packed narrow lanes group channels sharing an input, so a grouped
    conv's (each channel its own input, ``xp > 1``) are one a group (``Conv2d.mac_dsps``). The line
    buffer holds the lanes' XB-bit codes (``EB``, its padding ``PAD``: ZX's code), so padding reads
    ZX into the lanes: a one-line error where their width cannot hold it. O(weights)."""
    if macs_per_dsp not in (1, 2):
        raise FpgaplaceError(f"rtl conv2d: macs_per_dsp must be 1 or 2, got {macs_per_dsp}")
    lane = lane_values(c, w.reshape(w.shape[0], -1), c["PE"], macs_per_dsp, None, core, "conv2d",
                       1 if xp > 1 else c["PE"])
    xb, xu = lane["XB"], lane["XU"]
    padded = any(c.get(side, 0) for side in ("PT", "PL", "PB", "PR")) or upsampled(c)
    low, high = lane_range(xb, xu)
    if padded and (xb == 1 or not low <= c["ZX"] <= high):
        raise FpgaplaceError(f"rtl conv2d: padding reads ZX={c['ZX']}, which {xb}-bit{' unsigned' if xu else ''} "
                             f"lanes cannot hold{' (+-1)' if xb == 1 else ''}; expected an unpadded layer or ZX "
                             "in the lanes' range")
    int8_lanes = max(lane["WB"], xb) == 8 and min(lane["WB"], xb) > 1
    pack, packed = "none", 0
    if int8_lanes and macs_per_dsp == 2 and c["MMV"] >= 2:
        pack, packed = "pixel", c["MMV"] // 2 * 2
    elif int8_lanes and macs_per_dsp == 2 and c["PE"] >= 2 and xp == 1:
        pack, packed = "channel", c["PE"] // 2 * 2
    groups = [(p, 1) for p in range(c["PE"])] if xp > 1 else lane["groups"]
    product_bits = 16 if int8_lanes else lane["PW"]
    return lane | {"INT8_LANES": int8_lanes, "PW": product_bits, "tree": adder_tree(c["SIMD"], product_bits),
                   "PACK": pack, "PACKED": packed, "groups": groups, "macs_per_dsp": macs_per_dsp,
                   "EB": xb, "PAD": f"{xb}'h{lane_code(c['ZX'], xb, xu):x}"}


UPSAMPLING = ("UH", "UW", "XH", "XW")
"""A transposed conv's members: its strides (UH, UW: UH - 1 zero rows between input rows, UW - 1
zero pixels between input pixels) and its input's size (XH, XW); H and W are the zero-inserted
input's, (XH - 1) * UH + 1 and (XW - 1) * UW + 1."""


def upsampled(members: dict[str, Any]) -> bool:
    """Whether the members are a transposed conv's (zeros inserted into its input)."""
    return int(members.get("UH", 1)) > 1 or int(members.get("UW", 1)) > 1


def transposed_window(op: Op, x: tuple[int, ...], w: tuple[int, ...],
                      out: tuple[int, ...]) -> tuple[dict[str, int], tuple[int, ...], tuple[int, int]] | Unsupported:
    """A ConvTranspose as the conv a core runs: stride s inserts s - 1 zeros (the input's zero
    point) between input pixels and rows, and a conv of stride 1 with pads k - 1 - p (plus the
    output padding at the end) and the flipped, transposed weights slides over them. Its window
    members (H, W of the zero-inserted input, the UPSAMPLING members), conv weight shape and
    dilation, or why not. O(1)."""
    groups = int(op.attrs.get("group", 1))
    kh, kw = w[2], w[3]
    sh, sw = ints(op.attrs.get("strides"), 2, 1)
    pt, pl, pb, pr = ints(op.attrs.get("pads"), 4, 0)
    oh, ow = ints(op.attrs.get("output_padding"), 2, 0)
    if ints(op.attrs.get("dilations"), 2, 1) != [1, 1] or str(op.attrs.get("auto_pad", "NOTSET")) != "NOTSET":
        return Unsupported("a transposed convolution with dilations or auto_pad (expected explicit pads)")
    if max(pt, pb) > kh - 1 or max(pl, pr) > kw - 1:
        return Unsupported(f"a transposed convolution's pads {[pt, pl, pb, pr]} exceed kernel - 1")
    h, wi = (x[2] - 1) * sh + 1, (x[3] - 1) * sw + 1
    window = {"H": h, "W": wi, "SH": 1, "SW": 1, "PT": kh - 1 - pt, "PL": kw - 1 - pl, "PB": kh - 1 - pb + oh,
              "PR": kw - 1 - pr + ow, "HO": out[2], "WO": out[3], "UH": sh, "UW": sw, "XH": x[2], "XW": x[3]}
    if (h + window["PT"] + window["PB"] - kh + 1, wi + window["PL"] + window["PR"] - kw + 1) != tuple(out[2:]):
        return Unsupported(f"output {out[2]}x{out[3]} does not follow from the transposed window (output_shape)")
    return window, (w[1] * groups, w[0] // groups, kh, kw), (1, 1)


def conv_weights(w: np.ndarray, groups: int) -> np.ndarray:
    """A ConvTranspose's weights ``[Cin, Cout/g, KH, KW]`` as the conv's that slides over the
    zero-inserted input: ``[Cout, Cin/g, KH, KW]``, each group's in and out channels swapped and the
    kernel flipped. O(weights)."""
    cin, cout_g, kh, kw = w.shape
    grouped = w.reshape(groups, cin // groups, cout_g, kh, kw).transpose(0, 2, 1, 3, 4)
    return np.ascontiguousarray(grouped.reshape(groups * cout_g, cin // groups, kh, kw)[:, :, ::-1, ::-1])


def zero_inserted(x: np.ndarray, c: dict[str, Any]) -> np.ndarray:
    """The stream ``x`` of an ``[XH, XW, CIN]`` input with UH - 1 rows and UW - 1 pixels of the zero
    point ZX between its rows and pixels: ``[H, W, CIN]``. O(H * W * CIN)."""
    up = np.full((c["H"], c["W"], c["CIN"]), c["ZX"], dtype=np.int8)
    up[::c["UH"], ::c["UW"]] = np.asarray(x).reshape(c["XH"], c["XW"], c["CIN"])
    return up
