//! The Arrow decoder (`ArrowRecords.add_v2` + `finish`) on a batch-shaped input, against the records decoder:
//! it adds a batch exactly when `decode_records` accepts its records section, with the same rows; the
//! finished struct array has one row per record and never panics (offsets of Arrow's 32-bit columns).
#![no_main]

use _native::fuzzing::{decode_records, ArrowRecords};
use arrow_array::cast::AsArray;
use arrow_array::types::Int64Type;
use arrow_array::Array;
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let mut builder = ArrowRecords::with_capacity(data.len());
    let Some(b) = common::batch(data) else {
        assert_eq!(builder.add_v2_bytes(data, 0, 0, None, None), Ok(None));
        return;
    };
    let codec = b.attributes & 0x07;
    // a compressed batch: its "decompressed" records section is the bytes after the header
    let section = if codec != 0 { Some(b.records) } else { None };
    let expected = if data[16] == 2 && codec <= 4 {
        decode_records(b.records, b.count, b.base_offset, b.base_ts, b.append_ts, 0, true)
    } else {
        None
    };
    let added = builder.add_v2_bytes(data, 7, 3, None, section).expect("far below 1 GiB");
    assert_eq!(added, expected.as_ref().map(|(rows, _)| rows.len()));
    // a second, filtered add of the same batch: only the rows in the half-open ranges
    let (lo, hi) = (b.base_offset as i128, b.base_offset as i128 + 2);
    let keep = Some((lo, hi, i128::MIN, i128::MAX));
    let kept = builder.add_v2_bytes(data, 7, 3, keep, section).expect("far below 1 GiB");
    let array = builder.finish_array().expect("a consistent struct array");
    let n = added.unwrap_or(0) + kept.unwrap_or(0);
    assert_eq!(array.len(), n);
    if let Some((rows, _)) = expected {
        let offsets = array.column(0).as_primitive::<Int64Type>();
        let timestamps = array.column(1).as_primitive::<Int64Type>();
        let keys = array.column(3).as_binary::<i32>();
        let values = array.column(4).as_binary::<i32>();
        for (i, (offset, timestamp, key, value, _)) in rows.iter().enumerate() {
            assert_eq!(offsets.value(i), *offset);
            assert_eq!(timestamps.value(i), *timestamp);
            assert_eq!(keys.is_null(i), key.is_none());
            assert_eq!(values.is_null(i), value.is_none());
            if let Some(k) = key {
                assert_eq!(keys.value(i), *k);
            }
            if let Some(v) = value {
                assert_eq!(values.value(i), *v);
            }
        }
        let want = rows.iter().filter(|r| (r.0 as i128) >= lo && (r.0 as i128) < hi).count();
        assert_eq!(kept, Some(want));
    }
});
