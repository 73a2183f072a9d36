// Test harness for hls_templates/hls/include/fpgaplace/kernels.h (used by tests/test_hls_kernels.py).
//
// Build: g++ -std=c++17 -O2 -Wall -Werror -Wno-unknown-pragmas -DFP_COUNT_TICKS -I hls_templates/hls/include
//        -I <dir with harness_cases.h> tests/cpp/kernel_harness.cpp
// harness_cases.h (written by the test) holds one config struct per case, named <kernel>_case_<id>,
// with the kernel's spec members as `static constexpr int`, and the list
//   #define FPGAPLACE_HARNESS_CASES(X) X(conv2d, 0) X(dense, 3) ...
//
// Run:   kernel_harness <kernel> <id> <dir>
// reads the case's inputs from <dir> (raw little-endian arrays, sizes fixed by the config:
// x.bin / a.bin b.bin / x0.bin x1.bin / x.bin g.bin (binary) int8 streams, w.bin int8 folded weights, bias.bin and
// mult.bin int32, shift.bin int8; values.bin for broadcast), runs the kernel on streams of beats of
// the case's widths and writes y.bin (y0.bin, y1.bin for fork) and ticks.bin (int64: the
// iterations its stage counted). It fails (exit 1) if a file has the wrong size, an input stream is not
// consumed to the end, or an output stream does not hold exactly the expected elements.
//
//        kernel_harness requantize <n> <dir>   /  kernel_harness requantize2 <n> <dir>
// applies fp::requantize (fp::requantize2) to n values: acc.bin int64 (a.bin, b.bin int64), m.bin
// int32 (ma.bin, mb.bin), s.bin int32, params.bin int32 [n][3] = zero point, lo, hi; writes y.bin.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <vector>

#include "fpgaplace/kernels.h"
#include "harness_cases.h"

namespace {

template <int N>
using Stream = hls::stream<fp::beat<N>>;

template <typename T>
std::vector<T> read_array(const std::string& path, std::size_t count) {
  std::ifstream file(path, std::ios::binary);
  if (!file) throw std::runtime_error("cannot open " + path);
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() != count * sizeof(T)) {
    throw std::runtime_error(path + ": " + std::to_string(bytes.size()) + " bytes, expected " +
                             std::to_string(count * sizeof(T)));
  }
  std::vector<T> values(count);
  std::copy(bytes.begin(), bytes.end(), reinterpret_cast<char*>(values.data()));
  return values;
}

template <typename T>
void write_array(const std::string& path, const std::vector<T>& values) {
  std::ofstream file(path, std::ios::binary);
  file.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(T)));
  if (!file) throw std::runtime_error("cannot write " + path);
}

// Writes `values` into `stream` as beats of N consecutive elements (N divides their count).
template <int N>
void fill(Stream<N>& stream, const std::vector<int8_t>& values) {
  if (values.size() % N != 0) throw std::runtime_error("input of " + std::to_string(values.size()) + " elements "
                                                       "is not a whole number of beats of " + std::to_string(N));
  for (std::size_t i = 0; i < values.size(); i += N) {
    fp::beat<N> b;
    for (int j = 0; j < N; ++j) b.v[j] = values[i + j];
    stream.write(b);
  }
}

template <int N>
void expect_consumed(const Stream<N>& stream, const char* name) {
  if (!stream.empty()) {
    throw std::runtime_error(std::string("input stream ") + name + " has " + std::to_string(stream.size()) +
                             " unread beats");
  }
}

template <int N>
void drain_to(Stream<N>& stream, std::size_t expected, const std::string& path) {
  if (stream.size() * N != expected) {
    throw std::runtime_error("output stream holds " + std::to_string(stream.size() * N) + " elements, expected " +
                             std::to_string(expected));
  }
  std::vector<int8_t> values;
  while (!stream.empty()) {
    const fp::beat<N> b = stream.read();
    values.insert(values.end(), b.v, b.v + N);
  }
  write_array(path, values);
}

// The loop iterations the kernel's stage counted (fp::tick_counters()[STAGE]), as ticks.bin.
template <class C>
void write_ticks(const std::string& dir) {
  write_array(dir + "/ticks.bin", std::vector<long long>{fp::tick_counters()[C::STAGE]});
}

struct ChannelParams {
  std::vector<int32_t> bias, mult;
  std::vector<int8_t> shift;
  ChannelParams(const std::string& dir, std::size_t channels)
      : bias(read_array<int32_t>(dir + "/bias.bin", channels)),
        mult(read_array<int32_t>(dir + "/mult.bin", channels)),
        shift(read_array<int8_t>(dir + "/shift.bin", channels)) {}
};

template <class C>
void run_conv2d(const std::string& dir) {
  const auto w = read_array<int8_t>(dir + "/w.bin", fp::ConvShape<C>::WEIGHTS);
  const ChannelParams params(dir, C::COUT);
  Stream<C::IW> in("conv2d.in");
  Stream<C::OW> out("conv2d.out");
  fill(in, read_array<int8_t>(dir + "/x.bin", std::size_t(C::H) * C::W * C::CIN));
  fp::conv2d<C>(in, out, w.data(), params.bias.data(), params.mult.data(), params.shift.data());
  expect_consumed(in, "x");
  drain_to(out, std::size_t(C::HO) * C::WO * C::COUT, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C>
void run_dense(const std::string& dir) {
  const auto w = read_array<int8_t>(dir + "/w.bin", std::size_t(C::N) * C::K);
  const ChannelParams params(dir, C::N);
  Stream<C::SIMD> in("dense.in");
  Stream<C::PE> out("dense.out");
  fill(in, read_array<int8_t>(dir + "/x.bin", C::K));
  fp::dense<C>(in, out, w.data(), params.bias.data(), params.mult.data(), params.shift.data());
  expect_consumed(in, "x");
  drain_to(out, C::N, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C, void (*Kernel)(Stream<C::PE * C::MMV>&, Stream<C::PE * C::MMV>&)>
void run_pool(const std::string& dir) {
  Stream<C::PE * C::MMV> in("pool.in"), out("pool.out");
  fill(in, read_array<int8_t>(dir + "/x.bin", std::size_t(C::H) * C::W * C::C));
  Kernel(in, out);
  expect_consumed(in, "x");
  drain_to(out, std::size_t(C::HO) * C::WO * C::C, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C>
void run_maxpool(const std::string& dir) {
  run_pool<C, fp::maxpool<C>>(dir);
}

template <class C>
void run_avgpool(const std::string& dir) {
  run_pool<C, fp::avgpool<C>>(dir);
}

template <class C>
void run_add(const std::string& dir) {
  Stream<C::L> a("add.a"), b("add.b"), out("add.out");
  fill(a, read_array<int8_t>(dir + "/a.bin", C::SIZE));
  fill(b, read_array<int8_t>(dir + "/b.bin", C::SIZE));
  fp::add<C>(a, b, out);
  expect_consumed(a, "a");
  expect_consumed(b, "b");
  drain_to(out, C::SIZE, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C>
void run_requant(const std::string& dir) {
  Stream<C::L> in("requant.in"), out("requant.out");
  fill(in, read_array<int8_t>(dir + "/x.bin", C::SIZE));
  fp::requant<C>(in, out);
  expect_consumed(in, "x");
  drain_to(out, C::SIZE, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C>
void run_concat2(const std::string& dir) {
  Stream<C::L> in0("concat2.in0"), in1("concat2.in1"), out("concat2.out");
  fill(in0, read_array<int8_t>(dir + "/x0.bin", std::size_t(C::PIXELS) * C::C0));
  fill(in1, read_array<int8_t>(dir + "/x1.bin", std::size_t(C::PIXELS) * C::C1));
  fp::concat2<C>(in0, in1, out);
  expect_consumed(in0, "x0");
  expect_consumed(in1, "x1");
  drain_to(out, std::size_t(C::PIXELS) * (C::C0 + C::C1), dir + "/y.bin");
}

template <class C>
void run_fork(const std::string& dir) {
  Stream<C::L> in("fork.in"), out0("fork.out0"), out1("fork.out1");
  fill(in, read_array<int8_t>(dir + "/x.bin", C::SIZE));
  fp::fork<C>(in, out0, out1);
  expect_consumed(in, "x");
  drain_to(out0, C::SIZE, dir + "/y0.bin");
  drain_to(out1, C::SIZE, dir + "/y1.bin");
}

template <class C>
void run_regroup(const std::string& dir) {
  Stream<C::A> in("regroup.in");
  Stream<C::B> out("regroup.out");
  fill(in, read_array<int8_t>(dir + "/x.bin", C::SIZE));
  fp::regroup<C>(in, out);
  expect_consumed(in, "x");
  drain_to(out, C::SIZE, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C>
void run_binary(const std::string& dir) {
  const int g_size = C::MODE == 0 ? C::SIZE : C::MODE == 1 ? C::C : C::SIZE / C::C;
  Stream<C::L> x("binary.x"), out("binary.out");
  Stream<C::G> g("binary.g");
  fill(x, read_array<int8_t>(dir + "/x.bin", C::SIZE));
  fill(g, read_array<int8_t>(dir + "/g.bin", g_size));
  fp::binary<C>(x, g, out);
  expect_consumed(x, "x");
  expect_consumed(g, "g");
  drain_to(out, C::SIZE, dir + "/y.bin");
  write_ticks<C>(dir);
}

template <class C>
void run_broadcast(const std::string& dir) {
  const auto values = read_array<int8_t>(dir + "/values.bin", C::C);
  Stream<C::L> out("broadcast.out");
  fp::broadcast<C>(values.data(), out);
  drain_to(out, C::SIZE, dir + "/y.bin");
}

void run_requantize_values(bool two_inputs, std::size_t n, const std::string& dir) {
  const auto s = read_array<int32_t>(dir + "/s.bin", n);
  const auto params = read_array<int32_t>(dir + "/params.bin", 3 * n);
  std::vector<int8_t> y(n);
  if (two_inputs) {
    const auto a = read_array<int64_t>(dir + "/a.bin", n), b = read_array<int64_t>(dir + "/b.bin", n);
    const auto ma = read_array<int32_t>(dir + "/ma.bin", n), mb = read_array<int32_t>(dir + "/mb.bin", n);
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = fp::requantize2(a[i], ma[i], b[i], mb[i], s[i], params[3 * i], params[3 * i + 1], params[3 * i + 2]);
    }
  } else {
    const auto acc = read_array<int64_t>(dir + "/acc.bin", n);
    const auto m = read_array<int32_t>(dir + "/m.bin", n);
    for (std::size_t i = 0; i < n; ++i) {
      y[i] = fp::requantize(acc[i], m[i], s[i], params[3 * i], params[3 * i + 1], params[3 * i + 2]);
    }
  }
  write_array(dir + "/y.bin", y);
}

bool run_case(const std::string& kernel, int id, const std::string& dir) {
#define FPGAPLACE_DISPATCH(KIND, ID)          \
  if (kernel == #KIND && id == ID) {          \
    run_##KIND<KIND##_case_##ID>(dir);        \
    return true;                              \
  }
  FPGAPLACE_HARNESS_CASES(FPGAPLACE_DISPATCH)
#undef FPGAPLACE_DISPATCH
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: %s <kernel> <case id> <dir>\n", argv[0]);
    return 2;
  }
  const std::string kernel = argv[1], dir = argv[3];
  try {
    if (kernel == "requantize" || kernel == "requantize2") {
      run_requantize_values(kernel == "requantize2", std::stoul(argv[2]), dir);
    } else if (!run_case(kernel, std::atoi(argv[2]), dir)) {
      std::fprintf(stderr, "no case %s %s in this build\n", argv[1], argv[2]);
      return 2;
    }
  } catch (const std::exception& error) {
    std::fprintf(stderr, "%s %s: %s\n", argv[1], argv[2], error.what());
    return 1;
  }
  return 0;
}
