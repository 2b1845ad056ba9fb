//! The zero-copy path (`ArrowRecords(views=True).add_entries`, what `to_arrow(binary_view=True)` runs over a
//! segment's mapped bytes) on any input read as a run of log entries, plain and compressed: the views builder
//! takes exactly the entries the copying builder takes, with the same keys and values; every view stays inside
//! its data buffer (`validate_full`); and the views stay valid after the input's own handle and the builder are
//! gone (the array alone keeps the bytes alive, as a segment's mmap outlives its reader).
#![no_main]

use _native::fuzzing::ArrowRecords;
use arrow_array::cast::AsArray;
use arrow_array::Array;
use arrow_buffer::Buffer;
use libfuzzer_sys::fuzz_target;

/// At most this many decompressed bytes per batch (the reader's limit is larger; small keeps the target fast).
const LIMIT: usize = 1 << 20;

fuzz_target!(|data: &[u8]| {
    // the first byte chooses the CRC check (the reader verifies; unverified reaches more of the decoder), the
    // entries follow it
    let verify = data.first().is_some_and(|b| b & 1 == 1);
    let caps = (usize::MAX, usize::MAX);
    let filters = (verify, 0i16, i32::MAX, LIMIT);
    let mut copying = ArrowRecords::with_columns::<&str>(data.len(), None, false).expect("every column");
    let copied = copying.add_entries_buffer(&Buffer::from(data), 1, data.len(), 0, 0, caps, filters);
    let plain = copying.finish_array().expect("a consistent struct array");

    let mut viewing = ArrowRecords::with_columns::<&str>(data.len(), None, true).expect("every column");
    let input = Buffer::from_vec(data.to_vec()); // (the mapped segment: one handle, the builder's clone another)
    let viewed = viewing.add_entries_buffer(&input, 1, data.len(), 0, 0, caps, filters);
    assert_eq!(viewed, copied, "the same entries, rows and batches");
    drop(input);
    let views = viewing.finish_array().expect("a consistent struct array");
    drop(viewing);
    views.to_data().validate_full().expect("every view inside its buffer");
    assert_eq!(views.len(), plain.len());
    for col in [3, 4] {
        let (want, got) = (plain.column(col).as_binary::<i32>(), views.column(col).as_binary_view());
        for i in 0..plain.len() {
            assert_eq!(want.is_null(i), got.is_null(i));
            if !want.is_null(i) {
                assert_eq!(want.value(i), got.value(i));
            }
        }
    }
    // the views alone now hold the input's bytes: read every one once more after everything else is dropped
    drop(plain);
    for col in [3, 4] {
        let bytes: u64 = views.column(col).as_binary_view().iter().flatten().flatten().map(|&b| u64::from(b)).sum();
        std::hint::black_box(bytes);
    }
});
