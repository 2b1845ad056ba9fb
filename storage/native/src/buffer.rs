//! Reading a Python buffer (bytes, a memoryview over an mmap'd segment) in place, without a copy, and handing one
//! to Arrow as a data buffer (`arrow_buffer`: the zero-copy views of `views.rs`).
//!
//! The FFI boundary: the slice borrows memory that the held `PyBuffer` keeps exported (the exporter cannot
//! resize or free it while the view exists, by the buffer protocol). It is used while the GIL is held, except by
//! the whole-buffer passes (`scan_crc`, `ArrowRecords.add_entries`) and the per-batch decoders that release it to
//! read segment bytes that nothing writes meanwhile. An Arrow buffer made of one keeps the export (and so the
//! mapping) until its last user drops it, on any thread: one that holds the GIL releases the export at once,
//! any other queues it for the interpreter (`Py_AddPendingCall`), never waiting for the GIL itself. It holds the
//! raw export (not pyo3's `PyBuffer`, whose release takes the GIL through pyo3, which refuses once the
//! interpreter is finalizing: an Arrow array freed then would abort).

use std::ffi::{c_int, c_void};
use std::ptr::NonNull;
use std::sync::{Arc, Mutex};

use arrow_buffer::Buffer;
use pyo3::buffer::PyBuffer;
use pyo3::exceptions::PyValueError;
use pyo3::ffi;
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

/// The bytes of `obj` (a C-contiguous buffer of bytes) as an Arrow buffer that keeps them exported as long as it
/// (or a slice of it) lives, on any thread.
pub fn arrow_buffer(obj: &Bound<'_, PyAny>) -> PyResult<Buffer> {
    let mut view: Box<ffi::Py_buffer> = Box::new(ffi::Py_buffer::new());
    // SAFETY: `obj` is a live object (the GIL is held) and `view` a zeroed Py_buffer it may fill; PyBUF_SIMPLE asks
    // for a C-contiguous buffer of bytes. On failure nothing is to be released and the Python error is taken.
    if unsafe { ffi::PyObject_GetBuffer(obj.as_ptr(), &mut *view, ffi::PyBUF_SIMPLE) } != 0 {
        return Err(PyErr::fetch(obj.py()));
    }
    let (ptr, len) = (view.buf as *mut u8, view.len.max(0) as usize);
    let owner = Arc::new(Exported(Some(view)));
    match NonNull::new(ptr).filter(|_| len > 0) {
        // SAFETY: `ptr` points at the `len` bytes of a C-contiguous buffer that `owner` keeps exported, so they are
        // neither freed nor resized while the Arrow buffer (which holds `owner`) lives; Arrow only reads them.
        Some(ptr) => Ok(unsafe { Buffer::from_custom_allocation(ptr, len, owner) }),
        None => Ok(Buffer::from_vec(Vec::<u8>::new())), // (`owner` releases the empty export now)
    }
}

/// A buffer export owned by Arrow: released with the GIL, or queued for the interpreter when dropped without it.
struct Exported(Option<Box<ffi::Py_buffer>>);

// SAFETY: the Py_buffer is only read through the Arrow buffer (immutable bytes) and released under the GIL.
unsafe impl Send for Exported {}
// SAFETY: as above: nothing mutates it but its release, which needs the GIL and `&mut self`.
unsafe impl Sync for Exported {}

/// Exports dropped on threads without the GIL, released at the interpreter's next pending call.
static PENDING: Mutex<Vec<Exported>> = Mutex::new(Vec::new());

impl Drop for Exported {
    fn drop(&mut self) {
        let Some(mut view) = self.0.take() else { return };
        // SAFETY: PyGILState_Check only reads this thread's state; it may be called with or without the GIL.
        if unsafe { ffi::PyGILState_Check() } == 1 {
            // SAFETY: the export was taken by PyObject_GetBuffer and is released once, under the GIL this thread
            // holds (also during the interpreter's finalization, when objects are still torn down with it).
            unsafe { ffi::PyBuffer_Release(&mut *view) };
            release_pending();
            return;
        }
        let mut pending = PENDING.lock().unwrap_or_else(|e| e.into_inner());
        pending.push(Exported(Some(view)));
        if pending.len() == 1 {
            // SAFETY: Py_AddPendingCall may be called from any thread without the GIL; `release` takes no
            // argument. If it fails (the queue is full, the interpreter is exiting), the export waits for the next
            // release_pending, or is never released at exit.
            unsafe { ffi::Py_AddPendingCall(Some(release), std::ptr::null_mut()) };
        }
    }
}

extern "C" fn release(_: *mut c_void) -> c_int {
    release_pending();
    0
}

/// Release the exports queued by threads without the GIL (called with the GIL held).
pub fn release_pending() {
    let taken = std::mem::take(&mut *PENDING.lock().unwrap_or_else(|e| e.into_inner()));
    drop(taken);
}
