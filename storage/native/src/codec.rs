//! Compression as Kafka's producer and broker compress, byte for byte: the same C libraries at the versions
//! Kafka 3.9 and 4.x bundle (liblz4 1.10.0 as in lz4-java 1.10, libzstd 1.5.6 as in zstd-jni 1.5.6, C++ snappy
//! giving snappy-java 1.1.10's bytes: 1.1.9, vendored under `snappy/`), called the way Kafka's
//! `Lz4BlockOutputStream`, `ZstdCompression` and `SnappyOutputStream` call them. The framings (Kafka's lz4
//! frame, xerial's snappy framing, gzip's, whose zlib output already matches) stay in
//! `storage/codec/compression.py`.
//! `tests/kafka/test_compression_parity.py` compresses the same bytes through Kafka's own classes on the JDK.

use std::io::Write;

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::ByteView;

/// Kafka's default lz4 level: `Lz4BlockOutputStream` then uses lz4-java's fast compressor.
const LZ4_DEFAULT_LEVEL: i32 = 9;

/// One lz4 block (raw, without a size prefix) as `Lz4BlockOutputStream.writeBlock` compresses it: the fast
/// compressor (`LZ4_compress_default`) at the default level, else the high compressor (`LZ4_compress_HC`) at
/// `level`.
#[pyfunction]
pub(crate) fn lz4_block<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, level: i32) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    let out = lz4_block_bytes(view.as_slice(), level).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &out))
}

/// `lz4_block` without Python.
pub fn lz4_block_bytes(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let mode =
        if level == LZ4_DEFAULT_LEVEL { None } else { Some(lz4::block::CompressionMode::HIGHCOMPRESSION(level)) };
    lz4::block::compress(data, mode, false)
}

/// A zstd frame as `ZstdCompression.wrapForOutput` writes one: a streaming compression (no checksum) fed through a 16 KiB `BufferedOutputStream`, flushed and then ended when the stream closes.
#[pyfunction]
pub(crate) fn zstd_stream<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, level: i32) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    let out = zstd_stream_bytes(view.as_slice(), level).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &out))
}

/// `zstd_stream` without Python.
pub fn zstd_stream_bytes(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let mut enc = zstd::stream::Encoder::new(Vec::with_capacity(data.len() / 2 + 64), level)?;
    enc.include_checksum(false)?;
    // libzstd's default content-size flag (on), as zstd-jni leaves it: a streamed frame's size is unknown when
    // its header is written, except for an empty input ended in one call (its header then says 0)
    for chunk in data.chunks(16 * 1024) {
        enc.write_all(chunk)?;
    }
    // closing the stream flushes it first (`BufferedOutputStream.close` -> `ZstdOutputStream.flush`): the data
    // ends in a block that is not the last, and the end of the frame is an empty last block. With no data at
    // all nothing is flushed, and the end is the frame's first call (libzstd then writes the content size, 0).
    if !data.is_empty() {
        enc.flush()?;
    }
    enc.finish()
}

extern "C" {
    fn kafkalog_snappy_max_compressed_length(n: usize) -> usize;
    fn kafkalog_snappy_raw_compress(input: *const u8, n: usize, out: *mut u8) -> usize;
}

/// One raw snappy block (`snappy::RawCompress`, as snappy-java's `Snappy.compress` of one xerial chunk).
#[pyfunction]
pub(crate) fn snappy_block<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    let out = snappy_block_bytes(view.as_slice()).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// `snappy_block` without Python.
pub fn snappy_block_bytes(data: &[u8]) -> Result<Vec<u8>, &'static str> {
    // SAFETY: the FFI boundary. MaxCompressedLength has no preconditions; RawCompress reads exactly `n` bytes
    // of `input` (a live slice of that length) and writes at most MaxCompressedLength(n) bytes to `out`, which
    // is that long; it returns how many it wrote.
    let max = unsafe { kafkalog_snappy_max_compressed_length(data.len()) };
    let mut out = vec![0u8; max];
    let n = unsafe { kafkalog_snappy_raw_compress(data.as_ptr(), data.len(), out.as_mut_ptr()) };
    if n > max {
        return Err("snappy wrote past its bound");
    }
    out.truncate(n);
    Ok(out)
}

/// The versions of the compression libraries compiled in (lz4, zstd, snappy).
#[pyfunction]
pub(crate) fn codec_versions() -> (String, String, String) {
    let z = zstd::zstd_safe::version_number();
    let zstd = format!("{}.{}.{}", z / 10000, z / 100 % 100, z % 100);
    let l = lz4::version();
    let lz4 = format!("{}.{}.{}", l / 10000, l / 100 % 100, l % 100);
    (lz4, zstd, "1.1.9".to_string())
}
