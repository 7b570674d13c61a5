//! The generators, one per shape, each making the fabric its spec describes: switch and host
//! names, addresses, MACs and port numbers are each generator's, written in its module.

mod fat_tree;
pub mod leaf_spine;
mod rail;

use wire::ethernet::Address;

use crate::{fabric::Fabric, spec::Shape, spec::Spec};

/// Builds the fabric `spec` describes (a spec is within its limits once read, so this cannot
/// fail).
pub fn build(spec: &Spec) -> Fabric {
    match spec.shape {
        Shape::LeafSpine(shape) => leaf_spine::build(spec, shape),
        Shape::FatTree { k } => fat_tree::build(spec, k),
        Shape::Rail {
            groups,
            servers,
            rails,
        } => rail::build(spec, groups, servers, rails),
    }
}

/// The port MACs of fat-trees and rail-optimised fabrics: locally administered, then the
/// switch's tier, two bytes that name it within the tier, and the port:
/// `02:TT:AA:BB:PP:PP`.
fn port_mac(tier: u8, a: u16, b: u16, port: u16) -> Address {
    let [p1, p2] = port.to_be_bytes();
    Address([0x02, tier, a as u8, b as u8, p1, p2])
}
