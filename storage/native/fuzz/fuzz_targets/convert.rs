//! `convert`'s legacy v0/v1 -> v2 rewrite (`legacy_to_v2`, `legacy_plain_run`) on arbitrary bytes: no panic;
//! both stop at the same entry; every batch written is a v2 batch with a valid CRC-32C whose one record
//! decodes (with the records decoder) to the legacy message's key and value.
#![no_main]

use _native::fuzzing::{decode_records, legacy_plain_run, legacy_to_v2};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    let (n, nbytes, reached) = legacy_plain_run(data, 0, data.len());
    assert_eq!(reached, nbytes);
    assert!(reached <= data.len());
    let (out, metas, pos) = legacy_to_v2(data, 0, data.len(), usize::MAX / 2);
    // the output buffer is reserved by the input's size, not by the output budget (8 MiB in `convert`)
    assert!(out.capacity() <= 3 * data.len() + 4096, "{} bytes reserved for {}", out.capacity(), data.len());
    assert_eq!(pos, reached);
    assert_eq!(metas.len(), n);
    let mut at = 0;
    for (size, last, ts) in metas {
        let batch = &out[at..at + size];
        let b = common::batch(batch).expect("a whole v2 batch");
        assert_eq!(batch[16], 2);
        assert_eq!(common::be_i32(batch, 8) as usize + 12, size);
        assert_eq!(crc32c::crc32c(&batch[21..]), common::be_i32(batch, 17) as u32);
        assert_eq!(b.base_offset, last);
        assert_eq!(b.base_ts, ts);
        let (rows, _) = decode_records(b.records, b.count, b.base_offset, b.base_ts, b.append_ts, 0, true)
            .expect("the converted record decodes");
        assert_eq!(rows.len(), 1);
        at += size;
    }
    assert_eq!(at, out.len());
    // a small output bound stops early, at an entry boundary
    let (small, metas, pos2) = legacy_to_v2(data, 0, data.len(), 100);
    assert!(pos2 <= pos);
    assert_eq!(small.len(), metas.iter().map(|m| m.0).sum::<usize>());
});
