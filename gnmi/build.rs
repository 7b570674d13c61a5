//! Generates the Rust types, tonic client and tonic server of gNMI from its vendored `.proto`
//! text (`proto/README.md`), compiled by protox: no protoc, Python or network at build time.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR")?).join("proto");
    // Laid out under their import paths, so gnmi.proto's
    // `import "github.com/openconfig/gnmi/proto/gnmi_ext/gnmi_ext.proto"` resolves as it is.
    let gnmi = proto.join("github.com/openconfig/gnmi/proto/gnmi/gnmi.proto");
    let gnmi_ext = proto.join("github.com/openconfig/gnmi/proto/gnmi_ext/gnmi_ext.proto");
    println!("cargo:rerun-if-changed={}", gnmi.display());
    println!("cargo:rerun-if-changed={}", gnmi_ext.display());
    // google/protobuf's own files come with protox.
    let fds = protox::compile([&gnmi], [&proto])?;
    tonic_prost_build::configure()
        .build_client(true)
        .build_server(true)
        .compile_fds_with_config(fds, prost_build::Config::new())?;
    Ok(())
}
