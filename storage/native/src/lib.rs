//! kafkalog's compiled record core (`kafkalog.storage._native`).
//!
//! The pure-Python decoder in `storage/records/batch.py` is the reference. This module is its fast path and
//! follows one contract: it either returns exactly what the Python decoder returns for the same bytes, or it
//! returns `None` ("unusual input") and the Python careful decoder gives the verdict (records, or the error
//! with its byte position and reason). Every read is bounds-checked (`slice::get`), so hostile bytes never
//! panic; arithmetic that could overflow an `i64` is checked and sends the batch to the careful decoder.
//! `unsafe` appears only at FFI boundaries: `buffer.rs` reads a Python buffer in place, and `codec.rs` calls the
//! vendored C++ snappy, and `alloc.rs` sets a mimalloc option.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString, PyTuple};

mod alloc;
mod arrow;
mod buffer;
mod checksum;
mod cleaner;
mod codec;
mod convert;
pub mod fuzzing;
mod legacy;
mod record;
mod scan;

use record::Record;

const INT32_MAX: i64 = 2_147_483_647;

/// Kafka's unsigned varint (at most 5 bytes; the fifth contributes its low 4 bits), as
/// `ByteUtils.readUnsignedVarint` and `storage/codec/varint.read_uvarint`. `None` past `end` or when too long.
#[inline(always)]
fn uvarint(d: &[u8], p: &mut usize, end: usize) -> Option<u32> {
    // one byte: most lengths, deltas and counts of a record
    if *p < end {
        if let Some(&b) = d.get(*p) {
            if b & 0x80 == 0 {
                *p += 1;
                return Some(b as u32);
            }
        }
    }
    let mut value: u32 = 0;
    let mut shift = 0u32;
    loop {
        if *p >= end {
            return None;
        }
        let b = *d.get(*p)?;
        *p += 1;
        if shift == 28 {
            if b & 0x80 != 0 {
                return None;
            }
            return Some(value | (((b & 0x0F) as u32) << 28));
        }
        value |= ((b & 0x7F) as u32) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

/// Kafka's unsigned varlong (at most 10 bytes, bits past 64 dropped), as `read_uvarlong`.
#[inline(always)]
fn uvarlong(d: &[u8], p: &mut usize, end: usize) -> Option<u64> {
    if *p < end {
        if let Some(&b) = d.get(*p) {
            if b & 0x80 == 0 {
                *p += 1;
                return Some(b as u64);
            }
        }
    }
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        if *p >= end || shift > 63 {
            return None;
        }
        let b = *d.get(*p)?;
        *p += 1;
        value |= ((b & 0x7F) as u64).wrapping_shl(shift);
        if b & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

#[inline(always)]
pub(crate) fn varint(d: &[u8], p: &mut usize, end: usize) -> Option<i64> {
    let u = uvarint(d, p, end)? as i64;
    Some((u >> 1) ^ -(u & 1))
}

#[inline(always)]
fn varlong(d: &[u8], p: &mut usize, end: usize) -> Option<i64> {
    let u = uvarlong(d, p, end)?;
    Some(((u >> 1) as i64) ^ -((u & 1) as i64))
}

/// `increment_sequence` of `storage/records/batch.py` (Kafka's DefaultRecordBatch.incrementSequence).
#[inline(always)]
pub(crate) fn increment_sequence(sequence: i64, increment: i64) -> i64 {
    if sequence > INT32_MAX - increment {
        increment - (INT32_MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

/// Read `n` bytes at `p` (bounded by `rec_end`) for a length `len` (negative: null).
#[inline(always)]
fn field(len: i64, p: &mut usize, rec_end: usize) -> Option<Option<(usize, usize)>> {
    if len < 0 {
        return Some(None);
    }
    let n = len as usize;
    if n > rec_end - *p {
        return None;
    }
    let r = (*p, *p + n);
    *p += n;
    Some(Some(r))
}

#[inline(always)]
pub(crate) fn bytes_or_none(py: Python<'_>, d: &[u8], r: Option<(usize, usize)>) -> PyObject {
    match r {
        None => py.None(),
        Some((a, b)) => PyBytes::new(py, &d[a..b]).into_any().unbind(),
    }
}

/// One record of a v2 records section, validated: where its fields are.
pub(crate) struct Raw {
    pub attributes: u8,
    pub ts_delta: i64,
    pub off_delta: i64,
    pub key: Option<(usize, usize)>,
    pub value: Option<(usize, usize)>,
    pub hcount: usize,
    /// where the first header starts
    pub hstart: usize,
}

/// Parse the record at `p` (its length varint first), checking exactly what the careful decoder checks:
/// `None` on anything it would reject, and on header keys that are not UTF-8 (it decodes them with
/// surrogateescape). Allocates nothing.
#[inline(always)]
pub(crate) fn parse_record(d: &[u8], p: &mut usize, end: usize) -> Option<Raw> {
    parse_record_with(d, p, end, |_, _| ())
}

/// `parse_record`, handing each header's `(key, value)` byte ranges to `on_header` as it is checked (the key is
/// valid UTF-8): one walk over the headers for a caller that stores them. On `None` some headers of the record
/// may have been handed over already.
#[inline(always)]
pub(crate) fn parse_record_with(
    d: &[u8],
    p: &mut usize,
    end: usize,
    mut on_header: impl FnMut((usize, usize), Option<(usize, usize)>),
) -> Option<Raw> {
    let length = varint(d, p, end)?;
    if length < 0 {
        return None;
    }
    let rec_end = p.checked_add(length as usize)?;
    if rec_end > end || *p >= rec_end {
        return None;
    }
    let attributes = d[*p];
    *p += 1;
    let ts_delta = varlong(d, p, rec_end)?;
    let off_delta = varint(d, p, rec_end)?;
    let key = field(varint(d, p, rec_end)?, p, rec_end)?;
    let value = field(varint(d, p, rec_end)?, p, rec_end)?;
    let hcount = varint(d, p, rec_end)?;
    if hcount < 0 || hcount as usize > rec_end - *p {
        return None;
    }
    let hstart = *p;
    for _ in 0..hcount {
        let hk = varint(d, p, rec_end)?;
        if hk < 0 {
            return None;
        }
        let (a, b) = field(hk, p, rec_end)??;
        std::str::from_utf8(&d[a..b]).ok()?;
        on_header((a, b), field(varint(d, p, rec_end)?, p, rec_end)?);
    }
    if *p != rec_end {
        return None;
    }
    Some(Raw { attributes, ts_delta, off_delta, key, value, hcount: hcount as usize, hstart })
}

/// The headers of a record `parse_record` accepted: `(key, value)` byte ranges (the key is valid UTF-8).
pub(crate) struct Headers<'a> {
    d: &'a [u8],
    p: usize,
    left: usize,
}

impl Iterator for Headers<'_> {
    type Item = ((usize, usize), Option<(usize, usize)>);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let end = self.d.len();
        let k = field(varint(self.d, &mut self.p, end)?, &mut self.p, end)??;
        let v = field(varint(self.d, &mut self.p, end)?, &mut self.p, end)?;
        Some((k, v))
    }
}

impl Raw {
    pub(crate) fn headers<'a>(&self, d: &'a [u8]) -> Headers<'a> {
        Headers { d, p: self.hstart, left: self.hcount }
    }

    /// The absolute offset and timestamp, when they fit an i64.
    #[inline(always)]
    pub(crate) fn offset_timestamp(
        &self,
        base_offset: i64,
        base_ts: i64,
        append_ts: Option<i64>,
    ) -> Option<(i64, i64)> {
        let offset = base_offset.checked_add(self.off_delta)?;
        let timestamp = match append_ts {
            Some(t) => t,
            None => base_ts.checked_add(self.ts_delta)?,
        };
        Some((offset, timestamp))
    }
}

/// Decode the record at `p` into Python objects: a `Record` (`full`) or an `(offset, timestamp, key, value,
/// headers)` tuple; `Ok(None)` on anything unusual (see `parse_record`) and on offsets or timestamps past an
/// i64 (Python's are unbounded: the careful decoder handles those).
#[allow(clippy::too_many_arguments)]
#[inline(always)]
fn decode_one(
    py: Python<'_>,
    d: &[u8],
    p: &mut usize,
    end: usize,
    base_offset: i64,
    base_ts: i64,
    append_ts: Option<i64>,
    base_seq: i64,
    full: bool,
) -> PyResult<Option<PyObject>> {
    let Some(raw) = parse_record(d, p, end) else { return Ok(None) };
    let Some((offset, timestamp)) = raw.offset_timestamp(base_offset, base_ts, append_ts) else {
        return Ok(None);
    };
    let mut headers: Vec<Bound<'_, PyTuple>> = Vec::with_capacity(raw.hcount);
    for ((ka, kb), v) in raw.headers(d) {
        let name = PyString::new(py, std::str::from_utf8(&d[ka..kb]).unwrap_or_default());
        headers.push(PyTuple::new(py, [name.into_any(), bytes_or_none(py, d, v).into_bound(py)])?);
    }
    let key = bytes_or_none(py, d, raw.key);
    let value = bytes_or_none(py, d, raw.value);
    if full {
        let seq = if base_seq < 0 { -1 } else { increment_sequence(base_seq, raw.off_delta) };
        let rec = Record::from_parts(
            py,
            offset,
            timestamp,
            key,
            value,
            PyList::new(py, headers)?.into_any().unbind(),
            raw.attributes as i64,
            raw.ts_delta,
            raw.off_delta,
            seq,
        )?;
        Ok(Some(Py::new(py, rec)?.into_any()))
    } else {
        let t = PyTuple::new(
            py,
            [
                offset.into_pyobject(py)?.into_any(),
                timestamp.into_pyobject(py)?.into_any(),
                key.into_bound(py),
                value.into_bound(py),
                PyTuple::new(py, headers)?.into_any(),
            ],
        )?;
        Ok(Some(t.into_any().unbind()))
    }
}

/// Decode `count` records of a v2 records section from byte `p` -- the native `_decode_fast`.
///
/// `full`: `Record` objects (else `(offset, timestamp, key, value, headers)` tuples). With `last` the records
/// must end the data. Returns `(records, next_position)`, or `None` for the careful decoder to judge.
#[pyfunction]
#[pyo3(signature = (data, count, base_offset, base_ts, append_ts, base_seq, full, p=0, last=true))]
#[allow(clippy::too_many_arguments)]
fn decode_records<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    count: i64,
    base_offset: i64,
    base_ts: i64,
    append_ts: Option<i64>,
    base_seq: i64,
    full: bool,
    p: usize,
    last: bool,
) -> PyResult<PyObject> {
    let view = buffer::ByteView::new(data)?;
    decode_slice(py, view.as_slice(), count, base_offset, base_ts, append_ts, base_seq, full, p, last)
}

/// `decode_records` on a byte slice (also what `codec::decode_compressed` runs on the decompressed records).
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_slice(
    py: Python<'_>,
    d: &[u8],
    count: i64,
    base_offset: i64,
    base_ts: i64,
    append_ts: Option<i64>,
    base_seq: i64,
    full: bool,
    p: usize,
    last: bool,
) -> PyResult<PyObject> {
    let end = d.len();
    if count < 0 || p > end {
        return Ok(py.None());
    }
    // a record takes at least 7 bytes: a count the data cannot hold is the careful decoder's to report
    if (count as u64).saturating_mul(7) > (end - p) as u64 {
        return Ok(py.None());
    }
    let mut pos = p;
    let mut out: Vec<PyObject> = Vec::with_capacity(count as usize);
    for _ in 0..count {
        match decode_one(py, d, &mut pos, end, base_offset, base_ts, append_ts, base_seq, full)? {
            Some(r) => out.push(r),
            None => return Ok(py.None()),
        }
    }
    if last && pos != end {
        return Ok(py.None());
    }
    let list = PyList::new(py, out)?;
    Ok(PyTuple::new(py, [list.into_any(), pos.into_pyobject(py)?.into_any()])?.into_any().unbind())
}

/// The build's self-description for `kafkalog --version`.
#[pyfunction]
fn build_info() -> String {
    format!("kafkalog-native {} (Rust, PyO3 {})", env!("CARGO_PKG_VERSION"), "0.25")
}

/// The core's allocator and whether its purges decommit memory (`alloc.rs`).
#[pyfunction]
fn allocator() -> (&'static str, bool) {
    alloc::describe()
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    alloc::configure();
    m.add_function(wrap_pyfunction!(allocator, m)?)?;
    m.add_class::<Record>()?;
    m.add_class::<arrow::ArrowRecords>()?;
    m.add_class::<arrow::ArrowChunk>()?;
    m.add_class::<cleaner::OffsetMapCore>()?;
    m.add_function(wrap_pyfunction!(decode_records, m)?)?;
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
    m.add_function(wrap_pyfunction!(codec::decode_compressed, m)?)?;
    m.add_function(wrap_pyfunction!(codec::arrow_add_compressed, m)?)?;
    m.add_function(wrap_pyfunction!(legacy::legacy_records, m)?)?;
    m.add_function(wrap_pyfunction!(legacy::legacy_messages, m)?)?;
    m.add_function(wrap_pyfunction!(build_info, m)?)?;
    Ok(())
}
