//! The `softswitch` command line.
fn main() {}
