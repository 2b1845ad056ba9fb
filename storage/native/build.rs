//! Compiles the vendored C++ snappy 1.1.9 (see snappy/README.md) into the core.
fn main() {
    let files =
        ["snappy/snappy.cc", "snappy/snappy-sinksource.cc", "snappy/snappy-stubs-internal.cc", "snappy/shim.cc"];
    for f in
        files.iter().chain(["snappy/snappy.h", "snappy/snappy-internal.h", "snappy/snappy-stubs-internal.h"].iter())
    {
        println!("cargo:rerun-if-changed={f}");
    }
    cc::Build::new()
        .cpp(true)
        .std("c++11")
        .include("snappy")
        .define("HAVE_BUILTIN_EXPECT", "1")
        .define("HAVE_BUILTIN_CTZ", "1")
        .define("NDEBUG", None)
        .opt_level(2)
        .warnings(false)
        .files(files)
        .compile("kafkalog_snappy");
}
