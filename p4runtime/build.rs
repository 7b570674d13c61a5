//! Generates the Rust types, tonic clients and tonic servers of the P4Runtime definitions and of
//! softswitch's Queues service. Needs neither network, Python nor protoc: the P4Runtime
//! definitions come from a committed FileDescriptorSet (`proto/p4runtime.fds`, see
//! `proto/README.md`), the Queues service from its `.proto` text compiled by protox.

use std::path::PathBuf;

use prost::Message as _;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    let fds_path = proto.join("p4runtime.fds");
    let queues = proto.join("lossless/softswitch/v1/queues.proto");
    println!("cargo:rerun-if-changed={}", fds_path.display());
    println!("cargo:rerun-if-changed={}", queues.display());

    let mut fds = prost_types::FileDescriptorSet::decode(std::fs::read(&fds_path)?.as_slice())?;
    let ours = protox::compile([&queues], [&proto])?;
    fds.file.extend(ours.file);

    // The whole set, for text and JSON formats through prost-reflect at run time. Code is
    // generated for all of it; google.protobuf's types map to prost_types as usual.
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out.join("descriptors.bin"), fds.encode_to_vec())?;

    let mut config = prost_build::Config::new();
    // Type URLs as the official clients write them (type.googleapis.com/p4.v1.Error).
    config.enable_type_names();
    config.type_name_domain(["."], "type.googleapis.com");
    // Maps as BTreeMap: deterministic encodings and text (P4Info's type_info).
    config.btree_map(["."]);
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds_with_config(fds, config)?;
    Ok(())
}
