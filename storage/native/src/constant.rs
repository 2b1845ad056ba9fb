//! Columns whose value is the same on every row of a chunk (`timestampType`, `leaderEpoch`, `producerId`,
//! `producerEpoch`, `magic`, `sequence` without producer state, `topic`, `partition`, `segment`, `codec`, `piece`:
//! one value per chunk in the common case) as a slice of one immutable array per value, made once and shared by
//! every chunk after: no fill and no fresh pages per chunk, where a new vector per column was about a tenth of
//! `ArrowRecords.finish`'s work per row (and its strings were written out row by row).
//!
//! The arrays are Arrow's (buffers reference counted, never written once made): an array holding a slice keeps
//! them alive after the cache let them go. The cache holds at most `ENTRIES` arrays of at most `MAX_BYTES` each
//! (the most recently used); a longer column is made as before.

use std::sync::{Arc, Mutex};

use arrow_array::types::ArrowPrimitiveType;
use arrow_array::{Array, ArrayRef, PrimitiveArray, StringArray};
use arrow_buffer::ToByteSlice;

/// The largest array cached (a chunk of the reader's default 64 Ki rows of i64 takes 512 KiB, of a segment's
/// 24-byte name 1.75 MiB).
const MAX_BYTES: usize = 2 << 20;
/// The arrays cached at most (so at most 32 MiB held).
const ENTRIES: usize = 16;
/// The fewest rows made, so that a few small chunks do not each make their own.
const MIN_ROWS: usize = 4096;

/// What a cached array repeats: the type's name and the value's bytes.
#[derive(PartialEq)]
struct Key(&'static str, Vec<u8>);

/// Most recently used last.
static CACHE: Mutex<Vec<(Key, ArrayRef)>> = Mutex::new(Vec::new());

/// `x` repeated `rows` times, as a primitive array.
pub fn primitive<P: ArrowPrimitiveType>(x: P::Native, rows: usize) -> ArrayRef {
    let width = size_of::<P::Native>();
    cached(Key(std::any::type_name::<P>(), x.to_byte_slice().to_vec()), rows, width, |n| {
        Arc::new(PrimitiveArray::<P>::from_value(x, n))
    })
}

/// `s` repeated `rows` times, as a string array (Arrow's repeat: no UTF-8 check of what it wrote).
pub fn string(s: &str, rows: usize) -> ArrayRef {
    cached(Key("utf8", s.as_bytes().to_vec()), rows, s.len() + 4, |n| Arc::new(StringArray::new_repeated(s, n)))
}

/// The first `rows` rows of the cached array of `key` (made by `make(rows)` with room for more when none has
/// as many), or a new one of exactly `rows` past `MAX_BYTES`.
fn cached(key: Key, rows: usize, row_bytes: usize, make: impl Fn(usize) -> ArrayRef) -> ArrayRef {
    if rows.saturating_mul(row_bytes) > MAX_BYTES {
        return make(rows);
    }
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    let array = match cache.iter().rposition(|(k, _)| *k == key) {
        Some(i) if cache[i].1.len() >= rows => {
            let entry = cache.remove(i);
            let array = entry.1.clone();
            cache.push(entry);
            array
        }
        hit => {
            if let Some(i) = hit {
                cache.remove(i); // (too short: replaced by a longer one)
            }
            let array = make(rows.next_power_of_two().max(MIN_ROWS).min(MAX_BYTES / row_bytes.max(1)).max(rows));
            if cache.len() >= ENTRIES {
                cache.remove(0);
            }
            cache.push((key, array.clone()));
            array
        }
    };
    drop(cache);
    array.slice(0, rows)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow_array::types::{Int32Type, Int64Type};
    use arrow_array::{Int32Array, Int64Array};

    fn i32s(a: &ArrayRef) -> Vec<i32> {
        a.as_any().downcast_ref::<Int32Array>().unwrap().values().to_vec()
    }

    #[test]
    fn repeats_and_shares() {
        let a = primitive::<Int32Type>(7, 10);
        assert_eq!(i32s(&a), vec![7; 10]);
        let b = primitive::<Int32Type>(7, 100);
        assert_eq!(i32s(&b), vec![7; 100]);
        assert_eq!(a.to_data().buffers()[0].as_ptr(), b.to_data().buffers()[0].as_ptr(), "one array per value");
        // another type or value: another array
        let c = primitive::<Int64Type>(7, 10);
        assert_eq!(c.as_any().downcast_ref::<Int64Array>().unwrap().values().to_vec(), vec![7i64; 10]);
        assert_eq!(i32s(&primitive::<Int32Type>(8, 5)), vec![8; 5]);
        // longer than cached: a longer one replaces it, the arrays made before keep theirs
        let d = primitive::<Int32Type>(7, 5000);
        assert_eq!(i32s(&d), vec![7; 5000]);
        assert_eq!(i32s(&a), vec![7; 10]);
        // past MAX_BYTES: made, not cached
        let rows = MAX_BYTES / 4 + 1;
        assert_eq!(i32s(&primitive::<Int32Type>(1, rows)), vec![1; rows]);
        assert_eq!(primitive::<Int32Type>(0, 0).len(), 0);
        let s = string("bench", 3);
        let s = s.as_any().downcast_ref::<StringArray>().unwrap();
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![Some("bench"); 3]);
        assert_eq!(string("", 2).len(), 2);
        // more values than ENTRIES: still right
        for v in 0..(2 * ENTRIES as i32) {
            assert_eq!(i32s(&primitive::<Int32Type>(v, 3)), vec![v; 3]);
        }
    }
}
