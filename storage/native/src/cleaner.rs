//! The log cleaner's two per-record loops over the records section of one v2 batch (the native twins of
//! `map_records` and `scan_retained` in `storage/engine/cleaner_records.py`, which stay the reference).
//!
//! Contract, as for the decoder: the same result as the Python loop, or "slow" (`false` / `None`) and the
//! caller reruns the batch through the records layer's careful path. These loops are stricter than the Python
//! ones in one respect: a zig-zag length that is odd (negative) other than -1 is "slow" here (the Python loops
//! read it as a positive length; a CRC-valid batch written by Kafka never holds one).

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

/// A byte of `d`, or return "slow" (`$slow`) from the enclosing function.
macro_rules! at {
    ($d:expr, $i:expr, $slow:expr) => {
        match $d.get($i) {
            Some(&x) => x as usize,
            None => return Ok($slow),
        }
    };
}

#[inline(always)]
fn zigzag(v: usize) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// An unsigned varint of one or two bytes in its shortest form (`_uvarint`); `None` otherwise.
#[inline(always)]
fn short_uvarint(d: &[u8], p: &mut usize) -> Option<usize> {
    let b = *d.get(*p)? as usize;
    if b < 128 {
        *p += 1;
        return Some(b);
    }
    let b2 = *d.get(*p + 1)? as usize;
    if b2 >= 128 || b2 == 0 {
        return None;
    }
    *p += 2;
    Some((b & 127) | (b2 << 7))
}

/// An unsigned varlong of up to 10 bytes in its shortest form (`_long_uvarint`); `None` otherwise.
#[inline(always)]
fn long_uvarint(d: &[u8], p: &mut usize) -> Option<u64> {
    let start = *p;
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        if shift > 63 {
            return None;
        }
        let b = *d.get(*p)?;
        *p += 1;
        value |= ((b & 0x7F) as u64).wrapping_shl(shift);
        if b & 0x80 == 0 {
            if *p - start > 1 && b == 0 {
                return None;
            }
            return Some(value);
        }
        shift += 7;
    }
}

/// A length (zig-zag, one or two bytes, shortest form): `Some(Some(n))`, `Some(None)` for -1 (null), `None` for
/// anything else.
#[inline(always)]
fn length(d: &[u8], p: &mut usize) -> Option<Option<usize>> {
    let v = short_uvarint(d, p)?;
    if v & 1 == 0 {
        Some(Some(v >> 1))
    } else if v == 1 {
        Some(None)
    } else {
        None
    }
}

/// Skip a record's headers (`_skip_headers`), returning where they end.
fn skip_headers(d: &[u8], mut p: usize, rec_end: usize) -> Option<usize> {
    let n = zigzag(short_uvarint(d, &mut p)?);
    if n < 0 || n as usize > rec_end.checked_sub(p)? {
        return None;
    }
    for _ in 0..n {
        let k = zigzag(short_uvarint(d, &mut p)?);
        if k < 0 {
            return None;
        }
        p = p.checked_add(k as usize)?;
        let v = zigzag(short_uvarint(d, &mut p)?);
        if v >= 0 {
            p = p.checked_add(v as usize)?;
        } else if v != -1 {
            return None;
        }
        if p > rec_end {
            return None;
        }
    }
    Some(p)
}

/// `map_records`: put every keyed record of the batch into the offset map whose short-key dict is `raw`
/// (`raw[key]` is a one-element list holding the key's offset) and whose `new_cell(key, offset)` puts a key
/// not in `raw`. Returns false when the batch needs the careful path (puts already made are harmless: they
/// are idempotent in order).
#[pyfunction]
pub(crate) fn map_records(
    py: Python<'_>,
    data: &Bound<'_, PyBytes>,
    count: i64,
    base_offset: i64,
    raw: &Bound<'_, PyDict>,
    new_cell: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    let d = data.as_bytes();
    let mut p = 0usize;
    for _ in 0..count.max(0) {
        // length (the record must end exactly there), then attributes
        let Some(len) = length(d, &mut p).flatten() else { return Ok(false) };
        let rec_end = p + len;
        if len == 0 || rec_end > d.len() {
            return Ok(false);
        }
        p += 1;
        // timestamp delta (skipped)
        if long_uvarint(d, &mut p).is_none() {
            return Ok(false);
        }
        // offset delta
        let b = at!(d, p, false);
        let delta = if b < 128 {
            p += 1;
            zigzag(b)
        } else {
            let b2 = at!(d, p + 1, false);
            if b2 > 127 {
                return Ok(false);
            }
            p += 2;
            zigzag((b & 127) | (b2 << 7))
        };
        let Some(offset) = base_offset.checked_add(delta) else { return Ok(false) };
        // key
        let Some(key) = length(d, &mut p) else { return Ok(false) };
        if let Some(n) = key {
            let q = p + n;
            if q > rec_end {
                return Ok(false); // a key running past its record: not what the leader validated
            }
            let key = PyBytes::new(py, &d[p..q]);
            match raw.get_item(&key)? {
                Some(cell) => cell.downcast::<PyList>()?.set_item(0, offset)?,
                None => {
                    new_cell.call1((key, offset))?;
                }
            }
        } else if p > rec_end {
            return Ok(false);
        }
        p = rec_end;
    }
    Ok(p == d.len())
}

/// `scan_retained`: apply the cleaner's record rule to every record of a data batch. Returns
/// `(kept, records_read, keyless_dropped)` with one `(start, tail, end, timestamp, offset_delta, attributes,
/// is_tombstone)` tuple per retained record, or `None` when the batch needs the careful path.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn scan_retained<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyBytes>,
    count: i64,
    base_offset: i64,
    base_ts: i64,
    latest: i64,
    raw: &Bound<'py, PyDict>,
    get_unknown: &Bound<'py, PyAny>,
    keep_tombstones: bool,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let d = data.as_bytes();
    let end = d.len();
    let kept = PyList::empty(py);
    let mut invalid: i64 = 0;
    let mut p = 0usize;
    for _ in 0..count.max(0) {
        let start = p;
        let Some(len) = short_uvarint(d, &mut p) else { return Ok(None) };
        if len & 1 != 0 {
            return Ok(None);
        }
        let rec_end = p + (len >> 1);
        if rec_end > end {
            return Ok(None);
        }
        let attrs = at!(d, p, None);
        p += 1;
        let Some(ts) = long_uvarint(d, &mut p) else { return Ok(None) };
        let ts_delta = ((ts >> 1) as i64) ^ -((ts & 1) as i64);
        let Some(off) = short_uvarint(d, &mut p) else { return Ok(None) };
        let off_delta = zigzag(off);
        let tail = p;
        let Some(key) = length(d, &mut p) else { return Ok(None) };
        let key = match key {
            Some(n) => {
                let q = p + n;
                if q > end {
                    return Ok(None);
                }
                let k = (p, q);
                p = q;
                Some(k)
            }
            None => None,
        };
        let Some(value) = length(d, &mut p) else { return Ok(None) };
        let tomb = match value {
            Some(n) => {
                p += n;
                false
            }
            None => true,
        };
        if at!(d, p, None) == 0 {
            p += 1;
        } else {
            match skip_headers(d, p, rec_end) {
                Some(q) => p = q,
                None => return Ok(None),
            }
        }
        if p != rec_end {
            return Ok(None);
        }
        let Some(offset) = base_offset.checked_add(off_delta) else { return Ok(None) };
        if offset <= latest {
            let Some((a, b)) = key else {
                invalid += 1;
                continue;
            };
            let k = PyBytes::new(py, &d[a..b]);
            let mapped: i64 = match raw.get_item(&k)? {
                Some(cell) => cell.downcast::<PyList>()?.get_item(0)?.extract()?,
                None => get_unknown.call1((k,))?.extract()?,
            };
            if offset < mapped || (tomb && !keep_tombstones) {
                continue;
            }
        }
        let Some(timestamp) = base_ts.checked_add(ts_delta) else { return Ok(None) };
        let row = (start, tail, rec_end, timestamp, off_delta, attrs, tomb).into_pyobject(py)?;
        kept.append(row)?;
    }
    if p != end {
        return Ok(None);
    }
    Ok(Some(PyTuple::new(
        py,
        [kept.into_any(), count.into_pyobject(py)?.into_any(), invalid.into_pyobject(py)?.into_any()],
    )?))
}
