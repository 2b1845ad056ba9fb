//! Kafka's variable-length integers (`ByteUtils`' varint and varlong, zig-zag encoded; `storage/codec/varint.py`
//! is the Python twin): the readers every v2 record is parsed with, and the writer `convert` builds records
//! with. A read takes the data, a position it advances and an end it never reads past: `None` past the end or
//! for an encoding longer than Kafka accepts.

/// The one-byte varint at `p` (before `end`), consumed: most lengths, deltas and counts of a record, so both
/// readers try it first. `None` (nothing consumed) for anything else.
#[inline(always)]
fn single_byte(d: &[u8], p: &mut usize, end: usize) -> Option<u8> {
    if *p < end {
        if let Some(&b) = d.get(*p) {
            if b & 0x80 == 0 {
                *p += 1;
                return Some(b);
            }
        }
    }
    None
}

/// Kafka's unsigned varint (at most 5 bytes; the fifth contributes its low 4 bits), as
/// `ByteUtils.readUnsignedVarint` and `storage/codec/varint.read_uvarint`. `None` past `end` or when too long.
#[inline(always)]
fn uvarint(d: &[u8], p: &mut usize, end: usize) -> Option<u32> {
    if let Some(b) = single_byte(d, p, end) {
        return Some(b as u32);
    }
    let mut value: u32 = 0;
    let mut shift = 0u32;
    loop {
        if *p >= end {
            return None;
        }
        let b = *d.get(*p)?;
        *p += 1;
        if shift == 28 {
            if b & 0x80 != 0 {
                return None;
            }
            return Some(value | (((b & 0x0F) as u32) << 28));
        }
        value |= ((b & 0x7F) as u32) << shift;
        if b & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

/// Kafka's unsigned varlong (at most 10 bytes, bits past 64 dropped), as `read_uvarlong`.
#[inline(always)]
fn uvarlong(d: &[u8], p: &mut usize, end: usize) -> Option<u64> {
    if let Some(b) = single_byte(d, p, end) {
        return Some(b as u64);
    }
    let mut value: u64 = 0;
    let mut shift = 0u32;
    loop {
        if *p >= end || shift > 63 {
            return None;
        }
        let b = *d.get(*p)?;
        *p += 1;
        value |= ((b & 0x7F) as u64).wrapping_shl(shift);
        if b & 0x80 == 0 {
            return Some(value);
        }
        shift += 7;
    }
}

/// Kafka's zig-zag decoding of an unsigned varint or varlong.
#[inline(always)]
pub(crate) fn zigzag(u: u64) -> i64 {
    ((u >> 1) as i64) ^ -((u & 1) as i64)
}

/// Kafka's zig-zag varint (`ByteUtils.readVarint`, `read_varint`).
#[inline(always)]
pub(crate) fn varint(d: &[u8], p: &mut usize, end: usize) -> Option<i64> {
    Some(zigzag(uvarint(d, p, end)? as u64))
}

/// Kafka's zig-zag varlong (`ByteUtils.readVarlong`, `read_varlong`).
#[inline(always)]
pub(crate) fn varlong(d: &[u8], p: &mut usize, end: usize) -> Option<i64> {
    Some(zigzag(uvarlong(d, p, end)?))
}

/// An unsigned varint of one or two bytes in its shortest form (`cleaner_records._uvarint`), to the end of `d`:
/// the cleaner's fast path reads its lengths and deltas with it and leaves anything else (`None`) to the careful
/// path.
#[inline(always)]
pub(crate) fn short_uvarint(d: &[u8], p: &mut usize) -> Option<usize> {
    let b = *d.get(*p)? as usize;
    if b < 128 {
        *p += 1;
        return Some(b);
    }
    let b2 = *d.get(*p + 1)? as usize;
    if b2 >= 128 || b2 == 0 {
        return None;
    }
    *p += 2;
    Some((b & 127) | (b2 << 7))
}

/// An unsigned varlong (`uvarlong`) to the end of `d`, in its shortest form (`cleaner_records._long_uvarint`):
/// `None` for one with a trailing zero byte, which the cleaner's fast path leaves to the careful path.
#[inline(always)]
pub(crate) fn short_form_uvarlong(d: &[u8], p: &mut usize) -> Option<u64> {
    let start = *p;
    let value = uvarlong(d, p, d.len())?;
    if *p - start > 1 && d[*p - 1] == 0 {
        return None;
    }
    Some(value)
}

/// Kafka's zig-zag varint of a 32-bit value, appended to `out`.
#[inline(always)]
pub(crate) fn write_varint(v: i64, out: &mut Vec<u8>) {
    let mut u = ((v << 1) ^ (v >> 63)) as u64;
    while u >= 0x80 {
        out.push((u as u8) | 0x80);
        u >>= 7;
    }
    out.push(u as u8);
}
