//! Decoding v2 records straight into Arrow columns (arrow-rs), handed to pyarrow through the Arrow C data
//! interface (PyCapsule protocol, `__arrow_c_array__`): no Python object per record.
//!
//! `ArrowRecords` accumulates the per-record columns of the data source's schema (offset, timestamp, key,
//! value, headers, sequence) plus `batch`, the index of the record's batch in the chunk (the caller expands its
//! batch-level columns with it). A batch is added whole or not at all: it is parsed and checked first, and
//! anything unusual leaves the builder untouched for the caller's careful path.

use std::ffi::CString;
use std::sync::Arc;

use arrow_array::builder::{ArrayBuilder, BinaryBuilder, StringBuilder};
use arrow_array::{Array, ArrayRef, Int32Array, Int64Array, ListArray, StructArray};
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

fn headers_type() -> DataType {
    DataType::List(Arc::new(Field::new("element", DataType::Struct(header_fields()), true)))
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
    batches: Vec<i32>,
    nbytes: usize,
}

impl ArrowRecords {
    fn push(&mut self, d: &[u8], raw: &Raw, offset: i64, timestamp: i64, sequence: i32, batch: i32) {
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
        self.sequences.push(sequence);
        self.batches.push(batch);
    }
}

/// The sequence column of the data source: `(baseSequence + offsetDelta) mod 2^31`, -1 without one.
fn sequence(base_seq: i64, off_delta: i64) -> i32 {
    if base_seq < 0 {
        -1
    } else {
        (base_seq + off_delta).rem_euclid(1 << 31) as i32
    }
}

#[pymethods]
impl ArrowRecords {
    #[new]
    fn new() -> Self {
        ArrowRecords {
            offsets: Vec::new(),
            timestamps: Vec::new(),
            keys: BinaryBuilder::new(),
            values: BinaryBuilder::new(),
            header_offsets: vec![0],
            header_keys: StringBuilder::new(),
            header_values: BinaryBuilder::new(),
            sequences: Vec::new(),
            batches: Vec::new(),
            nbytes: 0,
        }
    }

    fn __len__(&self) -> usize {
        self.offsets.len()
    }

    /// Bytes of records data added so far.
    #[getter]
    fn nbytes(&self) -> usize {
        self.nbytes
    }

    /// Add the `count` records of a v2 records section (decompressed) as rows of batch number `batch`.
    /// `keep` (optional `(lo_offset, hi_offset, lo_ts, hi_ts)`) keeps only rows in those half-open ranges.
    /// Returns the number of rows added, or `None` (nothing added) when the section is unusual: the caller
    /// then decodes it carefully (and reports the error, or adds the rows with `add_tuples`).
    #[pyo3(signature = (data, count, base_offset, base_ts, append_ts, base_seq, batch, keep=None))]
    #[allow(clippy::too_many_arguments)]
    fn add(
        &mut self,
        data: &Bound<'_, PyBytes>,
        count: i64,
        base_offset: i64,
        base_ts: i64,
        append_ts: Option<i64>,
        base_seq: i64,
        batch: i32,
        keep: Option<(i128, i128, i128, i128)>,
    ) -> PyResult<Option<usize>> {
        let d = data.as_bytes();
        let end = d.len();
        if count < 0 || (count as u64).saturating_mul(7) > end as u64 {
            return Ok(None);
        }
        if self.nbytes + end > MAX_BYTES {
            return Err(PyValueError::new_err("an Arrow chunk holds at most 1 GiB of records: start a new one"));
        }
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
        let mut added = 0;
        for (raw, (offset, timestamp)) in &raws {
            if let Some((lo_o, hi_o, lo_t, hi_t)) = keep {
                let (o, t) = (*offset as i128, *timestamp as i128);
                if !(lo_o <= o && o < hi_o && lo_t <= t && t < hi_t) {
                    continue;
                }
            }
            self.push(d, raw, *offset, *timestamp, sequence(base_seq, raw.off_delta), batch);
            added += 1;
        }
        self.nbytes += end;
        Ok(Some(added))
    }

    /// Add rows decoded elsewhere (the careful decoder, legacy messages): `(offset, timestamp, key, value,
    /// headers)` tuples with their `sequences`, as rows of batch number `batch`.
    fn add_tuples(&mut self, rows: &Bound<'_, PySequence>, sequences: Vec<i32>, batch: i32) -> PyResult<()> {
        let n = rows.len()?;
        if sequences.len() != n {
            return Err(PyValueError::new_err("one sequence per row"));
        }
        for (i, seq) in sequences.into_iter().enumerate() {
            let row = rows.get_item(i)?;
            let row = row.downcast::<PyTuple>()?;
            self.offsets.push(row.get_item(0)?.extract()?);
            self.timestamps.push(row.get_item(1)?.extract()?);
            for (j, col) in [(2, &mut self.keys), (3, &mut self.values)] {
                let v = row.get_item(j)?;
                if v.is_none() {
                    col.append_null();
                } else {
                    let b: &[u8] = v.downcast::<PyBytes>()?.as_bytes();
                    self.nbytes += b.len();
                    col.append_value(b);
                }
            }
            for h in row.get_item(4)?.try_iter()? {
                let h = h?;
                let (k, v): (Bound<'_, PyString>, Bound<'_, PyAny>) = h.extract()?;
                // header keys the careful decoder kept with surrogateescape become U+FFFD in Arrow's UTF-8
                self.header_keys.append_value(k.to_string_lossy());
                if v.is_none() {
                    self.header_values.append_null();
                } else {
                    self.header_values.append_value(v.downcast::<PyBytes>()?.as_bytes());
                }
            }
            self.header_offsets.push(self.header_keys.len() as i32);
            self.sequences.push(seq);
            self.batches.push(batch);
        }
        if self.nbytes > MAX_BYTES {
            return Err(PyValueError::new_err("an Arrow chunk holds at most 1 GiB of records: start a new one"));
        }
        Ok(())
    }

    /// The rows as one Arrow struct array (columns offset, timestamp, key, value, headers, sequence, batch);
    /// the builder is empty afterwards.
    fn finish(&mut self) -> PyResult<ArrowChunk> {
        let n = self.offsets.len();
        let items = StructArray::try_new(
            header_fields(),
            vec![Arc::new(self.header_keys.finish()) as ArrayRef, Arc::new(self.header_values.finish())],
            None,
        )
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let offsets = std::mem::replace(&mut self.header_offsets, vec![0]);
        let headers = ListArray::try_new(
            Arc::new(Field::new("element", DataType::Struct(header_fields()), true)),
            OffsetBuffer::new(offsets.into()),
            Arc::new(items),
            None,
        )
        .map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        let fields = Fields::from(vec![
            Field::new("offset", DataType::Int64, true),
            Field::new("timestamp", DataType::Int64, true),
            Field::new("key", DataType::Binary, true),
            Field::new("value", DataType::Binary, true),
            Field::new("headers", headers_type(), true),
            Field::new("sequence", DataType::Int32, true),
            Field::new("batch", DataType::Int32, true),
        ]);
        let columns: Vec<ArrayRef> = vec![
            Arc::new(Int64Array::from(std::mem::take(&mut self.offsets))),
            Arc::new(Int64Array::from(std::mem::take(&mut self.timestamps))),
            Arc::new(self.keys.finish()),
            Arc::new(self.values.finish()),
            Arc::new(headers),
            Arc::new(Int32Array::from(std::mem::take(&mut self.sequences))),
            Arc::new(Int32Array::from(std::mem::take(&mut self.batches))),
        ];
        let array = StructArray::try_new(fields, columns, None).map_err(|e| PyRuntimeError::new_err(e.to_string()))?;
        debug_assert_eq!(array.len(), n);
        self.nbytes = 0;
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
