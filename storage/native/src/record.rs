//! `Record`: the native form of `storage/records/record.py`'s dataclass, with the same fields, constructor,
//! equality and repr. Fields hold Python objects, so assigning any value behaves as it does on the dataclass.

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
    offset: PyObject,
    timestamp: PyObject,
    key: PyObject,
    value: PyObject,
    headers: PyObject,
    attributes: PyObject,
    timestamp_delta: PyObject,
    offset_delta: PyObject,
    sequence: PyObject,
    magic: PyObject,
    crc: PyObject,
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
            attributes: attributes.into_pyobject(py)?.into_any().unbind(),
            timestamp_delta: ts_delta.into_pyobject(py)?.into_any().unbind(),
            offset_delta: off_delta.into_pyobject(py)?.into_any().unbind(),
            sequence: sequence.into_pyobject(py)?.into_any().unbind(),
            magic: 2i64.into_pyobject(py)?.into_any().unbind(),
            crc: py.None(),
        })
    }

    fn values<'py>(&self, py: Python<'py>) -> [Bound<'py, PyAny>; 11] {
        [
            self.offset.bind(py).clone(),
            self.timestamp.bind(py).clone(),
            self.key.bind(py).clone(),
            self.value.bind(py).clone(),
            self.headers.bind(py).clone(),
            self.attributes.bind(py).clone(),
            self.timestamp_delta.bind(py).clone(),
            self.offset_delta.bind(py).clone(),
            self.sequence.bind(py).clone(),
            self.magic.bind(py).clone(),
            self.crc.bind(py).clone(),
        ]
    }
}

#[pymethods]
impl Record {
    #[new]
    #[pyo3(signature = (offset, timestamp, key, value, headers=None, attributes=None, timestamp_delta=None,
                        offset_delta=None, sequence=None, magic=None, crc=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        offset: PyObject,
        timestamp: PyObject,
        key: PyObject,
        value: PyObject,
        headers: Option<PyObject>,
        attributes: Option<PyObject>,
        timestamp_delta: Option<PyObject>,
        offset_delta: Option<PyObject>,
        sequence: Option<PyObject>,
        magic: Option<PyObject>,
        crc: Option<PyObject>,
    ) -> PyResult<Self> {
        let int = |v: i64| -> PyResult<PyObject> { Ok(v.into_pyobject(py)?.into_any().unbind()) };
        Ok(Record {
            offset,
            timestamp,
            key,
            value,
            headers: match headers {
                Some(h) => h,
                None => PyList::empty(py).into_any().unbind(),
            },
            attributes: match attributes {
                Some(a) => a,
                None => int(0)?,
            },
            timestamp_delta: timestamp_delta.unwrap_or_else(|| py.None()),
            offset_delta: offset_delta.unwrap_or_else(|| py.None()),
            sequence: match sequence {
                Some(s) => s,
                None => int(-1)?,
            },
            magic: match magic {
                Some(m) => m,
                None => int(2)?,
            },
            crc: crc.unwrap_or_else(|| py.None()),
        })
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
        let other = other.borrow();
        let a = PyTuple::new(py, self.values(py))?;
        let b = PyTuple::new(py, other.values(py))?;
        match op {
            CompareOp::Eq => Ok(a.eq(b)?.into_pyobject(py)?.to_owned().into_any().unbind()),
            CompareOp::Ne => Ok(a.ne(b)?.into_pyobject(py)?.to_owned().into_any().unbind()),
            _ => Ok(py.NotImplemented()),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let mut parts = Vec::with_capacity(FIELDS.len());
        for (name, v) in FIELDS.iter().zip(self.values(py)) {
            parts.push(format!("{}={}", name, v.repr()?));
        }
        Ok(format!("Record({})", parts.join(", ")))
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        let args = PyTuple::new(py, slf.borrow().values(py))?;
        PyTuple::new(py, [slf.get_type().into_any(), args.into_any()])
    }

    fn __copy__(&self, py: Python<'_>) -> Self {
        let [o, t, k, v, h, a, td, od, s, m, c] = self.values(py).map(|b| b.unbind());
        Record {
            offset: o,
            timestamp: t,
            key: k,
            value: v,
            headers: h,
            attributes: a,
            timestamp_delta: td,
            offset_delta: od,
            sequence: s,
            magic: m,
            crc: c,
        }
    }
}
