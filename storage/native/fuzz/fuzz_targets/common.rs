// Shared by the targets (included with `#[path]`): the fields of a v2 batch header, when there is one.

#![allow(dead_code)]

pub fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}
pub fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}

/// A batch-shaped input: `(base_offset, base_ts, append_ts, base_seq, count, attributes)` and the records
/// section (the bytes after the 61-byte header), for inputs of at least 61 bytes.
pub struct Batch<'a> {
    pub base_offset: i64,
    pub base_ts: i64,
    pub append_ts: Option<i64>,
    pub base_seq: i64,
    pub count: i64,
    pub attributes: u16,
    pub records: &'a [u8],
}

pub fn batch(b: &[u8]) -> Option<Batch<'_>> {
    if b.len() < 61 {
        return None;
    }
    let attributes = u16::from_be_bytes([b[21], b[22]]);
    Some(Batch {
        base_offset: be_i64(b, 0),
        base_ts: be_i64(b, 27),
        append_ts: if attributes & 0x08 != 0 { Some(be_i64(b, 35)) } else { None },
        base_seq: be_i32(b, 53) as i64,
        count: be_i32(b, 57) as i64,
        attributes,
        records: &b[61..],
    })
}
