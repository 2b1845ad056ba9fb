//! The core's compressors (`lz4_block`, `zstd_stream`, `snappy_block`) and decompressors (`decompress_into`:
//! gzip, xerial/raw snappy, Kafka's lz4 frame, zstd) on arbitrary bytes: each compressor's output, framed as
//! Kafka frames it, decompresses back to the input (with the core and with an independent decoder); the
//! decompressors never panic on hostile bytes and never return more than their limit.
#![no_main]

use std::cell::RefCell;

use _native::fuzzing::{decompress_into, lz4_block_bytes, snappy_block_bytes, zstd_stream_bytes};
use libfuzzer_sys::fuzz_target;

const LIMIT: usize = 1 << 20;

/// Kafka's lz4 frame (FLG 0x60, BD 0x40, 64 KiB blocks; the header checksum of magic 1/2 or KAFKA-3160's), from
/// the compressed 64 KiB blocks of `data` (compressed once for both frames: each lz4 HC call sets up a 256 KiB
/// state, which AddressSanitizer maps fresh every time).
fn lz4_frame(data: &[u8], blocks: &[Vec<u8>], magic0: bool) -> Vec<u8> {
    let mut f = vec![0x04, 0x22, 0x4d, 0x18, 0x60, 0x40, if magic0 { 0x1a } else { 0x82 }];
    for (raw, block) in data.chunks(64 * 1024).zip(blocks) {
        if block.len() >= raw.len() {
            f.extend_from_slice(&(raw.len() as u32 | 0x8000_0000).to_le_bytes());
            f.extend_from_slice(raw);
        } else {
            f.extend_from_slice(&(block.len() as u32).to_le_bytes());
            f.extend_from_slice(block);
        }
    }
    f.extend_from_slice(&[0, 0, 0, 0]);
    f
}

/// xerial's snappy framing (`SnappyOutputStream`, 32 KiB chunks).
fn xerial(data: &[u8]) -> Vec<u8> {
    let mut f = b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01".to_vec();
    for chunk in data.chunks(32 * 1024) {
        let b = snappy_block_bytes(chunk).expect("snappy stays within its bound");
        f.extend_from_slice(&(b.len() as i32).to_be_bytes());
        f.extend_from_slice(&b);
    }
    f
}

thread_local! {
    /// The harness's own gzip compressors (one per level) and zstd decoder, reused from input to input: a fresh
    /// deflate or zstd context maps and clears hundreds of KiB each time (most of this target's time, before).
    static DEFLATE: RefCell<Vec<flate2::Compress>> =
        RefCell::new((0..10).map(|l| flate2::Compress::new(flate2::Compression::new(l), false)).collect());
    static ZSTD_DECODER: RefCell<zstd::bulk::Decompressor<'static>> =
        RefCell::new(zstd::bulk::Decompressor::new().expect("zstd context"));
}

/// A gzip member (RFC 1952: header, raw deflate at `level`, CRC-32 and size) from a reused compressor.
fn gzip(data: &[u8], level: u32) -> Vec<u8> {
    DEFLATE.with(|d| {
        let z = &mut d.borrow_mut()[level as usize];
        z.reset();
        let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff];
        out.reserve(data.len() + data.len() / 8 + 64);
        let start = out.len();
        loop {
            let done = z.total_in() as usize;
            if out.len() == out.capacity() {
                out.reserve(4096);
            }
            let status = z.compress_vec(&data[done..], &mut out, flate2::FlushCompress::Finish).expect("deflate");
            if status == flate2::Status::StreamEnd {
                break;
            }
        }
        assert!(out.len() > start);
        let mut crc = flate2::Crc::new();
        crc.update(data);
        out.extend_from_slice(&crc.sum().to_le_bytes());
        out.extend_from_slice(&(data.len() as u32).to_le_bytes());
        out
    })
}

fn native(codec: u8, d: &[u8], magic: u8) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    let r = decompress_into(codec, d, magic, LIMIT, &mut out);
    assert!(out.len() <= LIMIT + 1);
    r.map(|()| {
        assert!(out.len() <= LIMIT);
        out
    })
}

fuzz_target!(|data: &[u8]| {
    let (level, data) = match data.split_first() {
        Some((l, rest)) => (*l, rest),
        None => (0, data),
    };
    // hostile bytes, as every codec and magic: no panic, bounded output
    for codec in 1..=5u8 {
        for magic in [0u8, 1, 2] {
            let _ = native(codec, data, magic);
        }
    }
    // an empty Rust slice (its pointer dangling, as every empty buffer that crosses from Python): libFuzzer's
    // inputs always have a real address, so the empty input is made here, at this input's level
    assert_eq!(lz4_block_bytes(&[], (level >> 1) as i32 % 17).expect("lz4 of nothing"), [0]);
    // round trips
    let lz4_level = if level & 1 == 0 { 9 } else { (level >> 1) as i32 % 17 };
    let c = lz4_block_bytes(data, lz4_level).expect("lz4 compresses anything");
    let back = lz4::block::decompress(&c, Some(data.len() as i32)).expect("lz4 round trip");
    assert_eq!(back, data);
    let z = zstd_stream_bytes(data, (level % 3) as i32 + 1).expect("zstd compresses anything");
    let back = ZSTD_DECODER.with(|d| d.borrow_mut().decompress(&z, data.len()).expect("zstd round trip"));
    assert_eq!(back, data);
    let s = snappy_block_bytes(data).expect("snappy stays within its bound");
    assert_eq!(snap::raw::Decoder::new().decompress_vec(&s).expect("snappy round trip"), data);
    if data.len() <= LIMIT {
        assert_eq!(native(4, &z, 2).expect("native zstd round trip"), data);
        assert_eq!(native(2, &xerial(data), 2).expect("native snappy (xerial) round trip"), data);
        if !data.is_empty() {
            assert_eq!(native(2, &s, 2).expect("native raw snappy round trip"), data);
        }
        // one block for inputs up to 64 KiB: the one compressed above
        let blocks: Vec<Vec<u8>> = if data.len() <= 64 * 1024 {
            vec![c.clone()]
        } else {
            data.chunks(64 * 1024)
                .map(|raw| lz4_block_bytes(raw, lz4_level).expect("lz4 compresses anything"))
                .collect()
        };
        assert_eq!(native(3, &lz4_frame(data, &blocks, false), 2).expect("native lz4 round trip"), data);
        assert_eq!(native(3, &lz4_frame(data, &blocks, true), 0).expect("native lz4 magic 0"), data);
        let gz = gzip(data, (level % 10) as u32);
        assert_eq!(native(1, &gz, 2).expect("native gzip round trip"), data);
    }
});
