//! One record of a v2 records section (Kafka's `DefaultRecord.readFrom`; `storage/records/batch.py`'s careful
//! decoder is the reference): its length, attributes, timestamp and offset deltas, key, value and headers,
//! validated exactly as the careful decoder validates them and located as byte ranges of the data. Allocates
//! nothing and knows nothing of Python: `batch` builds Python objects from it, `arrow` Arrow columns, the fuzz
//! targets plain rows.

use crate::bytes::field;
use crate::varint::{varint, varlong};

/// One record of a v2 records section, validated: where its fields are.
pub(crate) struct Raw {
    pub attributes: u8,
    pub ts_delta: i64,
    pub off_delta: i64,
    pub key: Option<(usize, usize)>,
    pub value: Option<(usize, usize)>,
    pub hcount: usize,
    /// where the first header starts
    pub hstart: usize,
}

/// Parse the record at `p` (its length varint first), checking exactly what the careful decoder checks:
/// `None` on anything it would reject, and on header keys that are not UTF-8 (it decodes them with
/// surrogateescape). Allocates nothing.
#[inline(always)]
pub(crate) fn parse_record(d: &[u8], p: &mut usize, end: usize) -> Option<Raw> {
    parse_record_with(d, p, end, |_, _| ())
}

/// `parse_record`, handing each header's `(key, value)` byte ranges to `on_header` as it is checked (the key is
/// valid UTF-8): one walk over the headers for a caller that stores them. On `None` some headers of the record
/// may have been handed over already.
#[inline(always)]
pub(crate) fn parse_record_with(
    d: &[u8],
    p: &mut usize,
    end: usize,
    mut on_header: impl FnMut((usize, usize), Option<(usize, usize)>),
) -> Option<Raw> {
    let length = varint(d, p, end)?;
    if length < 0 {
        return None;
    }
    let rec_end = p.checked_add(length as usize)?;
    if rec_end > end || *p >= rec_end {
        return None;
    }
    let attributes = d[*p];
    *p += 1;
    let ts_delta = varlong(d, p, rec_end)?;
    let off_delta = varint(d, p, rec_end)?;
    let key = field(varint(d, p, rec_end)?, p, rec_end)?;
    let value = field(varint(d, p, rec_end)?, p, rec_end)?;
    let hcount = varint(d, p, rec_end)?;
    if hcount < 0 || hcount as usize > rec_end - *p {
        return None;
    }
    let hstart = *p;
    for _ in 0..hcount {
        let hk = varint(d, p, rec_end)?;
        if hk < 0 {
            return None;
        }
        let (a, b) = field(hk, p, rec_end)??;
        let name = &d[a..b];
        if !name.is_ascii() {
            std::str::from_utf8(name).ok()?; // (ASCII, the usual header name, is UTF-8: no call)
        }
        on_header((a, b), field(varint(d, p, rec_end)?, p, rec_end)?);
    }
    if *p != rec_end {
        return None;
    }
    Some(Raw { attributes, ts_delta, off_delta, key, value, hcount: hcount as usize, hstart })
}

/// The headers of a record `parse_record` accepted: `(key, value)` byte ranges (the key is valid UTF-8).
pub(crate) struct Headers<'a> {
    d: &'a [u8],
    p: usize,
    left: usize,
}

impl Iterator for Headers<'_> {
    type Item = ((usize, usize), Option<(usize, usize)>);

    #[inline(always)]
    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        let end = self.d.len();
        let k = field(varint(self.d, &mut self.p, end)?, &mut self.p, end)??;
        let v = field(varint(self.d, &mut self.p, end)?, &mut self.p, end)?;
        Some((k, v))
    }
}

impl Raw {
    pub(crate) fn headers<'a>(&self, d: &'a [u8]) -> Headers<'a> {
        Headers { d, p: self.hstart, left: self.hcount }
    }

    /// The absolute offset and timestamp, when they fit an i64.
    #[inline(always)]
    pub(crate) fn offset_timestamp(
        &self,
        base_offset: i64,
        base_ts: i64,
        append_ts: Option<i64>,
    ) -> Option<(i64, i64)> {
        let offset = base_offset.checked_add(self.off_delta)?;
        let timestamp = match append_ts {
            Some(t) => t,
            None => base_ts.checked_add(self.ts_delta)?,
        };
        Some((offset, timestamp))
    }
}
