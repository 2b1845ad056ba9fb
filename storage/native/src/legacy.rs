//! Message sets v0 and v1 (`storage/records/legacy.py`, which stays the reference): one shallow entry -- a plain
//! message, or a compressed wrapper whose value holds inner messages -- decoded into `Record` objects, tuples or
//! Arrow rows.
//!
//! The rules are `LegacyBatch.inner_messages`' step for step: the message layout of `parse_message` (offset and
//! size header, CRC, magic, attributes, the v1 timestamp, key, value; trailing bytes after the value allowed,
//! the CRC not checked), the wrapper's value decompressed by `codec.rs` (same framings, same limit), the inner
//! sequence ended silently by a short read, relative inner offsets for a v1 wrapper (absolute when the wrapper's
//! offset is 0), the wrapper's timestamp for the v1 inner messages of a LogAppendTime wrapper. Anything the
//! Python decoder would reject, and anything unusual (offsets past an i64), gives `None`: the Python decoder then
//! runs and raises its own error (class, file, byte position, reason).

use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

use crate::buffer::ByteView;
use crate::bytes::{be_i32, be_i64, bytes_or_none, field};
use crate::codec::{decompress_into, with_buffer};
use crate::py_record::Record;

/// The offset and size header of an entry.
const LOG_OVERHEAD: usize = 12;
/// The smallest v0 message (crc, magic, attributes, key length, value length).
const RECORD_OVERHEAD_V0: usize = 14;
/// The smallest v1 message (v0 plus the timestamp).
const RECORD_OVERHEAD_V1: usize = 22;
const CODEC_MASK: u8 = 0x07;
const TIMESTAMP_TYPE_MASK: u8 = 0x08;

/// One v0/v1 message: its fields, key and value as byte ranges of the data it was parsed from.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Msg {
    pub offset: i64,
    pub crc: u32,
    pub magic: u8,
    pub attributes: u8,
    pub timestamp: i64,
    pub key: Option<(usize, usize)>,
    pub value: Option<(usize, usize)>,
    /// the bytes its CRC32 covers (magic .. end of the message)
    pub raw: (usize, usize),
}

/// A length-prefixed field at `p` of a message ending at `end` (`_read_bytes`).
#[inline(always)]
fn bytes_field(d: &[u8], p: &mut usize, end: usize) -> Option<Option<(usize, usize)>> {
    if *p + 4 > end {
        return None;
    }
    let n = be_i32(d, *p)?;
    *p += 4;
    field(n.into(), p, end)
}

/// `parse_message`: the message of `size` bytes at `d[pos..]` (after its entry header), or `None` where the
/// Python parser raises.
#[inline(always)]
pub(crate) fn parse_message(d: &[u8], pos: usize, size: usize, offset: i64) -> Option<Msg> {
    let end = pos.checked_add(size)?;
    if size < RECORD_OVERHEAD_V0 || end > d.len() {
        return None;
    }
    let crc = u32::from_be_bytes(d.get(pos..pos + 4)?.try_into().ok()?);
    let magic = d[pos + 4];
    let attributes = d[pos + 5];
    let mut p = pos + 6;
    let timestamp = match magic {
        1 => {
            if size < RECORD_OVERHEAD_V1 {
                return None;
            }
            let t = be_i64(d, p)?;
            p += 8;
            t
        }
        0 => -1,
        _ => return None,
    };
    let key = bytes_field(d, &mut p, end)?;
    let value = bytes_field(d, &mut p, end)?;
    Some(Msg { offset, crc, magic, attributes, timestamp, key, value, raw: (pos + 4, end) })
}

/// The inner messages of a wrapper's decompressed value `data` (into `msgs`, cleared first), as
/// `inner_messages` reads them: `None` where it raises.
fn parse_inner(data: &[u8], msgs: &mut Vec<Msg>) -> Option<()> {
    msgs.clear();
    let end = data.len();
    let mut p = 0usize;
    while end - p >= LOG_OVERHEAD {
        let off = be_i64(data, p)?;
        let size = be_i32(data, p + 8)?;
        if size < RECORD_OVERHEAD_V0 as i32 {
            return None;
        }
        let size = size as usize;
        if size > end - p - LOG_OVERHEAD {
            break; // a short read silently ends the inner sequence (DataLogInputStream)
        }
        let m = parse_message(data, p + LOG_OVERHEAD, size, off)?;
        if m.attributes & CODEC_MASK != 0 {
            return None; // inner messages must not be compressed
        }
        msgs.push(m);
        p += LOG_OVERHEAD + size;
    }
    if msgs.is_empty() {
        return None;
    }
    Some(())
}

/// The wrapper rules applied to its parsed inner messages: absolute offsets (relative ones for magic >= 1, kept
/// as they are when the wrapper's offset is 0), the wrapper's timestamp for the v1 messages of a LogAppendTime
/// wrapper. `None` where `inner_messages` raises, or where an offset leaves the i64 range.
fn apply_wrapper(w: &Msg, msgs: &mut [Msg]) -> Option<()> {
    if w.magic >= 1 {
        let last_rel = msgs.last()?.offset;
        let base = if w.offset == 0 {
            0
        } else {
            let base = w.offset.checked_sub(last_rel)?;
            if base < 0 {
                return None;
            }
            base
        };
        for m in msgs.iter_mut() {
            m.offset = base.checked_add(m.offset)?;
        }
    }
    if w.magic >= 1 && w.attributes & TIMESTAMP_TYPE_MASK != 0 {
        for m in msgs.iter_mut() {
            if m.magic >= 1 {
                m.timestamp = w.timestamp;
            }
        }
    }
    Some(())
}

/// Decode the shallow entry `e` (offset and size header included) and run `f` on the bytes the messages'
/// ranges refer to and the messages (absolute offsets, timestamps resolved): the entry itself for a plain
/// message, the decompressed value (this thread's reused buffer, bounded by `limit`) for a wrapper. `msgs` is a
/// scratch vector (cleared). `None`, without calling `f`, where the Python decoder raises or for anything unusual.
pub(crate) fn with_entry<R>(
    e: &[u8],
    limit: usize,
    msgs: &mut Vec<Msg>,
    f: impl FnOnce(&[u8], &[Msg]) -> R,
) -> Option<R> {
    if e.len() < LOG_OVERHEAD {
        return None;
    }
    let offset = be_i64(e, 0)?;
    let w = parse_message(e, LOG_OVERHEAD, e.len() - LOG_OVERHEAD, offset)?;
    let codec = w.attributes & CODEC_MASK;
    msgs.clear();
    if codec == 0 {
        msgs.push(w);
        return Some(f(e, msgs));
    }
    // null value, zstd (not allowed below v2), unknown codec ids: the Python decoder's errors
    let (a, b) = w.value?;
    if codec > 3 {
        return None;
    }
    with_buffer(|out| {
        decompress_into(codec, &e[a..b], w.magic, limit, out)?;
        parse_inner(out, msgs)?;
        apply_wrapper(&w, msgs)?;
        Some(f(out, msgs))
    })
}

/// The timestamp type of a legacy entry (`LegacyBatch.timestamp_type`): -1 for v0, 1 LogAppendTime, 0 CreateTime.
#[inline(always)]
pub(crate) fn timestamp_type(magic: u8, attributes: u8) -> i32 {
    if magic == 0 {
        -1
    } else {
        i32::from(attributes & TIMESTAMP_TYPE_MASK != 0)
    }
}

/// One Python object per message of the shallow entry `entry` (`row(d, m)`), as a list; `None` for the Python
/// decoder to judge (see the module docs).
fn py_messages(
    py: Python<'_>,
    entry: &Bound<'_, PyAny>,
    limit: usize,
    mut row: impl FnMut(&[u8], &Msg) -> PyResult<PyObject>,
) -> PyResult<PyObject> {
    let view = ByteView::new(entry)?;
    let mut msgs = Vec::new();
    let got = with_entry(view.as_slice(), limit, &mut msgs, |d, msgs| -> PyResult<PyObject> {
        let out = msgs.iter().map(|m| row(d, m)).collect::<PyResult<Vec<PyObject>>>()?;
        Ok(PyList::new(py, out)?.into_any().unbind())
    });
    got.unwrap_or_else(|| Ok(py.None()))
}

/// A message's `(offset, timestamp, key, value, *rest)` tuple.
fn message_tuple<'py>(py: Python<'py>, d: &[u8], m: &Msg, rest: &[Bound<'py, PyAny>]) -> PyResult<PyObject> {
    let mut items = vec![
        m.offset.into_pyobject(py)?.into_any(),
        m.timestamp.into_pyobject(py)?.into_any(),
        bytes_or_none(py, d, m.key).into_bound(py),
        bytes_or_none(py, d, m.value).into_bound(py),
    ];
    items.extend_from_slice(rest);
    Ok(PyTuple::new(py, items)?.into_any().unbind())
}

/// `LegacyBatch.records()` (`full`: `Record` objects) or `record_tuples()` (`(offset, timestamp, key, value,
/// ())`) of the shallow entry `entry`; `None` for the Python decoder to judge (see the module docs).
#[pyfunction]
pub(crate) fn legacy_records<'py>(
    py: Python<'py>,
    entry: &Bound<'py, PyAny>,
    limit: usize,
    full: bool,
) -> PyResult<PyObject> {
    let empty = [PyTuple::empty(py).into_any()];
    py_messages(py, entry, limit, |d, m| {
        if !full {
            return message_tuple(py, d, m, &empty);
        }
        let (key, value) = (bytes_or_none(py, d, m.key), bytes_or_none(py, d, m.value));
        let (attributes, magic, crc) = (m.attributes as i64, m.magic as i64, m.crc as i64);
        let rec = Record::from_legacy(py, m.offset, m.timestamp, key, value, attributes, magic, crc)?;
        Ok(Py::new(py, rec)?.into_any())
    })
}

/// What `kafkalog dump --deep` shows of each message of the shallow entry `entry` (`LegacyBatch.message_fields`):
/// `(offset, timestamp, key, value, magic, crc, valid)` tuples, `valid` its own CRC32 check
/// (`LegacyMessage.is_valid`); `None` for the Python decoder to judge.
#[pyfunction]
pub(crate) fn legacy_messages<'py>(py: Python<'py>, entry: &Bound<'py, PyAny>, limit: usize) -> PyResult<PyObject> {
    py_messages(py, entry, limit, |d, m| {
        let valid = crc32fast::hash(&d[m.raw.0..m.raw.1]) == m.crc;
        let rest = [
            m.magic.into_pyobject(py)?.into_any(),
            m.crc.into_pyobject(py)?.into_any(),
            pyo3::types::PyBool::new(py, valid).to_owned().into_any(),
        ];
        message_tuple(py, d, m, &rest)
    })
}

/// The rows `legacy_records(full=False)` gives, without Python (the fuzz targets): `(offset, timestamp, key,
/// value)` per message, plus `(magic, attributes, crc)`.
#[allow(clippy::type_complexity)]
pub fn decode_entry(
    e: &[u8],
    limit: usize,
) -> Option<Vec<(i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, (u8, u8, u32))>> {
    let mut msgs = Vec::new();
    with_entry(e, limit, &mut msgs, |d, msgs| {
        msgs.iter()
            .map(|m| {
                let s = |r: Option<(usize, usize)>| r.map(|(a, b)| d[a..b].to_vec());
                (m.offset, m.timestamp, s(m.key), s(m.value), (m.magic, m.attributes, m.crc))
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn message(offset: i64, magic: u8, attributes: u8, ts: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> Vec<u8> {
        let mut body = vec![magic, attributes];
        if magic == 1 {
            body.extend_from_slice(&ts.to_be_bytes());
        }
        for f in [key, value] {
            match f {
                None => body.extend_from_slice(&(-1i32).to_be_bytes()),
                Some(v) => {
                    body.extend_from_slice(&(v.len() as i32).to_be_bytes());
                    body.extend_from_slice(v);
                }
            }
        }
        let mut e = offset.to_be_bytes().to_vec();
        e.extend_from_slice(&((body.len() + 4) as i32).to_be_bytes());
        e.extend_from_slice(&crc32fast::hash(&body).to_be_bytes());
        e.extend_from_slice(&body);
        e
    }

    #[test]
    fn plain_v0_and_v1() {
        let e = message(7, 0, 0, 0, Some(b"k"), None);
        let rows = decode_entry(&e, 1 << 20).unwrap();
        assert_eq!(rows, vec![(7, -1, Some(b"k".to_vec()), None, (0, 0, crc32fast::hash(&e[16..])))]);
        let e = message(9, 1, 0, 1234, None, Some(b"v"));
        let rows = decode_entry(&e, 1 << 20).unwrap();
        assert_eq!(rows[0].0, 9);
        assert_eq!(rows[0].1, 1234);
        assert_eq!(rows[0].3.as_deref(), Some(&b"v"[..]));
        // too short, bad magic, a key running past the message: the Python decoder's
        assert!(decode_entry(&e[..e.len() - 1], 1 << 20).is_none());
        let mut bad = e.clone();
        bad[16] = 3;
        assert!(decode_entry(&bad, 1 << 20).is_none());
    }
}
