//! The log cleaner's loops (`map_records`, `scan_retained`, `OffsetMapCore.map_batches`) on a batch-shaped
//! input: no panic, every range they report inside the data, and the two passes agree on what they accept.
#![no_main]

use std::collections::HashMap;

use _native::fuzzing::{map_batches, map_records, scan_retained};
use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    // the segment-level map pass over the whole input (a run of batches), from 0 and from a late start
    for (start, capacity) in [(i64::MIN, 1 << 20), (0, 16), (i64::MAX, 4)] {
        let (pos, _last, size) = map_batches(data, 0, start, capacity);
        assert!(pos <= data.len());
        assert!(size <= capacity.max(1 << 20));
    }
    let Some(b) = common::batch(data) else { return };
    let d = b.records;
    let (puts, ok) = map_records(d, b.count, b.base_offset);
    let mut map: HashMap<Vec<u8>, i64> = HashMap::new();
    for (k, o) in &puts {
        assert!(k.len() <= d.len());
        map.insert(k.clone(), *o);
    }
    let latest = if ok { puts.last().map_or(b.base_offset, |p| p.1) } else { b.base_offset };
    for keep_tombstones in [false, true] {
        let r = scan_retained(d, b.count, b.base_offset, b.base_ts, latest, keep_tombstones, |k| {
            *map.get(k).unwrap_or(&-1)
        });
        if let Some((kept, invalid)) = r {
            assert!(kept.len() as i64 + invalid <= b.count.max(0));
            let mut prev_end = 0;
            for (start, tail, end, _ts, _delta, _attrs, _tomb) in kept {
                assert!(prev_end <= start && start < tail && tail <= end && end <= d.len());
                prev_end = end;
            }
        }
    }
});
