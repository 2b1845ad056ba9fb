//! The core's compressors (`lz4_block`, `zstd_stream`, `snappy_block`; it has no decompressor: decompression
//! is Python's, see `storage/codec/compression.py`) on arbitrary bytes: each output decompresses, with an
//! independent decoder, back to the input.
#![no_main]

use _native::fuzzing::{lz4_block_bytes, snappy_block_bytes, zstd_stream_bytes};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (level, data) = match data.split_first() {
        Some((l, rest)) => (*l, rest),
        None => (0, data),
    };
    let lz4_level = if level & 1 == 0 { 9 } else { (level >> 1) as i32 % 17 };
    let c = lz4_block_bytes(data, lz4_level).expect("lz4 compresses anything");
    let back = lz4::block::decompress(&c, Some(data.len() as i32)).expect("lz4 round trip");
    assert_eq!(back, data);
    let z = zstd_stream_bytes(data, (level % 3) as i32 + 1).expect("zstd compresses anything");
    assert_eq!(zstd::decode_all(&z[..]).expect("zstd round trip"), data);
    let s = snappy_block_bytes(data).expect("snappy stays within its bound");
    assert_eq!(snap::raw::Decoder::new().decompress_vec(&s).expect("snappy round trip"), data);
});
