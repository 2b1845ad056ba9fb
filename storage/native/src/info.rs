//! What the build says about itself.

use pyo3::prelude::*;

/// The build's self-description for `kafkalog --version`.
#[pyfunction]
pub(crate) fn build_info() -> String {
    format!("kafkalog-native {} (Rust, PyO3 {})", env!("CARGO_PKG_VERSION"), "0.25")
}
