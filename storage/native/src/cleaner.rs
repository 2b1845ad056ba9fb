//! The log cleaner's two per-record loops over the records section of one v2 batch (the native twins of
//! `map_records` and `scan_retained` in `storage/engine/cleaner_records.py`, which stay the reference).
//!
//! Contract, as for the decoder: the same result as the Python loop, or "slow" (`false` / `None`) and the
//! caller reruns the batch through the records layer's careful path. These loops are stricter than the Python
//! ones in one respect: a zig-zag length that is odd (negative) other than -1 is "slow" here (the Python loops
//! read it as a positive length; a CRC-valid batch written by Kafka never holds one).

use std::collections::HashMap;

use foldhash::fast::RandomState;

use md5::{Digest, Md5};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use crate::buffer::ByteView;
use crate::varint::{short_form_uvarlong, short_uvarint, zigzag};

/// A byte of `d`, or return "slow" (`$slow`) from the enclosing function.
macro_rules! at {
    ($d:expr, $i:expr, $slow:expr) => {
        match $d.get($i) {
            Some(&x) => x as usize,
            None => return Ok($slow),
        }
    };
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
    let n = zigzag(short_uvarint(d, &mut p)? as u64);
    if n < 0 || n as usize > rec_end.checked_sub(p)? {
        return None;
    }
    for _ in 0..n {
        let k = zigzag(short_uvarint(d, &mut p)? as u64);
        if k < 0 {
            return None;
        }
        p = p.checked_add(k as usize)?;
        let v = zigzag(short_uvarint(d, &mut p)? as u64);
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

/// Walk the records of a batch for the map pass: `put(key, offset)` for every keyed record, in order. `Ok(false)`
/// when the batch needs the careful path (puts already made are harmless: they are idempotent in order).
#[inline(always)]
pub(crate) fn walk_keys<E>(
    d: &[u8],
    count: i64,
    base_offset: i64,
    mut put: impl FnMut(&[u8], i64) -> Result<(), E>,
) -> Result<bool, E> {
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
        if short_form_uvarlong(d, &mut p).is_none() {
            return Ok(false);
        }
        // offset delta
        let b = at!(d, p, false);
        let delta = if b < 128 {
            p += 1;
            zigzag(b as u64)
        } else {
            let b2 = at!(d, p + 1, false);
            if b2 > 127 {
                return Ok(false);
            }
            p += 2;
            zigzag(((b & 127) | (b2 << 7)) as u64)
        };
        let Some(offset) = base_offset.checked_add(delta) else { return Ok(false) };
        // key
        let Some(key) = length(d, &mut p) else { return Ok(false) };
        if let Some(n) = key {
            let q = p + n;
            if q > rec_end {
                return Ok(false); // a key running past its record: not what the leader validated
            }
            put(&d[p..q], offset)?;
        } else if p > rec_end {
            return Ok(false);
        }
        p = rec_end;
    }
    Ok(p == d.len())
}

/// `map_records` for a map held in Python dicts: `raw[key]` is a one-element list holding the key's offset,
/// `new_cell(key, offset)` puts a key not in `raw` (the worker processes' key dicts, and a spilling map).
#[pyfunction]
pub(crate) fn map_records(
    py: Python<'_>,
    data: &Bound<'_, PyBytes>,
    count: i64,
    base_offset: i64,
    raw: &Bound<'_, PyDict>,
    new_cell: &Bound<'_, PyAny>,
) -> PyResult<bool> {
    walk_keys(data.as_bytes(), count, base_offset, |key, offset| {
        let key = PyBytes::new(py, key);
        match raw.get_item(&key)? {
            Some(cell) => cell.downcast::<PyList>()?.set_item(0, offset)?,
            None => {
                new_cell.call1((key, offset))?;
            }
        }
        Ok(())
    })
}

/// One retained record: `(start, tail, end, timestamp, offset_delta, attributes, is_tombstone)`.
pub(crate) type Kept = (usize, usize, usize, i64, i64, usize, bool);

/// What the retain pass over one records section is given beside its bytes and the map: the batch's record
/// count, base offset and base timestamp, the map's latest offset, and whether tombstones are kept.
#[derive(Clone, Copy)]
pub(crate) struct RetainPass {
    pub(crate) count: i64,
    pub(crate) base_offset: i64,
    pub(crate) base_ts: i64,
    pub(crate) latest: i64,
    pub(crate) keep_tombstones: bool,
}

/// Walk the records of a data batch applying `shouldRetainRecord` with `mapped(key)` (the map's offset for a
/// key, -1 when absent). `Ok(None)` when the batch needs the careful path; else the retained records and the
/// number of keyless records dropped.
#[inline(always)]
pub(crate) fn walk_retained<E>(
    d: &[u8],
    pass: RetainPass,
    mut mapped: impl FnMut(&[u8]) -> Result<i64, E>,
) -> Result<Option<(Vec<Kept>, i64)>, E> {
    let RetainPass { count, base_offset, base_ts, latest, keep_tombstones } = pass;
    let end = d.len();
    let mut kept: Vec<Kept> = Vec::new();
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
        let Some(ts) = short_form_uvarlong(d, &mut p) else { return Ok(None) };
        let ts_delta = zigzag(ts);
        let Some(off) = short_uvarint(d, &mut p) else { return Ok(None) };
        let off_delta = zigzag(off as u64);
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
            if offset < mapped(&d[a..b])? || (tomb && !keep_tombstones) {
                continue;
            }
        }
        let Some(timestamp) = base_ts.checked_add(ts_delta) else { return Ok(None) };
        kept.push((start, tail, rec_end, timestamp, off_delta, attrs, tomb));
    }
    if p != end {
        return Ok(None);
    }
    Ok(Some((kept, invalid)))
}

fn retained_tuple<'py>(
    py: Python<'py>,
    r: Option<(Vec<Kept>, i64)>,
    count: i64,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some((kept, invalid)) = r else { return Ok(None) };
    let list = PyList::new(py, kept)?;
    Ok(Some(PyTuple::new(
        py,
        [list.into_any(), count.into_pyobject(py)?.into_any(), invalid.into_pyobject(py)?.into_any()],
    )?))
}

/// `scan_retained` for a map held in Python dicts (see `map_records`; `get_unknown(key)` looks up a key not in
/// `raw`). Returns `(kept, records_read, keyless_dropped)` with one `(start, tail, end, timestamp,
/// offset_delta, attributes, is_tombstone)` tuple per retained record, or `None` for the careful path.
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
    let pass = RetainPass { count, base_offset, base_ts, latest, keep_tombstones };
    let r = walk_retained(data.as_bytes(), pass, |key| {
        let k = PyBytes::new(py, key);
        match raw.get_item(&k)? {
            Some(cell) => cell.downcast::<PyList>()?.get_item(0)?.extract(),
            None => get_unknown.call1((k,))?.extract(),
        }
    })?;
    retained_tuple(py, r, count)
}

// ------------------------------------------------------------------------------------------- the offset map

/// The cleaner's key -> offset map (Kafka's `SkimpyOffsetMap`) held natively: one entry per distinct MD5 of a
/// key (so `size` counts distinct hashes and keys with the same MD5 share one offset, as in Kafka), about 40
/// bytes per hash, plus a cache from short raw keys to their hash's entry (bounded: `raw_max_keys` keys of at
/// most `raw_max_len` bytes) so that a key seen before is found without hashing it again. Capacity is the
/// caller's (`OffsetMap` in `cleaner_map.py`, which also keeps `start` and `latest_offset`).
#[pyclass(module = "kafkalog.storage._native")]
pub(crate) struct OffsetMapCore {
    // foldhash, seeded per process: fast, and keys chosen to collide cannot be precomputed
    index: HashMap<[u8; 16], usize, RandomState>,
    offsets: Vec<i64>,
    raw: HashMap<Box<[u8]>, usize, RandomState>,
    raw_max_keys: usize,
    raw_max_len: usize,
    frozen: Option<Vec<i64>>,
}

impl OffsetMapCore {
    /// The entry of `key`, created (with offset -1) when `create`.
    #[inline(always)]
    fn slot(&mut self, key: &[u8], create: bool) -> Option<usize> {
        if let Some(&s) = self.raw.get(key) {
            return Some(s);
        }
        let digest: [u8; 16] = Md5::digest(key).into();
        let s = match self.index.get(&digest) {
            Some(&s) => s,
            None if create => {
                let s = self.offsets.len();
                self.offsets.push(-1);
                self.index.insert(digest, s);
                s
            }
            None => return None,
        };
        if key.len() <= self.raw_max_len && self.raw.len() < self.raw_max_keys {
            self.raw.insert(key.into(), s);
        }
        Some(s)
    }

    #[inline(always)]
    fn put_key(&mut self, key: &[u8], offset: i64) {
        let s = self.slot(key, true).expect("created");
        self.offsets[s] = offset;
    }

    #[inline(always)]
    fn get_key(&mut self, key: &[u8]) -> i64 {
        match self.slot(key, false) {
            Some(s) => self.offsets[s],
            None => -1,
        }
    }

    /// `map_batches` on a byte slice.
    pub(crate) fn map_batches_bytes(
        &mut self,
        d: &[u8],
        pos: usize,
        start: i64,
        capacity: usize,
    ) -> (usize, Option<i64>) {
        let mut pos = pos;
        let mut last_mapped = None;
        while let Some(h) = d.get(pos..pos.saturating_add(61)) {
            let size = i32::from_be_bytes(h[8..12].try_into().expect("4 bytes"));
            if size < 49 || h[16] != 2 {
                break;
            }
            let total = 12 + size as usize;
            let Some(batch) = d.get(pos..pos + total) else { break };
            let attributes = u16::from_be_bytes([h[21], h[22]]);
            if attributes & 0x37 != 0 {
                break; // compressed, transactional or control: the per-batch path
            }
            let base = i64::from_be_bytes(h[0..8].try_into().expect("8 bytes"));
            let delta = i32::from_be_bytes(h[23..27].try_into().expect("4 bytes"));
            let count = i32::from_be_bytes(h[57..61].try_into().expect("4 bytes"));
            let stored = u32::from_be_bytes(h[17..21].try_into().expect("4 bytes"));
            if crate::checksum::crc32c(&batch[21..]) != stored {
                break;
            }
            let Some(last) = base.checked_add(delta as i64) else { break };
            if last < start {
                pos += total;
                continue;
            }
            if base < start || count < 0 || self.index.len() + count as usize >= capacity {
                break;
            }
            let records = &batch[61..];
            let walked = walk_keys(records, count as i64, base, |key, offset| {
                self.put_key(key, offset);
                Ok::<(), std::convert::Infallible>(())
            });
            if !matches!(walked, Ok(true)) {
                break; // puts already made for this batch are redone, in order, by the per-batch path
            }
            last_mapped = Some(last);
            pos += total;
        }
        (pos, last_mapped)
    }

    fn digest_of(digest: &[u8]) -> PyResult<[u8; 16]> {
        digest.try_into().map_err(|_| pyo3::exceptions::PyValueError::new_err("an MD5 digest is 16 bytes"))
    }
}

#[pymethods]
impl OffsetMapCore {
    #[new]
    pub(crate) fn new(raw_max_keys: usize, raw_max_len: usize) -> Self {
        OffsetMapCore {
            index: HashMap::default(),
            offsets: Vec::new(),
            raw: HashMap::default(),
            raw_max_keys,
            raw_max_len,
            frozen: None,
        }
    }

    /// Distinct hashes mapped.
    #[getter]
    pub(crate) fn size(&self) -> usize {
        self.index.len()
    }

    fn clear(&mut self) {
        self.index = HashMap::default();
        self.offsets = Vec::new();
        self.raw = HashMap::default();
        self.frozen = None;
    }

    fn put(&mut self, key: &[u8], offset: i64) {
        self.put_key(key, offset);
    }

    fn get(&mut self, key: &[u8]) -> i64 {
        self.get_key(key)
    }

    fn get_hash(&self, digest: &[u8]) -> PyResult<i64> {
        let d = Self::digest_of(digest)?;
        Ok(self.index.get(&d).map_or(-1, |&s| self.offsets[s]))
    }

    /// Set `digest`'s offset (with `newest`: only if larger, for merging per-segment results); a short `key` is
    /// remembered raw.
    #[pyo3(signature = (digest, offset, newest=true, key=None))]
    fn merge_hash(&mut self, digest: &[u8], offset: i64, newest: bool, key: Option<&[u8]>) -> PyResult<()> {
        let d = Self::digest_of(digest)?;
        let s = match self.index.get(&d) {
            Some(&s) => {
                if !newest || offset > self.offsets[s] {
                    self.offsets[s] = offset;
                }
                s
            }
            None => {
                let s = self.offsets.len();
                self.offsets.push(offset);
                self.index.insert(d, s);
                s
            }
        };
        if let Some(k) = key {
            if k.len() <= self.raw_max_len && self.raw.len() < self.raw_max_keys {
                self.raw.insert(k.into(), s);
            }
        }
        Ok(())
    }

    /// `(digest, offset)` of every mapped hash.
    fn items<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for (d, &s) in &self.index {
            out.append((PyBytes::new(py, d), self.offsets[s]))?;
        }
        Ok(out)
    }

    /// Sort the mapped offsets for `maps_none_of` (once the map is built).
    fn freeze(&mut self) {
        let mut v = self.offsets.clone();
        v.sort_unstable();
        self.frozen = Some(v);
    }

    /// Whether no mapped offset lies in `[base_offset, last_offset]` (None before `freeze`).
    fn maps_none_of(&self, base_offset: i64, last_offset: i64) -> Option<bool> {
        let v = self.frozen.as_ref()?;
        let i = v.partition_point(|&x| x < base_offset);
        Some(i == v.len() || v[i] > last_offset)
    }

    /// `map_records` into this map (the caller made sure it cannot fill up within the batch).
    fn map_records(&mut self, data: &Bound<'_, PyBytes>, count: i64, base_offset: i64) -> PyResult<bool> {
        walk_keys(data.as_bytes(), count, base_offset, |key, offset| {
            self.put_key(key, offset);
            Ok(())
        })
    }

    /// The map pass over a run of plain batches of a segment, from byte `pos` of `data` (the segment's bytes):
    /// every v2 batch that is not compressed, transactional or a control batch, has an intact CRC and lies at or
    /// above `start` is mapped record by record (a batch ending below `start` is skipped, as in
    /// `build_offset_map`). Stops at the first entry it does not take -- anything else, anything malformed, a
    /// batch straddling `start`, or one that could fill the map (`size + records >= capacity`) -- so that the
    /// caller's per-batch path handles exactly that entry. Returns `(position reached, last offset of the last
    /// batch mapped or None)`.
    fn map_batches(
        &mut self,
        data: &Bound<'_, PyAny>,
        pos: usize,
        start: i64,
        capacity: usize,
    ) -> PyResult<(usize, Option<i64>)> {
        let view = ByteView::new(data)?;
        Ok(self.map_batches_bytes(view.as_slice(), pos, start, capacity))
    }

    /// `scan_retained` against this map.
    #[allow(clippy::too_many_arguments)]
    fn scan_retained<'py>(
        &mut self,
        py: Python<'py>,
        data: &Bound<'py, PyBytes>,
        count: i64,
        base_offset: i64,
        base_ts: i64,
        latest: i64,
        keep_tombstones: bool,
    ) -> PyResult<Option<Bound<'py, PyTuple>>> {
        let pass = RetainPass { count, base_offset, base_ts, latest, keep_tombstones };
        let r = walk_retained(data.as_bytes(), pass, |key| Ok::<i64, PyErr>(self.get_key(key)))?;
        retained_tuple(py, r, count)
    }
}
