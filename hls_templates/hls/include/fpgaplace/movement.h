// fpgaplace int8 data movement kernels (namespace fp): slicing, nearest upsampling and padding, in the
// stream layout of kernels.h (beats of consecutive channels-last elements), bit-exact with
// fpgaplace/hw/reference.py. Included by kernels.h; the same conventions hold (config structs of
// static constexpr ints checked by static_assert, loops pipelined at II=1 and counted by FP_TICK).
//
//   slice<C>(in, out)     H W C H0 HN SH W0 WN SW C0 CN ZX M S ZY LO HI L STAGE; beats of L
//                         (L divides C, C0 and CN); H*W*C/L iterations: every input beat is read,
//                         the beats of rows H0 + i*SH (i < HN), pixels W0 + j*SW (j < WN) and
//                         channels [C0, C0 + CN) are requantized and written.
//   upsample<C>(in, out)  H W C RH RW ZX M S ZY LO HI L STAGE; beats of L (L divides C);
//                         H*RH*W*RW*C/L iterations, one output beat each: every input row gives RH
//                         output rows of each pixel repeated RW times, requantized. Input rows go
//                         to two row buffers of W*C/L beats (the row repeated and the next, read
//                         ahead when the input has data); a beat due before it arrived is read then.
//   pad<C>(in, out)       H W C PT PL PB PR PAD ZX M S ZY LO HI L STAGE; beats of L (L divides C);
//                         (H+PT+PB)*(W+PL+PR)*C/L iterations, one output beat each: an inner beat
//                         is read and requantized, a border beat is PAD in every lane.
//   avgpool_exclude<C>(in, out, mult, shift, tie)   the members of avgpool; average pooling without
//                         count_include_pad: the sum over a window's non-padded elements requantized
//                         by mult[n], shift[n] with midpoint band tie[n] for its n non-padded
//                         elements (tables of KH*KW + 1).
#ifndef FPGAPLACE_MOVEMENT_H
#define FPGAPLACE_MOVEMENT_H

namespace fp {

template <class C>
void slice(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out) {
  constexpr int CB = C::C / C::L;
  static_assert(C::H > 0 && C::W > 0 && C::C > 0 && C::L > 0, "slice: sizes must be positive");
  static_assert(C::C % C::L == 0 && C::C0 % C::L == 0 && C::CN % C::L == 0, "slice: L must divide C, C0 and CN");
  static_assert(C::HN > 0 && C::WN > 0 && C::CN > 0 && C::SH > 0 && C::SW > 0 && C::H0 >= 0 && C::W0 >= 0 &&
                    C::C0 >= 0 && C::H0 + (C::HN - 1) * C::SH < C::H && C::W0 + (C::WN - 1) * C::SW < C::W &&
                    C::C0 + C::CN <= C::C,
                "slice: the window must lie inside the input");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "slice: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "slice: need M >= 0 and 1 <= S <= 62");
  int cb = 0, w = 0, h = 0;
  for (int i = 0; i < C::H * C::W * CB; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const beat<C::L> x = in.read();
    const bool keep_c = cb >= C::C0 / C::L && cb < (C::C0 + C::CN) / C::L;
    const bool keep_w = w >= C::W0 && (w - C::W0) % C::SW == 0 && (w - C::W0) / C::SW < C::WN;
    const bool keep_h = h >= C::H0 && (h - C::H0) % C::SH == 0 && (h - C::H0) / C::SH < C::HN;
    if (keep_c && keep_w && keep_h) {
      beat<C::L> y;
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = requantize(static_cast<int64_t>(x.v[l]) - C::ZX, C::M, C::S, C::ZY, C::LO, C::HI);
      }
      out.write(y);
    }
    if (++cb == CB) {
      cb = 0;
      if (++w == C::W) {
        w = 0;
        ++h;
      }
    }
  }
}

template <class C>
void upsample(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out) {
  constexpr int CB = C::C / C::L, ROW = C::W * CB;
  static_assert(C::H > 0 && C::W > 0 && C::C > 0 && C::L > 0 && C::C % C::L == 0,
                "upsample: sizes must be positive and L must divide C");
  static_assert(C::RH > 0 && C::RW > 0, "upsample: factors must be positive");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "upsample: zero points and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "upsample: need M >= 0 and 1 <= S <= 62");
  beat<C::L> rows[2][ROW];  // the row being repeated and the next, read ahead
  int cb = 0, rw = 0, base = 0, rh = 0;           // the output beat: its channel beat, pixel copy, pixel, row copy
  int waddr = 0, wslot = 0, eslot = 0, held = 0;  // the beat read next; rows read whole and not yet repeated
  int rows_read = 0;
  for (int i = 0; i < C::H * C::RH * C::W * C::RW * CB; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const int at = base + cb;
    const bool due = held == 0 && at == waddr;  // the beat written out now has not arrived yet
    beat<C::L> arrived;
    if (rows_read < C::H && (due || (held < 2 && !in.empty()))) {
      arrived = in.read();
      rows[wslot][waddr] = arrived;
      if (++waddr == ROW) {
        waddr = 0;
        wslot ^= 1;
        ++held;
        ++rows_read;
      }
    }
    const beat<C::L> x = due ? arrived : rows[eslot][at];
    beat<C::L> y;
    for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
      y.v[l] = requantize(static_cast<int64_t>(x.v[l]) - C::ZX, C::M, C::S, C::ZY, C::LO, C::HI);
    }
    out.write(y);
    if (++cb == CB) {
      cb = 0;
      if (++rw == C::RW) {
        rw = 0;
        base += CB;
        if (base == ROW) {
          base = 0;
          if (++rh == C::RH) {
            rh = 0;
            eslot ^= 1;
            --held;
          }
        }
      }
    }
  }
}

template <class C>
void pad(hls::stream<beat<C::L>>& in, hls::stream<beat<C::L>>& out) {
  constexpr int CB = C::C / C::L, HO = C::H + C::PT + C::PB, WO = C::W + C::PL + C::PR;
  static_assert(C::H > 0 && C::W > 0 && C::C > 0 && C::L > 0 && C::C % C::L == 0,
                "pad: sizes must be positive and L must divide C");
  static_assert(C::PT >= 0 && C::PL >= 0 && C::PB >= 0 && C::PR >= 0, "pad: pads must not be negative");
  static_assert(detail::is_int8(C::ZX) && detail::is_int8(C::PAD) && detail::valid_output(C::ZY, C::LO, C::HI),
                "pad: zero points, PAD and LO <= HI must be int8");
  static_assert(detail::valid_rescale(C::M, C::S), "pad: need M >= 0 and 1 <= S <= 62");
  int cb = 0, w = 0, h = 0;
  for (int i = 0; i < HO * WO * CB; ++i) {
#pragma HLS PIPELINE II=1
    FP_TICK(C::STAGE);
    const bool inside = h >= C::PT && h < C::PT + C::H && w >= C::PL && w < C::PL + C::W;
    beat<C::L> y;
    if (inside) {
      const beat<C::L> x = in.read();
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = requantize(static_cast<int64_t>(x.v[l]) - C::ZX, C::M, C::S, C::ZY, C::LO, C::HI);
      }
    } else {
      for (int l = 0; l < C::L; ++l) {
#pragma HLS UNROLL
        y.v[l] = C::PAD;
      }
    }
    out.write(y);
    if (++cb == CB) {
      cb = 0;
      if (++w == WO) {
        w = 0;
        ++h;
      }
    }
  }
}

template <class C>
void avgpool_exclude(hls::stream<beat<C::PE * C::MMV>>& in, hls::stream<beat<C::PE * C::MMV>>& out,
                     const int32_t mult[C::KH * C::KW + 1], const int8_t shift[C::KH * C::KW + 1],
                     const int8_t tie[C::KH * C::KW + 1]) {
  static_assert(detail::valid_pool<C>() && !detail::is_global_pool<C>(), "avgpool_exclude: a padded window");
  static_assert(C::PE > 0 && C::C % C::PE == 0 && C::MMV > 0, "avgpool_exclude: PE must divide C");
  static_assert(detail::is_int8(C::ZX) && detail::valid_output(C::ZY, C::LO, C::HI),
                "avgpool_exclude: zero points and LO <= HI must be int8");
  detail::PoolStep<C, detail::SumReduce, detail::CountScale> step{out, {mult, shift, tie}};
  detail::slide_rows<C, C::C, C::PE * C::MMV, C::KH, C::WO / C::MMV * (C::C / C::PE)>(in, step);
}

}  // namespace fp

#endif  // FPGAPLACE_MOVEMENT_H
