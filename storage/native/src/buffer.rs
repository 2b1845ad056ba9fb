//! Reading a Python buffer (bytes, a memoryview over an mmap'd segment) in place, without a copy.
//!
//! This is the crate's only `unsafe`, at the FFI boundary: the slice borrows memory that the held
//! `PyBuffer` keeps exported (the exporter cannot resize or free it while the view exists, by the buffer
//! protocol). It is used while the GIL is held, except by the two whole-buffer passes (`scan_crc`,
//! `ArrowRecords.add_entries`), which release it to read segment bytes that nothing writes meanwhile.

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;

pub struct ByteView {
    buf: PyBuffer<u8>,
}

impl ByteView {
    /// A read view of `obj`, which must export a C-contiguous buffer of bytes.
    pub fn new(obj: &Bound<'_, PyAny>) -> PyResult<Self> {
        let buf = PyBuffer::<u8>::get(obj)?;
        if !buf.is_c_contiguous() {
            return Err(PyValueError::new_err("a contiguous buffer of bytes is needed"));
        }
        Ok(ByteView { buf })
    }

    pub fn as_slice(&self) -> &[u8] {
        let len = self.buf.len_bytes();
        if len == 0 {
            return &[];
        }
        // SAFETY: the buffer is C-contiguous and `len` bytes long; `self.buf` keeps it exported (not freed
        // or resized) for the lifetime of the returned slice. Most callers hold the GIL while they use it;
        // `scan_crc` and `ArrowRecords.add_entries` release it while they read a segment's bytes (an mmap or
        // bytes: kafkalog never writes a buffer it is scanning), and every index they use is bounds-checked.
        unsafe { std::slice::from_raw_parts(self.buf.buf_ptr() as *const u8, len) }
    }
}
