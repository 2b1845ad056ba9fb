//! `Record`: the native form of `storage/records/record.py`'s dataclass, with the same fields, constructor,
//! equality, repr and pickling. Read-only (`frozen`): offset, timestamp, key, value and headers are Python
//! objects read through member slots (as fast as attribute reads get); the raw stored fields are integers.

use pyo3::basic::CompareOp;
use pyo3::prelude::*;
use pyo3::types::{PyList, PyTuple};

const FIELDS: [&str; 11] = [
    "offset",
    "timestamp",
    "key",
    "value",
    "headers",
    "attributes",
    "timestamp_delta",
    "offset_delta",
    "sequence",
    "magic",
    "crc",
];

#[pyclass(module = "kafkalog.storage.records.record", name = "Record", get_all, frozen)]
pub struct Record {
    // read in every hot loop: Python objects, so reads are plain member slots
    offset: PyObject,
    timestamp: PyObject,
    key: PyObject,
    value: PyObject,
    headers: PyObject,
    // the raw stored fields, kept to rebuild a batch byte-exactly: plain integers until read
    attributes: i64,
    timestamp_delta: Option<i64>,
    offset_delta: Option<i64>,
    sequence: i64,
    magic: i64,
    crc: Option<i64>,
}

impl Record {
    #[allow(clippy::too_many_arguments)]
    pub fn from_parts(
        py: Python<'_>,
        offset: i64,
        timestamp: i64,
        key: PyObject,
        value: PyObject,
        headers: PyObject,
        attributes: i64,
        ts_delta: i64,
        off_delta: i64,
        sequence: i64,
    ) -> PyResult<Self> {
        Ok(Record {
            offset: offset.into_pyobject(py)?.into_any().unbind(),
            timestamp: timestamp.into_pyobject(py)?.into_any().unbind(),
            key,
            value,
            headers,
            attributes,
            timestamp_delta: Some(ts_delta),
            offset_delta: Some(off_delta),
            sequence,
            magic: 2,
            crc: None,
        })
    }

    fn values<'py>(&self, py: Python<'py>) -> PyResult<[Bound<'py, PyAny>; 11]> {
        let opt = |v: Option<i64>| -> PyResult<Bound<'py, PyAny>> {
            Ok(match v {
                Some(v) => v.into_pyobject(py)?.into_any(),
                None => py.None().into_bound(py),
            })
        };
        Ok([
            self.offset.bind(py).clone(),
            self.timestamp.bind(py).clone(),
            self.key.bind(py).clone(),
            self.value.bind(py).clone(),
            self.headers.bind(py).clone(),
            self.attributes.into_pyobject(py)?.into_any(),
            opt(self.timestamp_delta)?,
            opt(self.offset_delta)?,
            self.sequence.into_pyobject(py)?.into_any(),
            self.magic.into_pyobject(py)?.into_any(),
            opt(self.crc)?,
        ])
    }
}

#[pymethods]
impl Record {
    #[new]
    #[pyo3(signature = (offset, timestamp, key, value, headers=None, attributes=0, timestamp_delta=None,
                        offset_delta=None, sequence=-1, magic=2, crc=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        offset: PyObject,
        timestamp: PyObject,
        key: PyObject,
        value: PyObject,
        headers: Option<PyObject>,
        attributes: i64,
        timestamp_delta: Option<i64>,
        offset_delta: Option<i64>,
        sequence: i64,
        magic: i64,
        crc: Option<i64>,
    ) -> Self {
        Record {
            offset,
            timestamp,
            key,
            value,
            headers: headers.unwrap_or_else(|| PyList::empty(py).into_any().unbind()),
            attributes,
            timestamp_delta,
            offset_delta,
            sequence,
            magic,
            crc,
        }
    }

    #[getter]
    fn is_tombstone(&self, py: Python<'_>) -> bool {
        self.value.is_none(py)
    }

    #[classattr]
    fn __match_args__(py: Python<'_>) -> PyResult<Py<PyTuple>> {
        Ok(PyTuple::new(py, FIELDS)?.unbind())
    }

    fn __richcmp__(&self, other: &Bound<'_, PyAny>, op: CompareOp, py: Python<'_>) -> PyResult<PyObject> {
        let Ok(other) = other.downcast::<Record>() else {
            return Ok(py.NotImplemented());
        };
        let other = other.get();
        let a = PyTuple::new(py, self.values(py)?)?;
        let b = PyTuple::new(py, other.values(py)?)?;
        match op {
            CompareOp::Eq => Ok(a.eq(b)?.into_pyobject(py)?.to_owned().into_any().unbind()),
            CompareOp::Ne => Ok(a.ne(b)?.into_pyobject(py)?.to_owned().into_any().unbind()),
            _ => Ok(py.NotImplemented()),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut parts = Vec::with_capacity(FIELDS.len());
        for (name, v) in FIELDS.iter().zip(self.values(py)?) {
            parts.push(format!("{}={}", name, v.repr()?));
        }
        Ok(format!("Record({})", parts.join(", ")))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let args = PyTuple::new(py, slf.get().values(py)?)?;
        PyTuple::new(py, [slf.get_type().into_any(), args.into_any()])
    }
}

impl Record {
    /// A v0/v1 message as `LegacyBatch.records()` has it: no headers, no deltas, sequence -1, its own magic and
    /// CRC (`storage/native/src/legacy.rs`).
    #[allow(clippy::too_many_arguments)]
    pub fn from_legacy(
        py: Python<'_>,
        offset: i64,
        timestamp: i64,
        key: PyObject,
        value: PyObject,
        attributes: i64,
        magic: i64,
        crc: i64,
    ) -> PyResult<Self> {
        let headers = PyList::empty(py).into_any().unbind();
        let v2 = Record::from_parts(py, offset, timestamp, key, value, headers, attributes, 0, 0, -1)?;
        Ok(Record { timestamp_delta: None, offset_delta: None, magic, crc: Some(crc), ..v2 })
    }
}
