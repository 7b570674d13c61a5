//! Builds the eBPF programs (nightly, bpf-linker) so the loader can embed them.

fn main() -> anyhow::Result<()> {
    let root_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../dataplane-ebpf");
    // aya-build reruns the build when the eBPF crate changes; the crates it takes its formats
    // and map records from change it too.
    for shared in ["wire", "dataplane-common"] {
        for part in ["src", "Cargo.toml"] {
            println!(
                "cargo:rerun-if-changed={}/../{shared}/{part}",
                env!("CARGO_MANIFEST_DIR")
            );
        }
    }
    let package = aya_build::Package {
        name: "dataplane-ebpf",
        root_dir,
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::default())
}
