//! kafkalog's compiled record core (`kafkalog.storage._native`).
//!
//! The pure-Python decoder in `storage/records/batch.py` is the reference. This module is its fast path and
//! follows one contract: it either returns exactly what the Python decoder returns for the same bytes, or it
//! returns `None` ("unusual input") and the Python careful decoder gives the verdict (records, or the error
//! with its byte position and reason). Every read is bounds-checked (`slice::get`), so hostile bytes never
//! panic; arithmetic that could overflow an `i64` is checked and sends the batch to the careful decoder.
//! `unsafe` appears only at FFI boundaries: `buffer.rs` reads a Python buffer in place (and lends one to Arrow),
//! `codec.rs` calls the vendored C++ snappy, and `alloc.rs` sets a mimalloc option.
//!
//! This file only declares the modules and registers what Python sees (`storage/_native.pyi` types it). The
//! modules depend one way, each only on those listed before it:
//!
//! - `buffer`, `bytes`, `varint`, `checksum`: reading Python buffers, fixed-width integers, varints, CRCs;
//! - `codec`: compression and decompression;
//! - `record` (one v2 record's grammar), `py_record` (the Python `Record` class);
//! - `batch` (a v2 batch's records as Python objects), `legacy` (v0/v1 message sets), `convert` (v0/v1 to v2),
//!   `cleaner` (the compaction passes), `scan` (shallow scan and CRC);
//! - `projection` (the columns an Arrow builder materialises), `constant` (batch-level columns as slices of
//!   shared buffers), `views` (key and value columns as views into the
//!   records' bytes), `arrow` (records into Arrow columns);
//! - `alloc`, `info`, `fuzzing` (the core without Python, for the fuzz targets), and this file.

use pyo3::prelude::*;

mod alloc;
mod arrow;
mod batch;
mod buffer;
mod bytes;
mod checksum;
mod cleaner;
mod codec;
mod constant;
mod convert;
pub mod fuzzing;
mod info;
mod legacy;
mod projection;
mod py_record;
mod record;
mod scan;
mod varint;
mod views;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    alloc::configure();
    m.add_function(wrap_pyfunction!(alloc::allocator, m)?)?;
    m.add_class::<py_record::Record>()?;
    m.add_class::<arrow::ArrowRecords>()?;
    m.add_class::<arrow::ArrowChunk>()?;
    m.add_class::<cleaner::OffsetMapCore>()?;
    m.add_function(wrap_pyfunction!(batch::decode_records, m)?)?;
    m.add_function(wrap_pyfunction!(cleaner::map_records, m)?)?;
    m.add_function(wrap_pyfunction!(cleaner::scan_retained, m)?)?;
    m.add_function(wrap_pyfunction!(convert::legacy_to_v2, m)?)?;
    m.add_function(wrap_pyfunction!(convert::legacy_plain_run, m)?)?;
    m.add_function(wrap_pyfunction!(codec::lz4_block, m)?)?;
    m.add_function(wrap_pyfunction!(codec::zstd_stream, m)?)?;
    m.add_function(wrap_pyfunction!(codec::snappy_block, m)?)?;
    m.add_function(wrap_pyfunction!(codec::codec_versions, m)?)?;
    m.add_function(wrap_pyfunction!(scan::scan_crc, m)?)?;
    m.add_function(wrap_pyfunction!(codec::decompress, m)?)?;
    m.add_function(wrap_pyfunction!(batch::decode_compressed, m)?)?;
    m.add_function(wrap_pyfunction!(arrow::arrow_add_compressed, m)?)?;
    m.add_function(wrap_pyfunction!(legacy::legacy_records, m)?)?;
    m.add_function(wrap_pyfunction!(legacy::legacy_messages, m)?)?;
    m.add_function(wrap_pyfunction!(info::build_info, m)?)?;
    Ok(())
}
