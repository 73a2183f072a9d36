// fpgaplace int8 dataflow kernels (namespace fp), bit-exact with fpgaplace/hw/reference.py.
//
// Semantics: see the int8 hardware spec (fpgaplace.hw.quant / fpgaplace.hw.reference). Every
// kernel processes one sample per call. Streams carry *beats* of N int8 elements
// (fp::beat<N>): consecutive elements of the tensor in channels-last order (for h, for w, for
// c), so a beat of a width dividing W*C never straddles a row. Each kernel is a template on a
// config struct of `static constexpr int` members, checked by static_assert, and its widths are
// the folding's: a kernel reads and writes at most one beat per stream per cycle.
//
// Kernels and config members (STAGE: the stage's index, for the iteration counters below):
//   conv2d<C>(in, out, w, bias, mult, shift)  H W CIN COUT KH KW SH SW PT PL PB PR DH DW GROUPS
//                                            HO WO ZX ZY LO HI PE SIMD MMV IW OW STAGE (WB: weights
//                                            packed at WB bits, detail::weight)
//                                            in: beat<IW>, out: beat<OW> (PE*MMV, but see ConvStep)
//   conv2d_transposed<C>(in, out, w, ...)     conv2d's, UH UW XH XW (a zero-inserting front, IW | CIN)
//   dense<C>(in, out, w, bias, mult, shift)   K N ZX ZY LO HI PE SIMD STAGE (WB: weights packed at WB
//                                            bits, detail::weight); in beat<SIMD>, out beat<PE>
//   maxpool<C>(in, out), avgpool<C>(in, out)  H W C KH KW SH SW PT PL PB PR HO WO ZX ZY LO HI M S
//                                            PE MMV STAGE (avgpool: TIE too, default 0); in and out
//                                            beat<PE*MMV>
//   add<C>(a, b, out)                         SIZE ZA MA ZB MB S ZY LO HI L STAGE; beats of L
//   requant<C>(in, out)                       SIZE ZX M S ZY LO HI L STAGE; beats of L
//   affine<C>(in, out, mult, offset)          SIZE C ZX S ZY LO HI L STAGE; beats of L, mult[C], offset[C]
//   table<C>(in, out, values)                 SIZE L STAGE; beats of L, values[256]
//   embedding<C>(in, out, table)              SIZE E ROWS L STAGE; in beat<1> (a byte index), out beat<L>,
//                                            table[ROWS * E]
//   onehot<C>(in, out)                        SIZE E ROWS ON OFF L STAGE; in beat<1> (a byte index), out beat<L>
//   softmax<C>(in, out, exp_table)            SIZE N MY SY ZY LO HI L DIV STAGE; beats of L, exp_table[256]
//   layernorm<C>(in, out, mult, offset)       SIZE N E S ZY LO HI L SQRT DIV STAGE; beats of L, mult[N],
//                                            offset[N]
//   matmul<C>(a, b, out)                      HEADS M K N ZA ZB MQ SQ ZY LO HI PE SIMD STAGE; a beat<SIMD>,
//                                            b and out beat<PE>
//   shuffle<C>(in, out, perm)                 PIXELS C ZX M S ZY LO HI L STAGE; beats of L, perm[C]
//   reorder<C>(in, out)                       SIZE XR XC XE ZX M S ZY LO HI L STAGE; beats of L
//   lrn<C>(in, out, table)                    PIXELS C BEFORE AFTER ZX ZY LO HI F MBITS ENTRIES L STAGE;
//                                            beats of L, table[ENTRIES]
//   lstm_cell_first<C>(i, g, out), lstm_cell_step<C>(f, w, i, g, out), lstm_cell_narrow<C>(w, out)
//                                            SIZE MODE ZI ZG MB S (ZF MA) / ZY LO HI, L STAGE; int8 operands
//                                            beats of L, the int16 cell state w beats of 2L (low byte first)
//   binary<C>(x, g, out)                      SIZE C MODE OP ZX MX SX ZG MG SG S ZY LO HI L G BUFFER STAGE; x and
//                                            out beats of L, g beats of G (same shape, per channel, per pixel)
//   concat2<C>(in0, in1, out)                 PIXELS C0 C1 Z0 M0 S0 Z1 M1 S1 ZY LO HI L STAGE
//   fork<C>(in, out0, out1)                   SIZE L STAGE
//   broadcast<C>(values, out)                 SIZE C L STAGE (a per-channel constant, every pixel)
//   regroup<C>(in, out)                       SIZE A B STAGE (beats of A elements -> beats of B)
//
// Folding (the op library's, fpgaplace/hw/kernels.py): a dot-product stage computes PE output
// channels x SIMD reduction elements of MMV output pixels per cycle (a row's last group may be
// short; with PE < COUT or a short group, a group's outputs leave through a reorder buffer, OW a
// beat). A lane stage
// handles PE channels of MMV pixels (MMV > 1 only with PE == C). Every loop below that runs per
// element or per beat is pipelined at II=1, with the lanes unrolled; its trip count is what the
// cycle model counts:
//   conv2d  fill + sum over output rows of max(input beats read for the next row,
//           ceil(WO/MMV) * COUT/PE * KKG/SIMD)    (the MVAU overlaps the line buffer's refill)
//           + the last group's beats when a reorder buffer drains it
//   dense   N/PE * K/SIMD                            (the input vector is read during the first fold)
//   matmul  HEADS * (max(M*K/SIMD, K*N/PE) + M * N/PE * K/SIMD)   (both operands of a head buffered first)
//   pools   fill + sum over output rows of max(input beats, WO/MMV * C/PE); global: H*W*C/L + C/L
//   add, requant, affine, fork, broadcast, lstm_cell: SIZE/L; binary: SIZE/L (+ C/G gate beats per channel);
//   concat2: PIXELS*(C0+C1)/L; regroup: about SIZE/min(A,B); shuffle, lrn: (PIXELS + 1) * C/L;
//   reorder: SIZE/L (in and out overlap, a ping-pong buffer); softmax: ROWS * (3 * N/L + DIV);
//   layernorm: ROWS * (2 * N/L + SQRT + DIV)
// Compiled with FP_COUNT_TICKS, each such loop counts its iterations in fp::tick_counters()[STAGE],
// so a C simulation measures every stage's cycles at II=1 beside the model's estimate.
//
// Additions to the spec (no deviation in names or signatures):
// * Weight order. `w` of conv2d/dense is NOT the plain [COUT][KH][KW][CIN/GROUPS] / [N][K] order
//   but that matrix folded as [COUT/PE][KK/SIMD][PE][SIMD] (KK = KH*KW*CIN/GROUPS, or K), so
//   the PE*SIMD weights one cycle multiplies are adjacent and `ARRAY_PARTITION cyclic
//   factor=PE*SIMD` gives each lane its own bank. fpgaplace.hw.reference.fold_weights produces
//   it. bias, mult and shift are in plain output-channel order (cyclic factor=PE banks).
// * Conv and windowed pooling keep R + SH rows of their input in a line buffer (R = DH*(KH-1)+1
//   window rows plus the SH rows the next output row needs), so the rows of output row ho+1
//   stream in while row ho is computed.
// * Accumulation: each dot product in int32 (static_assert that KK*255*128 < 2**31), plus the
//   int32 bias in int64; requantization in int64, as fp::requantize.
// The weight/bias/multiplier/shift arrays are declared with their sizes (they still decay to
// pointers, so callers pass arrays or pointers as before) so that HLS can partition them.
// Under plain g++ the `#pragma HLS` lines are ignored (-Wno-unknown-pragmas). No dynamic memory.
// * C-simulation shortcut (FP_CSIM_FAST: plain g++, neither __SYNTHESIS__ nor FP_CSIM_LITERAL
//   defined). A convolution's MVAU step re-reads the line buffer once per fold, which g++ cannot
//   vectorize; instead, at the first step of each output row, ConvStep computes the whole row's
//   outputs as contiguous dot products (the window of each pixel gathered once, the weights
//   unfolded once per call, both zero-padded to a multiple of 16 terms), and every step then
//   hands out the outputs the literal step would have requantized at that step. The loops, their
//   trip counts (FP_COUNT_TICKS), the stream reads and writes and their order are the same; the
//   results are too: the window rows do not change during an output row's steps (the rows read
//   meanwhile go to the other SH slots of the line buffer), and an int32 sum of the same terms
//   does not depend on their order since no partial sum can overflow (MAX_DOT_LENGTH). Vitis HLS
//   synthesizes the literal step; -DFP_CSIM_LITERAL runs it under g++ too (the tests compare both).
#ifndef FPGAPLACE_KERNELS_H
#define FPGAPLACE_KERNELS_H

#include <cstdint>
#include <type_traits>

#include "hls_compat.h"

#if !defined(__SYNTHESIS__) && !defined(FP_CSIM_LITERAL)
#define FP_CSIM_FAST 1
#else
#define FP_CSIM_FAST 0
#endif

namespace fp {

// ---------------------------------------------------------------- requantization

namespace detail {

// clip(round_half_even(v / 2**s) + zp, lo, hi): arithmetic shift (floor), remainder test for
// round half to even (the remainder as v - q*2**s, which never overflows since q*2**s <= v). A
// remainder less than 2**tie from the midpoint counts as the midpoint (tie 0: the midpoint alone;
// an average's band, fpgaplace.hw.quant.tie_bits). T: int8_t, or int16_t for the LSTM's wide cell state.
template <class T = int8_t>
inline T shift_round_clip(int64_t v, int s, int zp, int lo, int hi, int tie = 0) {
#pragma HLS INLINE
  const int64_t q = v >> s;  // gcc: arithmetic shift of a negative int64_t
  const int64_t r = v - q * (int64_t(1) << s);
  const int64_t half = int64_t(1) << (s - 1);
  const int64_t band = int64_t(1) << tie;
  const bool tied = r - half < band && half - r < band;
  const bool round_up = tied ? (q & 1) != 0 : r > half;
  int64_t y = q + (round_up ? 1 : 0) + zp;
  if (y < lo) y = lo;
  if (y > hi) y = hi;
  return static_cast<T>(y);
}

constexpr bool is_int8(int v) { return v >= -128 && v <= 127; }
constexpr bool valid_output(int zy, int lo, int hi) { return is_int8(zy) && -128 <= lo && lo <= hi && hi <= 127; }
constexpr bool valid_rescale(int m, int s) { return m >= 0 && s >= 1 && s <= 62; }
constexpr int out_size(int size, int k, int stride, int before, int after, int dilation) {
  return (size + before + after - dilation * (k - 1) - 1) / stride + 1;
}
constexpr int max_int(int a, int b) { return a > b ? a : b; }
constexpr int gcd(int a, int b) { return b == 0 ? a : gcd(b, a % b); }
constexpr int min_int(int a, int b) { return a < b ? a : b; }
// Longest dot product whose int32 sum cannot overflow: |(x - zx) * w| <= 255 * 128.
constexpr int MAX_DOT_LENGTH = 2147483647 / (255 * 128);

// Weight idx of an array stored at WB bits a weight (fpgaplace.codegen.render.packed_weights):
// int8 as is at WB = 8; at 1, 2 or 4 bits 8/WB weights a byte, weight idx in bits
// (idx % (8/WB)) * WB of byte idx / (8/WB), two's complement, a 1-bit weight +-1 stored as 1 / 0.
template <int WB>
inline int32_t weight(const int8_t* w, int idx) {
#pragma HLS INLINE
  static_assert(WB == 1 || WB == 2 || WB == 4 || WB == 8, "weights of 1, 2, 4 or 8 bits");
  if constexpr (WB == 8) {
    return w[idx];
  } else {
    constexpr int PER_BYTE = 8 / WB;
    const int code = (static_cast<uint8_t>(w[idx / PER_BYTE]) >> ((idx % PER_BYTE) * WB)) & ((1 << WB) - 1);
    if constexpr (WB == 1) return code ? 1 : -1;
    return code >= (1 << (WB - 1)) ? code - (1 << WB) : code;
  }
}

// A config's weight bits: its member WB (a dense or conv stage's packed weights), else 8.
template <class C, class = void>
struct WeightBits {
  static constexpr int value = 8;
};
template <class C>
struct WeightBits<C, std::void_t<decltype(C::WB)>> {
  static constexpr int value = C::WB;
};

}  // namespace detail

// requantize(acc) = clip(round_half_even(acc * m / 2**s) + zp, lo, hi); needs |acc| < 2**32,
// 0 <= m < 2**31, 1 <= s <= 62; tie: the midpoint band of shift_round_clip (0 <= tie <= s - 2).
inline int8_t requantize(int64_t acc, int32_t m, int s, int zp, int lo, int hi, int tie = 0) {
#pragma HLS INLINE
  return detail::shift_round_clip(acc * static_cast<int64_t>(m), s, zp, lo, hi, tie);
}

// The output stage of a dot product (conv2d, dense) of config C on channel co's accumulator acc
// (bias included): requantize(acc, mult[co], shift[co], ZY, LO, HI), or, when C has T thresholds
// per channel (fpgaplace.hw.threshold), FINN's multithreshold: ZY + STEP * #{i : acc >= t[co][i]}
// (STEP: the codes written are every STEP-th, threshold.code_step). There
// the bias is what turns the accumulator into the dot product of lane values, and the table holds
// each threshold as that dot product meets it (threshold.stored_table): TH_W-bit two's complement
// fields, TH_PE channels' T thresholds a word of TH_BYTES bytes (threshold.table_bytes).
template <class C, class = void>
struct OutputStage {
  static int8_t apply(int64_t acc, int co, const int32_t* mult, const int8_t* shift) {
#pragma HLS INLINE
    return requantize(acc, mult[co], shift[co], C::ZY, C::LO, C::HI);
  }
};

namespace detail {
// The W-bit two's complement field at bit `bit` of the little-endian bytes `bytes` (W <= 56; the
// eight bytes from the field's first are read, so an array of fields ends in eight spare bytes).
template <int W>
inline int64_t signed_field(const uint8_t* bytes, int bit) {
#pragma HLS INLINE
  static_assert(W >= 1 && W <= 56, "fields of 1 to 56 bits");
  const uint8_t* first = bytes + bit / 8;
  uint64_t window = 0;
  for (int b = 0; b < 8; ++b) {
#pragma HLS UNROLL
    window |= static_cast<uint64_t>(first[b]) << (8 * b);
  }
  const uint64_t field = (window >> (bit % 8)) & ((uint64_t{1} << W) - 1);
  return field >= (uint64_t{1} << (W - 1)) ? static_cast<int64_t>(field) - (int64_t{1} << W)
                                           : static_cast<int64_t>(field);
}
}  // namespace detail

template <class C>
struct OutputStage<C, std::void_t<decltype(C::T)>> {
  static int8_t apply(int64_t acc, int co, const int32_t*, const int8_t*) {
#pragma HLS INLINE
    const uint8_t* word = C::thresholds() + (co / C::TH_PE) * C::TH_BYTES;
    const int first = (co % C::TH_PE) * C::T * C::TH_W;
    int count = 0;
    for (int i = 0; i < C::T; ++i) {
#pragma HLS UNROLL
      count += acc >= detail::signed_field<C::TH_W>(word, first + i * C::TH_W) ? 1 : 0;
    }
    return static_cast<int8_t>(C::ZY + C::STEP * count);
  }
};

// requantize2(a, b) = clip(round_half_even((a*ma + b*mb) / 2**s) + zp, lo, hi); |a|, |b| < 2**31.
inline int8_t requantize2(int64_t a, int32_t ma, int64_t b, int32_t mb, int s, int zp, int lo, int hi) {
#pragma HLS INLINE
  return detail::shift_round_clip(a * static_cast<int64_t>(ma) + b * static_cast<int64_t>(mb), s, zp, lo, hi);
}

// ---------------------------------------------------------------- beats and iteration counters

// N consecutive int8 elements of a stream, moved in one cycle.
template <int N>
struct beat {
  int8_t v[N];
};

#ifdef FP_COUNT_TICKS
#ifndef FP_MAX_STAGES
#define FP_MAX_STAGES 4096
#endif
// Iterations of each stage's pipelined loops since the last reset (C simulation only).
inline long long* tick_counters() {
  static long long counts[FP_MAX_STAGES];
  return counts;
}
#define FP_TICK(stage) (++::fp::tick_counters()[stage])

// The iterations of the pipelined loops in one scope, counted in a local (a register) and added to
// the stage's counter when the scope ends, also when a stream read throws: the same totals as
// FP_TICK every iteration, without a read-modify-write of memory each time (the line-buffered
// loops run millions of iterations a sample).
class LoopTicks {
 public:
  explicit LoopTicks(int stage) : stage_(stage) {}
  LoopTicks(const LoopTicks&) = delete;
  LoopTicks& operator=(const LoopTicks&) = delete;
  ~LoopTicks() { tick_counters()[stage_] += count_; }
  void tick() { ++count_; }

 private:
  int stage_;
  long long count_ = 0;
};
#define FP_LOOP_TICKS(counter, stage) ::fp::LoopTicks counter(stage)
#define FP_LOOP_TICK(counter) counter.tick()
#else
#define FP_TICK(stage) ((void)0)
#define FP_LOOP_TICKS(counter, stage) static_assert(true, "no iteration counters")
#define FP_LOOP_TICK(counter) ((void)0)
#endif

namespace detail {

// Reads one beat of row-major [.][W][CH] input into the line buffer's slot of the row being read.
// (row, offset) is the read position: offset counts elements within the row.
template <int SLOTS, int W, int CH, int IW>
void read_beat(hls::stream<beat<IW>>& in, int8_t line[SLOTS][W][CH], int& row, int& offset) {
#pragma HLS INLINE
  const beat<IW> b = in.read();
  for (int j = 0; j < IW; ++j) {
#pragma HLS UNROLL
    const int e = offset + j;
    line[row % SLOTS][e / CH][e % CH] = b.v[j];
  }
  offset += IW;
  if (offset == W * CH) {
    offset = 0;
    ++row;
  }
}

// The row loop shared by convolution and windowed pooling (FINN's sliding window generator and
// its consumer in one loop). Rows enter a line buffer of SLOTS = R + SH rows; before output row
// ho is computed, every input row its window covers has been read; while its STEPS compute
// steps run (one per cycle), the rows output row ho + 1 needs (all the remaining rows, after the
// last output row) are read, one beat per cycle. Iterations: the rows of output row 0, then per
// output row max(beats read, STEPS).
template <class C, int CH, int IW, int R, int STEPS, class Step>
void slide_rows(hls::stream<beat<IW>>& in, Step& step) {
#pragma HLS INLINE
  constexpr int SLOTS = R + C::SH;
  constexpr int ROW_BEATS = C::W * CH / IW;
  int8_t line[SLOTS][C::W][CH];
#pragma HLS ARRAY_PARTITION variable=line complete dim=1
  int row = 0, offset = 0;
  const int first = max_int(0, min_int(C::H, R - C::PT));  // rows output row 0 needs
  FP_LOOP_TICKS(ticks, C::STAGE);  // both loops' iterations, added to the stage's counter on return
  for (int i = 0; i < first * ROW_BEATS; ++i) {
#pragma HLS PIPELINE II=1
    FP_LOOP_TICK(ticks);
    read_beat<SLOTS, C::W, CH, IW>(in, line, row, offset);
  }
  for (int ho = 0; ho < C::HO; ++ho) {
    const int top = ho * C::SH - C::PT;
    const int wanted = ho + 1 < C::HO ? min_int(C::H, top + C::SH + R) : C::H;
    const int reads = max_int(0, wanted - row) * ROW_BEATS;  // whole rows: each row loop ends on a row boundary
    const int iterations = max_int(reads, STEPS);
    for (int i = 0; i < iterations; ++i) {
#pragma HLS PIPELINE II=1
      FP_LOOP_TICK(ticks);
      if (i < STEPS) step.compute(line, top, i);
      if (i < reads) read_beat<SLOTS, C::W, CH, IW>(in, line, row, offset);
    }
  }
}

}  // namespace detail

// ---------------------------------------------------------------- conv2d

template <class C>
struct ConvShape {
  static constexpr int CG = C::CIN / C::GROUPS;         // input channels per group
  static constexpr int KKG = C::KH * C::KW * CG;        // dot-product length
  static constexpr int WEIGHTS = C::COUT * KKG;
  static constexpr int ROWS = C::DH * (C::KH - 1) + 1;  // window rows
  static constexpr int NF = C::COUT / C::PE;            // output-channel folds
  static constexpr int SF = KKG / C::SIMD;              // reduction folds
  static constexpr int ROW_GROUPS = (C::WO + C::MMV - 1) / C::MMV;  // pixel groups of a row (the last may be short)
  static constexpr int STEPS = ROW_GROUPS * NF * SF;  // compute cycles per output row
  static constexpr int LAST_GROUP = C::WO - (ROW_GROUPS - 1) * C::MMV;  // pixels in a row's last group
  // a group's outputs are not whole consecutive beats (fewer than COUT channels a fold, or a short
  // last group): they leave through a buffer
  static constexpr bool REORDER = C::MMV > 1 && (C::PE < C::COUT || LAST_GROUP < C::MMV);
  static constexpr int GROUP_BEATS = C::MMV * C::COUT / C::OW;  // REORDER: beats a full group leaves in
};

namespace detail {

#if FP_CSIM_FAST
// C simulation only (FP_CSIM_FAST): the outputs of one output row of a convolution, as WO x COUT
// contiguous dot products of TERMS int16 terms that g++ vectorizes. O(WO*COUT*KKG) a row, plus
// O(WO*KH*KW*CIN) to gather the windows; the weights are unfolded once per call, O(COUT*KKG).
template <class C>
struct ConvRowCsim {
  using S = ConvShape<C>;
  static constexpr int SLOTS = S::ROWS + C::SH;
  static constexpr int TERMS = (S::KKG + 15) / 16 * 16;  // a dot product's terms, zero-padded
  static constexpr int CPG = C::COUT / C::GROUPS;        // output channels per group
  static constexpr int PIXELS = (C::WO + 3) / 4 * 4;      // WO rounded up to whole dot4() blocks
  int8_t y[C::WO][C::COUT];

  // Static storage, one per config (too large for the stack): weights [COUT][TERMS] in plain
  // (kh, kw, c) order, and each output pixel's window per group [PIXELS][GROUPS][TERMS] as x - ZX
  // (the pixels past WO stay zero: their sums are not used).
  static int16_t* weights() {
    static int16_t plain[C::COUT * TERMS];
    return plain;
  }
  static int16_t* windows() {
    static int16_t x[PIXELS * C::GROUPS * TERMS];
    return x;
  }

  // Weight k of output channel co is folded[((co/PE * SF + k/SIMD) * PE + co%PE) * SIMD + k%SIMD].
  static void unfold(const int8_t* folded) {
    int16_t* plain = weights();
    for (int co = 0; co < C::COUT; ++co) {
      for (int k = 0; k < TERMS; ++k) {
        plain[co * TERMS + k] = k < S::KKG ? weight<WeightBits<C>::value>(
                                                 folded, ((co / C::PE * S::SF + k / C::SIMD) * C::PE + co % C::PE) *
                                                                 C::SIMD + k % C::SIMD)
                                           : 0;
      }
    }
  }

  // The dot products of w with the windows at x, x + stride, x + 2 stride and x + 3 stride: one
  // load of each weight for four pixels (about twice the multiply-accumulates a second of four
  // separate dot products).
  static void dot4(const int16_t* x, int stride, const int16_t* w, int32_t sums[4]) {
    const int16_t *x0 = x, *x1 = x + stride, *x2 = x + 2 * stride, *x3 = x + 3 * stride;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int k = 0; k < TERMS; ++k) {
      const int32_t wk = w[k];
      s0 += static_cast<int32_t>(x0[k]) * wk;
      s1 += static_cast<int32_t>(x1[k]) * wk;
      s2 += static_cast<int32_t>(x2[k]) * wk;
      s3 += static_cast<int32_t>(x3[k]) * wk;
    }
    sums[0] = s0;
    sums[1] = s1;
    sums[2] = s2;
    sums[3] = s3;
  }

  void output(int wo, int co, int32_t acc, const int32_t* bias, const int32_t* mult, const int8_t* shift) {
    y[wo][co] = OutputStage<C>::apply(static_cast<int64_t>(bias[co]) + acc, co, mult, shift);
  }

  // Every window element of output row `top`'s pixels (0 where padded), then the row's outputs.
  void compute(const int8_t line[SLOTS][C::W][C::CIN], int top, const int32_t* bias, const int32_t* mult,
               const int8_t* shift) {
    int16_t* x = windows();
    for (int wo = 0; wo < C::WO; ++wo) {
      const int left = wo * C::SW - C::PL;
      for (int grp = 0; grp < C::GROUPS; ++grp) {
        int16_t* window = x + (wo * C::GROUPS + grp) * TERMS;
        for (int kh = 0; kh < C::KH; ++kh) {
          const int ih = top + kh * C::DH;
          for (int kw = 0; kw < C::KW; ++kw) {
            const int iw = left + kw * C::DW;
            const bool inside = ih >= 0 && ih < C::H && iw >= 0 && iw < C::W;
            int16_t* terms = window + (kh * C::KW + kw) * S::CG;
            for (int c = 0; c < S::CG; ++c) {
              terms[c] = inside ? static_cast<int16_t>(line[ih % SLOTS][iw][grp * S::CG + c] - C::ZX) : 0;
            }
          }
        }
        for (int k = S::KKG; k < TERMS; ++k) window[k] = 0;
      }
    }
    constexpr int PIXEL_STRIDE = C::GROUPS * TERMS;
    const int16_t* plain = weights();
    for (int co = 0; co < C::COUT; ++co) {
      const int16_t* w_co = plain + co * TERMS;
      const int16_t* x_co = x + co / CPG * TERMS;
      for (int wo = 0; wo < PIXELS; wo += 4) {
        int32_t sums[4];
        dot4(x_co + wo * PIXEL_STRIDE, PIXEL_STRIDE, w_co, sums);
        for (int j = 0; j < 4 && wo + j < C::WO; ++j) output(wo + j, co, sums[j], bias, mult, shift);
      }
    }
  }
};
#endif

// One MVAU step of a convolution: fold (nf, t) of the pixel group g of output row `top`: PE x
// SIMD x MMV multiply-accumulates; the fold's last tile requantizes PE x MMV outputs. When they
// are consecutive in stream order (MMV == 1 or PE == COUT) they leave as one beat; otherwise a
// group's MMV x COUT outputs collect in one half of a double buffer and leave, OW a beat, during
// the next group's steps (S::REORDER), the last group after the row loop (`drain`).
template <class C>
struct ConvStep {
  using S = ConvShape<C>;
  static constexpr int SLOTS = S::ROWS + C::SH;
  const int8_t* w;
  const int32_t* bias;
  const int32_t* mult;
  const int8_t* shift;
  hls::stream<beat<C::OW>>& out;
  int32_t acc[C::MMV][C::PE];
  int8_t held[2][C::MMV * C::COUT];  // REORDER only: the group being computed and the one leaving
  int beats[2];  // REORDER only: beats the group in each half leaves in (fewer for a short group)
  int groups = 0;  // REORDER only: groups completed
#if FP_CSIM_FAST
  ConvRowCsim<C> row;  // the current output row's outputs, computed at its first step
#endif

  void compute(const int8_t line[SLOTS][C::W][C::CIN], int top, int i) {
#pragma HLS INLINE
    const int g = i / (S::NF * S::SF), nf = i / S::SF % S::NF, t = i % S::SF;
    if (S::REORDER && groups > 0) emit(i % (S::NF * S::SF), (groups - 1) % 2);
    beat<C::PE * C::MMV> y = {};
#if FP_CSIM_FAST
    if (i == 0) row.compute(line, top, bias, mult, shift);
    if (t == S::SF - 1) row_outputs(g, nf, y);
#else
    tile(line, top, g, nf, t, y);
#endif
    if (t == S::SF - 1) {
      if (!S::REORDER) {
        write_direct(y);
      } else if (nf == S::NF - 1) {
        const int pixels = g == S::ROW_GROUPS - 1 ? S::LAST_GROUP : C::MMV;
        beats[groups % 2] = pixels * C::COUT / C::OW;
        ++groups;
      }
    }
  }

  // The MMV x PE x SIMD multiply-accumulates of tile t of fold nf of pixel group g; on the fold's
  // last tile, its PE x MMV requantized outputs in y (and in the reorder buffer).
  void tile(const int8_t line[SLOTS][C::W][C::CIN], int top, int g, int nf, int t, beat<C::PE * C::MMV>& y) {
#pragma HLS INLINE
    for (int m = 0; m < C::MMV; ++m) {
#pragma HLS UNROLL
      const int left = (g * C::MMV + m) * C::SW - C::PL;  // a short group's missing pixels compute unused sums
      // where each of the tile's SIMD window elements sits in the line buffer (same for every lane)
      int slot[C::SIMD], col[C::SIMD], chan[C::SIMD];
      bool inside[C::SIMD];
      for (int s = 0; s < C::SIMD; ++s) {
#pragma HLS UNROLL
        const int k = t * C::SIMD + s;  // (kh, kw, c) of the window, c fastest
        const int ih = top + k / S::CG / C::KW * C::DH, iw = left + k / S::CG % C::KW * C::DW;
        inside[s] = ih >= 0 && ih < C::H && iw >= 0 && iw < C::W;  // a padded position holds ZX: adds 0
        slot[s] = inside[s] ? ih % SLOTS : 0;
        col[s] = inside[s] ? iw : 0;
        chan[s] = k % S::CG;
      }
      for (int p = 0; p < C::PE; ++p) {
#pragma HLS UNROLL
        const int co = nf * C::PE + p;
        const int channel0 = co / (C::COUT / C::GROUPS) * S::CG;
        const int lane_w = ((nf * S::SF + t) * C::PE + p) * C::SIMD;  // the lane's first weight
        int32_t partial = 0;
        for (int s = 0; s < C::SIMD; ++s) {
#pragma HLS UNROLL
          const int32_t x = inside[s] ? static_cast<int32_t>(line[slot[s]][col[s]][channel0 + chan[s]]) - C::ZX : 0;
          partial += x * weight<WeightBits<C>::value>(w, lane_w + s);
        }
        acc[m][p] = (t == 0 ? 0 : acc[m][p]) + partial;
        if (t == S::SF - 1) {
          const int8_t q = OutputStage<C>::apply(static_cast<int64_t>(bias[co]) + acc[m][p], co, mult, shift);
          y.v[m * C::PE + p] = q;
          if (S::REORDER) held[groups % 2][m * C::COUT + co] = q;
        }
      }
    }
  }

#if FP_CSIM_FAST
  // What tile() leaves in y and the reorder buffer on fold nf's last tile, from the row computed
  // at its first step (a short group's missing pixels are never emitted: not filled).
  void row_outputs(int g, int nf, beat<C::PE * C::MMV>& y) {
    for (int m = 0; m < C::MMV && g * C::MMV + m < C::WO; ++m) {
      for (int p = 0; p < C::PE; ++p) {
        const int co = nf * C::PE + p;
        const int8_t q = row.y[g * C::MMV + m][co];
        y.v[m * C::PE + p] = q;
        if (S::REORDER) held[groups % 2][m * C::COUT + co] = q;
      }
    }
  }
#endif

  // Beat e of the completed group in held[half], if the group has that many beats.
  void emit(int e, int half) {
#pragma HLS INLINE
    if (e >= beats[half]) return;
    beat<C::OW> b;
    for (int j = 0; j < C::OW; ++j) {
#pragma HLS UNROLL
      b.v[j] = held[half][e * C::OW + j];
    }
    out.write(b);
  }

  // The last group's beats, after the row loop (REORDER only).
  void drain() {
    for (int e = 0; e < beats[(groups - 1) % 2]; ++e) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      emit(e, (groups - 1) % 2);
    }
  }

  void write_direct(const beat<C::PE * C::MMV>& y) {
#pragma HLS INLINE
    beat<C::OW> b;
    for (int j = 0; j < C::OW; ++j) {
#pragma HLS UNROLL
      b.v[j] = y.v[j];
    }
    out.write(b);
  }
};

}  // namespace detail

// y[HO][WO][COUT] = requantize(bias + sum (x - ZX) * w over the window, mult, shift, ZY, LO, HI).
// Input beats of IW elements fill the line buffer while the MVAU computes (detail::slide_rows);
// each output pixel group takes COUT/PE * KKG/SIMD cycles.
template <class C>
void conv2d(hls::stream<beat<C::IW>>& in, hls::stream<beat<C::OW>>& out,
            const int8_t w[ConvShape<C>::WEIGHTS], const int32_t bias[C::COUT], const int32_t mult[C::COUT],
            const int8_t shift[C::COUT]) {
  using S = ConvShape<C>;
  [[maybe_unused]] constexpr int PE = C::PE, LANES = C::PE * C::SIMD;  // for the pragmas
  static_assert(C::H > 0 && C::W > 0 && C::CIN > 0 && C::COUT > 0, "conv2d: sizes must be positive");
  static_assert(C::KH > 0 && C::KW > 0 && C::SH > 0 && C::SW > 0 && C::DH > 0 && C::DW > 0,
                "conv2d: kernel, stride and dilation must be positive");
  static_assert(C::PT >= 0 && C::PL >= 0 && C::PB >= 0 && C::PR >= 0, "conv2d: pads must be >= 0");
  static_assert(C::GROUPS > 0 && C::CIN % C::GROUPS == 0 && C::COUT % C::GROUPS == 0,
                "conv2d: GROUPS must divide CIN and COUT");
  static_assert(C::HO == detail::out_size(C::H, C::KH, C::SH, C::PT, C::PB, C::DH), "conv2d: HO mismatch");
  static_assert(C::WO == detail::out_size(C::W, C::KW, C::SW, C::PL, C::PR, C::DW), "conv2d: WO mismatch");
  static_assert(C::HO > 0 && C::WO > 0, "conv2d: the kernel must fit in the padded input");
  static_assert(C::PE > 0 && C::COUT % C::PE == 0, "conv2d: PE must divide COUT");
  static_assert(C::SIMD > 0 && S::KKG % C::SIMD == 0, "conv2d: SIMD must divide KH*KW*CIN/GROUPS");
  static_assert(C::MMV > 0 && C::MMV <= C::WO, "conv2d: MMV must be 1 to WO");
  static_assert(S::REORDER ? (S::LAST_GROUP * C::COUT) % C::OW == 0 && (C::MMV * C::COUT) % C::OW == 0 &&
                                 S::GROUP_BEATS <= S::NF * S::SF
                           : C::OW == C::PE * C::MMV,
                "conv2d: OW must be PE*MMV, or with a reorder buffer divide a group's outputs (a short one's too) "
                "in at most COUT/PE*KKG/SIMD beats");
  static_assert(C::IW > 0 && (C::W * C::CIN) % C::IW == 0, "conv2d: IW must divide W*CIN");
  static_assert(S::KKG <= detail::MAX_DOT_LENGTH, "conv2d: dot product too long for an int32 accumulator");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "conv2d: zero points and LO <= HI must be int8");
  // a cycle's PE x SIMD weights: LANES bytes, or LANES * WB / 8 of packed weights
  [[maybe_unused]] constexpr int WORD_BYTES = detail::max_int(1, LANES * detail::WeightBits<C>::value / 8);
#pragma HLS ARRAY_PARTITION variable=w cyclic factor=WORD_BYTES
#pragma HLS ARRAY_PARTITION variable=bias cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=mult cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=shift cyclic factor=PE
  detail::ConvStep<C> step{w, bias, mult, shift, out, {}, {}, {0, 0}, 0};
#if FP_CSIM_FAST
  detail::ConvRowCsim<C>::unfold(w);
#endif
  detail::slide_rows<C, C::CIN, C::IW, S::ROWS, S::STEPS>(in, step);
  if (S::REORDER) step.drain();
}

// ---------------------------------------------------------------- dense

// y[N] = requantize(bias + sum_k (x[k] - ZX) * w[n][k], mult, shift, ZY, LO, HI) in N/PE folds of
// K/SIMD cycles; the input vector is read (SIMD elements a beat) during the first fold and kept.
template <class C>
void dense(hls::stream<beat<C::SIMD>>& in, hls::stream<beat<C::PE>>& out, const int8_t w[C::N * C::K],
           const int32_t bias[C::N], const int32_t mult[C::N], const int8_t shift[C::N]) {
  [[maybe_unused]] constexpr int PE = C::PE, SIMD = C::SIMD, LANES = PE * SIMD;  // for the pragmas
  constexpr int NF = C::N / C::PE, SF = C::K / C::SIMD;
  static_assert(C::K > 0 && C::N > 0, "dense: sizes must be positive");
  static_assert(C::PE > 0 && C::N % C::PE == 0, "dense: PE must divide N");
  static_assert(C::SIMD > 0 && C::K % C::SIMD == 0, "dense: SIMD must divide K");
  static_assert(C::K <= detail::MAX_DOT_LENGTH, "dense: dot product too long for an int32 accumulator");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "dense: zero points and LO <= HI must be int8");
  // a cycle's PE x SIMD weights: LANES bytes, or LANES * WB / 8 of packed weights
  [[maybe_unused]] constexpr int WORD_BYTES = detail::max_int(1, LANES * detail::WeightBits<C>::value / 8);
#pragma HLS ARRAY_PARTITION variable=w cyclic factor=WORD_BYTES
#pragma HLS ARRAY_PARTITION variable=bias cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=mult cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=shift cyclic factor=PE
  int8_t x[SF][C::SIMD];
#pragma HLS ARRAY_PARTITION variable=x complete dim=2
  int32_t acc[C::PE] = {};
#pragma HLS ARRAY_PARTITION variable=acc complete
  FP_LOOP_TICKS(ticks, C::STAGE);
  for (int i = 0; i < NF * SF; ++i) {
#pragma HLS PIPELINE II=1
    FP_LOOP_TICK(ticks);
    const int nf = i / SF, t = i % SF;
    if (nf == 0) {
      const beat<C::SIMD> b = in.read();
      for (int s = 0; s < C::SIMD; ++s) {
#pragma HLS UNROLL
        x[t][s] = b.v[s];
      }
    }
    beat<C::PE> y = {};
    for (int p = 0; p < C::PE; ++p) {
#pragma HLS UNROLL
      int32_t partial = 0;
      for (int s = 0; s < C::SIMD; ++s) {
#pragma HLS UNROLL
        partial += (static_cast<int32_t>(x[t][s]) - C::ZX) *
                   detail::weight<detail::WeightBits<C>::value>(w, (i * C::PE + p) * C::SIMD + s);
      }
      acc[p] = (t == 0 ? 0 : acc[p]) + partial;
      const int co = nf * C::PE + p;
      if (t == SF - 1) y.v[p] = OutputStage<C>::apply(static_cast<int64_t>(bias[co]) + acc[p], co, mult, shift);
    }
    if (t == SF - 1) out.write(y);
  }
}

// ---------------------------------------------------------------- matmul

namespace detail {

// Beat `count` of a [ROWS][COLS] matrix streamed by rows, W elements a beat, into `buffer`, if it has come
// (a non-blocking take, so a stage buffering two operands never stalls the producer of either).
template <int W, int ROWS, int COLS>
void take_row_beat(hls::stream<beat<W>>& in, int8_t (&buffer)[ROWS][COLS], int& count) {
#pragma HLS INLINE
  constexpr int PER_ROW = COLS / W;
  if (count == ROWS * PER_ROW || in.empty()) return;
  const beat<W> x = in.read();
  for (int e = 0; e < W; ++e) {
#pragma HLS UNROLL
    buffer[count / PER_ROW][count % PER_ROW * W + e] = x.v[e];
  }
  ++count;
}

}  // namespace detail

// y[h][m][n] = requantize(sum_k (a[h][m][k] - ZA) * (b[h][k][n] - ZB), MQ, SQ, ZY, LO, HI), a MatMul of two
// activations (fpgaplace.hw.matmul). Per head both operands are buffered, taking beats of either stream as they
// come (A SIMD elements a beat, B PE: max(M*K/SIMD, K*N/PE) iterations when both wait), then M * N/PE * K/SIMD
// MAC steps of PE x SIMD lanes, a beat of PE results at the end of each fold.
template <class C>
void matmul(hls::stream<beat<C::SIMD>>& a, hls::stream<beat<C::PE>>& b, hls::stream<beat<C::PE>>& out) {
  constexpr int M = C::M, K = C::K, N = C::N, PE = C::PE, SIMD = C::SIMD, NF = N / PE, SF = K / SIMD;
  static_assert(C::HEADS > 0 && M > 0 && K > 0 && N > 0, "matmul: sizes must be positive");
  static_assert(PE > 0 && N % PE == 0 && SIMD > 0 && K % SIMD == 0, "matmul: PE must divide N and SIMD K");
  static_assert(K <= 2147483647 / (255 * 255), "matmul: reduction too long for an int32 sum");
  static_assert(detail::is_int8(C::ZA) && detail::is_int8(C::ZB) && detail::valid_output(C::ZY, C::LO, C::HI) &&
                detail::valid_rescale(C::MQ, C::SQ), "matmul: int8 zero points, LO <= HI, MQ >= 0, 1 <= SQ <= 62");
  int8_t abuf[M][K];
  int8_t bbuf[K][N];
#pragma HLS ARRAY_PARTITION variable=abuf cyclic factor=SIMD dim=2
#pragma HLS ARRAY_PARTITION variable=bbuf cyclic factor=SIMD dim=1
#pragma HLS ARRAY_PARTITION variable=bbuf cyclic factor=PE dim=2
  for (int h = 0; h < C::HEADS; ++h) {
    int ia = 0, ib = 0;
    while (ia < M * SF || ib < K * NF) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      detail::take_row_beat(a, abuf, ia);
      detail::take_row_beat(b, bbuf, ib);
    }
    int32_t acc[PE] = {};
#pragma HLS ARRAY_PARTITION variable=acc complete
    for (int i = 0; i < M * NF * SF; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      const int m = i / (NF * SF), nf = i / SF % NF, t = i % SF;
      beat<PE> y = {};
      for (int p = 0; p < PE; ++p) {
#pragma HLS UNROLL
        int32_t partial = 0;
        for (int s = 0; s < SIMD; ++s) {
#pragma HLS UNROLL
          const int k = t * SIMD + s;
          partial += (static_cast<int32_t>(abuf[m][k]) - C::ZA) * (static_cast<int32_t>(bbuf[k][nf * PE + p]) - C::ZB);
        }
        acc[p] = (t == 0 ? 0 : acc[p]) + partial;
        if (t == SF - 1) y.v[p] = requantize(acc[p], C::MQ, C::SQ, C::ZY, C::LO, C::HI);
      }
      if (t == SF - 1) out.write(y);
    }
  }
}

// ---------------------------------------------------------------- pooling

namespace detail {

// How a pooling window reduces its elements: max of x (then minus ZX) or sum of (x - ZX).
struct MaxReduce {
  static constexpr int32_t INIT = -128;  // below or equal to every int8, so padding never wins
  static int32_t combine(int32_t acc, int8_t x, int) { return x > acc ? static_cast<int32_t>(x) : acc; }
  static int64_t finish(int32_t acc, int zx) { return static_cast<int64_t>(acc) - zx; }
};

struct SumReduce {
  static constexpr int32_t INIT = 0;
  static int32_t combine(int32_t acc, int8_t x, int zx) { return acc + (static_cast<int32_t>(x) - zx); }
  static int64_t finish(int32_t acc, int) { return acc; }
};

template <class C>
constexpr bool is_global_pool() {
  return C::KH == C::H && C::KW == C::W && C::PT == 0 && C::PL == 0 && C::PB == 0 && C::PR == 0;
}

template <class C>
constexpr bool valid_pool() {
  return C::H > 0 && C::W > 0 && C::C > 0 && C::KH > 0 && C::KW > 0 && C::SH > 0 && C::SW > 0 && C::PT >= 0 &&
         C::PL >= 0 && C::PB >= 0 && C::PR >= 0 && C::PT < C::KH && C::PB < C::KH && C::PL < C::KW &&
         C::PR < C::KW;
}

// Global pooling: one accumulator per channel, updated L channels a cycle as the input streams
// in, then C/L beats of results.
template <class C, class Reduce, class Scale>
void global_pool(hls::stream<beat<C::PE * C::MMV>>& in, hls::stream<beat<C::PE * C::MMV>>& out) {
#pragma HLS INLINE
  constexpr int L = C::PE * C::MMV;
  int32_t acc[C::C];
#pragma HLS ARRAY_PARTITION variable=acc cyclic factor=L
  for (int c = 0; c < C::C; ++c) {
#pragma HLS UNROLL factor=L
    acc[c] = Reduce::INIT;
  }
  for (int i = 0; i < C::H * C::W * C::C / L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<L> b = in.read();
    for (int l = 0; l < L; ++l) {
#pragma HLS UNROLL
      const int c = (i * L + l) % C::C;
      acc[c] = Reduce::combine(acc[c], b.v[l], C::ZX);
    }
  }
  for (int i = 0; i < C::C / L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    beat<L> y;
    for (int l = 0; l < L; ++l) {
#pragma HLS UNROLL
      y.v[l] = requantize(Reduce::finish(acc[i * L + l], C::ZX), C::M, C::S, C::ZY, C::LO, C::HI, Scale{}.t(0));
    }
    out.write(y);
  }
}

// An average's midpoint band (config member TIE; 0 for a config without one).
template <class C, class = int>
struct tie_of {
  static constexpr int value = 0;
};
template <class C>
struct tie_of<C, decltype((void)C::TIE, 0)> {
  static constexpr int value = C::TIE;
};

// The rescale of a pool's result: one (M, S) for every window (a max: no midpoint band; an
// average: TIE), or (average pooling without count_include_pad) one (mult, shift, tie) per count
// of the window's non-padded elements, from tables.
template <class C>
struct FixedScale {
  int32_t m(int) const { return C::M; }
  int s(int) const { return C::S; }
  int t(int) const { return 0; }
};

template <class C>
struct AverageScale : FixedScale<C> {
  static_assert(tie_of<C>::value >= 0 && (tie_of<C>::value == 0 || tie_of<C>::value <= C::S - 2),
                "avgpool: need 0 <= TIE <= S - 2");
  int t(int) const { return tie_of<C>::value; }
};

struct CountScale {
  const int32_t* mult;
  const int8_t* shift;
  const int8_t* tie;
  int32_t m(int count) const { return mult[count]; }
  int s(int count) const { return shift[count]; }
  int t(int count) const { return tie[count]; }
};

// One step of windowed pooling: PE channels of MMV output pixels of output row `top`.
template <class C, class Reduce, class Scale = FixedScale<C>>
struct PoolStep {
  static constexpr int SLOTS = C::KH + C::SH;
  static constexpr int CF = C::C / C::PE;  // channel folds
  hls::stream<beat<C::PE * C::MMV>>& out;
  Scale scale{};

  void compute(const int8_t line[SLOTS][C::W][C::C], int top, int i) {
#pragma HLS INLINE
    const int g = i / CF, cf = i % CF;
    beat<C::PE * C::MMV> y;
    for (int m = 0; m < C::MMV; ++m) {
#pragma HLS UNROLL
      const int left = (g * C::MMV + m) * C::SW - C::PL;
      for (int p = 0; p < C::PE; ++p) {
#pragma HLS UNROLL
        const int c = cf * C::PE + p;
        int32_t acc = Reduce::INIT;
        int count = 0;
        for (int kh = 0; kh < C::KH; ++kh) {
#pragma HLS UNROLL
          for (int kw = 0; kw < C::KW; ++kw) {
#pragma HLS UNROLL
            const int ih = top + kh, iw = left + kw;
            if (ih >= 0 && ih < C::H && iw >= 0 && iw < C::W) {
              acc = Reduce::combine(acc, line[ih % SLOTS][iw][c], C::ZX);
              ++count;
            }
          }
        }
        y.v[m * C::PE + p] =
            requantize(Reduce::finish(acc, C::ZX), scale.m(count), scale.s(count), C::ZY, C::LO, C::HI,
                       scale.t(count));
      }
    }
    out.write(y);
  }
};

template <class C, class Reduce, class Scale>
void pool2d(hls::stream<beat<C::PE * C::MMV>>& in, hls::stream<beat<C::PE * C::MMV>>& out) {
  static_assert(valid_pool<C>(), "pool: sizes, kernel and stride must be positive, 0 <= pads < kernel");
  static_assert(C::HO == out_size(C::H, C::KH, C::SH, C::PT, C::PB, 1), "pool: HO mismatch");
  static_assert(C::WO == out_size(C::W, C::KW, C::SW, C::PL, C::PR, 1), "pool: WO mismatch");
  static_assert(C::HO > 0 && C::WO > 0, "pool: the kernel must fit in the padded input");
  static_assert(C::KH * C::KW * 255 < 2147483647 / 2, "pool: window too large");
  static_assert(is_int8(C::ZX) && valid_output(C::ZY, C::LO, C::HI), "pool: zero points and LO <= HI must be int8");
  static_assert(valid_rescale(C::M, C::S), "pool: need M >= 0 and 1 <= S <= 62");
  static_assert(C::PE > 0 && C::C % C::PE == 0, "pool: PE must divide C");
  static_assert(C::MMV > 0 && (C::MMV == 1 || (C::PE == C::C && C::WO % C::MMV == 0 && C::W % C::MMV == 0)),
                "pool: MMV > 1 needs PE == C and MMV dividing W and WO");
  if constexpr (is_global_pool<C>()) {
    global_pool<C, Reduce, Scale>(in, out);
  } else {
    PoolStep<C, Reduce, Scale> step{out};
    slide_rows<C, C::C, C::PE * C::MMV, C::KH, C::WO / C::MMV * (C::C / C::PE)>(in, step);
  }
}

}  // namespace detail

// y = requantize(max over the window's non-padded x  -  ZX, M, S, ZY, LO, HI).
template <class C>
void maxpool(hls::stream<beat<C::PE * C::MMV>>& in, hls::stream<beat<C::PE * C::MMV>>& out) {
  detail::pool2d<C, detail::MaxReduce, detail::FixedScale<C>>(in, out);
}

// y = requantize(sum over the window's non-padded (x - ZX), M, S, ZY, LO, HI, TIE); 1/count is in
// M, S, its midpoint band in TIE (optional member, default 0).
template <class C>
void avgpool(hls::stream<beat<C::PE * C::MMV>>& in, hls::stream<beat<C::PE * C::MMV>>& out) {
  detail::pool2d<C, detail::SumReduce, detail::AverageScale<C>>(in, out);
}

// ---------------------------------------------------------------- elementwise

namespace detail {

template <class C>
constexpr bool valid_lanes(int size) {
  return C::L > 0 && size > 0 && size % C::L == 0;
}

}  // namespace detail

// y = requantize2(a - ZA, MA, b - ZB, MB, S, ZY, LO, HI), SIZE elements, L a cycle.
template <class C>
void add(hls::stream<beat<C::L>>& a, hls::stream<beat<C::L>>& b, hls::stream<beat<C::L>>& out) {
  static_assert(detail::valid_lanes<C>(C::SIZE), "add: SIZE must be positive and a multiple of L");
  static_assert(detail::is_int8(C::ZA) && detail::is_int8(C::ZB) && detail::valid_output(C::ZY, C::LO, C::HI),
                "add: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::MA, C::S) && C::MB >= 0, "add: need MA, MB >= 0 and 1 <= S <= 62");
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = a.read(), z = b.read();
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = requantize2(static_cast<int64_t>(x.v[l]) - C::ZA, C::MA, static_cast<int64_t>(z.v[l]) - C::ZB, C::MB,
                           C::S, C::ZY, C::LO, C::HI);
    }
    out.write(y);
  }
}

// y = requantize(x - ZX, M, S, ZY, LO, HI), SIZE elements, L a cycle (ReLU / Clip / rescale).
template <class C>
void requant(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out) {
  static_assert(detail::valid_lanes<C>(C::SIZE), "requant: SIZE must be positive and a multiple of L");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "requant: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "requant: need M >= 0 and 1 <= S <= 62");
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = in.read();
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = requantize(static_cast<int64_t>(x.v[l]) - C::ZX, C::M, C::S, C::ZY, C::LO, C::HI);
    }
    out.write(y);
  }
}

// y = clip(round_half_even(((x - ZX) * mult[c] + offset[c]) / 2**S) + ZY, LO, HI) with c = e mod C
// for element e of the stream (channels last), SIZE elements, L a cycle: a per-channel affine map,
// a batch norm or a Mul by a constant (fpgaplace.hw.affine; signed mult, |mult| <= 2**23).
template <class C>
void affine(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out, const int32_t mult[C::C],
            const int64_t offset[C::C]) {
  static_assert(detail::valid_lanes<C>(C::SIZE) && C::C > 0 && C::SIZE % C::C == 0,
                "affine: SIZE must be positive and a multiple of L and of C");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "affine: zero points and LO <= HI must be int8");
  static_assert(C::S >= 1 && C::S <= 62, "affine: need 1 <= S <= 62");
#pragma HLS ARRAY_PARTITION variable=mult cyclic factor=C::L
#pragma HLS ARRAY_PARTITION variable=offset cyclic factor=C::L
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = in.read();
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      const int c = (i * C::L + l) % C::C;
      const int64_t d = static_cast<int64_t>(x.v[l]) - C::ZX;
      y.v[l] = detail::shift_round_clip(d * mult[c] + offset[c], C::S, C::ZY, C::LO, C::HI);
    }
    out.write(y);
  }
}

// y = values[x + 128], SIZE elements, L a cycle: an island of elementwise ops of one int8 tensor
// (SiLU, HardSwish, GELU, ...) as its 256 outputs (fpgaplace.hw.table); each lane reads its own
// copy of the ROM.
template <class C>
void table(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out, const int8_t values[256]) {
  static_assert(detail::valid_lanes<C>(C::SIZE), "table: SIZE must be positive and a multiple of L");
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = in.read();
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = values[static_cast<int>(x.v[l]) + 128];
    }
    out.write(y);
  }
}

namespace detail {
// For each of SIZE byte indices of in (read unsigned), E values value(index, k), k = 0 .. E-1, L a
// cycle: the loop the embedding and one-hot share.
template <class C, class Value>
void index_rows(hls::stream<beat<1>>& in, hls::stream<beat<C::L>>& out, Value value) {
  static_assert(C::L > 0 && C::E % C::L == 0, "index_rows: L must divide E");
  for (int i = 0; i < C::SIZE; ++i) {
    const int id = static_cast<uint8_t>(in.read().v[0]);
    for (int e = 0; e < C::E / C::L; ++e) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = value(id, e * C::L + l);
      }
      out.write(y);
    }
  }
}
}  // namespace detail

// out = rows of table[ROWS][E] at the byte indices of in (past the last row, the last row), SIZE
// indices a sample, L values of a row a cycle: an embedding (fpgaplace.hw.gather).
template <class C>
void embedding(hls::stream<beat<1>>& in, hls::stream<beat<C::L>>& out, const int8_t table[C::ROWS * C::E]) {
  static_assert(C::ROWS > 0 && C::ROWS <= 256, "embedding: ROWS must lie in 1..256");
  detail::index_rows<C>(in, out, [&](int id, int k) -> int8_t {
    return table[(id < C::ROWS ? id : C::ROWS - 1) * C::E + k];
  });
}

// out = E values per byte index of in: ON at the index, OFF elsewhere, L a cycle; a one-hot by
// comparison (fpgaplace.hw.onehot).
template <class C>
void onehot(hls::stream<beat<1>>& in, hls::stream<beat<C::L>>& out) {
  detail::index_rows<C>(in, out, [](int id, int k) -> int8_t { return k == id ? C::ON : C::OFF; });
}

namespace detail {
// floor(dividend / divisor) for dividend < 2**BITS by restoring division, one quotient bit an
// iteration from the top (as the RTL dividers of softmax and layernorm); 0 when divisor is 0.
template <int BITS, int STAGE>
uint64_t restoring_divide(uint64_t dividend, uint64_t divisor) {
  uint64_t remainder = 0, quotient = 0;
  for (int b = BITS - 1; b >= 0; --b) {
#pragma HLS PIPELINE II=1
    FP_TICK(STAGE);
    remainder = (remainder << 1) | ((dividend >> b) & 1);
    quotient <<= 1;
    if (divisor != 0 && remainder >= divisor) {
      remainder -= divisor;
      quotient |= 1;
    }
  }
  return quotient;
}
}  // namespace detail

// Softmax over rows of N int8 values, L a cycle (fpgaplace.hw.softmax): a row is read into a
// buffer (its max m), e_i = exp_table[m - x_i] summed, r = round(MY * 2**16 / sum) (one division
// a row, DIV steps), then y_i = requantize(e_i, r, SY + 16, ZY, LO, HI). 3 * N/L + DIV iterations a row.
template <class C>
void softmax(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out, const int32_t exp_table[256]) {
  static_assert(C::N > 0 && C::L > 0 && C::N % C::L == 0 && C::SIZE % C::N == 0, "softmax: L must divide N, N SIZE");
  static_assert(detail::valid_output(C::ZY, C::LO, C::HI) && detail::valid_rescale(C::MY, C::SY + 16),
                "softmax: need int8 ZY, LO <= HI, MY >= 0 and SY + 16 <= 62");
  constexpr int BEATS = C::N / C::L;
  for (int row = 0; row < C::SIZE / C::N; ++row) {
    int8_t buffer[BEATS][C::L];
    int m = -128;
    for (int i = 0; i < BEATS; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      const beat<C::L> x = in.read();
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        buffer[i][l] = x.v[l];
        m = x.v[l] > m ? x.v[l] : m;
      }
    }
    int64_t sum = 0;
    for (int i = 0; i < BEATS; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        sum += exp_table[m - buffer[i][l]];
      }
    }
    // r = (MY * 2**16 + sum / 2) / sum by restoring division, a quotient bit a cycle (as the RTL)
    const uint64_t dividend = (static_cast<uint64_t>(C::MY) << 16) + static_cast<uint64_t>(sum) / 2;
    const int32_t r = static_cast<int32_t>(detail::restoring_divide<C::DIV, C::STAGE>(dividend, sum));
    for (int i = 0; i < BEATS; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = requantize(exp_table[m - buffer[i][l]], r, C::SY + 16, C::ZY, C::LO, C::HI);
      }
      out.write(y);
    }
  }
}

// LayerNormalization over rows of N int8 values, L a cycle (fpgaplace.hw.layernorm): a row is read
// into a buffer with its sums S1, S2; W = 4 (N S2 - S1**2) + E; s = isqrt(W * 2**24) digit by digit
// (SQRT steps); r = (2**52 + s / 2) / s by restoring division (DIV steps); then per element
// t = (2 (N x - S1) r + 2**23) >> 24 and y = clip(round_half_even((t mult[i] + offset[i]) / 2**S) + ZY).
// 2 * N/L + SQRT + DIV iterations a row.
template <class C>
void layernorm(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out, const int32_t mult[C::N],
               const int64_t offset[C::N]) {
  static_assert(C::N > 0 && C::N <= 1024 && C::L > 0 && C::N % C::L == 0 && C::SIZE % C::N == 0,
                "layernorm: L must divide N <= 1024, N SIZE");
  static_assert(detail::valid_output(C::ZY, C::LO, C::HI) && C::S >= 1 && C::S <= 62 && C::E >= 0,
                "layernorm: need int8 ZY, LO <= HI, 1 <= S <= 62 and E >= 0");
  static_assert(C::SQRT == 31 && C::DIV == 53, "layernorm: the square root and divider widths of the op library");
#pragma HLS ARRAY_PARTITION variable=mult cyclic factor=C::L
#pragma HLS ARRAY_PARTITION variable=offset cyclic factor=C::L
  constexpr int BEATS = C::N / C::L;
  for (int row = 0; row < C::SIZE / C::N; ++row) {
    int8_t buffer[BEATS][C::L];
    int64_t s1 = 0, s2 = 0;
    for (int i = 0; i < BEATS; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      const beat<C::L> x = in.read();
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        buffer[i][l] = x.v[l];
        s1 += x.v[l];
        s2 += static_cast<int32_t>(x.v[l]) * x.v[l];
      }
    }
    const uint64_t radicand = static_cast<uint64_t>(4 * (C::N * s2 - s1 * s1) + C::E) << 24;
    uint64_t root = 0, rest = 0;
    for (int k = C::SQRT - 1; k >= 0; --k) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      rest = (rest << 2) | ((radicand >> (2 * k)) & 3);
      const uint64_t trial = (root << 2) | 1;
      root <<= 1;
      if (rest >= trial) {
        rest -= trial;
        root |= 1;
      }
    }
    const uint64_t dividend = (static_cast<uint64_t>(1) << 52) + root / 2;
    const int64_t r = static_cast<int64_t>(detail::restoring_divide<C::DIV, C::STAGE>(dividend, root));
    for (int i = 0; i < BEATS; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        const int e = i * C::L + l;
        const int64_t t = (2 * (C::N * static_cast<int64_t>(buffer[i][l]) - s1) * r + (int64_t(1) << 23)) >> 24;
        y.v[l] = detail::shift_round_clip(t * mult[e] + offset[e], C::S, C::ZY, C::LO, C::HI);
      }
      out.write(y);
    }
  }
}

// y[p][c] = requantize(x[p][perm[c]] - ZX, M, S, ZY, LO, HI): a fixed permutation of each pixel's C
// channels (a channel shuffle, fpgaplace.hw.shuffle), L a cycle. One half of a two-pixel buffer
// takes pixel p while the other gives out pixel p - 1: (PIXELS + 1) * C / L iterations.
template <class C>
void shuffle(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out, const int16_t perm[C::C]) {
  static_assert(C::PIXELS > 0 && C::L > 0 && C::C % C::L == 0, "shuffle: L must divide C");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "shuffle: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "shuffle: need M >= 0 and 1 <= S <= 62");
  constexpr int BEATS = C::C / C::L;
  int8_t pixel[2][C::C];
#pragma HLS ARRAY_PARTITION variable=pixel complete dim=0
  for (int i = 0; i < (C::PIXELS + 1) * BEATS; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const int p = i / BEATS, b = i % BEATS;
    if (p < C::PIXELS) {
      const beat<C::L> x = in.read();
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        pixel[p & 1][b * C::L + l] = x.v[l];
      }
    }
    if (p > 0) {
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = requantize(static_cast<int64_t>(pixel[(p - 1) & 1][perm[b * C::L + l]]) - C::ZX, C::M, C::S, C::ZY,
                            C::LO, C::HI);
      }
      out.write(y);
    }
  }
}

namespace detail {

// The LRN table's index of a sum of squares s >= 0 (fpgaplace.hw.lrn.table_index): s below
// 2^(MBITS+1), else e * 2^MBITS + (s >> e) with e = bits(s) - MBITS - 1.
template <int MBITS>
inline int lrn_index(int64_t s) {
#pragma HLS INLINE
  int length = 0;
  for (int b = 0; b < 40; ++b) {
#pragma HLS UNROLL
    if ((s >> b) != 0) length = b + 1;
  }
  const int e = length > MBITS + 1 ? length - MBITS - 1 : 0;
  return (e << MBITS) + static_cast<int>(s >> e);
}

}  // namespace detail

// ONNX LRN of each pixel's C channels (fpgaplace.hw.lrn): d = x - ZX, S[c] = sum of d^2 over
// channels c - BEFORE .. c + AFTER, y[c] = requantize(d[c], table[index(S[c])], F, ZY, LO, HI), L a
// cycle. One half of a two-pixel buffer takes pixel p while the other gives out pixel p - 1:
// (PIXELS + 1) * C / L iterations.
template <class C>
void lrn(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out, const int32_t table[C::ENTRIES]) {
  static_assert(C::PIXELS > 0 && C::L > 0 && C::C % C::L == 0, "lrn: L must divide C");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "lrn: zero points and LO <= HI must be int8");
  static_assert(C::F >= 1 && C::F <= 62 && C::BEFORE >= 0 && C::AFTER >= 0, "lrn: need 1 <= F <= 62");
  constexpr int BEATS = C::C / C::L;
  int16_t offset[2][C::C];
  int32_t square[2][C::C];
#pragma HLS ARRAY_PARTITION variable=offset complete dim=0
#pragma HLS ARRAY_PARTITION variable=square complete dim=0
  for (int i = 0; i < (C::PIXELS + 1) * BEATS; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const int p = i / BEATS, b = i % BEATS;
    if (p < C::PIXELS) {
      const beat<C::L> x = in.read();
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        const int16_t d = static_cast<int16_t>(x.v[l] - C::ZX);
        offset[p & 1][b * C::L + l] = d;
        square[p & 1][b * C::L + l] = d * d;
      }
    }
    if (p > 0) {
      const int h = (p - 1) & 1;
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        const int c = b * C::L + l;
        int64_t s = 0;
        for (int k = -C::BEFORE; k <= C::AFTER; ++k) {
#pragma HLS UNROLL
          if (c + k >= 0 && c + k < C::C) s += square[h][c + k];
        }
        y.v[l] = requantize(offset[h][c], table[detail::lrn_index<C::MBITS>(s)], C::F, C::ZY, C::LO, C::HI);
      }
      out.write(y);
    }
  }
}

// The zero-inserting front of a transposed convolution (fpgaplace.hw.conv.transposed_window): the
// [XH][XW][CIN] input with UH - 1 rows and UW - 1 pixels of ZX between its rows and pixels, as
// the [H][W][CIN] stream conv2d slides over, beats of IW (IW divides CIN). One beat a cycle.
template <class C>
void zero_insert(hls::stream<beat<C::IW>>& in, hls::stream<beat<C::IW>>& out) {
  static_assert(C::CIN % C::IW == 0 && C::H == (C::XH - 1) * C::UH + 1 && C::W == (C::XW - 1) * C::UW + 1,
                "zero_insert: IW must divide CIN and H, W be the zero-inserted XH, XW");
  constexpr int BEATS = C::CIN / C::IW;
  for (int i = 0; i < C::H * C::W * BEATS; ++i) {
#pragma HLS PIPELINE II=1
    const int h = i / (C::W * BEATS), w = i / BEATS % C::W;
    beat<C::IW> y;
    if (h % C::UH == 0 && w % C::UW == 0) {
      y = in.read();
    } else {
      for (int l = 0; l < C::IW; ++l) {
#pragma HLS UNROLL
        y.v[l] = static_cast<int8_t>(C::ZX);
      }
    }
    out.write(y);
  }
}

// A transposed convolution: the zero-inserting front and conv2d over its stream, two processes
// of a DATAFLOW region (conv2d's iterations are the stage's count; the front keeps up with it).
template <class C>
void conv2d_transposed(hls::stream<beat<C::IW>>& in, hls::stream<beat<C::OW>>& out,
                       const int8_t w[ConvShape<C>::WEIGHTS], const int32_t bias[C::COUT],
                       const int32_t mult[C::COUT], const int8_t shift[C::COUT]) {
#pragma HLS DATAFLOW
  hls::stream<beat<C::IW>> inserted("inserted");
#pragma HLS STREAM variable=inserted depth=2
  zero_insert<C>(in, inserted);
  conv2d<C>(inserted, out, w, bias, mult, shift);
}

namespace detail {
// The two sides of fp::reorder: element (r, c, e) of the sample, the sample read as [XR][XC][XE],
// sits in bank (r + c + e) % L at ((r * XC + c) * XE + e) / L, so the L elements of a beat in (one
// r and L columns, or one block and L of its elements) and of a beat out (one c and L rows, or L
// elements of a block) are in L different banks.
template <class C>
int reorder_bank(int r, int c, int e) {
  return (r + c + e) % C::L;
}

template <class C>
void reorder_in(hls::stream<beat<C::L>>& in, int8_t bank[C::L][C::SIZE / C::L]) {
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    const beat<C::L> x = in.read();
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      const int at = i * C::L + l;  // the input's element (r, c, e), row-major
      bank[reorder_bank<C>(at / (C::XC * C::XE), at / C::XE % C::XC, at % C::XE)][i] = x.v[l];
    }
  }
}

template <class C>
void reorder_out(const int8_t bank[C::L][C::SIZE / C::L], hls::stream<beat<C::L>>& out) {
  for (int j = 0; j < C::SIZE / C::L; ++j) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      const int at = j * C::L + l;  // the output's element (c, r, e), row-major
      const int c = at / (C::XR * C::XE), r = at / C::XE % C::XR, e = at % C::XE;
      const int8_t v = bank[reorder_bank<C>(r, c, e)][((r * C::XC + c) * C::XE + e) / C::L];
      y.v[l] = requantize(static_cast<int64_t>(v) - C::ZX, C::M, C::S, C::ZY, C::LO, C::HI);
    }
    out.write(y);
  }
}
}  // namespace detail

// y[(c * XR + r) * XE + e] = requantize(x[(r * XC + c) * XE + e] - ZX, M, S, ZY, LO, HI): the
// sample's stream read as [XR][XC][XE] and written as [XC][XR][XE] (fpgaplace.hw.reorder; XE = 1
// a transpose), L a cycle (L divides XE, or XR and XC when XE = 1). The sample goes into the banks
// (detail::reorder_in) and out of them (detail::reorder_out), two processes of a DATAFLOW region:
// HLS makes the banks a ping-pong buffer, so sample n goes out while sample n + 1 comes in, SIZE/L
// iterations a sample each (the out side's are counted).
template <class C>
void reorder(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out) {
  static_assert(C::L > 0 && C::XE > 0 && (C::XE > 1 ? C::XE % C::L == 0 : C::XR % C::L == 0 && C::XC % C::L == 0)
                && C::XR * C::XC * C::XE == C::SIZE,
                "reorder: L must divide XE (or XR and XC when XE is 1), and XR * XC * XE be SIZE");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "reorder: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "reorder: need M >= 0 and 1 <= S <= 62");
#pragma HLS DATAFLOW
  int8_t bank[C::L][C::SIZE / C::L];
#pragma HLS ARRAY_PARTITION variable=bank complete dim=1
  detail::reorder_in<C>(in, bank);
  detail::reorder_out<C>(bank, out);
}

// Channel concatenation of [PIXELS][C0] and [PIXELS][C1] into [PIXELS][C0 + C1], L channels a
// cycle (L divides C0 and C1), each input requantized to the output. More inputs: chain concat2.
template <class C>
void concat2(hls::stream<beat<C::L>>& in0, hls::stream<beat<C::L>>& in1, hls::stream<beat<C::L>>& out) {
  constexpr int B0 = C::C0 / C::L, B1 = C::C1 / C::L;
  static_assert(C::PIXELS > 0 && C::C0 > 0 && C::C1 > 0, "concat2: sizes must be positive");
  static_assert(C::L > 0 && C::C0 % C::L == 0 && C::C1 % C::L == 0, "concat2: L must divide C0 and C1");
  static_assert(detail::is_int8(C::Z0) && detail::is_int8(C::Z1) && detail::valid_output(C::ZY, C::LO, C::HI),
                "concat2: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M0, C::S0) && detail::valid_rescale(C::M1, C::S1),
                "concat2: need M0, M1 >= 0 and 1 <= S0, S1 <= 62");
  for (int i = 0; i < C::PIXELS * (B0 + B1); ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const bool first = i % (B0 + B1) < B0;
    const beat<C::L> x = first ? in0.read() : in1.read();
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = first ? requantize(static_cast<int64_t>(x.v[l]) - C::Z0, C::M0, C::S0, C::ZY, C::LO, C::HI)
                     : requantize(static_cast<int64_t>(x.v[l]) - C::Z1, C::M1, C::S1, C::ZY, C::LO, C::HI);
    }
    out.write(y);
  }
}

// ---------------------------------------------------------------- the LSTM's wide cell state

namespace detail {

// The int16 state of lane l of a beat of 2L bytes (low byte first), and back (fpgaplace.hw.lstm_cell).
template <int L2>
inline int64_t wide_lane(const beat<L2>& b, int l) {
#pragma HLS INLINE
  return static_cast<int16_t>(static_cast<uint16_t>(static_cast<uint8_t>(b.v[2 * l])) |
                              static_cast<uint16_t>(static_cast<uint8_t>(b.v[2 * l + 1]) << 8));
}

template <int L2>
inline void set_wide_lane(beat<L2>& b, int l, int16_t w) {
#pragma HLS INLINE
  const uint16_t u = static_cast<uint16_t>(w);
  b.v[2 * l] = static_cast<int8_t>(u & 0xFF);
  b.v[2 * l + 1] = static_cast<int8_t>(u >> 8);
}

template <class C>
constexpr bool valid_cell() {
  return valid_lanes<C>(C::SIZE) && is_int8(C::ZI) && is_int8(C::ZG) && valid_rescale(C::MB, C::S);
}

}  // namespace detail

// The first step's wide state: w = clip16(rhe(MB * (i - ZI) * (g - ZG) * 2**-S)), SIZE elements, L a cycle.
template <class C>
void lstm_cell_first(hls::stream<beat<C::L>>& i, hls::stream<beat<C::L>>& g, hls::stream<beat<2 * C::L>>& out) {
  static_assert(detail::valid_cell<C>(), "lstm_cell: SIZE a multiple of L, int8 zero points, MB >= 0, 1 <= S <= 62");
  for (int k = 0; k < C::SIZE / C::L; ++k) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> a = i.read(), b = g.read();
    beat<2 * C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      const int64_t p = (static_cast<int64_t>(a.v[l]) - C::ZI) * (static_cast<int64_t>(b.v[l]) - C::ZG);
      detail::set_wide_lane(y, l, detail::shift_round_clip<int16_t>(p * C::MB, C::S, 0, -32768, 32767));
    }
    out.write(y);
  }
}

// A step's wide state: w = clip16(rhe((MA * (f - ZF) * w_prev + MB * (i - ZI) * (g - ZG)) * 2**-S)).
template <class C>
void lstm_cell_step(hls::stream<beat<C::L>>& f, hls::stream<beat<2 * C::L>>& w, hls::stream<beat<C::L>>& i,
                    hls::stream<beat<C::L>>& g, hls::stream<beat<2 * C::L>>& out) {
  static_assert(detail::valid_cell<C>() && detail::is_int8(C::ZF) && detail::valid_rescale(C::MA, C::S),
                "lstm_cell: SIZE a multiple of L, int8 zero points, MA, MB >= 0, 1 <= S <= 62");
  for (int k = 0; k < C::SIZE / C::L; ++k) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = f.read();
    const beat<2 * C::L> state = w.read();
    const beat<C::L> a = i.read(), b = g.read();
    beat<2 * C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      const int64_t kept = (static_cast<int64_t>(x.v[l]) - C::ZF) * detail::wide_lane(state, l);
      const int64_t fresh = (static_cast<int64_t>(a.v[l]) - C::ZI) * (static_cast<int64_t>(b.v[l]) - C::ZG);
      detail::set_wide_lane(y, l, detail::shift_round_clip<int16_t>(kept * C::MA + fresh * C::MB, C::S, 0, -32768,
                                                                     32767));
    }
    out.write(y);
  }
}

// The int8 c the QDQ model has: clip(rhe(w * 2**-7) + ZY, LO, HI).
template <class C>
void lstm_cell_narrow(hls::stream<beat<2 * C::L>>& w, hls::stream<beat<C::L>>& out) {
  static_assert(detail::valid_lanes<C>(C::SIZE) && detail::valid_output(C::ZY, C::LO, C::HI),
                "lstm_cell: SIZE a multiple of L, ZY and LO <= HI int8");
  for (int k = 0; k < C::SIZE / C::L; ++k) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<2 * C::L> state = w.read();
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = detail::shift_round_clip(detail::wide_lane(state, l), 7, C::ZY, C::LO, C::HI);
    }
    out.write(y);
  }
}

// ---------------------------------------------------------------- two activations, one broadcast

namespace detail {

enum BinaryOp { BIN_ADD = 0, BIN_SUB = 1, BIN_MUL = 2, BIN_MAX = 3, BIN_MIN = 4 };  // fpgaplace.hw.binary.OPS
enum BinaryMode { BIN_SAME = 0, BIN_PER_CHANNEL = 1, BIN_PER_PIXEL = 2 };           // fpgaplace.hw.binary MODE

// One output element of the binary op C::OP from x and its g (fpgaplace.hw.reference.binary).
template <class C>
inline int8_t binary_element(int8_t x, int8_t g) {
#pragma HLS INLINE
  const int64_t dx = C::SX * (static_cast<int64_t>(x) - C::ZX), dg = C::SG * (static_cast<int64_t>(g) - C::ZG);
  if (C::OP == BIN_MUL) return requantize(dx * dg, C::MX, C::S, C::ZY, C::LO, C::HI);
  if (C::OP == BIN_ADD || C::OP == BIN_SUB) return requantize2(dx, C::MX, dg, C::MG, C::S, C::ZY, C::LO, C::HI);
  const int8_t a = requantize(dx, C::MX, C::S, C::ZY, C::LO, C::HI), b = requantize(dg, C::MG, C::S, C::ZY, C::LO, C::HI);
  return (C::OP == BIN_MAX) == (a > b) ? a : b;
}

// The plane buffer of a broadcast: x's SIZE elements pass into a stream of BUFFER beats (one or two
// planes, fpgaplace.hw.binary.buffer_planes), so x's producer does not wait for g (which may be
// computed from x). A FIFO, not a stage: no ticks.
template <class C>
void plane_buffer(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& plane) {
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    plane.write(in.read());
  }
}

// The op over x's plane with g per channel (the C gate values read first, G a beat) or per pixel
// (a beat of G pixels' values with each pixel group's first beat).
template <class C>
void gated(hls::stream<beat<C::L>>& plane, hls::stream<beat<C::G>>& g, hls::stream<beat<C::L>>& out) {
  [[maybe_unused]] constexpr int LANES = C::L;  // for the pragma
  int8_t gate[C::MODE == BIN_PER_CHANNEL ? C::C : C::G] = {};
#pragma HLS ARRAY_PARTITION variable=gate cyclic factor=LANES
  if (C::MODE == BIN_PER_CHANNEL) {
    for (int i = 0; i < C::C / C::G; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      const beat<C::G> b = g.read();
      for (int j = 0; j < C::G; ++j) {
#pragma HLS UNROLL
        gate[i * C::G + j] = b.v[j];
      }
    }
  }
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = plane.read();
    if (C::MODE == BIN_PER_PIXEL && (i * C::L) % (C::C * C::G) == 0) {
      const beat<C::G> b = g.read();
      for (int j = 0; j < C::G; ++j) {
#pragma HLS UNROLL
        gate[j] = b.v[j];
      }
    }
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      const int e = i * C::L + l;
      y.v[l] = binary_element<C>(x.v[l], gate[C::MODE == BIN_PER_CHANNEL ? e % C::C : (e / C::C) % C::G]);
    }
    out.write(y);
  }
}

// A broadcast: x's plane buffer and the gated op, two processes of one dataflow region.
template <class C>
void binary_broadcast(hls::stream<beat<C::L>>& x, hls::stream<beat<C::G>>& g, hls::stream<beat<C::L>>& out) {
#pragma HLS DATAFLOW
  [[maybe_unused]] constexpr int DEPTH = C::BUFFER;  // for the pragma
  hls::stream<beat<C::L>> plane("plane");
#pragma HLS STREAM variable=plane depth=DEPTH
  plane_buffer<C>(x, plane);
  gated<C>(plane, g, out);
}

}  // namespace detail

// y = OP(x, g) elementwise over x's SIZE elements (C channels a pixel), L a cycle; g of the same
// shape (G = L), one value per channel (G divides C) or one per pixel (G pixels a beat).
template <class C>
void binary(hls::stream<beat<C::L>>& x, hls::stream<beat<C::G>>& g, hls::stream<beat<C::L>>& out) {
  static_assert(detail::valid_lanes<C>(C::SIZE) && C::C > 0 && C::SIZE % C::C == 0,
                "binary: SIZE must be a positive multiple of L and of C");
  static_assert(C::OP >= detail::BIN_ADD && C::OP <= detail::BIN_MIN, "binary: OP must be 0 to 4");
  static_assert(C::MODE == detail::BIN_SAME ? C::G == C::L
                : C::MODE == detail::BIN_PER_CHANNEL ? C::G > 0 && C::C % C::G == 0 && (C::L % C::C == 0 || C::C % C::L == 0)
                : C::MODE == detail::BIN_PER_PIXEL && C::G > 0 && (C::L == C::G * C::C || (C::G == 1 && C::C % C::L == 0)),
                "binary: G must be L (same shape), divide C (per channel), or be the pixels of a beat (per pixel)");
  static_assert(C::MODE == detail::BIN_SAME || C::BUFFER >= C::SIZE / C::L, "binary: BUFFER must hold a plane");
  static_assert(detail::is_int8(C::ZX) && detail::is_int8(C::ZG) && detail::valid_output(C::ZY, C::LO, C::HI),
                "binary: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::MX, C::S) && C::MG >= 0 && (C::SX == 1 || C::SX == -1) &&
                    (C::SG == 1 || C::SG == -1),
                "binary: need MX, MG >= 0, 1 <= S <= 62 and signs of +-1");
  if (C::MODE == detail::BIN_SAME) {
    for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
      FP_TICK(C::STAGE);
      const beat<C::L> a = x.read();
      const beat<C::G> b = g.read();
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = detail::binary_element<C>(a.v[l], b.v[l % C::G]);
      }
      out.write(y);
    }
  } else {
    detail::binary_broadcast<C>(x, g, out);
  }
}

// Copies SIZE elements of one stream into two (a tensor read by two ops on the same core).
template <class C>
void fork(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out0, hls::stream<beat<C::L>>& out1) {
  static_assert(detail::valid_lanes<C>(C::SIZE), "fork: SIZE must be positive and a multiple of L");
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> v = in.read();
    out0.write(v);
    out1.write(v);
  }
}

// Streams SIZE elements of a per-channel constant (C values, repeated every pixel): the second
// operand of an Add whose other input is a constant bias, in the order of the first operand.
template <class C>
void broadcast(const int8_t values[C::C], hls::stream<beat<C::L>>& out) {
  static_assert(detail::valid_lanes<C>(C::SIZE) && C::C > 0 && C::SIZE % C::C == 0,
                "broadcast: SIZE must be a multiple of C and of L");
  for (int i = 0; i < C::SIZE / C::L; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = values[(i * C::L + l) % C::C];
    }
    out.write(y);
  }
}

// Width conversion: SIZE elements from beats of A into beats of B (both dividing SIZE), in order,
// through a ring of 2*max(A, B) elements: each cycle reads a beat when there is room and writes
// one when enough has arrived, so it takes about max(SIZE/A, SIZE/B) + B/A cycles.
template <class C>
void regroup(hls::stream<beat<C::A>>& in, hls::stream<beat<C::B>>& out) {
  constexpr int CAP = 2 * detail::max_int(C::A, C::B);
  static_assert(C::A > 0 && C::B > 0 && C::SIZE % C::A == 0 && C::SIZE % C::B == 0,
                "regroup: A and B must divide SIZE");
  int8_t ring[CAP];
#pragma HLS ARRAY_PARTITION variable=ring complete
  int reads = C::SIZE / C::A, writes = C::SIZE / C::B, head = 0, tail = 0, held = 0;
  while (writes > 0) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    if (reads > 0 && held + C::A <= CAP) {
      const beat<C::A> x = in.read();
      for (int j = 0; j < C::A; ++j) {
#pragma HLS UNROLL
        ring[(head + j) % CAP] = x.v[j];
      }
      head = (head + C::A) % CAP;
      held += C::A;
      --reads;
    }
    if (held >= C::B) {
      beat<C::B> y;
      for (int j = 0; j < C::B; ++j) {
#pragma HLS UNROLL
        y.v[j] = ring[(tail + j) % CAP];
      }
      tail = (tail + C::B) % CAP;
      held -= C::B;
      --writes;
      out.write(y);
    }
  }
}

}  // namespace fp

#include "movement.h"  // slice, upsample, pad

#endif  // FPGAPLACE_KERNELS_H
