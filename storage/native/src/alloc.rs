//! The core's allocator: mimalloc (cargo feature `mimalloc`, on by default; off in the cargo-fuzz build, so that
//! AddressSanitizer and libFuzzer's `-malloc_limit_mb` see every allocation).
//!
//! mimalloc reuses the memory of a finished chunk's buffers (handed to Arrow, freed by pyarrow) for the next chunk,
//! where the system allocator returns it to the kernel and faults zeroed pages in again. When mimalloc purges
//! memory it has held unused for its purge delay, it decommits it (`MADV_DONTNEED`) by default: the next
//! decode after other work (a benchmark's interleaved peers, a Spark task's JVM hand-off) faults every page in
//! again, about a tenth of `to_arrow`'s time. [`configure`] makes a purge a reset instead (`MADV_FREE`, as
//! jemalloc's muzzy pages): the kernel still takes the pages back whenever it needs memory, and until then a
//! reuse costs no fault. `MIMALLOC_PURGE_DECOMMITS` in the environment, when set, wins.

#[cfg(feature = "mimalloc")]
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[cfg(feature = "mimalloc")]
mod ffi {
    use std::os::raw::{c_int, c_long};

    /// `mi_option_purge_decommits` in mimalloc.h (the same index in mimalloc 2 and 3).
    pub const OPTION_PURGE_DECOMMITS: c_int = 5;

    extern "C" {
        pub fn mi_option_set(option: c_int, value: c_long);
        pub fn mi_option_get(option: c_int) -> c_long;
    }
}

/// Called once, when the module is loaded.
pub fn configure() {
    #[cfg(feature = "mimalloc")]
    if std::env::var_os("MIMALLOC_PURGE_DECOMMITS").is_none() {
        // SAFETY: mimalloc's documented option setter, with an option index of its enum and a valid value; it
        // takes effect at the next purge and may be called at any time from any thread.
        unsafe { ffi::mi_option_set(ffi::OPTION_PURGE_DECOMMITS, 0) };
    }
}

/// The core's allocator and whether its purges decommit memory (`_native.allocator()`, held by a test).
#[pyo3::pyfunction]
pub fn allocator() -> (&'static str, bool) {
    describe()
}

/// The allocator and its purge mode: `("mimalloc", decommits)` or
/// `("system", false)`.
pub fn describe() -> (&'static str, bool) {
    #[cfg(feature = "mimalloc")]
    {
        // SAFETY: mimalloc's documented option getter, with an option index of its enum.
        let decommits = unsafe { ffi::mi_option_get(ffi::OPTION_PURGE_DECOMMITS) } != 0;
        ("mimalloc", decommits)
    }
    #[cfg(not(feature = "mimalloc"))]
    ("system", false)
}
