//! `lossless check FABRIC`: the fabric's configuration checked against the misconfigurations
//! that break lossless fabrics ([`::check`], the rules). [`read`] turns what users already
//! write (a generated fabric's spec, a topology.json or p4app.json with its switches' runtime
//! JSON, one runtime JSON, the agents' or hosts' configs) into the fabric the rules read,
//! through the parsers `lossless net` and `lossless agent` use; [`cli`] runs the rules (and,
//! with `--failures 1`, the cycle rule after each single link failure with the control
//! plane's reroute), prints them as a table or JSON, adds `--suggest`'s thresholds and writes
//! `--fix`'s corrected copies; [`live`] reads a running network's fabric (`--net NAME`), its
//! entries over P4Runtime. docs/check.md is the reference.

pub mod cli;
pub mod live;
pub mod read;
