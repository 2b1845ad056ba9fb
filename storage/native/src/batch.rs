//! The records section of a v2 batch (Kafka's `DefaultRecordBatch`) decoded into Python objects: the native
//! `_decode_fast` of `storage/records/batch.py`, plain or after decompressing a compressed batch's section with
//! `codec`. Each record is parsed by `record::parse_record`; the result is a `Record` (`py_record`) or an
//! `(offset, timestamp, key, value, headers)` tuple per record, or `None` for the careful decoder to judge.

use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use crate::buffer::ByteView;
use crate::bytes::bytes_or_none;
use crate::codec::{decompress_into, with_buffer};
use crate::py_record::Record;
use crate::record::parse_record;

const INT32_MAX: i64 = 2_147_483_647;

/// `increment_sequence` of `storage/records/batch.py` (Kafka's DefaultRecordBatch.incrementSequence).
#[inline(always)]
pub(crate) fn increment_sequence(sequence: i64, increment: i64) -> i64 {
    if sequence > INT32_MAX - increment {
        increment - (INT32_MAX - sequence) - 1
    } else {
        sequence + increment
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
pub(crate) fn decode_records<'py>(
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
    let view = ByteView::new(data)?;
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

/// `decode_records` over a compressed records section: decompressed into this thread's reused buffer and
/// decoded there, so the decompressed bytes never become a Python object. `None` when the decompression or the
/// decoding meets anything the Python path must judge (it then runs both, and raises its error).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn decode_compressed<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    codec: u8,
    magic: u8,
    limit: usize,
    count: i64,
    base_offset: i64,
    base_ts: i64,
    append_ts: Option<i64>,
    base_seq: i64,
    full: bool,
) -> PyResult<PyObject> {
    let view = ByteView::new(data)?;
    with_buffer(|out| match decompress_into(codec, view.as_slice(), magic, limit, out) {
        Some(()) => decode_slice(py, out, count, base_offset, base_ts, append_ts, base_seq, full, 0, true),
        None => Ok(py.None()),
    })
}
