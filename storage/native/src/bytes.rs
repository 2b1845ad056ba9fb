//! Fixed-width integers of Kafka's on-disk formats, read from byte slices: the bottom of the crate, used by
//! every parser above it (`codec`, `legacy`, `convert`, `arrow`). Every read is bounds-checked.

use pyo3::prelude::*;
use pyo3::types::PyBytes;

/// `$name(d, p)`: the `$t` at `p` in `$from` byte order, `None` past the end; with `$at`, also `$at(d, p)`, the
/// same at a position the caller has bounds-checked (a batch header's fixed fields): 0 past the end.
macro_rules! fixed_width {
    ($name:ident, $t:ty, $from:ident, $what:literal) => {
        #[doc = concat!("A ", $what, " `", stringify!($t), "` at `p`, `None` past the end.")]
        #[inline(always)]
        pub(crate) fn $name(d: &[u8], p: usize) -> Option<$t> {
            Some(<$t>::$from(d.get(p..p.checked_add(size_of::<$t>())?)?.try_into().ok()?))
        }
    };
    ($name:ident, $at:ident, $t:ty, $from:ident, $what:literal) => {
        fixed_width!($name, $t, $from, $what);

        #[doc = concat!("`", stringify!($name), "` at a position the caller has bounds-checked: 0 past the end.")]
        #[inline(always)]
        pub(crate) fn $at(d: &[u8], p: usize) -> $t {
            $name(d, p).unwrap_or_default()
        }
    };
}

fixed_width!(be_i16, be_i16_at, i16, from_be_bytes, "big-endian");
fixed_width!(be_i32, be_i32_at, i32, from_be_bytes, "big-endian");
fixed_width!(be_i64, be_i64_at, i64, from_be_bytes, "big-endian");
// lz4 and zstd frames
fixed_width!(le_u32, u32, from_le_bytes, "little-endian");

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
