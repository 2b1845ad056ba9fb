//! `convert`'s rewrite of plain v0/v1 messages as v2 batches (the native twin of `plain_legacy_to_v2` in
//! `storage/engine/convert.py`, which stays the reference).
//!
//! A run of consecutive uncompressed v0/v1 messages, each with an intact CRC32, becomes one v2 batch per
//! message with exactly the bytes `plain_legacy_to_v2` builds. The run stops at the first entry it does not take
//! (a v2 batch, a compressed wrapper, a message failing its CRC or malformed, a torn tail): the caller's
//! per-entry path handles exactly that entry, with its errors.

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};

use crate::buffer::ByteView;
use crate::bytes::{be_i32, be_i64};
use crate::checksum::crc32c;
use crate::legacy::parse_message;
use crate::varint::write_varint;

/// The fields of one plain v0/v1 message (the entry `e`: offset, size, crc, magic, attributes, [timestamp], key,
/// value) with an intact CRC32: `(offset, magic, attributes, timestamp, key, value)`; `None` for anything else.
/// The message is read by the one legacy message parser (`legacy::parse_message`).
#[allow(clippy::type_complexity)]
#[inline(always)]
pub(crate) fn plain_fields(e: &[u8]) -> Option<(i64, u8, u8, i64, Option<(usize, usize)>, Option<(usize, usize)>)> {
    let offset = be_i64(e, 0)?;
    let m = parse_message(e, 12, e.len().checked_sub(12)?, offset)?;
    if m.attributes & 0x07 != 0 || crc32fast::hash(&e[m.raw.0..m.raw.1]) != m.crc {
        return None;
    }
    Some((offset, m.magic, m.attributes, m.timestamp, m.key, m.value))
}

/// The next entry of `d[pos:end]` as a slice, when it is complete and its size field is at least 14.
#[inline(always)]
pub(crate) fn entry(d: &[u8], pos: usize, end: usize) -> Option<&[u8]> {
    if pos + 17 >= end {
        return None;
    }
    let size = be_i32(d, pos + 8)?;
    if size < 14 {
        return None;
    }
    let total = 12 + size as usize;
    if pos + total > end {
        return None;
    }
    d.get(pos..pos + total)
}

/// One plain message (the entry `e`) as a v2 batch appended to `out`; `None` when the entry is not one this path
/// takes. Returns `(last offset, max timestamp)`.
pub(crate) fn plain_to_v2(e: &[u8], out: &mut Vec<u8>, body: &mut Vec<u8>) -> Option<(i64, i64)> {
    let (offset, magic, attributes, ts, key, value) = plain_fields(e)?;
    let log_append = magic == 1 && attributes & 0x08 != 0;
    // the record: attributes 0, timestamp delta 0, offset delta 0, key, value, no headers
    body.clear();
    body.extend_from_slice(&[0, 0, 0]);
    for f in [key, value] {
        match f {
            None => body.push(0x01),
            Some((a, b)) => {
                write_varint((b - a) as i64, body);
                body.extend_from_slice(&e[a..b]);
            }
        }
    }
    body.push(0);
    let start = out.len();
    out.resize(start + 61, 0);
    write_varint(body.len() as i64, out);
    out.extend_from_slice(body);
    let length = (out.len() - start - 12) as i32;
    let h = &mut out[start..start + 61];
    h[0..8].copy_from_slice(&offset.to_be_bytes());
    h[8..12].copy_from_slice(&length.to_be_bytes());
    h[12..16].copy_from_slice(&(-1i32).to_be_bytes()); // partition leader epoch: none for v0/v1
    h[16] = 2;
    h[21..23].copy_from_slice(&(if log_append { 0x08u16 } else { 0 }).to_be_bytes());
    h[23..27].copy_from_slice(&0i32.to_be_bytes()); // last offset delta
    h[27..35].copy_from_slice(&ts.to_be_bytes());
    h[35..43].copy_from_slice(&ts.to_be_bytes());
    h[43..51].copy_from_slice(&(-1i64).to_be_bytes()); // producer id
    h[51..53].copy_from_slice(&(-1i16).to_be_bytes()); // producer epoch
    h[53..57].copy_from_slice(&(-1i32).to_be_bytes()); // base sequence
    h[57..61].copy_from_slice(&1i32.to_be_bytes()); // records
    let crc = crc32c(&out[start + 21..]);
    out[start + 17..start + 21].copy_from_slice(&crc.to_be_bytes());
    Some((offset, ts))
}

/// Convert the run of plain v0/v1 messages of `data[pos:end]` (see the module docs), producing at most about
/// `max_bytes` of output. Returns `(v2 batches as one bytes object, [(size, last offset, max timestamp)] per
/// batch, position reached)`.
#[pyfunction]
pub(crate) fn legacy_to_v2<'py>(
    py: Python<'py>,
    data: &Bound<'py, PyAny>,
    pos: usize,
    end: usize,
    max_bytes: usize,
) -> PyResult<(Bound<'py, PyBytes>, Bound<'py, PyList>, usize)> {
    let view = ByteView::new(data)?;
    let (out, sizes, pos) = legacy_to_v2_bytes(view.as_slice(), pos, end, max_bytes);
    let metas = PyList::empty(py);
    for m in sizes {
        metas.append(m)?;
    }
    Ok((PyBytes::new(py, &out), metas, pos))
}

/// `legacy_to_v2` on a byte slice: `(v2 batches, [(size, last offset, max timestamp)], position reached)`.
#[allow(clippy::type_complexity)]
pub(crate) fn legacy_to_v2_bytes(
    d: &[u8],
    pos: usize,
    end: usize,
    max_bytes: usize,
) -> (Vec<u8>, Vec<(usize, i64, i64)>, usize) {
    let end = end.min(d.len());
    let mut pos = pos;
    // the output of the run is at most about 2.6 times its input (a 26-byte v0 message becomes a 68-byte batch):
    // reserve for that, not for `max_bytes`, so that a short input never allocates the whole output budget
    let reserve = max_bytes.min(1 << 24).min(end.saturating_sub(pos).saturating_mul(3));
    let mut out: Vec<u8> = Vec::with_capacity(reserve + 4096);
    let mut body: Vec<u8> = Vec::new();
    let mut metas = Vec::new();
    while out.len() < max_bytes {
        let Some(e) = entry(d, pos, end) else { break };
        let before = out.len();
        let Some((last, ts)) = plain_to_v2(e, &mut out, &mut body) else { break };
        metas.push((out.len() - before, last, ts));
        pos += e.len();
    }
    (out, metas, pos)
}

/// The run of plain v0/v1 messages with an intact CRC32 from `data[pos:end]` that `legacy_to_v2` would convert
/// (what the plan counts and validates): `(entries, bytes, position reached)`.
#[pyfunction]
pub(crate) fn legacy_plain_run(data: &Bound<'_, PyAny>, pos: usize, end: usize) -> PyResult<(usize, usize, usize)> {
    let view = ByteView::new(data)?;
    Ok(legacy_plain_run_bytes(view.as_slice(), pos, end))
}

/// `legacy_plain_run` on a byte slice.
pub(crate) fn legacy_plain_run_bytes(d: &[u8], pos: usize, end: usize) -> (usize, usize, usize) {
    let end = end.min(d.len());
    let (mut pos, start, mut n) = (pos, pos, 0usize);
    while let Some(e) = entry(d, pos, end) {
        if plain_fields(e).is_none() {
            break;
        }
        n += 1;
        pos += e.len();
    }
    (n, pos - start, pos)
}
