// kafkalog: a C entry to C++ snappy's raw block compressor, for the Rust core (src/codec.rs).
#include <cstddef>

#include "snappy.h"

extern "C" size_t kafkalog_snappy_max_compressed_length(size_t n) { return snappy::MaxCompressedLength(n); }

extern "C" size_t kafkalog_snappy_raw_compress(const char* input, size_t n, char* out) {
  size_t len = 0;
  snappy::RawCompress(input, n, out, &len);
  return len;
}
