//! The core's parsers on plain byte slices, without Python: what the fuzz targets of `storage/native/fuzz/`
//! call (`cargo fuzz`). Each function runs the same code as its PyO3 entry point -- the same record parser,
//! the same cleaner and convert loops, the same Arrow builder and compressors -- and returns plain Rust values
//! instead of Python objects. Nothing here is used by the extension module itself.

pub use crate::arrow::ArrowRecords;
pub use crate::codec::{decompress_into, lz4_block_bytes, snappy_block_bytes, xxh32, zstd_stream_bytes};

/// A decoded record: `(offset, timestamp, key, value, headers)`, as the tuples of `decode_records(full=False)`.
pub type Row<'a> = (i64, i64, Option<&'a [u8]>, Option<&'a [u8]>, Vec<(&'a str, Option<&'a [u8]>)>);

fn slice(d: &[u8], r: Option<(usize, usize)>) -> Option<&[u8]> {
    r.map(|(a, b)| &d[a..b])
}

/// `decode_records` (the tuples): `Some((rows, next position))`, or `None` where it returns `None` (the
/// careful decoder's verdict).
#[allow(clippy::too_many_arguments)]
pub fn decode_records(
    d: &[u8],
    count: i64,
    base_offset: i64,
    base_ts: i64,
    append_ts: Option<i64>,
    p: usize,
    last: bool,
) -> Option<(Vec<Row<'_>>, usize)> {
    let end = d.len();
    if count < 0 || p > end {
        return None;
    }
    if (count as u64).saturating_mul(7) > (end - p) as u64 {
        return None;
    }
    let mut pos = p;
    let mut out = Vec::with_capacity(count as usize);
    for _ in 0..count {
        let raw = crate::record::parse_record(d, &mut pos, end)?;
        let (offset, timestamp) = raw.offset_timestamp(base_offset, base_ts, append_ts)?;
        let headers = raw
            .headers(d)
            .map(|((ka, kb), v)| (std::str::from_utf8(&d[ka..kb]).unwrap_or_default(), slice(d, v)))
            .collect();
        out.push((offset, timestamp, slice(d, raw.key), slice(d, raw.value), headers));
    }
    if last && pos != end {
        return None;
    }
    Some((out, pos))
}

/// The record sequence `decode_records(full=True)` gives (`Record.sequence`).
pub fn sequence(base_seq: i64, off_delta: i64) -> i64 {
    if base_seq < 0 {
        -1
    } else {
        crate::batch::increment_sequence(base_seq, off_delta)
    }
}

/// The cleaner's map pass over one records section (`map_records`): the `(key, offset)` puts, in order, and
/// whether the batch was taken (`false`: the careful path).
pub fn map_records(d: &[u8], count: i64, base_offset: i64) -> (Vec<(Vec<u8>, i64)>, bool) {
    let mut puts = Vec::new();
    let ok = crate::cleaner::walk_keys(d, count, base_offset, |k, o| {
        puts.push((k.to_vec(), o));
        Ok::<(), std::convert::Infallible>(())
    });
    (puts, matches!(ok, Ok(true)))
}

/// One retained record of `scan_retained`: `(start, tail, end, timestamp, offset_delta, attributes,
/// is_tombstone)`.
pub type Kept = crate::cleaner::Kept;

/// The cleaner's retain pass over one records section (`scan_retained`) against a map `mapped(key)`:
/// `Some((kept, keyless dropped))` or `None` (the careful path).
pub fn scan_retained(
    d: &[u8],
    count: i64,
    base_offset: i64,
    base_ts: i64,
    latest: i64,
    keep_tombstones: bool,
    mut mapped: impl FnMut(&[u8]) -> i64,
) -> Option<(Vec<Kept>, i64)> {
    let pass = crate::cleaner::RetainPass { count, base_offset, base_ts, latest, keep_tombstones };
    let r = crate::cleaner::walk_retained(d, pass, |k| Ok::<i64, std::convert::Infallible>(mapped(k)));
    match r {
        Ok(r) => r,
        Err(never) => match never {},
    }
}

/// The map pass over a run of plain batches of a segment (`OffsetMapCore.map_batches`):
/// `(position reached, last offset mapped, distinct hashes mapped)`.
pub fn map_batches(d: &[u8], pos: usize, start: i64, capacity: usize) -> (usize, Option<i64>, usize) {
    let mut core = crate::cleaner::OffsetMapCore::new(1024, 64);
    let (reached, last) = core.map_batches_bytes(d, pos, start, capacity);
    (reached, last, core.size())
}

/// `legacy_to_v2`: `(v2 batches, [(size, last offset, max timestamp)], position reached)`.
#[allow(clippy::type_complexity)]
pub fn legacy_to_v2(d: &[u8], pos: usize, end: usize, max_bytes: usize) -> (Vec<u8>, Vec<(usize, i64, i64)>, usize) {
    crate::convert::legacy_to_v2_bytes(d, pos, end, max_bytes)
}

/// `legacy_plain_run`: `(entries, bytes, position reached)`.
pub fn legacy_plain_run(d: &[u8], pos: usize, end: usize) -> (usize, usize, usize) {
    crate::convert::legacy_plain_run_bytes(d, pos, end)
}

/// A decoded record with owned key and value: `(offset, timestamp, key, value, header count)`.
pub type OwnedRow = (i64, i64, Option<Vec<u8>>, Option<Vec<u8>>, usize);

/// `decode_compressed`: the records section `d` decompressed natively (codec, magic, limit), then decoded as
/// `decode_records` decodes it; `None` where it returns `None`.
#[allow(clippy::too_many_arguments)]
pub fn decode_compressed(
    d: &[u8],
    codec: u8,
    limit: usize,
    count: i64,
    base_offset: i64,
    base_ts: i64,
    append_ts: Option<i64>,
) -> Option<Vec<OwnedRow>> {
    let mut out = Vec::new();
    decompress_into(codec, d, 2, limit, &mut out)?;
    let (rows, _) = decode_records(&out, count, base_offset, base_ts, append_ts, 0, true)?;
    Some(
        rows.into_iter().map(|(o, t, k, v, h)| (o, t, k.map(<[u8]>::to_vec), v.map(<[u8]>::to_vec), h.len())).collect(),
    )
}

/// `legacy_records(full=False)` of one v0/v1 shallow entry (`legacy.rs`): `(offset, timestamp, key, value,
/// (magic, attributes, crc))` per message, or `None` where the Python decoder judges.
pub use crate::legacy::decode_entry as decode_legacy;

/// `ArrowRecords.add_legacy` of one v0/v1 shallow entry (no `keep`): the rows added, or `None`.
pub fn arrow_add_legacy(builder: &mut ArrowRecords, e: &[u8], limit: usize) -> Option<usize> {
    builder.add_legacy_bytes(e, 0, 0, None, limit, &mut Vec::new()).ok().flatten()
}
