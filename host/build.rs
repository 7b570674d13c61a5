//! Builds the eBPF programs (nightly, bpf-linker) so the loader can embed them.

fn main() -> anyhow::Result<()> {
    let root_dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../dataplane-ebpf");
    let package = aya_build::Package {
        name: "dataplane-ebpf",
        root_dir,
        ..Default::default()
    };
    aya_build::build_ebpf([package], aya_build::Toolchain::default())
}
