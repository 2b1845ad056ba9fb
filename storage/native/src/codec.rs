//! Compression as Kafka's producer and broker compress, byte for byte: the same C libraries at the versions
//! Kafka 3.9 and 4.x bundle (liblz4 1.10.0 as in lz4-java 1.10, libzstd 1.5.6 as in zstd-jni 1.5.6, C++ snappy
//! giving snappy-java 1.1.10's bytes: 1.1.9, vendored under `vendor/snappy/`), called the way Kafka's
//! `Lz4BlockOutputStream`, `ZstdCompression` and `SnappyOutputStream` call them. The framings on write
//! (Kafka's lz4 frame, xerial's snappy framing, gzip's, whose zlib output already matches) stay in
//! `storage/codec/compression.py`; decompression (below) reads all four framings natively, following that
//! module's decoders check for check.
//! `tests/kafka/test_compression_parity.py` compresses the same bytes through Kafka's own classes on the JDK.

use std::io::Write;
use std::os::raw::{c_char, c_int, c_void};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::buffer::ByteView;
use crate::bytes::{be_i32, le_u32};

/// `data`, or for an empty input an empty slice at a real address, for handing to C: a Rust empty slice points
/// at 0x1, and lz4's optimal parser (levels 10-12) computes `end - 12` from its pointer, which wrapped around and
/// read wild memory (a segfault, before). Nothing is read through the address: it only has to be real.
fn for_c(data: &[u8]) -> &[u8] {
    static NOTHING: [u8; 1] = [0];
    if data.is_empty() {
        &NOTHING[..0]
    } else {
        data
    }
}

/// Kafka's default lz4 level: `Lz4BlockOutputStream` then uses lz4-java's fast compressor.
const LZ4_DEFAULT_LEVEL: i32 = 9;

/// One lz4 block (raw, without a size prefix) as `Lz4BlockOutputStream.writeBlock` compresses it: the fast
/// compressor (`LZ4_compress_default`) at the default level, else the high compressor (`LZ4_compress_HC`) at
/// `level`.
#[pyfunction]
pub(crate) fn lz4_block<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, level: i32) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    let out = lz4_block_bytes(view.as_slice(), level).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &out))
}

/// `lz4_block` without Python. The high compressor runs in a state kept per thread: `LZ4_compress_HC` is
/// `LZ4_compress_HC_extStateHC` in a 256 KiB state it allocates for each block; the state is fully initialised
/// by every call, so the block is the same bytes.
pub fn lz4_block_bytes(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    let data = for_c(data);
    if level == LZ4_DEFAULT_LEVEL {
        return lz4::block::compress(data, None, false);
    }
    let bound = lz4::block::compress_bound(data.len())?; // also refuses inputs over i32::MAX
    let mut out = vec![0u8; bound];
    let written = LZ4_HC_STATE.with(|cell| {
        let mut fresh = Vec::new();
        let mut kept = cell.try_borrow_mut();
        let state: &mut Vec<u64> = match kept.as_mut() {
            Ok(state) => state,
            Err(_) => &mut fresh, // re-entered (never in practice): a fresh state
        };
        // SAFETY: LZ4_sizeofStateHC has no preconditions.
        let size = unsafe { LZ4_sizeofStateHC() } as usize;
        if state.len() * 8 < size {
            *state = vec![0u64; size.div_ceil(8)];
        }
        // SAFETY: the FFI boundary. `state` holds at least LZ4_sizeofStateHC() bytes, 8-aligned (the alignment of
        // LZ4_streamHC_t), and the call initialises it before use; `src` is a live slice of `data.len()` bytes
        // (at most i32::MAX, checked by compress_bound); `dst` has `bound` writable bytes and the call writes at
        // most `bound` (its capacity argument), returning how many, or 0 on failure.
        unsafe {
            LZ4_compress_HC_extStateHC(
                state.as_mut_ptr().cast(),
                data.as_ptr().cast(),
                out.as_mut_ptr().cast(),
                data.len() as c_int,
                bound as c_int,
                level,
            )
        }
    });
    if written <= 0 || written as usize > bound {
        return Err(std::io::Error::other("lz4 compression failed"));
    }
    out.truncate(written as usize);
    Ok(out)
}

extern "C" {
    fn LZ4_sizeofStateHC() -> c_int;
    fn LZ4_compress_HC_extStateHC(
        state: *mut c_void,
        src: *const c_char,
        dst: *mut c_char,
        src_size: c_int,
        max_dst_size: c_int,
        level: c_int,
    ) -> c_int;
}

/// A zstd frame as `ZstdCompression.wrapForOutput` writes one: a streaming compression (no checksum) fed through a 16 KiB `BufferedOutputStream`, flushed and then ended when the stream closes.
#[pyfunction]
pub(crate) fn zstd_stream<'py>(py: Python<'py>, data: &Bound<'py, PyAny>, level: i32) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    let out = zstd_stream_bytes(view.as_slice(), level).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyBytes::new(py, &out))
}

/// The highest zstd level whose compression context a thread keeps between frames: about 15 MiB with its
/// window at level 9 (Kafka's default is 3, about 3.5 MiB); above it a context is freed after its frame.
const ZSTD_KEEP_LEVEL: i32 = 9;

/// `zstd_stream` without Python. Each thread keeps one compression context (up to `ZSTD_KEEP_LEVEL`): a fresh
/// one maps and clears 1-2 MiB of match tables for every frame. It is reset, parameters and all, before each
/// frame, so a frame is the same bytes as from a new context (the JVM differential tests compare them with
/// zstd-jni's).
pub fn zstd_stream_bytes(data: &[u8], level: i32) -> std::io::Result<Vec<u8>> {
    use zstd::zstd_safe::{CParameter, ResetDirective};
    let out = Vec::with_capacity(data.len() / 2 + 64);
    let zstd_error = |code: usize| std::io::Error::other(zstd::zstd_safe::get_error_name(code));
    ZSTD_CCTX.with(|cell| match cell.try_borrow_mut() {
        Ok(mut slot) => {
            let cctx = slot.get_or_insert_with(zstd::zstd_safe::CCtx::create);
            cctx.reset(ResetDirective::SessionAndParameters).map_err(zstd_error)?;
            cctx.set_parameter(CParameter::CompressionLevel(level)).map_err(zstd_error)?;
            let frame = zstd_write_frame(zstd::stream::Encoder::with_context(out, cctx), data);
            if level > ZSTD_KEEP_LEVEL {
                *slot = None; // its tables (up to 770 MiB at level 22) are not kept for the thread's lifetime
            }
            frame
        }
        Err(_) => zstd_write_frame(zstd::stream::Encoder::new(out, level)?, data), // re-entered: a fresh context
    })
}

/// One frame through `enc` (its level set), as `ZstdCompression.wrapForOutput` writes it.
fn zstd_write_frame(mut enc: zstd::stream::Encoder<'_, Vec<u8>>, data: &[u8]) -> std::io::Result<Vec<u8>> {
    enc.include_checksum(false)?;
    // libzstd's default content-size flag (on), as zstd-jni leaves it: a streamed frame's size is unknown when
    // its header is written, except for an empty input ended in one call (its header then says 0)
    for chunk in data.chunks(16 * 1024) {
        enc.write_all(chunk)?;
    }
    // closing the stream flushes it first (`BufferedOutputStream.close` -> `ZstdOutputStream.flush`): the data
    // ends in a block that is not the last, and the end of the frame is an empty last block. With no data at
    // all nothing is flushed, and the end is the frame's first call (libzstd then writes the content size, 0).
    if !data.is_empty() {
        enc.flush()?;
    }
    enc.finish()
}

extern "C" {
    fn kafkalog_snappy_max_compressed_length(n: usize) -> usize;
    fn kafkalog_snappy_raw_compress(input: *const u8, n: usize, out: *mut u8) -> usize;
}

/// One raw snappy block (`snappy::RawCompress`, as snappy-java's `Snappy.compress` of one xerial chunk).
#[pyfunction]
pub(crate) fn snappy_block<'py>(py: Python<'py>, data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    let view = ByteView::new(data)?;
    let out = snappy_block_bytes(view.as_slice()).map_err(PyValueError::new_err)?;
    Ok(PyBytes::new(py, &out))
}

/// `snappy_block` without Python.
pub fn snappy_block_bytes(data: &[u8]) -> Result<Vec<u8>, &'static str> {
    let data = for_c(data);
    // SAFETY: the FFI boundary. MaxCompressedLength has no preconditions; RawCompress reads exactly `n` bytes
    // of `input` (a live slice of that length) and writes at most MaxCompressedLength(n) bytes to `out`, which
    // is that long; it returns how many it wrote.
    let max = unsafe { kafkalog_snappy_max_compressed_length(data.len()) };
    let mut out = vec![0u8; max];
    let n = unsafe { kafkalog_snappy_raw_compress(data.as_ptr(), data.len(), out.as_mut_ptr()) };
    if n > max {
        return Err("snappy wrote past its bound");
    }
    out.truncate(n);
    Ok(out)
}

/// The versions of the compression libraries compiled in (lz4, zstd, snappy).
#[pyfunction]
pub(crate) fn codec_versions() -> (String, String, String) {
    let z = zstd::zstd_safe::version_number();
    let zstd = format!("{}.{}.{}", z / 10000, z / 100 % 100, z % 100);
    let l = lz4::version();
    let lz4 = format!("{}.{}.{}", l / 10000, l / 100 % 100, l % 100);
    (lz4, zstd, "1.1.9".to_string())
}

// ------------------------------------------------------------------------------------------- decompress
//
// The decompressors of `storage/codec/compression.py`, step for step: the same framings, the same checks in the
// same order, the same bound on the output (`limit`). They follow the core's contract: the decompressed bytes
// when the Python path would return exactly them, or `None` when it would raise -- the Python path then runs
// and gives the verdict (its `CompressionError`, byte position and reason), so errors are the same either way.
// Output never grows past `limit + 1` bytes, so a decompression bomb costs at most `limit` bytes here too.

/// Kafka's lz4 frame magic.
const LZ4_MAGIC: [u8; 4] = [0x04, 0x22, 0x4d, 0x18];
const XERIAL_MAGIC: [u8; 8] = [0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0];
const ZSTD_BLOCK_MAX: u64 = 128 * 1024;
/// Kafka's zstd reader (zstd-jni's stream): the largest window, and the one-pass exception to it (see
/// `_ZSTD_WINDOW_MAX` in `storage/codec/compression.py`).
const ZSTD_WINDOW_MAX: u64 = 1 << 27;
const ZSTD_ONE_PASS: u64 = 16 * 1024;
const ZSTD_IN_MAX: usize = 128 * 1024 + 3;

/// Decompress `data` (codec ids as Kafka's: 1 gzip, 2 snappy, 3 lz4, 4 zstd) into `out` (cleared first).
/// `None`: the Python path raises for these bytes.
pub fn decompress_into(codec: u8, data: &[u8], magic: u8, limit: usize, out: &mut Vec<u8>) -> Option<()> {
    out.clear();
    match codec {
        1 => gzip(data, limit, out),
        2 => snappy(data, limit, out),
        3 => lz4_frame(data, magic, limit, out),
        4 if magic >= 2 => zstd_frames(data, limit, out),
        _ => None,
    }
}

/// `decompress_into` for Python: `bytes`, or `None` for the Python path to decompress (and give its error).
#[pyfunction]
pub(crate) fn decompress<'py>(
    py: Python<'py>,
    codec: u8,
    data: &Bound<'py, PyAny>,
    magic: u8,
    limit: usize,
) -> PyResult<PyObject> {
    let view = ByteView::new(data)?;
    with_buffer(|out| match decompress_into(codec, view.as_slice(), magic, limit, out) {
        Some(()) => Ok(PyBytes::new(py, out).into_any().unbind()),
        None => Ok(py.None()),
    })
}

thread_local! {
    /// Per thread: the output buffer (reused between calls) and the zstd decompression context.
    static DECOMPRESSED: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
    static ZSTD_DCTX: std::cell::RefCell<Option<zstd::bulk::Decompressor<'static>>> =
        const { std::cell::RefCell::new(None) };
    /// Per thread: lz4's high-compression state (`lz4_block_bytes`).
    static LZ4_HC_STATE: std::cell::RefCell<Vec<u64>> = const { std::cell::RefCell::new(Vec::new()) };
    /// Per thread: the zstd compression context (`zstd_stream_bytes`).
    static ZSTD_CCTX: std::cell::RefCell<Option<zstd::zstd_safe::CCtx<'static>>> =
        const { std::cell::RefCell::new(None) };
}

/// Keep a reused buffer from pinning a huge allocation after one big payload.
pub(crate) fn shrink(out: &mut Vec<u8>) {
    if out.capacity() > 8 << 20 {
        *out = Vec::new();
    }
}

/// Run `f` on a reusable output buffer of this thread (the native decode paths decompress into it).
pub(crate) fn with_buffer<R>(f: impl FnOnce(&mut Vec<u8>) -> R) -> R {
    DECOMPRESSED.with(|cell| match cell.try_borrow_mut() {
        Ok(mut out) => {
            let r = f(&mut out);
            shrink(&mut out);
            r
        }
        Err(_) => f(&mut Vec::new()), // re-entered (never in practice): a fresh buffer
    })
}

/// Grow `out` so that it can take more output, never past `limit + 1` bytes in all.
fn grow(out: &mut Vec<u8>, limit: usize) -> bool {
    let cap = out.capacity();
    if cap > limit {
        return false;
    }
    let want = cap.max(64 * 1024).min(limit + 1 - cap);
    out.reserve_exact(want.max(1));
    true
}

/// `_gzip_decompress`: every gzip member (trailing bytes that are not a member are ignored).
fn gzip(d: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<()> {
    use flate2::{Decompress, FlushDecompress, Status};
    let n = d.len();
    let mut pos = 0;
    let mut first = true;
    if out.capacity() == 0 {
        // the ISIZE trailer of a single member is a good first guess (bounded by the limit)
        let hint = if n >= 4 { u32::from_le_bytes(d[n - 4..].try_into().ok()?) as usize } else { 0 };
        out.reserve_exact(hint.max(1024).min(limit.saturating_add(1)));
    }
    while pos < n {
        if n - pos < 2 || d[pos] != 0x1f || d[pos + 1] != 0x8b {
            if first {
                return None;
            }
            break;
        }
        first = false;
        let mut z = Decompress::new_gzip(15);
        loop {
            if out.len() == out.capacity() && !grow(out, limit) {
                return None;
            }
            let in_before = z.total_in();
            let out_before = out.len();
            let at = pos + z.total_in() as usize;
            let status = z.decompress_vec(d.get(at..)?, out, FlushDecompress::None).ok()?;
            if out.len() > limit {
                return None;
            }
            if status == Status::StreamEnd {
                break;
            }
            let consumed_all = pos + z.total_in() as usize >= n;
            if consumed_all && out.len() < out.capacity() {
                return None; // truncated deflate stream
            }
            if z.total_in() == in_before && out.len() == out_before && out.len() < out.capacity() {
                return None; // no progress
            }
        }
        pos += z.total_in() as usize;
    }
    if out.len() > limit {
        return None;
    }
    Some(())
}

/// `_snappy_raw`: one raw snappy block, appended.
fn snappy_raw(block: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<()> {
    let n = snap::raw::decompress_len(block).ok()?;
    if n.checked_add(out.len())? > limit || n > 32 * block.len() + 64 {
        return None;
    }
    let start = out.len();
    out.resize(start + n, 0);
    let got = snap::raw::Decoder::new().decompress(block, &mut out[start..]).ok()?;
    if got != n {
        return None;
    }
    Some(())
}

/// `_snappy_decompress`: a xerial stream (`SnappyInputStream`), else one raw block.
fn snappy(d: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<()> {
    if d.is_empty() {
        return None;
    }
    if d.len() < 16 || d[..8] != XERIAL_MAGIC {
        return snappy_raw(d, limit, out);
    }
    if be_i32(d, 8)? < 1 {
        return None;
    }
    let end = d.len();
    let mut pos = 16;
    while end - pos >= 4 {
        let n = be_i32(d, pos)?;
        if d[pos..pos + 4] == XERIAL_MAGIC[..4] {
            if end - pos < 16 || d[pos..pos + 8] != XERIAL_MAGIC {
                return None;
            }
            pos += 16;
            continue;
        }
        pos += 4;
        if n < 0 || n as usize > end - pos {
            return None;
        }
        snappy_raw(&d[pos..pos + n as usize], limit, out)?;
        pos += n as usize;
    }
    Some(())
}

/// `_lz4_decompress`: Kafka's lz4 frame (`Lz4BlockInputStream`), with the magic-0 header checksum quirk
/// (KAFKA-3160: not checked for magic 0), independent blocks, optional block checksums, and the content
/// checksum read but not verified.
fn lz4_frame(d: &[u8], magic: u8, limit: usize, out: &mut Vec<u8>) -> Option<()> {
    let end = d.len();
    if end < 7 || d[..4] != LZ4_MAGIC {
        return None;
    }
    let (flg, bd) = (d[4], d[5]);
    if flg & 0x03 != 0 || (flg >> 6) != 1 || flg & 0x20 == 0 {
        return None;
    }
    let block_max: usize = match (bd >> 4) & 7 {
        4 => 64 * 1024,
        5 => 256 * 1024,
        6 => 1024 * 1024,
        7 => 4 * 1024 * 1024,
        _ => return None,
    };
    if bd & 0x8f != 0 {
        return None;
    }
    let mut pos = 6;
    if flg & 0x08 != 0 {
        pos += 8;
    }
    if pos >= end {
        return None;
    }
    if magic != 0 && d[pos] as u32 != (xxh32(&d[4..pos]) >> 8) & 0xff {
        return None;
    }
    pos += 1;
    let block_checksum = flg & 0x10 != 0;
    loop {
        let word = le_u32(d, pos)?;
        pos += 4;
        let raw = word & 0x8000_0000 != 0;
        let size = (word & 0x7fff_ffff) as usize;
        if size == 0 {
            break;
        }
        if size > block_max || size > end - pos {
            return None;
        }
        let block = &d[pos..pos + size];
        pos += size;
        let start = out.len();
        if raw {
            if start + size > limit {
                return None;
            }
            out.extend_from_slice(block);
        } else {
            let cap = block_max.min(255 * size + 64);
            // the Python path decompresses the block whole, then checks the limit: a block that decodes but
            // overruns the limit is its error too, so the room here only needs to hold what is legal
            let room = cap.min(limit.saturating_sub(start).saturating_add(1));
            match lz4_block_into(block, room, out) {
                Some(k) if start + k <= limit => {}
                _ => return None, // corrupt, or past the limit (or not fitting the room below `cap`: too big)
            }
        }
        if block_checksum {
            if le_u32(d, pos)? != xxh32(block) {
                return None;
            }
            pos += 4;
        }
    }
    if flg & 0x04 != 0 && end - pos < 4 {
        return None;
    }
    Some(())
}

/// One lz4 block decompressed onto the end of `out`, into at most `room` bytes of its spare capacity (not zeroed
/// first: `lz4::block::decompress_to_buffer` needs an initialised slice, and zeroing a block's 64 KiB room for
/// every batch of ~16 KiB was a tenth of an lz4 read). The decompressed size, or `None` when the block is corrupt
/// or does not fit `room` (`out` unchanged then).
fn lz4_block_into(block: &[u8], room: usize, out: &mut Vec<u8>) -> Option<usize> {
    let (src_len, dst_len) = (c_int::try_from(block.len()).ok()?, c_int::try_from(room).ok()?);
    out.reserve(room);
    let spare = out.spare_capacity_mut();
    if spare.len() < room {
        return None;
    }
    // SAFETY: the FFI boundary. `block` is a live slice of `src_len` bytes; `spare` has at least `room` (=
    // `dst_len`) writable bytes, and LZ4_decompress_safe never writes past its capacity argument nor reads past
    // its input size (it returns a negative number for a malformed block), returning the bytes it wrote.
    let n = unsafe {
        lz4::liblz4::LZ4_decompress_safe(block.as_ptr().cast(), spare.as_mut_ptr().cast(), src_len, dst_len)
    };
    let n = usize::try_from(n).ok().filter(|&n| n <= room)?;
    // SAFETY: the call above initialised the first `n` bytes of the spare capacity (n <= room <= spare.len()).
    unsafe { out.set_len(out.len() + n) };
    Some(n)
}

/// `_zstd_decompress`: every zstd frame (skippable frames skipped), each bounded by its block count.
fn zstd_frames(d: &[u8], limit: usize, out: &mut Vec<u8>) -> Option<()> {
    let n = d.len();
    if n == 0 {
        return None;
    }
    let mut pos = 0;
    while pos < n {
        let magic = le_u32(d, pos)?;
        if magic & 0xffff_fff0 == 0x184d_2a50 {
            let size = le_u32(d, pos + 4)? as usize;
            if size > n - pos - 8 {
                return None;
            }
            pos += 8 + size;
            continue;
        }
        if magic != 0xfd2f_b528 || n - pos < 5 {
            return None;
        }
        let start = pos;
        let fhd = d[pos + 4];
        let single = (fhd >> 5) & 1 == 1;
        let checksum = (fhd >> 2) & 1 == 1;
        let dict_id_size = [0usize, 1, 2, 4][(fhd & 3) as usize];
        let fcs_size = [if single { 1usize } else { 0 }, 2, 4, 8][(fhd >> 6) as usize];
        let mut p = pos + 5 + usize::from(!single) + dict_id_size;
        if p + fcs_size > n {
            return None;
        }
        let mut content_size: Option<u64> = None;
        if fcs_size > 0 {
            let mut v = 0u64;
            for (i, b) in d[p..p + fcs_size].iter().enumerate() {
                v |= (*b as u64) << (8 * i);
            }
            content_size = Some(v + if fcs_size == 2 { 256 } else { 0 });
        }
        // the window (RFC 8878 §3.1.1.1.2): a single-segment frame's is its content
        let window = if single {
            content_size.unwrap_or(0)
        } else {
            let wd = d[pos + 5];
            let base = 1u64 << (10 + (wd >> 3));
            base + (base >> 3) * u64::from(wd & 7)
        };
        p += fcs_size;
        let mut blocks = 0u64;
        loop {
            if n - p < 3 {
                return None;
            }
            let bh = d[p] as u32 | (d[p + 1] as u32) << 8 | (d[p + 2] as u32) << 16;
            let btype = (bh >> 1) & 3;
            if btype == 3 {
                return None;
            }
            p += 3 + if btype == 1 { 1 } else { (bh >> 3) as usize };
            if p > n {
                return None;
            }
            blocks += 1;
            if bh & 1 == 1 {
                break;
            }
        }
        if checksum {
            p += 4;
            if p > n {
                return None;
            }
        }
        pos = p;
        // Kafka's zstd reader refuses a window above 2^27 bytes unless libzstd can decode the frame in one pass
        // (`_ZSTD_WINDOW_MAX` in compression.py); a one-shot decompression here would not check it
        let one_pass = content_size.is_some_and(|cs| cs <= ZSTD_ONE_PASS) && p - start <= ZSTD_IN_MAX;
        if window > ZSTD_WINDOW_MAX && !one_pass {
            return None;
        }
        let room = (limit - out.len()) as u64;
        if let Some(cs) = content_size {
            if cs > room || cs > blocks * ZSTD_BLOCK_MAX {
                return None;
            }
            if cs == 0 {
                continue; // python-zstandard returns b"" for a frame that declares 0 bytes
            }
        }
        let bound = content_size.unwrap_or(blocks * ZSTD_BLOCK_MAX).min(room) as usize;
        zstd_frame(&d[start..p], bound, out)?;
        if out.len() > limit {
            return None;
        }
    }
    Some(())
}

/// Decompress one zstd frame, appending at most `bound` bytes, with this thread's reused context.
fn zstd_frame(frame: &[u8], bound: usize, out: &mut Vec<u8>) -> Option<()> {
    ZSTD_DCTX.with_borrow_mut(|slot| {
        if slot.is_none() {
            *slot = Some(zstd::bulk::Decompressor::new().ok()?);
        }
        let dctx = slot.as_mut()?;
        if out.is_empty() {
            out.reserve_exact(bound);
            dctx.decompress_to_buffer(frame, out).ok()?;
        } else {
            let mut tmp = Vec::with_capacity(bound);
            dctx.decompress_to_buffer(frame, &mut tmp).ok()?;
            out.extend_from_slice(&tmp);
        }
        Some(())
    })
}

/// xxHash32 (seed 0): the lz4 frame's header and block checksums.
pub fn xxh32(data: &[u8]) -> u32 {
    const P1: u32 = 2654435761;
    const P2: u32 = 2246822519;
    const P3: u32 = 3266489917;
    const P4: u32 = 668265263;
    const P5: u32 = 374761393;
    let round = |v: u32, lane: u32| v.wrapping_add(lane.wrapping_mul(P2)).rotate_left(13).wrapping_mul(P1);
    let n = data.len();
    let mut i = 0;
    let mut h: u32;
    if n >= 16 {
        let (mut v1, mut v2, mut v3, mut v4) = (P1.wrapping_add(P2), P2, 0u32, 0u32.wrapping_sub(P1));
        while i + 16 <= n {
            let lane = |k: usize| u32::from_le_bytes(data[i + k..i + k + 4].try_into().unwrap_or_default());
            v1 = round(v1, lane(0));
            v2 = round(v2, lane(4));
            v3 = round(v3, lane(8));
            v4 = round(v4, lane(12));
            i += 16;
        }
        h = v1
            .rotate_left(1)
            .wrapping_add(v2.rotate_left(7))
            .wrapping_add(v3.rotate_left(12))
            .wrapping_add(v4.rotate_left(18));
    } else {
        h = P5;
    }
    h = h.wrapping_add(n as u32);
    while i + 4 <= n {
        let k = u32::from_le_bytes(data[i..i + 4].try_into().unwrap_or_default());
        h = h.wrapping_add(k.wrapping_mul(P3)).rotate_left(17).wrapping_mul(P4);
        i += 4;
    }
    while i < n {
        h = h.wrapping_add((data[i] as u32).wrapping_mul(P5)).rotate_left(11).wrapping_mul(P1);
        i += 1;
    }
    h ^= h >> 15;
    h = h.wrapping_mul(P2);
    h ^= h >> 13;
    h = h.wrapping_mul(P3);
    h ^= h >> 16;
    h
}
