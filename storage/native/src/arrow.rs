//! Decoding v2 records straight into Arrow columns (arrow-rs), handed to pyarrow through the Arrow C data
//! interface (PyCapsule protocol, `__arrow_c_array__`): no Python object per record.
//!
//! `ArrowRecords` accumulates the record columns of the data source's schema, but topic, partition and segment
//! (the caller expands those from `piece`, the index of the segment the row came from). A batch is added whole
//! or not at all: it is parsed and checked first, and anything unusual leaves the builder untouched for the
//! caller's careful path.

use std::borrow::Cow;
use std::ffi::CString;
use std::sync::Arc;

use arrow_array::cast::AsArray;
use arrow_array::types::{ArrowPrimitiveType, Int32Type, Int64Type};
use arrow_array::{
    Array, ArrayRef, BinaryArray, BooleanArray, Int32Array, Int64Array, ListArray, PrimitiveArray, StringArray,
    StructArray, TimestampMicrosecondArray,
};
use arrow_buffer::{BooleanBuffer, BooleanBufferBuilder, Buffer, NullBuffer, OffsetBuffer};
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{ArrowError, DataType, Field, Fields};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PySequence, PyString, PyTuple};

use crate::batch::increment_sequence;
use crate::buffer::{arrow_buffer, ByteView};
use crate::bytes::{be_i16_at, be_i32_at, be_i64_at};
use crate::codec::{decompress_into, with_buffer};
use crate::constant;
use crate::legacy::{timestamp_type, with_entry, Msg};
use crate::projection::{Fill, Projection};
use crate::record::parse_record_with;
use crate::views::{Buffers, Loc, ViewCol};

/// Arrow's 32-bit offsets: a chunk's keys, values or header bytes must stay below this.
const MAX_BYTES: usize = (i32::MAX as usize) / 2;

fn header_fields() -> Fields {
    Fields::from(vec![Field::new("key", DataType::Utf8, true), Field::new("value", DataType::Binary, true)])
}

/// The batch-level values every row of a batch repeats.
#[derive(Clone, Copy)]
struct BatchMeta {
    timestamp_type: i32,
    leader_epoch: i32,
    producer_id: i64,
    producer_epoch: i32,
    transactional: bool,
    control: bool,
    magic: i32,
    position: i64,
    piece: i32,
}

const CODEC_NAMES: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

/// The rows to keep: half-open `(lo_offset, hi_offset, lo_timestamp, hi_timestamp)` (None: every row).
type Keep = Option<(i128, i128, i128, i128)>;

/// What adding a batch gives: its rows added, `None` (nothing added: the careful path decides), or an error.
type Added = Result<Option<usize>, &'static str>;

/// A binary column written straight into its buffers (offsets, bytes, and the rows that are null: the validity
/// bitmap is built at finish, only when a null occurred): a batch that turns out to be unusual is taken back by
/// truncating them. A column not asked for (`on` false) takes no pushes and holds nothing.
struct BinCol {
    offsets: Vec<i32>,
    data: Vec<u8>,
    /// the null rows, ascending
    null_rows: Vec<usize>,
    on: bool,
}

impl BinCol {
    fn with_capacity(rows: usize, bytes: usize) -> Self {
        let mut offsets = Vec::with_capacity(rows + 1);
        offsets.push(0);
        BinCol { offsets, data: Vec::with_capacity(bytes), null_rows: Vec::new(), on: true }
    }

    /// `with_capacity`, or an empty column that ignores pushes when `on` is false.
    fn wanted(on: bool, rows: usize, bytes: usize) -> Self {
        if on {
            Self::with_capacity(rows, bytes)
        } else {
            BinCol { on: false, ..Self::with_capacity(0, 0) }
        }
    }

    /// The rows pushed so far.
    #[inline(always)]
    fn len(&self) -> usize {
        self.offsets.len() - 1
    }

    #[inline(always)]
    fn push(&mut self, v: Option<&[u8]>) {
        if !self.on {
            return;
        }
        match v {
            Some(v) => self.data.extend_from_slice(v),
            None => self.null_rows.push(self.len()),
        }
        self.offsets.push(self.data.len() as i32);
    }

    /// Where the column ends now, for `truncate`.
    fn mark(&self) -> (usize, usize, usize) {
        (self.len(), self.data.len(), self.null_rows.len())
    }

    /// Take back everything pushed since `mark`.
    fn truncate(&mut self, (rows, bytes, nulls): (usize, usize, usize)) {
        self.offsets.truncate(rows + 1);
        self.data.truncate(bytes);
        self.null_rows.truncate(nulls);
    }

    /// The validity bitmap: `None` without a null row.
    fn nulls(&self) -> Option<NullBuffer> {
        if self.null_rows.is_empty() {
            return None;
        }
        let mut valid = BooleanBufferBuilder::new(self.len());
        valid.append_n(self.len(), true);
        for &i in &self.null_rows {
            valid.set_bit(i, false);
        }
        Some(NullBuffer::new(valid.finish()))
    }

    fn finish_binary(self) -> Result<ArrayRef, ArrowError> {
        let nulls = self.nulls();
        Ok(Arc::new(BinaryArray::try_new(OffsetBuffer::new(self.offsets.into()), Buffer::from_vec(self.data), nulls)?))
    }

    fn finish_utf8(self) -> Result<ArrayRef, ArrowError> {
        let nulls = self.nulls();
        Ok(Arc::new(StringArray::try_new(OffsetBuffer::new(self.offsets.into()), Buffer::from_vec(self.data), nulls)?))
    }
}

/// The key or the value column: plain `binary` (each value copied) or `binary_view` (`views.rs`: views into the
/// bytes the records were parsed from).
enum ByteCol {
    Bin(BinCol),
    View(ViewCol),
}

impl ByteCol {
    fn new(views: bool, on: bool, rows: usize, bytes: usize) -> Self {
        if views && on {
            ByteCol::View(ViewCol::with_capacity(rows))
        } else {
            ByteCol::Bin(BinCol::wanted(on, rows, bytes))
        }
    }

    /// A row: null, or `d[a..b]`, `d` lying at `loc` in a shared buffer (or nowhere shared).
    #[inline(always)]
    fn push(&mut self, d: &[u8], v: Option<(usize, usize)>, loc: Option<Loc>) {
        match self {
            ByteCol::Bin(c) => c.push(v.map(|(a, b)| &d[a..b])),
            ByteCol::View(c) => c.push(d, v, loc),
        }
    }

    /// A row from bytes that lie in no shared buffer.
    fn push_bytes(&mut self, v: Option<&[u8]>) {
        match (self, v) {
            (ByteCol::Bin(c), v) => c.push(v),
            (ByteCol::View(c), Some(v)) => c.push_copy(v),
            (ByteCol::View(c), None) => c.push_null(),
        }
    }

    fn mark(&self) -> (usize, usize, usize) {
        match self {
            ByteCol::Bin(c) => c.mark(),
            ByteCol::View(c) => c.mark(),
        }
    }

    fn truncate(&mut self, mark: (usize, usize, usize)) {
        match self {
            ByteCol::Bin(c) => c.truncate(mark),
            ByteCol::View(c) => c.truncate(mark),
        }
    }

    fn reserve(&mut self, rows: usize) {
        match self {
            ByteCol::Bin(c) if c.on => c.offsets.reserve(rows),
            ByteCol::Bin(_) => {}
            ByteCol::View(c) => c.reserve(rows),
        }
    }

    fn finish(self, buffers: &Buffers) -> Result<ArrayRef, ArrowError> {
        match self {
            ByteCol::Bin(c) => c.finish_binary(),
            ByteCol::View(c) => c.finish(buffers),
        }
    }
}

/// Rows of one batch in a row: the batch-level columns are these values repeated `rows` times.
struct Run {
    meta: BatchMeta,
    codec: Cow<'static, str>,
    rows: usize,
}

#[pyclass(module = "kafkalog.storage._native")]
pub struct ArrowRecords {
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    keys: ByteCol,
    values: ByteCol,
    /// with `views`: the data buffers key and value views point into (segments, decompressed batches)
    buffers: Buffers,
    views: bool,
    /// with `views`: the chunk's decompressed records sections, one after the other (a shared buffer, in the
    /// slot `arena_slot`, at finish)
    arena: Vec<u8>,
    arena_slot: Option<usize>,
    header_offsets: Vec<i32>,
    header_keys: BinCol,
    header_values: BinCol,
    sequences: Vec<i32>,
    runs: Vec<Run>,
    nbytes: usize,
    /// the byte capacity asked for: every chunk's buffers start that large (a finished chunk's buffers go to
    /// Arrow, so without it each later chunk would grow from nothing, reallocating and faulting pages in)
    capacity: usize,
    /// the columns built at finish, and the per-record buffers they need filled
    projection: Projection,
    fill: Fill,
    /// the current batch's parsed records (`add_v2_at` without `keep`), reused batch after batch
    parsed: Vec<Parsed>,
}

/// One record of a batch, parsed and checked, before its row is written (`ArrowRecords::add_all`).
#[derive(Clone, Copy)]
struct Parsed {
    offset: i64,
    timestamp: i64,
    off_delta: i64,
    hcount: usize,
}

impl ArrowRecords {
    /// The batch-level values of the next `rows` rows.
    fn push_run(&mut self, meta: BatchMeta, codec: &str, rows: usize) {
        if rows == 0 {
            return;
        }
        let codec = match CODEC_NAMES.iter().find(|c| **c == codec) {
            Some(c) => Cow::Borrowed(*c),
            None => Cow::Owned(codec.to_owned()),
        };
        self.runs.push(Run { meta, codec, rows });
    }

    fn check_room(&self, more: usize) -> Result<(), &'static str> {
        if self.nbytes + more > MAX_BYTES {
            return Err("an Arrow chunk holds at most 1 GiB of records: start a new one");
        }
        Ok(())
    }

    /// The builder (`ArrowRecords(capacity)`), without Python: every column.
    pub fn with_capacity(capacity: usize) -> Self {
        Self::projected(capacity, Projection::ALL, false)
    }

    /// The builder of the columns `names` only (`ArrowRecords(capacity, columns)`; every column for `None`), with
    /// key and value as `binary_view` when `views`; an unknown name is the error.
    pub fn with_columns<S: AsRef<str>>(capacity: usize, names: Option<&[S]>, views: bool) -> Result<Self, String> {
        let projection = names.map_or(Ok(Projection::ALL), Projection::of)?;
        Ok(Self::projected(capacity, projection, views))
    }

    fn projected(capacity: usize, projection: Projection, views: bool) -> Self {
        let capacity = capacity.min(MAX_BYTES);
        let rows = capacity / 64;
        let fill = projection.fill();
        let on = |yes: bool, n: usize| if yes { n } else { 0 };
        ArrowRecords {
            offsets: Vec::with_capacity(rows),
            timestamps: Vec::with_capacity(on(fill.timestamps, rows)),
            keys: ByteCol::new(views, fill.keys, rows, capacity / 8),
            values: ByteCol::new(views, fill.values, rows, capacity),
            buffers: Buffers::default(),
            arena: Vec::new(),
            arena_slot: None,
            views: views && (fill.keys || fill.values), // (neither asked for: nothing to point anywhere)
            header_offsets: {
                let mut v = Vec::with_capacity(on(fill.headers, rows) + 1);
                v.push(0);
                v
            },
            header_keys: BinCol::wanted(fill.headers, rows / 8, capacity / 64),
            header_values: BinCol::wanted(fill.headers, rows / 8, capacity / 32),
            sequences: Vec::with_capacity(on(fill.sequences, rows)),
            runs: Vec::with_capacity(capacity / 1024),
            nbytes: 0,
            capacity,
            projection,
            fill,
            parsed: Vec::new(),
        }
    }

    /// The per-record values of one row but its key and value (pushed by the caller): offset, timestamp (when
    /// asked), the end of its headers (when asked) and its sequence (when asked and known: `None` is -1, left
    /// unwritten until a known one follows or the chunk ends: the rows past `sequences` are -1).
    #[inline(always)]
    fn push_row(&mut self, offset: i64, timestamp: i64, sequence: Option<i32>) {
        self.offsets.push(offset);
        if self.fill.timestamps {
            self.timestamps.push(timestamp);
        }
        if self.fill.headers {
            // only the rows up to the last one with headers are written: the rows after it end where it ends
            let (ends, last) = (self.header_keys.len() as i32, self.header_offsets.last().copied().unwrap_or(0));
            if ends != last {
                self.header_offsets.resize(self.offsets.len(), last);
                self.header_offsets.push(ends);
            }
        }
        if let (true, Some(s)) = (self.fill.sequences, sequence) {
            if self.sequences.len() + 1 < self.offsets.len() {
                self.sequences.resize(self.offsets.len() - 1, -1);
            }
            self.sequences.push(s);
        }
    }

    /// Where every per-row column ends now, for `truncate`.
    fn mark(&self) -> [(usize, usize, usize); 5] {
        let rows = self.offsets.len();
        [
            self.keys.mark(),
            self.values.mark(),
            self.header_keys.mark(),
            self.header_values.mark(),
            (rows, self.buffers.len(), 0),
        ]
    }

    /// Take back the rows added since `mark` (a batch that turned out unusual half-way).
    fn truncate(&mut self, [k, v, hk, hv, (rows, shared, _)]: [(usize, usize, usize); 5]) {
        self.buffers.truncate(shared);
        self.keys.truncate(k);
        self.values.truncate(v);
        self.header_keys.truncate(hk);
        self.header_values.truncate(hv);
        self.offsets.truncate(rows);
        self.timestamps.truncate(rows);
        self.sequences.truncate(rows);
        self.header_offsets.truncate(rows + 1);
    }

    /// Room for `rows` more rows, reserved once per batch (the byte columns start at the chunk's capacity).
    fn reserve(&mut self, rows: usize) {
        let f = self.fill;
        self.offsets.reserve(rows);
        self.timestamps.reserve(if f.timestamps { rows } else { 0 });
        self.header_offsets.reserve(if f.headers { rows } else { 0 });
        self.sequences.reserve(if f.sequences { rows } else { 0 });
        self.keys.reserve(rows);
        self.values.reserve(rows);
    }

    /// `add_v2` on byte slices (`data`: the decompressed records section of a compressed batch).
    pub fn add_v2_bytes(&mut self, b: &[u8], position: i64, piece: i32, keep: Keep, data: Option<&[u8]>) -> Added {
        self.add_v2_at(b, position, piece, keep, data, None)
    }

    /// `add_v2_bytes`, the records section (`b[61..]`, or `data`) lying at `loc` in a shared buffer: with views,
    /// the keys and values point there.
    fn add_v2_at(
        &mut self,
        b: &[u8],
        position: i64,
        piece: i32,
        keep: Keep,
        data: Option<&[u8]>,
        loc: Option<Loc>,
    ) -> Added {
        if b.len() < 61 || b[16] != 2 {
            return Ok(None);
        }
        let attributes = (be_i16_at(b, 21) & 0xFF) as u8;
        let codec = (attributes & 0x07) as usize;
        let d: &[u8] = match (codec, data) {
            (0, None) => &b[61..],
            (1..=4, Some(data)) => data,
            _ => return Ok(None),
        };
        let count = be_i32_at(b, 57);
        let end = d.len();
        if count < 0 || (count as u64).saturating_mul(7) > end as u64 {
            return Ok(None);
        }
        self.check_room(b.len().max(end))?;
        let base_offset = be_i64_at(b, 0);
        let base_ts = be_i64_at(b, 27);
        let append_ts = if attributes & 0x08 != 0 { Some(be_i64_at(b, 35)) } else { None };
        let base_seq = be_i32_at(b, 53) as i64;
        let meta = BatchMeta {
            timestamp_type: i32::from(append_ts.is_some()),
            leader_epoch: be_i32_at(b, 12),
            producer_id: be_i64_at(b, 43),
            producer_epoch: be_i16_at(b, 51) as i32,
            transactional: attributes & 0x10 != 0,
            control: attributes & 0x20 != 0,
            magic: 2,
            position,
            piece,
        };
        self.reserve(count as usize);
        let mark = self.mark();
        if keep.is_none() {
            let added = self.add_all(d, count as usize, (base_offset, base_ts, append_ts, base_seq), loc);
            if added.is_none() {
                self.truncate(mark);
                return Ok(None);
            }
            self.push_run(meta, CODEC_NAMES[codec], count as usize);
            self.nbytes += b.len();
            return Ok(added);
        }
        // one pass, straight into the columns; anything unusual takes the whole batch back
        let mut added = 0;
        let mut p = 0usize;
        for _ in 0..count {
            touch(d, p + TOUCH_AHEAD);
            // the headers go straight into their columns as parse_record_with checks them (taken back with the
            // batch, or with the record when `keep` drops it)
            let header_mark = keep.map(|_| (self.header_keys.mark(), self.header_values.mark()));
            let (hk, hv) = (&mut self.header_keys, &mut self.header_values);
            let Some(raw) = parse_record_with(d, &mut p, end, |(ka, kb), v| {
                hk.push(Some(&d[ka..kb]));
                hv.push(v.map(|(a, b)| &d[a..b]));
            }) else {
                self.truncate(mark);
                return Ok(None);
            };
            let Some((offset, timestamp)) = raw.offset_timestamp(base_offset, base_ts, append_ts) else {
                self.truncate(mark);
                return Ok(None);
            };
            if let (Some((lo_o, hi_o, lo_t, hi_t)), Some((hk, hv))) = (keep, header_mark) {
                let (o, t) = (offset as i128, timestamp as i128);
                if !(lo_o <= o && o < hi_o && lo_t <= t && t < hi_t) {
                    self.header_keys.truncate(hk);
                    self.header_values.truncate(hv);
                    continue;
                }
            }
            self.keys.push(d, raw.key, loc);
            self.values.push(d, raw.value, loc);
            self.push_row(offset, timestamp, (base_seq >= 0).then(|| sequence(base_seq, raw.off_delta)));
            added += 1;
        }
        if p != end {
            self.truncate(mark);
            return Ok(None);
        }
        self.push_run(meta, CODEC_NAMES[codec], added);
        self.nbytes += b.len();
        Ok(Some(added))
    }

    /// Every record of a batch's records section `d` (`count` of them, filling it exactly) as rows, in two
    /// passes: each record parsed and checked, its headers, key and value written as it is (those copies'
    /// stores overlap the next record's parse), then offsets, timestamps, header offsets and sequences each in a
    /// loop of its own (one capacity check per column, not one per row). `None` on anything unusual: the caller
    /// takes back the batch. `(base_offset, base_ts, append_ts, base_seq)` are the batch's.
    #[inline(never)]
    fn add_all(
        &mut self,
        d: &[u8],
        count: usize,
        (base_offset, base_ts, append_ts, base_seq): (i64, i64, Option<i64>, i64),
        loc: Option<Loc>,
    ) -> Option<usize> {
        let mut parsed = std::mem::take(&mut self.parsed);
        parsed.clear();
        parsed.reserve(count);
        let (hk, hv) = (&mut self.header_keys, &mut self.header_values);
        let (keys, values) = (&mut self.keys, &mut self.values);
        let mut p = 0usize;
        let end = d.len();
        let ok = (|| {
            for _ in 0..count {
                touch(d, p + TOUCH_AHEAD);
                let raw = parse_record_with(d, &mut p, end, |(ka, kb), v| {
                    hk.push(Some(&d[ka..kb]));
                    hv.push(v.map(|(a, b)| &d[a..b]));
                })?;
                let (offset, timestamp) = raw.offset_timestamp(base_offset, base_ts, append_ts)?;
                // the copies stay in this pass: their stores overlap the next record's parse
                keys.push(d, raw.key, loc);
                values.push(d, raw.value, loc);
                parsed.push(Parsed { offset, timestamp, off_delta: raw.off_delta, hcount: raw.hcount });
            }
            (p == end).then_some(())
        })();
        if ok.is_some() {
            self.write_parsed(&parsed, base_seq);
        }
        self.parsed = parsed;
        ok.map(|()| count)
    }

    /// The rows of `add_all`'s parsed records, column by column (as `push_row` and the key and value pushes
    /// write them row by row).
    fn write_parsed(&mut self, parsed: &[Parsed], base_seq: i64) {
        let before = self.offsets.len();
        self.offsets.extend(parsed.iter().map(|r| r.offset));
        if self.fill.timestamps {
            self.timestamps.extend(parsed.iter().map(|r| r.timestamp));
        }
        if self.fill.headers {
            // only the rows up to the last one with headers are written: the rows after it end where it ends
            let mut ends = (self.header_keys.len() - parsed.iter().map(|r| r.hcount).sum::<usize>()) as i32;
            for (i, r) in parsed.iter().enumerate() {
                if r.hcount == 0 {
                    continue;
                }
                let last = self.header_offsets.last().copied().unwrap_or(0);
                ends += r.hcount as i32;
                self.header_offsets.resize(before + i + 1, last);
                self.header_offsets.push(ends);
            }
        }
        if self.fill.sequences && base_seq >= 0 {
            if self.sequences.len() < before {
                self.sequences.resize(before, -1);
            }
            self.sequences.extend(parsed.iter().map(|r| sequence(base_seq, r.off_delta)));
        }
    }

    /// One v2 batch (a run's, `add_entries`, or `add_v2`'s), lying at `at` in a shared buffer (with views): a
    /// plain one as `add_v2_bytes`; a compressed one decompressed first within `limit` bytes (`None` when that
    /// fails: the records layer's verdict), into this thread's reused buffer, or with views into a buffer of its
    /// own that the views point into.
    pub fn add_v2_entry(
        &mut self,
        b: &[u8],
        position: i64,
        piece: i32,
        keep: Keep,
        limit: usize,
        at: Option<Loc>,
    ) -> Added {
        if b.len() < 61 || b[16] != 2 {
            return Ok(None);
        }
        let codec = b[22] & 0x07;
        if codec == 0 {
            let loc = at.map(|l| Loc { buffer: l.buffer, start: l.start + 61 });
            return self.add_v2_at(b, position, piece, keep, None, loc);
        }
        with_buffer(|out| match decompress_into(codec, &b[61..], 2, limit, out) {
            Some(()) if self.views => self.add_decompressed(b, position, piece, keep, out),
            Some(()) => self.add_v2_at(b, position, piece, keep, Some(out), None),
            None => Ok(None),
        })
    }

    /// A compressed batch's decompressed records section `out`, with views: appended to the chunk's arena (one
    /// block copy per batch, into memory reused batch after batch) that its views then point into.
    fn add_decompressed(&mut self, b: &[u8], position: i64, piece: i32, keep: Keep, out: &[u8]) -> Added {
        if self.arena_slot.is_none() {
            self.arena_slot = Some(self.buffers.placeholder());
            self.arena.reserve(2 * self.capacity); // (about what the chunk's sections decompress to: grown once)
        }
        let slot = self.arena_slot.unwrap_or_default();
        let mut arena = std::mem::take(&mut self.arena);
        let start = arena.len();
        arena.extend_from_slice(out);
        let got = self.add_v2_at(b, position, piece, keep, Some(&arena[start..]), Some(Loc { buffer: slot, start }));
        if !matches!(got, Ok(Some(n)) if n > 0) {
            arena.truncate(start); // (no view points into it)
        }
        self.arena = arena;
        got
    }

    /// `add_entries` without Python (its GIL released by the caller): the entries of `data[start..end]`, the
    /// caps `(max_rows, max_bytes)` and the filters `(verify, stop_attributes, max_count, limit)` as there. With
    /// views, `data` is kept as a shared buffer of the chunk (a clone: the views keep it alive, whoever else lets
    /// it go).
    #[allow(clippy::too_many_arguments)]
    pub fn add_entries_buffer(
        &mut self,
        data: &Buffer,
        start: usize,
        end: usize,
        position_base: i64,
        piece: i32,
        (max_rows, max_bytes): (usize, usize),
        (verify, stop_attributes, max_count, limit): (bool, i16, i32, usize),
    ) -> (usize, usize, usize) {
        // with views, the buffer (a segment's mapped bytes) is shared: the views keep it exported
        let shared = self.views.then(|| self.buffers.add(data.clone()));
        let d = data.as_slice();
        let end = end.min(d.len());
        let stop_attributes = if limit == 0 { stop_attributes | 0x07 } else { stop_attributes };
        let mut pos = start;
        let mut added = 0usize;
        let mut batches = 0usize;
        while pos < end && end - pos > 17 && self.offsets.len() < max_rows && self.nbytes < max_bytes {
            let size = be_i32_at(d, pos + 8);
            if size < 14 || (size as usize) > end - pos - 12 {
                break;
            }
            let entry = &d[pos..pos + 12 + size as usize];
            if entry[16] != 2 || entry.len() < 61 || be_i16_at(entry, 21) & stop_attributes != 0 {
                break;
            }
            if be_i32_at(entry, 57) > max_count {
                break;
            }
            if verify && be_i32_at(entry, 17) as u32 != crate::checksum::crc32c(&entry[21..]) {
                break;
            }
            let at = shared.map(|buffer| Loc { buffer, start: pos });
            match self.add_v2_entry(entry, position_base + pos as i64, piece, None, limit, at) {
                Ok(Some(n)) => {
                    added += n;
                    batches += usize::from(n > 0); // (an empty batch adds no row: not counted)
                }
                _ => break,
            }
            pos += entry.len();
        }
        (pos, added, batches)
    }

    /// `add_legacy` on a byte slice, with a scratch vector for the messages.
    pub(crate) fn add_legacy_bytes(
        &mut self,
        e: &[u8],
        position: i64,
        piece: i32,
        keep: Keep,
        limit: usize,
        msgs: &mut Vec<Msg>,
    ) -> Added {
        if e.len() < 18 || e[16] > 1 {
            return Ok(None);
        }
        let (magic, attributes) = (e[16], e[17]);
        let codec = (attributes & 0x07) as usize;
        let meta = BatchMeta {
            timestamp_type: timestamp_type(magic, attributes),
            leader_epoch: -1,
            producer_id: -1,
            producer_epoch: -1,
            transactional: false,
            control: false,
            magic: magic as i32,
            position,
            piece,
        };
        let got = with_entry(e, limit, msgs, |d, msgs| -> Result<usize, &'static str> {
            self.check_room(e.len().max(d.len()))?;
            self.reserve(msgs.len());
            let mut added = 0;
            for m in msgs {
                if let Some((lo_o, hi_o, lo_t, hi_t)) = keep {
                    let (o, t) = (m.offset as i128, m.timestamp as i128);
                    if !(lo_o <= o && o < hi_o && lo_t <= t && t < hi_t) {
                        continue;
                    }
                }
                self.keys.push(d, m.key, None);
                self.values.push(d, m.value, None);
                self.push_row(m.offset, m.timestamp, None);
                added += 1;
            }
            Ok(added)
        });
        match got {
            None => Ok(None),
            Some(Err(e)) => Err(e),
            Some(Ok(added)) => {
                // as the records layer's rows (`add_rows`): a batch none of whose rows is kept adds no bytes
                if added > 0 {
                    self.push_run(meta, CODEC_NAMES[codec], added);
                    self.nbytes += e.len();
                }
                Ok(Some(added))
            }
        }
    }

    /// The headers column (the builder's header buffers are empty afterwards).
    fn finish_headers(&mut self) -> Result<ArrayRef, ArrowError> {
        let items = StructArray::try_new(
            header_fields(),
            vec![
                std::mem::replace(&mut self.header_keys, BinCol::with_capacity(0, 0)).finish_utf8()?,
                std::mem::replace(&mut self.header_values, BinCol::with_capacity(0, 0)).finish_binary()?,
            ],
            None,
        )?;
        let rows = self.offsets.len();
        let mut offsets = std::mem::replace(&mut self.header_offsets, vec![0]);
        // a record without headers has null headers, as Spark's Kafka source (`KafkaRecordToRowConverter`)
        let (offsets, has_headers) = if items.is_empty() {
            // no record of the chunk has any (the common case): zero offsets from a shared array, every row null
            let zeros = constant::primitive::<Int32Type>(0, rows + 1);
            (zeros.as_primitive::<Int32Type>().values().clone(), BooleanBuffer::new_unset(rows))
        } else {
            let last = offsets.last().copied().unwrap_or(0);
            offsets.resize(rows + 1, last);
            let has = BooleanBuffer::collect_bool(rows, |i| offsets[i + 1] > offsets[i]);
            (offsets.into(), has)
        };
        let header_nulls = Some(NullBuffer::new(has_headers)).filter(|n| n.null_count() > 0);
        Ok(Arc::new(ListArray::try_new(
            Arc::new(Field::new("element", DataType::Struct(header_fields()), true)),
            OffsetBuffer::new(offsets),
            Arc::new(items),
            header_nulls,
        )?))
    }

    /// `finish` without Python: the rows as one struct array (a `piece` column where the data source has
    /// topic, partition and segment); the builder is empty afterwards.
    pub fn finish_array(&mut self) -> Result<StructArray, arrow_schema::ArrowError> {
        self.finish_with(None)
    }

    /// The rows as one struct array. With `names` (topic, partition and segment of each piece number) the
    /// columns are exactly the data source's record columns, in order (`RECORD_COLUMNS`); without, `piece`
    /// stands for those three.
    pub fn finish_with(
        &mut self,
        names: Option<&[(String, i32, String)]>,
    ) -> Result<StructArray, arrow_schema::ArrowError> {
        let want = self.projection;
        let headers = if want.has("headers") { Some(self.finish_headers()?) } else { None };
        let runs = std::mem::take(&mut self.runs);
        let rows = self.offsets.len();
        // a batch-level column: each run's value repeated over its rows
        fn expand<P: ArrowPrimitiveType>(runs: &[Run], rows: usize, f: impl Fn(&Run) -> P::Native) -> ArrayRef
        where
            P::Native: PartialEq,
        {
            // one value for the whole chunk (the common case for most of these columns): a shared array's slice
            if let Some(first) = runs.first() {
                let x = f(first);
                if runs.iter().all(|r| f(r) == x) {
                    return constant::primitive::<P>(x, rows);
                }
            }
            let mut v = Vec::with_capacity(rows);
            for r in runs {
                v.extend(std::iter::repeat_n(f(r), r.rows));
            }
            Arc::new(PrimitiveArray::<P>::new(v.into(), None))
        }
        // a string column: each run's string repeated over its rows, built in bulk
        fn repeated<'a>(runs: &'a [Run], rows: usize, f: impl Fn(&'a Run) -> &'a str) -> Result<ArrayRef, ArrowError> {
            // one string for every row (one topic, segment or codec in the chunk, the common case): a shared
            // array's slice (Arrow's repeat, which needs no UTF-8 check of the bytes it wrote)
            if let Some(first) = runs.first() {
                let s = f(first);
                if runs.iter().all(|r| {
                    let t = f(r);
                    std::ptr::eq(t, s) || t == s
                }) {
                    if s.len().saturating_mul(rows) > i32::MAX as usize {
                        return Err(ArrowError::InvalidArgumentError("string column too large".into()));
                    }
                    return Ok(constant::string(s, rows));
                }
            }
            let mut offsets: Vec<i32> = Vec::with_capacity(rows + 1);
            offsets.push(0);
            let mut data: Vec<u8> = Vec::new();
            for r in runs {
                let s = f(r).as_bytes();
                if data.len() + s.len() * r.rows > i32::MAX as usize {
                    return Err(ArrowError::InvalidArgumentError("string column too large".into()));
                }
                let at = data.len() as i32;
                let n = s.len() as i32;
                offsets.extend((1..=r.rows as i32).map(|i| at + i * n));
                // the string once, then doubled in place (a few memcpy, not a byte at a time)
                let (start, total) = (data.len(), s.len() * r.rows);
                data.reserve(total);
                data.extend_from_slice(s);
                while data.len() - start < total {
                    let have = data.len() - start;
                    data.extend_from_within(start..start + have.min(total - have));
                }
            }
            Ok(Arc::new(StringArray::try_new(OffsetBuffer::new(offsets.into()), Buffer::from_vec(data), None)?))
        }
        let codecs = |runs: &[Run], rows: usize| repeated(runs, rows, |r| r.codec.as_ref());
        let i64s = |v: Vec<i64>| Arc::new(Int64Array::from(v)) as ArrayRef;
        // a batch-level flag: each run's value repeated over its rows, straight into the bitmap
        let bools = |f: fn(&BatchMeta) -> bool| {
            let mut bits = BooleanBufferBuilder::new(rows);
            for r in &runs {
                bits.append_n(r.rows, f(&r.meta));
            }
            Arc::new(BooleanArray::new(bits.finish(), None)) as ArrayRef
        };
        // topic, partition and segment from the piece names (those asked for)
        let mut named: [Option<ArrayRef>; 3] = [None, None, None];
        if let Some(names) = names {
            if let Some(r) = runs.iter().find(|r| names.get(r.meta.piece as usize).is_none()) {
                return Err(ArrowError::InvalidArgumentError(format!("no name for piece {}", r.meta.piece)));
            }
            let piece = |r: &Run| &names[r.meta.piece as usize];
            if want.has("topic") {
                named[0] = Some(repeated(&runs, rows, |r| piece(r).0.as_str())?);
            }
            if want.has("partition") {
                named[1] = Some(expand::<Int32Type>(&runs, rows, |r| piece(r).1));
            }
            if want.has("segment") {
                named[2] = Some(repeated(&runs, rows, |r| piece(r).2.as_str())?);
            }
        }
        let [topic, partition, segment] = named;
        let keys = std::mem::replace(&mut self.keys, ByteCol::new(false, false, 0, 0));
        let values = std::mem::replace(&mut self.values, ByteCol::new(false, false, 0, 0));
        let mut buffers = std::mem::take(&mut self.buffers);
        if let Some(slot) = self.arena_slot.take() {
            buffers.fill(slot, Buffer::from_vec(std::mem::take(&mut self.arena)));
        }
        let timestamps = std::mem::take(&mut self.timestamps);
        // the columns asked for, in the data source's order (named) or the unnamed form's
        let w = |name: &str| want.has(name);
        let mut columns: Vec<(&str, ArrayRef)> = Vec::with_capacity(18);
        if let Some(topic) = topic {
            columns.push(("topic", topic));
        }
        if let Some(partition) = partition {
            columns.push(("partition", partition));
        }
        let offsets = std::mem::take(&mut self.offsets);
        if w("offset") {
            columns.push(("offset", i64s(offsets)));
        }
        if names.is_some() {
            // Spark's TIMESTAMP (microseconds, UTC) beside the epoch ms; ms past what microseconds hold: null
            if w("timestamp") {
                columns.push(("timestamp", spark_timestamps(&timestamps)?));
            }
            if w("timestampMs") {
                columns.push(("timestampMs", i64s(timestamps)));
            }
        } else if w("timestamp") || w("timestampMs") {
            columns.push(("timestamp", i64s(timestamps)));
        }
        if w("timestampType") {
            columns.push(("timestampType", expand::<Int32Type>(&runs, rows, |r| r.meta.timestamp_type)));
        }
        if w("key") {
            columns.push(("key", keys.finish(&buffers)?));
        }
        if w("value") {
            columns.push(("value", values.finish(&buffers)?));
        }
        if let Some(headers) = headers {
            columns.push(("headers", headers));
        }
        if w("leaderEpoch") {
            columns.push(("leaderEpoch", expand::<Int32Type>(&runs, rows, |r| r.meta.leader_epoch)));
        }
        if w("producerId") {
            columns.push(("producerId", expand::<Int64Type>(&runs, rows, |r| r.meta.producer_id)));
        }
        if w("producerEpoch") {
            columns.push(("producerEpoch", expand::<Int32Type>(&runs, rows, |r| r.meta.producer_epoch)));
        }
        if w("sequence") {
            // (-1 past the last known one: a chunk without any is one shared buffer's slice)
            let mut known = std::mem::take(&mut self.sequences);
            let sequences = if known.is_empty() {
                constant::primitive::<Int32Type>(-1, rows)
            } else {
                known.resize(rows, -1);
                Arc::new(Int32Array::from(known))
            };
            columns.push(("sequence", sequences));
        }
        if w("isTransactional") {
            columns.push(("isTransactional", bools(|m| m.transactional)));
        }
        if w("isControl") {
            columns.push(("isControl", bools(|m| m.control)));
        }
        if w("magic") {
            columns.push(("magic", expand::<Int32Type>(&runs, rows, |r| r.meta.magic)));
        }
        if w("codec") {
            columns.push(("codec", codecs(&runs, rows)?));
        }
        if let Some(segment) = segment {
            columns.push(("segment", segment));
        }
        if w("position") {
            columns.push(("position", expand::<Int64Type>(&runs, rows, |r| r.meta.position)));
        }
        if names.is_none() && w("piece") {
            columns.push(("piece", expand::<Int32Type>(&runs, rows, |r| r.meta.piece)));
        }
        let fields = Fields::from(
            columns.iter().map(|(name, a)| Field::new(*name, a.data_type().clone(), true)).collect::<Vec<_>>(),
        );
        let arrays = columns.into_iter().map(|(_, a)| a).collect();
        // (with no column asked for, the rows are still counted: the array keeps its length)
        let array = StructArray::try_new_with_length(fields, arrays, None, rows)?;
        *self = Self::projected(self.capacity, want, self.views);
        Ok(array)
    }
}

/// How far ahead of the record being parsed `touch` reads.
const TOUCH_AHEAD: usize = 192;

/// Read the two cache lines at `d[at..]` (when in the slice) for nothing but to have them on their way: the
/// parse's reads are a chain (each varint says where the next field is), and the first read of each record's
/// bytes past its value otherwise waits on memory. Loads nothing depends on do not hold the loop up.
#[inline(always)]
fn touch(d: &[u8], at: usize) {
    std::hint::black_box((d.get(at).copied(), d.get(at + 64).copied()));
}

/// Epoch ms as Spark's TIMESTAMP (microseconds, UTC); null where the microseconds overflow an i64 (as
/// `columns.timestamp_columns`: Spark could not show those either).
fn spark_timestamps(ms: &[i64]) -> Result<ArrayRef, ArrowError> {
    const MAX_MS: i64 = i64::MAX / 1000 - 1;
    let fits = |t: &i64| t.unsigned_abs() <= MAX_MS as u64;
    let mut all_fit = true;
    let us: Vec<i64> = ms
        .iter()
        .map(|t| {
            let ok = fits(t);
            all_fit &= ok;
            if ok {
                t * 1000
            } else {
                0
            }
        })
        .collect();
    let nulls = (!all_fit).then(|| NullBuffer::from_iter(ms.iter().map(fits)));
    Ok(Arc::new(TimestampMicrosecondArray::try_new(us.into(), nulls)?.with_timezone("UTC")))
}

/// The sequence column: the record's sequence as Kafka derives it (`DefaultRecordBatch.incrementSequence`),
/// -1 without a base sequence -- the same rule as `Record.sequence`.
fn sequence(base_seq: i64, off_delta: i64) -> i32 {
    if base_seq < 0 {
        -1
    } else {
        increment_sequence(base_seq, off_delta) as i32
    }
}

#[pymethods]
impl ArrowRecords {
    /// `capacity`: about how many bytes of log entries will be added (buffers are sized for them once).
    /// `columns`: the only columns to build (None: every one); the others' buffers are never filled.
    /// `views`: key and value as `binary_view`, pointing into the segments' bytes (uncompressed batches) and the
    /// decompressed batches instead of copies (`views.rs`).
    #[new]
    #[pyo3(signature = (capacity=0, columns=None, views=false))]
    fn new(capacity: usize, columns: Option<Vec<String>>, views: bool) -> PyResult<Self> {
        crate::buffer::release_pending();
        Self::with_columns(capacity, columns.as_deref(), views).map_err(PyValueError::new_err)
    }

    fn __len__(&self) -> usize {
        self.offsets.len()
    }

    /// Bytes of log entries added so far.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// Add the records of one v2 batch (its whole entry, header included, at `position` of piece number
    /// `piece`) as rows. A compressed batch needs its records section decompressed in `data`. `keep`
    /// (optional `(lo_offset, hi_offset, lo_ts, hi_ts)`) keeps only rows in those half-open ranges.
    /// Returns the number of rows added, or `None` (nothing added) when the batch is unusual in any way: the
    /// caller then decodes it with the Python decoder (which reports the error, or gives rows for `add_rows`).
    /// The GIL is released meanwhile.
    #[pyo3(signature = (batch, position, piece, keep=None, data=None))]
    fn add_v2(
        &mut self,
        py: Python<'_>,
        batch: &Bound<'_, PyAny>,
        position: i64,
        piece: i32,
        keep: Keep,
        data: Option<&Bound<'_, PyBytes>>,
    ) -> PyResult<Option<usize>> {
        let (b, data) = (arrow_buffer(batch)?, data.map(|d| d.as_bytes()));
        let at = self.views.then(|| Loc { buffer: self.buffers.add(b.clone()), start: 61 });
        let b = b.as_slice();
        py.allow_threads(|| match data {
            Some(_) => self.add_v2_at(b, position, piece, keep, data, None), // (decompressed by Python: copied)
            None => self.add_v2_at(b, position, piece, keep, None, at),
        })
        .map_err(PyValueError::new_err)
    }

    /// Add the records of the log entries of `buf[start:end]`, one after the other, while they are complete,
    /// uncompressed v2 batches that decode without anything unusual, and until `max_rows` rows or `max_bytes`
    /// bytes of entries are held (checked after each batch, as `iter_arrow` does). The GIL is released
    /// meanwhile. With `verify` a batch must have its stored CRC32C (Kafka's `isValid`); a batch with any of
    /// `stop_attributes` set (a codec always, unless `limit`) or declaring more than `max_count` records is not
    /// added either. With `limit` (> 0) compressed batches are added too, decompressed natively within `limit`
    /// bytes (as `arrow_add_compressed`). Returns `(position, rows, batches)`: where the first entry not added
    /// starts (the caller reads that one through the records layer: framing, compression, legacy messages,
    /// errors), the rows added and the batches that added rows.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (buf, start, end, position_base, piece, max_rows, max_bytes, verify=false,
                        stop_attributes=0x07, max_count=i32::MAX, limit=0))]
    fn add_entries(
        &mut self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        start: usize,
        end: usize,
        position_base: i64,
        piece: i32,
        max_rows: usize,
        max_bytes: usize,
        verify: bool,
        stop_attributes: i16,
        max_count: i32,
        limit: usize,
    ) -> PyResult<(usize, usize, usize)> {
        let data = arrow_buffer(buf)?;
        let (caps, filters) = ((max_rows, max_bytes), (verify, stop_attributes, max_count, limit));
        Ok(py.allow_threads(|| self.add_entries_buffer(&data, start, end, position_base, piece, caps, filters)))
    }

    /// Add rows decoded by Python (the careful decoder, legacy messages): `(offset, timestamp, key, value,
    /// headers)` tuples with their `sequences`, and the batch-level values of their batch: `meta` is
    /// `(timestampType, leaderEpoch, producerId, producerEpoch, isTransactional, isControl, magic, codec,
    /// position, size)`.
    #[allow(clippy::type_complexity)]
    fn add_rows(
        &mut self,
        rows: &Bound<'_, PySequence>,
        sequences: Vec<i32>,
        piece: i32,
        meta: (i32, i32, i64, i32, bool, bool, i32, String, i64, usize),
    ) -> PyResult<()> {
        let n = rows.len()?;
        if sequences.len() != n {
            return Err(PyValueError::new_err("one sequence per row"));
        }
        self.check_room(meta.9).map_err(PyValueError::new_err)?;
        let m = BatchMeta {
            timestamp_type: meta.0,
            leader_epoch: meta.1,
            producer_id: meta.2,
            producer_epoch: meta.3,
            transactional: meta.4,
            control: meta.5,
            magic: meta.6,
            position: meta.8,
            piece,
        };
        // extract everything first: a row that is not what it should be adds nothing
        let mut parsed: Vec<(i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, Vec<(String, Option<Vec<u8>>)>)> =
            Vec::with_capacity(n);
        for i in 0..n {
            let row = rows.get_item(i)?;
            let row = row.downcast::<PyTuple>()?;
            let offset: i64 = row.get_item(0)?.extract()?;
            let timestamp: i64 = row.get_item(1)?.extract()?;
            let key: Option<Vec<u8>> = row.get_item(2)?.extract()?;
            let value: Option<Vec<u8>> = row.get_item(3)?.extract()?;
            let mut headers = Vec::new();
            for h in row.get_item(4)?.try_iter()? {
                let (k, v): (Bound<'_, PyString>, Option<Vec<u8>>) = h?.extract()?;
                // a header key the careful decoder kept with surrogateescape becomes U+FFFD in Arrow's UTF-8
                headers.push((k.to_string_lossy().into_owned(), v));
            }
            parsed.push((offset, timestamp, key, value, headers));
        }
        for ((offset, timestamp, key, value, headers), seq) in parsed.into_iter().zip(sequences) {
            self.keys.push_bytes(key.as_deref());
            self.values.push_bytes(value.as_deref());
            for (k, v) in headers {
                self.header_keys.push(Some(k.as_bytes()));
                self.header_values.push(v.as_deref());
            }
            self.push_row(offset, timestamp, Some(seq));
        }
        self.push_run(m, &meta.7, n);
        self.nbytes += meta.9;
        Ok(())
    }

    /// Add the messages of one v0/v1 shallow entry (a plain message or a compressed wrapper, decompressed
    /// natively within `limit` bytes; its whole entry at `position` of piece number `piece`) as rows, with the
    /// batch-level values `LegacyBatch` has. `keep` as for `add_v2`. Returns the number of rows added, or `None`
    /// (nothing added) where `LegacyBatch` would raise or anything is unusual (the caller's records layer then
    /// decodes it and reports the error). The GIL is released meanwhile.
    #[pyo3(signature = (entry, position, piece, keep=None, limit=0))]
    fn add_legacy(
        &mut self,
        py: Python<'_>,
        entry: &Bound<'_, PyAny>,
        position: i64,
        piece: i32,
        keep: Keep,
        limit: usize,
    ) -> PyResult<Option<usize>> {
        let view = ByteView::new(entry)?;
        let e = view.as_slice();
        py.allow_threads(|| self.add_legacy_bytes(e, position, piece, keep, limit, &mut Vec::new()))
            .map_err(PyValueError::new_err)
    }

    /// `add_entries` for v0/v1 entries: add the messages of the entries of `buf[start:end]`, one after the other,
    /// while they are complete v0/v1 entries (plain messages, or wrappers decompressed natively within `limit`
    /// bytes) that `add_legacy` takes, and until `max_rows` rows or `max_bytes` bytes of entries are held
    /// (checked before each entry). The GIL is released meanwhile. Returns `(position, rows)`: where the first
    /// entry not added starts (the caller reads that one through the records layer) and the rows added.
    #[allow(clippy::too_many_arguments)]
    ///
    /// With `verify` an entry must have its stored CRC32 (`LegacyBatch.is_valid`); with `plain_only` a compressed
    /// wrapper is not added either (its message count is not known before decompressing: the caller's records
    /// layer reads it in bounded chunks).
    #[pyo3(signature = (buf, start, end, position_base, piece, max_rows, max_bytes, limit, verify=false,
                        plain_only=false))]
    fn add_legacy_entries(
        &mut self,
        py: Python<'_>,
        buf: &Bound<'_, PyAny>,
        start: usize,
        end: usize,
        position_base: i64,
        piece: i32,
        max_rows: usize,
        max_bytes: usize,
        limit: usize,
        verify: bool,
        plain_only: bool,
    ) -> PyResult<(usize, usize)> {
        let view = ByteView::new(buf)?;
        let d = view.as_slice();
        let end = end.min(d.len());
        Ok(py.allow_threads(|| {
            let (mut pos, mut added) = (start, 0usize);
            let mut msgs = Vec::new();
            while pos < end && end - pos > 17 && self.offsets.len() < max_rows && self.nbytes < max_bytes {
                let size = be_i32_at(d, pos + 8);
                if size < 14 || (size as usize) > end - pos - 12 {
                    break;
                }
                let entry = &d[pos..pos + 12 + size as usize];
                if plain_only && entry[17] & 0x07 != 0 {
                    break;
                }
                if verify && be_i32_at(entry, 12) as u32 != crc32fast::hash(&entry[16..]) {
                    break;
                }
                match self.add_legacy_bytes(entry, position_base + pos as i64, piece, None, limit, &mut msgs) {
                    Ok(Some(n)) => added += n,
                    _ => break,
                }
                pos += entry.len();
            }
            (pos, added)
        }))
    }

    /// The rows as one Arrow struct array: the record columns of the data source, in order, given `names`
    /// (the `(topic, partition, segment)` of each piece number); without `names`, a `piece` column stands for
    /// those three. The builder is empty afterwards.
    #[pyo3(signature = (names=None))]
    fn finish(&mut self, py: Python<'_>, names: Option<Vec<(String, i32, String)>>) -> PyResult<ArrowChunk> {
        let array = py
            .allow_threads(|| self.finish_with(names.as_deref()))
            .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(ArrowChunk { array: Some(array) })
    }
}

/// `ArrowRecords.add_v2` for a compressed batch (its whole entry `batch`): the records section decompressed
/// natively into this thread's reused buffer and added from there. `None` (nothing added) when the decompression
/// or the batch is unusual: the caller then decompresses through the Python path (its errors) and goes on as
/// without the core.
#[pyfunction]
#[pyo3(signature = (builder, batch, position, piece, limit, keep=None))]
pub(crate) fn arrow_add_compressed(
    builder: &Bound<'_, ArrowRecords>,
    batch: &Bound<'_, PyAny>,
    position: i64,
    piece: i32,
    limit: usize,
    keep: Keep,
) -> PyResult<Option<usize>> {
    let view = ByteView::new(batch)?;
    let b = view.as_slice();
    if b.len() < 61 || b[16] != 2 {
        return Ok(None);
    }
    if b[22] & 0x07 == 0 {
        return Ok(None); // (not compressed: add_v2's)
    }
    let py = builder.py();
    let mut held = builder.borrow_mut();
    let builder: &mut ArrowRecords = &mut held;
    // decompressed and decoded without the GIL (into this thread's reused buffer, or with views a buffer of its own)
    py.allow_threads(|| builder.add_v2_entry(b, position, piece, keep, limit, None)).map_err(PyValueError::new_err)
}

/// Finished rows, exported once through the Arrow PyCapsule interface: `pyarrow.record_batch(chunk)`.
#[pyclass(module = "kafkalog.storage._native")]
pub struct ArrowChunk {
    array: Option<StructArray>,
}

#[pymethods]
impl ArrowChunk {
    fn __len__(&self) -> usize {
        self.array.as_ref().map_or(0, |a| a.len())
    }

    #[pyo3(signature = (requested_schema=None))]
    fn __arrow_c_array__<'py>(
        &mut self,
        py: Python<'py>,
        requested_schema: Option<PyObject>,
    ) -> PyResult<Bound<'py, PyTuple>> {
        let _ = requested_schema; // the schema is fixed; pyarrow casts if it asked for another
        let array = self.array.take().ok_or_else(|| PyRuntimeError::new_err("this chunk was already exported"))?;
        let data = array.to_data();
        let schema = FFI_ArrowSchema::try_from(data.data_type()).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let ffi_array = FFI_ArrowArray::new(&data);
        let schema_capsule = PyCapsule::new(py, schema, Some(CString::new("arrow_schema").unwrap_or_default()))?;
        let array_capsule = PyCapsule::new(py, ffi_array, Some(CString::new("arrow_array").unwrap_or_default()))?;
        PyTuple::new(py, [schema_capsule.into_any(), array_capsule.into_any()])
    }
}
