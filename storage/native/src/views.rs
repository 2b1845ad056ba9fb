//! Key and value columns as Arrow `binary_view` (`ArrowRecords(views=True)`): each row is a 16-byte view, the
//! bytes themselves stay where the records are. A value of an uncompressed batch points into the segment's mapped
//! bytes, one of a compressed batch into that batch's decompressed records section (the chunk's decompressed
//! sections are one data buffer, its arena); values of 12 bytes or fewer are inline in their view, and a value
//! read from anywhere else (rows from Python, v0/v1 messages) is copied into the column's own buffer. No copy is
//! made per record otherwise.
//!
//! The data buffers are shared by the key and value columns of a chunk (`Buffers`): buffer 0 of each column is
//! its own copies, buffer `1 + i` the `i`-th shared one. Where a shared buffer comes from Python (a segment's
//! memoryview), its `arrow_buffer::Buffer` holds that buffer exported (`buffer.rs`): the mapping stays valid as
//! long as any view of it lives, after the reader and its segments are closed.

use arrow_array::builder::make_view;
use arrow_array::{ArrayRef, BinaryViewArray};
use arrow_buffer::{BooleanBufferBuilder, Buffer, NullBuffer, ScalarBuffer};
use arrow_schema::ArrowError;
use std::sync::Arc;

/// Where the bytes a record was parsed from lie: bytes `[start, start + len)` of shared data buffer `buffer`.
#[derive(Clone, Copy, Debug)]
pub struct Loc {
    pub buffer: usize,
    pub start: usize,
}

/// The data buffers the views of a chunk point into (beyond each column's own copies).
#[derive(Default)]
pub struct Buffers {
    shared: Vec<Buffer>,
    /// the address and length of each shared buffer, to find one added again (a segment read in several calls)
    spans: Vec<(usize, usize)>,
}

impl Buffers {
    /// The index of `buffer` among the shared ones (added unless the same bytes are there already).
    pub fn add(&mut self, buffer: Buffer) -> usize {
        let span = (buffer.as_ptr() as usize, buffer.len());
        if let Some(i) = self.spans.iter().rposition(|s| *s == span) {
            return i;
        }
        self.shared.push(buffer);
        self.spans.push(span);
        self.shared.len() - 1
    }

    /// A slot for a buffer not made yet (`fill` it before the views are finished): its index.
    pub fn placeholder(&mut self) -> usize {
        self.shared.push(Buffer::from_vec(Vec::<u8>::new()));
        self.spans.push((0, usize::MAX)); // (matches no buffer)
        self.shared.len() - 1
    }

    /// The buffer of a `placeholder` slot.
    pub fn fill(&mut self, slot: usize, buffer: Buffer) {
        if let Some(s) = self.shared.get_mut(slot) {
            *s = buffer;
        }
    }

    /// How many there are, for `truncate`.
    pub fn len(&self) -> usize {
        self.shared.len()
    }

    /// Forget those added since there were `n` (a batch taken back).
    pub fn truncate(&mut self, n: usize) {
        self.shared.truncate(n);
        self.spans.truncate(n);
    }
}

/// A `binary_view` column being built.
pub struct ViewCol {
    views: Vec<u128>,
    /// the null rows, ascending
    null_rows: Vec<usize>,
    /// copies of values that lie in no shared buffer: data buffer 0
    own: Vec<u8>,
}

impl ViewCol {
    pub fn with_capacity(rows: usize) -> Self {
        ViewCol { views: Vec::with_capacity(rows), null_rows: Vec::new(), own: Vec::new() }
    }

    pub fn reserve(&mut self, rows: usize) {
        self.views.reserve(rows);
    }

    /// A row: `None` (null), or the bytes `d[a..b]`, where `d` lies at `loc` (a view into that shared buffer) or
    /// nowhere shared (`None`: copied, unless inline).
    #[inline(always)]
    pub fn push(&mut self, d: &[u8], v: Option<(usize, usize)>, loc: Option<Loc>) {
        let Some((a, b)) = v else {
            self.null_rows.push(self.views.len());
            self.views.push(0);
            return;
        };
        let bytes = &d[a..b];
        if bytes.len() <= 12 {
            self.views.push(make_view(bytes, 0, 0));
            return;
        }
        if let Some(loc) = loc {
            if let (Ok(buffer), Ok(offset)) = (u32::try_from(1 + loc.buffer), u32::try_from(loc.start + a)) {
                if u32::try_from(loc.start + b).is_ok() {
                    self.views.push(make_view(bytes, buffer, offset));
                    return;
                }
            }
        }
        self.push_copy(bytes);
    }

    /// A row copied into the column's own buffer (inline when short).
    #[inline(always)]
    pub fn push_copy(&mut self, bytes: &[u8]) {
        if bytes.len() <= 12 {
            self.views.push(make_view(bytes, 0, 0));
            return;
        }
        let offset = self.own.len() as u32; // (a chunk holds less than 1 GiB)
        self.own.extend_from_slice(bytes);
        self.views.push(make_view(bytes, 0, offset));
    }

    pub fn push_null(&mut self) {
        self.null_rows.push(self.views.len());
        self.views.push(0);
    }

    /// Where the column ends now, for `truncate`.
    pub fn mark(&self) -> (usize, usize, usize) {
        (self.views.len(), self.own.len(), self.null_rows.len())
    }

    pub fn truncate(&mut self, (rows, own, nulls): (usize, usize, usize)) {
        self.views.truncate(rows);
        self.own.truncate(own);
        self.null_rows.truncate(nulls);
    }

    /// The Arrow array: its own buffer first, then the shared ones (each view checked to lie in its buffer).
    pub fn finish(self, buffers: &Buffers) -> Result<ArrayRef, ArrowError> {
        let rows = self.views.len();
        let nulls = (!self.null_rows.is_empty()).then(|| {
            let mut valid = BooleanBufferBuilder::new(rows);
            valid.append_n(rows, true);
            for &i in &self.null_rows {
                valid.set_bit(i, false);
            }
            NullBuffer::new(valid.finish())
        });
        let mut data = Vec::with_capacity(1 + buffers.shared.len());
        data.push(Buffer::from_vec(self.own));
        data.extend(buffers.shared.iter().cloned());
        Ok(Arc::new(BinaryViewArray::try_new(ScalarBuffer::from(self.views), data, nulls)?))
    }
}
