//! Shallow scan + CRC32C of a buffer of log entries in one pass, with the GIL released: the native twin of
//! `LogScanner` + `RecordBatch.is_valid()` for runs of complete v2 entries (`storage/records/reader.scan_crc`).
//!
//! It stops, without judging, at anything else: a size field below the minimum or above `max_batch_size`, an
//! entry past the end, a legacy (v0/v1) entry, the end. The caller reads that entry through the records layer
//! (its errors, positions and reasons) and calls again after it.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// Scan the entries of `buf[start:end]`; returns `(positions, flags, stop)`: each complete v2 entry's
/// position (native-endian i64s, relative to `buf`), a flag per entry (1: at least 61 bytes and the stored
/// CRC32C matches, Kafka's `isValid`; 0: not), and where the scan stopped.
#[pyfunction]
#[pyo3(signature = (buf, start, end, max_batch_size=None))]
pub fn scan_crc<'py>(
    py: Python<'py>,
    buf: &Bound<'py, PyAny>,
    start: usize,
    end: usize,
    max_batch_size: Option<i64>,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyBytes>, usize)> {
    let view = crate::buffer::ByteView::new(buf)?;
    let d = view.as_slice();
    let end = end.min(d.len());
    let (positions, flags, stop) = py.allow_threads(|| scan(d, start, end, max_batch_size));
    Ok((PyBytes::new(py, &positions), PyBytes::new(py, &flags), stop))
}

/// `scan_crc` without Python.
pub fn scan(d: &[u8], start: usize, end: usize, max_batch_size: Option<i64>) -> (Vec<u8>, Vec<u8>, usize) {
    let mut positions = Vec::new();
    let mut flags = Vec::new();
    let mut pos = start;
    while pos < end && end - pos > 17 {
        let size = i32::from_be_bytes([d[pos + 8], d[pos + 9], d[pos + 10], d[pos + 11]]) as i64;
        if size < 14 || max_batch_size.is_some_and(|m| size > m) || size as usize > end - pos - 12 {
            break;
        }
        let magic = d[pos + 16];
        if !(2..128).contains(&magic) {
            break;
        }
        let entry = &d[pos..pos + 12 + size as usize];
        let valid = entry.len() >= 61 && {
            let stored = u32::from_be_bytes([entry[17], entry[18], entry[19], entry[20]]);
            stored == crate::checksum::crc32c(&entry[21..])
        };
        positions.extend_from_slice(&(pos as i64).to_ne_bytes());
        flags.push(u8::from(valid));
        pos += entry.len();
    }
    (positions, flags, pos)
}
