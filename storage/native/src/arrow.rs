//! Decoding v2 records straight into Arrow columns (arrow-rs), handed to pyarrow through the Arrow C data
//! interface (PyCapsule protocol, `__arrow_c_array__`): no Python object per record.
//!
//! `ArrowRecords` accumulates the record columns of the data source's schema, but topic, partition and segment
//! (the caller expands those from `piece`, the index of the segment the row came from). A batch is added whole
//! or not at all: it is parsed and checked first, and anything unusual leaves the builder untouched for the
//! caller's careful path.

use std::ffi::CString;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, BinaryBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, BooleanArray, Int32Array, Int64Array, ListArray, StructArray};
use arrow_buffer::OffsetBuffer;
use arrow_data::ffi::FFI_ArrowArray;
use arrow_schema::ffi::FFI_ArrowSchema;
use arrow_schema::{DataType, Field, Fields};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyCapsule, PySequence, PyString, PyTuple};

use crate::{parse_record, Raw};

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

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap_or_default())
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap_or_default())
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes(b[at..at + 2].try_into().unwrap_or_default())
}

#[pyclass(module = "kafkalog.storage._native")]
pub struct ArrowRecords {
    offsets: Vec<i64>,
    timestamps: Vec<i64>,
    keys: BinaryBuilder,
    values: BinaryBuilder,
    header_offsets: Vec<i32>,
    header_keys: StringBuilder,
    header_values: BinaryBuilder,
    sequences: Vec<i32>,
    timestamp_types: Vec<i32>,
    leader_epochs: Vec<i32>,
    producer_ids: Vec<i64>,
    producer_epochs: Vec<i32>,
    transactional: Vec<bool>,
    control: Vec<bool>,
    magics: Vec<i32>,
    codecs: StringBuilder,
    positions: Vec<i64>,
    pieces: Vec<i32>,
    nbytes: usize,
}

impl ArrowRecords {
    fn push_meta(&mut self, m: &BatchMeta, codec: &str, sequence: i32) {
        self.sequences.push(sequence);
        self.timestamp_types.push(m.timestamp_type);
        self.leader_epochs.push(m.leader_epoch);
        self.producer_ids.push(m.producer_id);
        self.producer_epochs.push(m.producer_epoch);
        self.transactional.push(m.transactional);
        self.control.push(m.control);
        self.magics.push(m.magic);
        self.codecs.append_value(codec);
        self.positions.push(m.position);
        self.pieces.push(m.piece);
    }

    fn push(&mut self, d: &[u8], raw: &Raw, offset: i64, timestamp: i64) {
        self.offsets.push(offset);
        self.timestamps.push(timestamp);
        match raw.key {
            Some((a, b)) => self.keys.append_value(&d[a..b]),
            None => self.keys.append_null(),
        }
        match raw.value {
            Some((a, b)) => self.values.append_value(&d[a..b]),
            None => self.values.append_null(),
        }
        for ((ka, kb), v) in raw.headers(d) {
            self.header_keys.append_value(std::str::from_utf8(&d[ka..kb]).unwrap_or_default());
            match v {
                Some((a, b)) => self.header_values.append_value(&d[a..b]),
                None => self.header_values.append_null(),
            }
        }
        self.header_offsets.push(self.header_keys.len() as i32);
    }

    fn check_room(&self, more: usize) -> Result<(), &'static str> {
        if self.nbytes + more > MAX_BYTES {
            return Err("an Arrow chunk holds at most 1 GiB of records: start a new one");
        }
        Ok(())
    }

    /// The builder (`ArrowRecords(capacity)`), without Python.
    pub fn with_capacity(capacity: usize) -> Self {
        let capacity = capacity.min(MAX_BYTES);
        let rows = capacity / 64;
        ArrowRecords {
            offsets: Vec::with_capacity(rows),
            timestamps: Vec::with_capacity(rows),
            keys: BinaryBuilder::with_capacity(rows, capacity / 8),
            values: BinaryBuilder::with_capacity(rows, capacity),
            header_offsets: vec![0],
            header_keys: StringBuilder::new(),
            header_values: BinaryBuilder::new(),
            sequences: Vec::new(),
            timestamp_types: Vec::new(),
            leader_epochs: Vec::new(),
            producer_ids: Vec::new(),
            producer_epochs: Vec::new(),
            transactional: Vec::new(),
            control: Vec::new(),
            magics: Vec::new(),
            codecs: StringBuilder::new(),
            positions: Vec::new(),
            pieces: Vec::new(),
            nbytes: 0,
        }
    }

    /// `add_v2` on byte slices (`data`: the decompressed records section of a compressed batch).
    pub fn add_v2_bytes(
        &mut self,
        b: &[u8],
        position: i64,
        piece: i32,
        keep: Option<(i128, i128, i128, i128)>,
        data: Option<&[u8]>,
    ) -> Result<Option<usize>, &'static str> {
        if b.len() < 61 || b[16] != 2 {
            return Ok(None);
        }
        let attributes = (be_i16(b, 21) & 0xFF) as u8;
        let codec = (attributes & 0x07) as usize;
        let d: &[u8] = match (codec, data) {
            (0, None) => &b[61..],
            (1..=4, Some(data)) => data,
            _ => return Ok(None),
        };
        let count = be_i32(b, 57);
        let end = d.len();
        if count < 0 || (count as u64).saturating_mul(7) > end as u64 {
            return Ok(None);
        }
        self.check_room(b.len().max(end))?;
        let base_offset = be_i64(b, 0);
        let base_ts = be_i64(b, 27);
        let append_ts = if attributes & 0x08 != 0 { Some(be_i64(b, 35)) } else { None };
        let base_seq = be_i32(b, 53) as i64;
        let mut raws = Vec::with_capacity(count as usize);
        let mut p = 0usize;
        for _ in 0..count {
            let Some(raw) = parse_record(d, &mut p, end) else { return Ok(None) };
            let Some(ot) = raw.offset_timestamp(base_offset, base_ts, append_ts) else { return Ok(None) };
            raws.push((raw, ot));
        }
        if p != end {
            return Ok(None);
        }
        let meta = BatchMeta {
            timestamp_type: i32::from(append_ts.is_some()),
            leader_epoch: be_i32(b, 12),
            producer_id: be_i64(b, 43),
            producer_epoch: be_i16(b, 51) as i32,
            transactional: attributes & 0x10 != 0,
            control: attributes & 0x20 != 0,
            magic: 2,
            position,
            piece,
        };
        let mut added = 0;
        for (raw, (offset, timestamp)) in &raws {
            if let Some((lo_o, hi_o, lo_t, hi_t)) = keep {
                let (o, t) = (*offset as i128, *timestamp as i128);
                if !(lo_o <= o && o < hi_o && lo_t <= t && t < hi_t) {
                    continue;
                }
            }
            self.push(d, raw, *offset, *timestamp);
            self.push_meta(&meta, CODEC_NAMES[codec], sequence(base_seq, raw.off_delta));
            added += 1;
        }
        self.nbytes += b.len();
        Ok(Some(added))
    }

    /// `finish` without Python: the rows as one struct array; the builder is empty afterwards.
    pub fn finish_array(&mut self) -> Result<StructArray, arrow_schema::ArrowError> {
        let items = StructArray::try_new(
            header_fields(),
            vec![Arc::new(self.header_keys.finish()) as ArrayRef, Arc::new(self.header_values.finish())],
            None,
        )?;
        let offsets = std::mem::replace(&mut self.header_offsets, vec![0]);
        let headers = ListArray::try_new(
            Arc::new(Field::new("element", DataType::Struct(header_fields()), true)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(items),
            None,
        )?;
        let i32s = |v: &mut Vec<i32>| Arc::new(Int32Array::from(std::mem::take(v))) as ArrayRef;
        let i64s = |v: &mut Vec<i64>| Arc::new(Int64Array::from(std::mem::take(v))) as ArrayRef;
        let bools = |v: &mut Vec<bool>| Arc::new(BooleanArray::from(std::mem::take(v))) as ArrayRef;
        let columns: Vec<(&str, ArrayRef)> = vec![
            ("offset", i64s(&mut self.offsets)),
            ("timestamp", i64s(&mut self.timestamps)),
            ("timestampType", i32s(&mut self.timestamp_types)),
            ("key", Arc::new(self.keys.finish())),
            ("value", Arc::new(self.values.finish())),
            ("headers", Arc::new(headers)),
            ("leaderEpoch", i32s(&mut self.leader_epochs)),
            ("producerId", i64s(&mut self.producer_ids)),
            ("producerEpoch", i32s(&mut self.producer_epochs)),
            ("sequence", i32s(&mut self.sequences)),
            ("isTransactional", bools(&mut self.transactional)),
            ("isControl", bools(&mut self.control)),
            ("magic", i32s(&mut self.magics)),
            ("codec", Arc::new(self.codecs.finish())),
            ("position", i64s(&mut self.positions)),
            ("piece", i32s(&mut self.pieces)),
        ];
        let fields = Fields::from(
            columns.iter().map(|(name, a)| Field::new(*name, a.data_type().clone(), true)).collect::<Vec<_>>(),
        );
        let arrays = columns.into_iter().map(|(_, a)| a).collect();
        let array = StructArray::try_new(fields, arrays, None)?;
        self.nbytes = 0;
        Ok(array)
    }
}

/// The sequence column: the record's sequence as Kafka derives it (`DefaultRecordBatch.incrementSequence`),
/// -1 without a base sequence -- the same rule as `Record.sequence`.
fn sequence(base_seq: i64, off_delta: i64) -> i32 {
    if base_seq < 0 {
        -1
    } else {
        crate::increment_sequence(base_seq, off_delta) as i32
    }
}

#[pymethods]
impl ArrowRecords {
    /// `capacity`: about how many bytes of log entries will be added (buffers are sized for them once).
    #[new]
    #[pyo3(signature = (capacity=0))]
    fn new(capacity: usize) -> Self {
        Self::with_capacity(capacity)
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
    #[pyo3(signature = (batch, position, piece, keep=None, data=None))]
    fn add_v2(
        &mut self,
        batch: &Bound<'_, PyAny>,
        position: i64,
        piece: i32,
        keep: Option<(i128, i128, i128, i128)>,
        data: Option<&Bound<'_, PyBytes>>,
    ) -> PyResult<Option<usize>> {
        let view = crate::buffer::ByteView::new(batch)?;
        self.add_v2_bytes(view.as_slice(), position, piece, keep, data.map(|d| d.as_bytes()))
            .map_err(PyValueError::new_err)
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
        let mut parsed = Vec::with_capacity(n);
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
            self.offsets.push(offset);
            self.timestamps.push(timestamp);
            match key {
                Some(k) => self.keys.append_value(k),
                None => self.keys.append_null(),
            }
            match value {
                Some(v) => self.values.append_value(v),
                None => self.values.append_null(),
            }
            for (k, v) in headers {
                self.header_keys.append_value(k);
                match v {
                    Some(v) => self.header_values.append_value(v),
                    None => self.header_values.append_null(),
                }
            }
            self.header_offsets.push(self.header_keys.len() as i32);
            self.push_meta(&m, &meta.7, seq);
        }
        self.nbytes += meta.9;
        Ok(())
    }

    /// The rows as one Arrow struct array: the record columns of the data source but topic, partition and
    /// segment, which the caller expands from `piece`; the builder is empty afterwards.
    fn finish(&mut self) -> PyResult<ArrowChunk> {
        let array = self.finish_array().map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        Ok(ArrowChunk { array: Some(array) })
    }
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
