//! Generates the `zonemesh.v1` types, clients and servers, and the encoded file descriptor set
//! that the aggregator serves through gRPC reflection.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // A vendored protoc keeps the build free of system packages; PROTOC still wins when set.
    if std::env::var_os("PROTOC").is_none() {
        let protoc = protoc_bin_vendored::protoc_bin_path()?;
        set_protoc(protoc);
    }
    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    let protos = [
        "zonemesh/v1/common.proto",
        "zonemesh/v1/ingest.proto",
        "zonemesh/v1/topology.proto",
    ];
    for proto in protos {
        println!("cargo:rerun-if-changed={proto}");
    }
    tonic_prost_build::configure()
        // The Ingest RPC is called `Connect`, which would clash with the generated
        // `IngestClient::connect` constructor; clients are built with `new(channel)` instead.
        .build_transport(false)
        // Buffers sized for zonemesh's streams (src/codec.rs), not tonic's 8 KiB each.
        .codec_path("crate::codec::LeanCodec")
        .file_descriptor_set_path(out_dir.join("zonemesh_descriptor.bin"))
        .compile_protos(&protos, &["."])?;
    Ok(())
}

#[allow(unsafe_code)]
fn set_protoc(path: PathBuf) {
    // Edition 2024 marks set_var unsafe because other threads may read the environment; a build
    // script has no other threads.
    unsafe { std::env::set_var("PROTOC", path) };
}
