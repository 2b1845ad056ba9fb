//! Fixed-width integers of Kafka's on-disk formats, read from byte slices: the bottom of the crate, used by
//! every parser above it (`codec`, `legacy`, `convert`, `arrow`). Every read is bounds-checked.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// A big-endian `i16` at `p`, `None` past the end.
#[inline(always)]
pub(crate) fn be_i16(d: &[u8], p: usize) -> Option<i16> {
    Some(i16::from_be_bytes(d.get(p..p.checked_add(2)?)?.try_into().ok()?))
}

/// A big-endian `i32` at `p`, `None` past the end.
#[inline(always)]
pub(crate) fn be_i32(d: &[u8], p: usize) -> Option<i32> {
    Some(i32::from_be_bytes(d.get(p..p.checked_add(4)?)?.try_into().ok()?))
}

/// A big-endian `i64` at `p`, `None` past the end.
#[inline(always)]
pub(crate) fn be_i64(d: &[u8], p: usize) -> Option<i64> {
    Some(i64::from_be_bytes(d.get(p..p.checked_add(8)?)?.try_into().ok()?))
}

/// A little-endian `u32` at `p` (lz4 and zstd frames), `None` past the end.
#[inline(always)]
pub(crate) fn le_u32(d: &[u8], p: usize) -> Option<u32> {
    Some(u32::from_le_bytes(d.get(p..p.checked_add(4)?)?.try_into().ok()?))
}

/// `be_i16` at a position the caller has bounds-checked (a batch header's fixed fields): 0 past the end.
#[inline(always)]
pub(crate) fn be_i16_at(d: &[u8], p: usize) -> i16 {
    be_i16(d, p).unwrap_or_default()
}

/// `be_i32` at a position the caller has bounds-checked: 0 past the end.
#[inline(always)]
pub(crate) fn be_i32_at(d: &[u8], p: usize) -> i32 {
    be_i32(d, p).unwrap_or_default()
}

/// `be_i64` at a position the caller has bounds-checked: 0 past the end.
#[inline(always)]
pub(crate) fn be_i64_at(d: &[u8], p: usize) -> i64 {
    be_i64(d, p).unwrap_or_default()
}

/// The field of length `len` at `p` (a key, a value, a header's), bounded by `end`: where it is (`Some(None)`
/// for a negative length, null), `p` moved past it; `None` when it runs past `end`.
#[inline(always)]
pub(crate) fn field(len: i64, p: &mut usize, end: usize) -> Option<Option<(usize, usize)>> {
    if len < 0 {
        return Some(None);
    }
    let n = len as usize;
    if n > end - *p {
        return None;
    }
    let r = (*p, *p + n);
    *p += n;
    Some(Some(r))
}

/// The bytes of the range `r` of `d` as a Python `bytes` object, `None` for a null field.
#[inline(always)]
pub(crate) fn bytes_or_none(py: Python<'_>, d: &[u8], r: Option<(usize, usize)>) -> PyObject {
    match r {
        None => py.None(),
        Some((a, b)) => PyBytes::new(py, &d[a..b]).into_any().unbind(),
    }
}
