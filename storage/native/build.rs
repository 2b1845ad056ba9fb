//! Compiles the vendored C++ snappy 1.1.9 (see vendor/snappy/README.md) into the core.
const SNAPPY: &str = "vendor/snappy";

fn main() {
    let sources = ["snappy.cc", "snappy-sinksource.cc", "snappy-stubs-internal.cc", "shim.cc"];
    let headers = ["snappy.h", "snappy-internal.h", "snappy-stubs-internal.h"];
    let files: Vec<String> = sources.iter().map(|f| format!("{SNAPPY}/{f}")).collect();
    for f in sources.iter().chain(headers.iter()) {
        println!("cargo:rerun-if-changed={SNAPPY}/{f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++11")
        .include(SNAPPY)
        .define("HAVE_BUILTIN_EXPECT", "1")
        .define("HAVE_BUILTIN_CTZ", "1")
        .define("NDEBUG", None)
        .opt_level(2)
        .warnings(false)
        .files(files)
        .compile("kafkalog_snappy");
}
