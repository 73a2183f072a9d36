// fpgaplace int8 dataflow kernels (namespace fp), bit-exact with fpgaplace/hw/reference.py.
//
// Semantics: see the int8 hardware spec (fpgaplace.hw.quant / fpgaplace.hw.reference). Every
// kernel processes one sample per call, reads its input stream(s) and writes its output stream
// one int8 element per read/write, in channels-last order (for h, for w, for c). Each kernel is
// a template on a config struct of `static constexpr int` members, checked by static_assert.
//
// Kernels and config members:
//   conv2d<C>(in, out, w, bias, mult, shift)  H W CIN COUT KH KW SH SW PT PL PB PR DH DW GROUPS
//                                            HO WO ZX ZY LO HI PE SIMD
//   dense<C>(in, out, w, bias, mult, shift)   K N ZX ZY LO HI PE SIMD
//   maxpool<C>(in, out), avgpool<C>(in, out)  H W C KH KW SH SW PT PL PB PR HO WO ZX ZY LO HI M S
//   add<C>(a, b, out)                         SIZE ZA MA ZB MB S ZY LO HI
//   requant<C>(in, out)                       SIZE ZX M S ZY LO HI
//   concat2<C>(in0, in1, out)                 PIXELS C0 C1 Z0 M0 S0 Z1 M1 S1 ZY LO HI
//   fork<C>(in, out0, out1)                   SIZE
//   broadcast<C>(values, out)                 SIZE C   (a per-channel constant, every pixel)
//
// Additions to the spec (no deviation in names or signatures):
// * Weight order. `w` of conv2d/dense is NOT the plain [COUT][KH][KW][CIN/GROUPS] / [N][K] order
//   but that matrix folded as [COUT/PE][KK/SIMD][PE][SIMD] (KK = KH*KW*CIN/GROUPS, or K), so
//   the PE*SIMD weights one cycle multiplies are adjacent and `ARRAY_PARTITION cyclic
//   factor=PE*SIMD` gives each lane its own bank. fpgaplace.hw.reference.fold_weights produces
//   it. bias, mult and shift are in plain output-channel order (cyclic factor=PE banks).
// * Grouped conv: any PE dividing COUT computes correctly, but the window partition is exact
//   (one bank per lane, so II=1 under HLS) only when PE divides COUT/GROUPS or is a multiple
//   of it: a fold's PE channels then lie in one group or in whole consecutive groups.
// * Conv's line buffer holds DH*(KH-1)+1 rows (= KH rows without dilation).
// * Accumulation: each dot product in int32 (static_assert that KK*255*128 < 2**31), plus the
//   int32 bias in int64; requantization in int64, as fp::requantize.
// * Global pooling (KH == H, KW == W, no pads) accumulates per channel while the input streams
//   in, with no line buffer.
// The weight/bias/multiplier/shift arrays are declared with their sizes (they still decay to
// pointers, so callers pass arrays or pointers as before) so that HLS can partition them.
//
// Under plain g++ the `#pragma HLS` lines are ignored (-Wno-unknown-pragmas); they say how the
// loops map to hardware: the pixel and fold loops are pipelined at II=1, the PE and SIMD lanes
// unrolled, and the arrays they read in one cycle partitioned accordingly. No dynamic memory.
//
// Loop structure (cycles per sample at II=1, ignoring pipeline fill), for a cost model to match:
//   conv2d  H*W*CIN reads + HO*WO * (KH*KW*CIN/G gather + COUT/PE * (KKG/SIMD + PE)),
//           G = gcd(SIMD, CIN/GROUPS) (the window gather and the MVAU run one after the other)
//   dense   K + N/PE * (K/SIMD + PE)
//   pools   H*W*C reads + HO*WO*C (window read in one cycle); global: H*W*C + 2*C
//   add, requant, fork: SIZE; concat2: PIXELS*(C0+C1)
#ifndef FPGAPLACE_KERNELS_H
#define FPGAPLACE_KERNELS_H

#include <cstdint>

#include "hls_compat.h"

namespace fp {

// ---------------------------------------------------------------- requantization

namespace detail {

// clip(round_half_even(v / 2**s) + zp, lo, hi): arithmetic shift (floor), remainder test for
// round half to even (the remainder as v - q*2**s, which never overflows since q*2**s <= v).
inline int8_t shift_round_clip(int64_t v, int s, int zp, int lo, int hi) {
#pragma HLS INLINE
  const int64_t q = v >> s;  // gcc: arithmetic shift of a negative int64_t
  const int64_t r = v - q * (int64_t(1) << s);
  const int64_t half = int64_t(1) << (s - 1);
  const bool round_up = (r > half) || (r == half && (q & 1) != 0);
  int64_t y = q + (round_up ? 1 : 0) + zp;
  if (y < lo) y = lo;
  if (y > hi) y = hi;
  return static_cast<int8_t>(y);
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

}  // namespace detail

// requantize(acc) = clip(round_half_even(acc * m / 2**s) + zp, lo, hi); needs |acc| < 2**32,
// 0 <= m < 2**31, 1 <= s <= 62.
inline int8_t requantize(int64_t acc, int32_t m, int s, int zp, int lo, int hi) {
#pragma HLS INLINE
  return detail::shift_round_clip(acc * static_cast<int64_t>(m), s, zp, lo, hi);
}

// requantize2(a, b) = clip(round_half_even((a*ma + b*mb) / 2**s) + zp, lo, hi); |a|, |b| < 2**31.
inline int8_t requantize2(int64_t a, int32_t ma, int64_t b, int32_t mb, int s, int zp, int lo, int hi) {
#pragma HLS INLINE
  return detail::shift_round_clip(a * static_cast<int64_t>(ma) + b * static_cast<int64_t>(mb), s, zp, lo, hi);
}

// ---------------------------------------------------------------- shared building blocks

namespace detail {

// Reads input rows [first, last] of a [.][W][C] stream into a circular line buffer of R rows
// (row ih in slot ih % R); returns the number of rows read so far. One element per cycle.
template <int R, int W, int C>
int fill_rows(hls::stream<int8_t>& in, int8_t line[R][W][C], int first, int last) {
#pragma HLS INLINE
  for (int ih = first; ih <= last; ++ih) {
    for (int iw = 0; iw < W; ++iw) {
      for (int c = 0; c < C; ++c) {
#pragma HLS PIPELINE II=1
        line[ih % R][iw][c] = in.read();
      }
    }
  }
  return max_int(first, last + 1);
}

// Matrix-vector unit (FINN's MVAU shape): for each of COUT/PE folds, TILES = KKG/SIMD cycles
// of PE x SIMD multiply-accumulates, then the fold's PE outputs are requantized and written.
// win[g][k] is element k of group g's im2col column; output channel co reads group co/CPG.
template <int GROUPS, int KKG, int COUT, int PE, int SIMD, int ZX, int ZY, int LO, int HI>
void mvau(const int8_t win[GROUPS][KKG], const int8_t w[], const int32_t bias[], const int32_t mult[],
          const int8_t shift[], hls::stream<int8_t>& out) {
#pragma HLS INLINE
  constexpr int NF = COUT / PE;
  constexpr int TILES = KKG / SIMD;
  constexpr int CPG = COUT / GROUPS;
  for (int nf = 0; nf < NF; ++nf) {
    int32_t dot[PE];
#pragma HLS ARRAY_PARTITION variable=dot complete
    for (int p = 0; p < PE; ++p) {
#pragma HLS UNROLL
      dot[p] = 0;
    }
    for (int t = 0; t < TILES; ++t) {
#pragma HLS PIPELINE II=1
      for (int p = 0; p < PE; ++p) {
#pragma HLS UNROLL
        const int group = (nf * PE + p) / CPG;
        int32_t partial = 0;
        for (int i = 0; i < SIMD; ++i) {
#pragma HLS UNROLL
          const int32_t x = static_cast<int32_t>(win[group][t * SIMD + i]) - ZX;
          partial += x * static_cast<int32_t>(w[((nf * TILES + t) * PE + p) * SIMD + i]);
        }
        dot[p] += partial;
      }
    }
    for (int p = 0; p < PE; ++p) {
#pragma HLS PIPELINE II=1
      const int co = nf * PE + p;
      out.write(requantize(static_cast<int64_t>(bias[co]) + dot[p], mult[co], shift[co], ZY, LO, HI));
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
  static constexpr int ROWS = C::DH * (C::KH - 1) + 1;  // line buffer rows
  // channels gathered per cycle: consecutive channels of one group land in consecutive window
  // elements, which fall in distinct SIMD banks as long as there are at most SIMD of them
  static constexpr int GATHER = detail::gcd(C::SIMD, CG);
};

// y[HO][WO][COUT] = requantize(bias + sum (x - ZX) * w over the window, mult, shift, ZY, LO, HI).
// Input rows enter a line buffer of ConvShape::ROWS rows; for each output pixel the window is
// gathered (GATHER = gcd(SIMD, CIN/GROUPS) channels per cycle) into a per-group im2col column
// and the MVAU computes the COUT outputs in COUT/PE folds of KKG/SIMD cycles.
template <class C>
void conv2d(hls::stream<int8_t>& in, hls::stream<int8_t>& out, const int8_t w[ConvShape<C>::WEIGHTS],
            const int32_t bias[C::COUT], const int32_t mult[C::COUT], const int8_t shift[C::COUT]) {
  using S = ConvShape<C>;
  constexpr int CG = S::CG, KKG = S::KKG, R = S::ROWS, GATHER = S::GATHER;
  constexpr int CPG = C::COUT / C::GROUPS;
  // named for the pragmas (unused by g++, which ignores them)
  [[maybe_unused]] constexpr int PE = C::PE, SIMD = C::SIMD, LANES = PE * SIMD;
  [[maybe_unused]] constexpr int GROUP_LANES = C::PE > CPG ? C::PE / CPG : 1;  // groups one fold reads at once
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
  static_assert(C::SIMD > 0 && KKG % C::SIMD == 0, "conv2d: SIMD must divide KH*KW*CIN/GROUPS");
  static_assert(KKG <= detail::MAX_DOT_LENGTH, "conv2d: dot product too long for an int32 accumulator");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "conv2d: zero points and LO <= HI must be int8");
#pragma HLS ARRAY_PARTITION variable=w cyclic factor=LANES
#pragma HLS ARRAY_PARTITION variable=bias cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=mult cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=shift cyclic factor=PE
  int8_t line[R][C::W][C::CIN];
#pragma HLS ARRAY_PARTITION variable=line cyclic factor=GATHER dim=3
  int8_t win[C::GROUPS][KKG];
#pragma HLS ARRAY_PARTITION variable=win cyclic factor=SIMD dim=2
#pragma HLS ARRAY_PARTITION variable=win cyclic factor=GROUP_LANES dim=1
  int rows_read = 0;
  for (int ho = 0; ho < C::HO; ++ho) {
    const int top = ho * C::SH - C::PT;
    rows_read = detail::fill_rows<R, C::W, C::CIN>(in, line, rows_read, detail::min_int(C::H - 1, top + R - 1));
    for (int wo = 0; wo < C::WO; ++wo) {
      const int left = wo * C::SW - C::PL;
      for (int kh = 0; kh < C::KH; ++kh) {
        const int ih = top + kh * C::DH;
        const bool row_inside = ih >= 0 && ih < C::H;
        const int slot = row_inside ? ih % R : 0;
        for (int kw = 0; kw < C::KW; ++kw) {
          const int iw = left + kw * C::DW;
          const bool inside = row_inside && iw >= 0 && iw < C::W;
          const int col = inside ? iw : 0;
          for (int c0 = 0; c0 < C::CIN; c0 += GATHER) {
#pragma HLS PIPELINE II=1
            for (int j = 0; j < GATHER; ++j) {
#pragma HLS UNROLL
              // a padded position holds ZX, so that its (x - ZX) contributes 0
              const int c = c0 + j;
              win[c / CG][(kh * C::KW + kw) * CG + c % CG] = inside ? line[slot][col][c] : static_cast<int8_t>(C::ZX);
            }
          }
        }
      }
      detail::mvau<C::GROUPS, KKG, C::COUT, C::PE, C::SIMD, C::ZX, C::ZY, C::LO, C::HI>(win, w, bias, mult, shift,
                                                                                      out);
    }
  }
  detail::fill_rows<R, C::W, C::CIN>(in, line, rows_read, C::H - 1);  // rows below the last window
}

// ---------------------------------------------------------------- dense

// y[N] = requantize(bias + sum_k (x[k] - ZX) * w[n][k], mult, shift, ZY, LO, HI): the input
// vector is buffered (SIMD banks), then the MVAU computes N/PE folds of K/SIMD cycles.
template <class C>
void dense(hls::stream<int8_t>& in, hls::stream<int8_t>& out, const int8_t w[C::N * C::K], const int32_t bias[C::N],
           const int32_t mult[C::N], const int8_t shift[C::N]) {
  [[maybe_unused]] constexpr int PE = C::PE, SIMD = C::SIMD, LANES = PE * SIMD;  // for the pragmas
  static_assert(C::K > 0 && C::N > 0, "dense: sizes must be positive");
  static_assert(C::PE > 0 && C::N % C::PE == 0, "dense: PE must divide N");
  static_assert(C::SIMD > 0 && C::K % C::SIMD == 0, "dense: SIMD must divide K");
  static_assert(C::K <= detail::MAX_DOT_LENGTH, "dense: dot product too long for an int32 accumulator");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "dense: zero points and LO <= HI must be int8");
#pragma HLS ARRAY_PARTITION variable=w cyclic factor=LANES
#pragma HLS ARRAY_PARTITION variable=bias cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=mult cyclic factor=PE
#pragma HLS ARRAY_PARTITION variable=shift cyclic factor=PE
  int8_t x[1][C::K];
#pragma HLS ARRAY_PARTITION variable=x cyclic factor=SIMD dim=2
  for (int k = 0; k < C::K; ++k) {
#pragma HLS PIPELINE II=1
    x[0][k] = in.read();
  }
  detail::mvau<1, C::K, C::N, C::PE, C::SIMD, C::ZX, C::ZY, C::LO, C::HI>(x, w, bias, mult, shift, out);
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

// Global pooling: one accumulator per channel, updated as the input streams in.
template <class C, class Reduce>
void global_pool(hls::stream<int8_t>& in, hls::stream<int8_t>& out) {
#pragma HLS INLINE
  int32_t acc[C::C];
  for (int c = 0; c < C::C; ++c) {
#pragma HLS PIPELINE II=1
    acc[c] = Reduce::INIT;
  }
  for (int i = 0; i < C::H * C::W; ++i) {
    for (int c = 0; c < C::C; ++c) {
#pragma HLS PIPELINE II=1
      acc[c] = Reduce::combine(acc[c], in.read(), C::ZX);
    }
  }
  for (int c = 0; c < C::C; ++c) {
#pragma HLS PIPELINE II=1
    out.write(requantize(Reduce::finish(acc[c], C::ZX), C::M, C::S, C::ZY, C::LO, C::HI));
  }
}

// Windowed pooling through a line buffer of KH rows: per output pixel and channel (II=1), the
// KH x KW window is read in one cycle (rows completely partitioned, columns in KW banks).
template <class C, class Reduce>
void window_pool(hls::stream<int8_t>& in, hls::stream<int8_t>& out) {
#pragma HLS INLINE
  [[maybe_unused]] constexpr int KW = C::KW;  // for the pragma
  int8_t line[C::KH][C::W][C::C];
#pragma HLS ARRAY_PARTITION variable=line complete dim=1
#pragma HLS ARRAY_PARTITION variable=line cyclic factor=KW dim=2
  int rows_read = 0;
  for (int ho = 0; ho < C::HO; ++ho) {
    const int top = ho * C::SH - C::PT;
    rows_read = fill_rows<C::KH, C::W, C::C>(in, line, rows_read, min_int(C::H - 1, top + C::KH - 1));
    for (int wo = 0; wo < C::WO; ++wo) {
      const int left = wo * C::SW - C::PL;
      for (int c = 0; c < C::C; ++c) {
#pragma HLS PIPELINE II=1
        int32_t acc = Reduce::INIT;
        for (int kh = 0; kh < C::KH; ++kh) {
#pragma HLS UNROLL
          for (int kw = 0; kw < C::KW; ++kw) {
#pragma HLS UNROLL
            const int ih = top + kh, iw = left + kw;
            if (ih >= 0 && ih < C::H && iw >= 0 && iw < C::W) {
              acc = Reduce::combine(acc, line[ih % C::KH][iw][c], C::ZX);
            }
          }
        }
        out.write(requantize(Reduce::finish(acc, C::ZX), C::M, C::S, C::ZY, C::LO, C::HI));
      }
    }
  }
  fill_rows<C::KH, C::W, C::C>(in, line, rows_read, C::H - 1);  // rows below the last window
}

template <class C, class Reduce>
void pool2d(hls::stream<int8_t>& in, hls::stream<int8_t>& out) {
  static_assert(valid_pool<C>(), "pool: sizes, kernel and stride must be positive, 0 <= pads < kernel");
  static_assert(C::HO == out_size(C::H, C::KH, C::SH, C::PT, C::PB, 1), "pool: HO mismatch");
  static_assert(C::WO == out_size(C::W, C::KW, C::SW, C::PL, C::PR, 1), "pool: WO mismatch");
  static_assert(C::HO > 0 && C::WO > 0, "pool: the kernel must fit in the padded input");
  static_assert(C::KH * C::KW * 255 < 2147483647 / 2, "pool: window too large");
  static_assert(is_int8(C::ZX) && valid_output(C::ZY, C::LO, C::HI), "pool: zero points and LO <= HI must be int8");
  static_assert(valid_rescale(C::M, C::S), "pool: need M >= 0 and 1 <= S <= 62");
  if constexpr (is_global_pool<C>()) {
    global_pool<C, Reduce>(in, out);
  } else {
    window_pool<C, Reduce>(in, out);
  }
}

}  // namespace detail

// y = requantize(max over the window's non-padded x  -  ZX, M, S, ZY, LO, HI).
template <class C>
void maxpool(hls::stream<int8_t>& in, hls::stream<int8_t>& out) {
  detail::pool2d<C, detail::MaxReduce>(in, out);
}

// y = requantize(sum over the window's non-padded (x - ZX), M, S, ZY, LO, HI); 1/count is in M, S.
template <class C>
void avgpool(hls::stream<int8_t>& in, hls::stream<int8_t>& out) {
  detail::pool2d<C, detail::SumReduce>(in, out);
}

// ---------------------------------------------------------------- elementwise

// y = requantize2(a - ZA, MA, b - ZB, MB, S, ZY, LO, HI), SIZE elements.
template <class C>
void add(hls::stream<int8_t>& a, hls::stream<int8_t>& b, hls::stream<int8_t>& out) {
  static_assert(C::SIZE > 0, "add: SIZE must be positive");
  static_assert(detail::is_int8(C::ZA) && detail::is_int8(C::ZB) && detail::valid_output(C::ZY, C::LO, C::HI),
                "add: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::MA, C::S) && C::MB >= 0, "add: need MA, MB >= 0 and 1 <= S <= 62");
  for (int i = 0; i < C::SIZE; ++i) {
#pragma HLS PIPELINE II=1
    const int64_t da = static_cast<int64_t>(a.read()) - C::ZA;
    const int64_t db = static_cast<int64_t>(b.read()) - C::ZB;
    out.write(requantize2(da, C::MA, db, C::MB, C::S, C::ZY, C::LO, C::HI));
  }
}

// y = requantize(x - ZX, M, S, ZY, LO, HI), SIZE elements (standalone ReLU / Clip / rescale).
template <class C>
void requant(hls::stream<int8_t>& in, hls::stream<int8_t>& out) {
  static_assert(C::SIZE > 0, "requant: SIZE must be positive");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "requant: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "requant: need M >= 0 and 1 <= S <= 62");
  for (int i = 0; i < C::SIZE; ++i) {
#pragma HLS PIPELINE II=1
    out.write(requantize(static_cast<int64_t>(in.read()) - C::ZX, C::M, C::S, C::ZY, C::LO, C::HI));
  }
}

// Channel concatenation of two [PIXELS][C0] and [PIXELS][C1] streams into [PIXELS][C0 + C1], each
// input requantized to the output (zero point, multiplier and shift per input). Vectors are
// PIXELS = 1. More inputs: chain concat2.
template <class C>
void concat2(hls::stream<int8_t>& in0, hls::stream<int8_t>& in1, hls::stream<int8_t>& out) {
  static_assert(C::PIXELS > 0 && C::C0 > 0 && C::C1 > 0, "concat2: sizes must be positive");
  static_assert(detail::is_int8(C::Z0) && detail::is_int8(C::Z1) && detail::valid_output(C::ZY, C::LO, C::HI),
                "concat2: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M0, C::S0) && detail::valid_rescale(C::M1, C::S1),
                "concat2: need M0, M1 >= 0 and 1 <= S0, S1 <= 62");
  for (int p = 0; p < C::PIXELS; ++p) {
    for (int c = 0; c < C::C0; ++c) {
#pragma HLS PIPELINE II=1
      out.write(requantize(static_cast<int64_t>(in0.read()) - C::Z0, C::M0, C::S0, C::ZY, C::LO, C::HI));
    }
    for (int c = 0; c < C::C1; ++c) {
#pragma HLS PIPELINE II=1
      out.write(requantize(static_cast<int64_t>(in1.read()) - C::Z1, C::M1, C::S1, C::ZY, C::LO, C::HI));
    }
  }
}

// Copies SIZE elements of one stream into two (a tensor read by two ops on the same core).
template <class C>
void fork(hls::stream<int8_t>& in, hls::stream<int8_t>& out0, hls::stream<int8_t>& out1) {
  static_assert(C::SIZE > 0, "fork: SIZE must be positive");
  for (int i = 0; i < C::SIZE; ++i) {
#pragma HLS PIPELINE II=1
    const int8_t v = in.read();
    out0.write(v);
    out1.write(v);
  }
}

// Streams SIZE elements of a per-channel constant (C values, repeated every pixel): the second
// operand of an Add whose other input is a constant bias, in the order of the first operand.
template <class C>
void broadcast(const int8_t values[C::C], hls::stream<int8_t>& out) {
  static_assert(C::SIZE > 0 && C::C > 0 && C::SIZE % C::C == 0, "broadcast: SIZE must be a multiple of C");
  for (int i = 0; i < C::SIZE; ++i) {
#pragma HLS PIPELINE II=1
    out.write(values[i % C::C]);
  }
}

}  // namespace fp

#endif  // FPGAPLACE_KERNELS_H
