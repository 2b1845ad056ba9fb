//! Kafka's variable-length integers (`ByteUtils`' varint and varlong, zig-zag encoded; `storage/codec/varint.py`
//! is the Python twin): the readers every v2 record is parsed with, and the writer `convert` builds records
//! with. A read takes the data, a position it advances and an end it never reads past: `None` past the end or
//! for an encoding longer than Kafka accepts.

/// An unsigned LEB128 of at most `max_bytes` bytes, as `ByteUtils.readUnsignedVarint`/`Varlong` read it (and
/// `storage/codec/varint._read_unsigned`): a continuation bit on the last allowed byte is too long (`None`), as is
/// running past `end`; bits past 64 are dropped.
#[inline(always)]
fn unsigned(d: &[u8], p: &mut usize, end: usize, max_bytes: u32) -> Option<u64> {
    // one byte: most deltas and counts of a record; two: most record and value lengths (64 to 8191 bytes)
    if *p < end {
        if let Some(&b) = d.get(*p) {
            if b & 0x80 == 0 {
                *p += 1;
                return Some(b as u64);
            }
            if let (true, Some(&b2)) = (*p + 1 < end, d.get(*p + 1)) {
                if b2 & 0x80 == 0 {
                    *p += 2;
                    return Some((b & 0x7F) as u64 | (b2 as u64) << 7);
                }
            }
        }
    }
    let mut value: u64 = 0;
    for i in 0..max_bytes {
        if *p >= end {
            return None;
        }
        let b = *d.get(*p)?;
        *p += 1;
        value |= ((b & 0x7F) as u64).wrapping_shl(7 * i);
        if b & 0x80 == 0 {
            return Some(value);
        }
    }
    None
}

/// Kafka's unsigned varint (at most 5 bytes; the fifth contributes its low 4 bits), as
/// `ByteUtils.readUnsignedVarint` and `storage/codec/varint.read_uvarint`. `None` past `end` or when too long.
#[inline(always)]
fn uvarint(d: &[u8], p: &mut usize, end: usize) -> Option<u32> {
    unsigned(d, p, end, 5).map(|v| v as u32)
}

/// Kafka's unsigned varlong (at most 10 bytes, bits past 64 dropped), as `read_uvarlong`.
#[inline(always)]
fn uvarlong(d: &[u8], p: &mut usize, end: usize) -> Option<u64> {
    unsigned(d, p, end, 10)
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
