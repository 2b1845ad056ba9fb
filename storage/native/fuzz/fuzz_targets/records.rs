//! The v2 records decoder (`decode_records`, the fast path of `storage/records/batch.py`) on a batch-shaped
//! input: no panic, and what it accepts is consistent (positions inside the data, offsets and timestamps as
//! the header says, keys/values/headers slices of the input, the same rows when decoded from a shifted start);
//! and a v0/v1 entry through the legacy decoder and the Arrow builder (the same entries taken, as many rows).
#![no_main]

use _native::fuzzing::{arrow_add_legacy, decode_compressed, decode_legacy, decode_records, sequence, ArrowRecords};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    // a v0/v1 entry (magic byte 0 or 1): the legacy decoder (legacy.rs) and the Arrow builder take the same
    // entries with as many rows, every key and value a slice of the input or of its decompressed value
    if data.len() > 17 && data[16] < 2 {
        let rows = decode_legacy(data, 1 << 20);
        let mut builder = ArrowRecords::with_capacity(0);
        assert_eq!(rows.as_ref().map(Vec::len), arrow_add_legacy(&mut builder, data, 1 << 20));
        if let Some(rows) = &rows {
            assert!(!rows.is_empty());
            if data[17] & 0x07 == 0 {
                assert_eq!(rows.len(), 1);
                assert_eq!(rows[0].0, i64::from_be_bytes(data[..8].try_into().unwrap()));
            }
            for (_, _, key, value, (magic, attributes, _)) in rows {
                assert!(*magic <= 1 && attributes & 0x07 == 0); // inner messages are never compressed
                for s in [key, value].into_iter().flatten() {
                    assert!(s.len() <= 1 << 20);
                }
            }
        }
    }
    let Some(b) = common::batch(data) else {
        // too short for a header: the records decoder on the raw bytes, one record at most
        let _ = decode_records(data, 1, 0, 0, None, 0, false);
        return;
    };
    // a compressed batch: decompressed natively, then decoded; the same records as decompressing first
    let codec = (b.attributes & 7) as u8;
    if (1..=4).contains(&codec) {
        let got = decode_compressed(b.records, codec, 1 << 20, b.count, b.base_offset, b.base_ts, b.append_ts);
        let mut out = Vec::new();
        if _native::fuzzing::decompress_into(codec, b.records, 2, 1 << 20, &mut out).is_some() {
            let want = decode_records(&out, b.count, b.base_offset, b.base_ts, b.append_ts, 0, true);
            assert_eq!(got.as_ref().map(Vec::len), want.as_ref().map(|(r, _)| r.len()));
        } else {
            assert!(got.is_none());
        }
    }
    let whole = decode_records(b.records, b.count, b.base_offset, b.base_ts, b.append_ts, 0, true);
    let partial = decode_records(b.records, b.count, b.base_offset, b.base_ts, b.append_ts, 0, false);
    if let Some((rows, pos)) = &whole {
        assert_eq!(*pos, b.records.len());
        assert_eq!(rows.len() as i64, b.count);
        let (prows, ppos) = partial.as_ref().expect("accepted whole, so accepted as a prefix");
        assert_eq!(prows, rows);
        assert_eq!(*ppos, *pos);
        for (offset, timestamp, key, value, headers) in rows {
            assert!(*offset >= b.base_offset.min(b.base_offset.saturating_sub(1 << 31)));
            if let Some(t) = b.append_ts {
                assert_eq!(*timestamp, t);
            }
            for s in [key, value].into_iter().flatten() {
                assert!(s.len() <= b.records.len());
            }
            assert!(headers.len() <= b.records.len());
            let _ = sequence(b.base_seq, offset.wrapping_sub(b.base_offset));
        }
    }
    if let Some((rows, pos)) = &partial {
        assert!(*pos <= b.records.len());
        assert_eq!(rows.len() as i64, b.count);
        // the same section decoded from the whole input, starting at byte 61
        let again = decode_records(data, b.count, b.base_offset, b.base_ts, b.append_ts, 61, false)
            .expect("the same bytes at an offset decode the same");
        assert_eq!(&again.0, rows);
        assert_eq!(again.1, pos + 61);
    }
});
