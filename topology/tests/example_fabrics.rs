//! The example fabrics under dataplane-p4 (`topologies/leaf-spine`, `misconfigured/*`) are what
//! their `make.py` writes: an edit of a generator or of the shared `lossless_runtime.py` that
//! is not followed by a regeneration fails here.

#[test]
fn the_committed_fabrics_are_what_their_generators_write() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../dataplane-p4");
    testkit::assert_fabrics_match_generators(
        "the_committed_fabrics_are_what_their_generators_write",
        &root,
    );
}
