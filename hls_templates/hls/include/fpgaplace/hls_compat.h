// fpgaplace HLS compatibility layer.
//
// Under Vitis HLS (__SYNTHESIS__ defined) or wherever the Vitis headers are on the include path,
// this includes the real <hls_stream.h>. Otherwise (plain g++ for C simulation) it defines a
// minimal software hls::stream<T>: an unbounded FIFO with read(), write(), empty(), size(),
// operator>> / operator<< and a name constructor. Reading an empty stream throws
// std::runtime_error naming the stream (a kernel that reads more than its producer wrote is a
// bug, and a throw lets a Python caller of a shared library survive it).
//
// `#pragma HLS ...` lines need nothing here: g++ ignores unknown pragmas (build with
// -Wno-unknown-pragmas). The kernels use plain <cstdint> integer types, so no ap_int aliases.
#ifndef FPGAPLACE_HLS_COMPAT_H
#define FPGAPLACE_HLS_COMPAT_H

#if defined(__SYNTHESIS__)
#define FPGAPLACE_VITIS_HEADERS 1
#elif defined(__has_include)
#if __has_include(<hls_stream.h>)
#define FPGAPLACE_VITIS_HEADERS 1
#endif
#endif

#ifdef FPGAPLACE_VITIS_HEADERS
#include <hls_stream.h>
#else
#include <cstddef>
#include <deque>
#include <stdexcept>
#include <string>

namespace hls {

template <typename T>
class stream {
 public:
  stream() : name_("stream") {}
  explicit stream(const char* name) : name_(name) {}
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  T read() {
    if (fifo_.empty()) {
      throw std::runtime_error("hls::stream '" + name_ + "': read from an empty stream");
    }
    T value = fifo_.front();
    fifo_.pop_front();
    return value;
  }
  void write(const T& value) { fifo_.push_back(value); }
  bool empty() const { return fifo_.empty(); }
  std::size_t size() const { return fifo_.size(); }
  void operator>>(T& value) { value = read(); }
  void operator<<(const T& value) { write(value); }

 private:
  std::string name_;
  std::deque<T> fifo_;
};

}  // namespace hls
#endif  // FPGAPLACE_VITIS_HEADERS

#endif  // FPGAPLACE_HLS_COMPAT_H
