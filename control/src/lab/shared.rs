//! What the labs share: the priority of their traffic, forwarding namespaces, detaching the
//! data planes they attach on every exit, and Jain's fairness index.

use crate::{
    host::{attach, pins::PinDir},
    netns::{check, Namespace},
};

/// The priority the labs' traffic uses (DSCP 26).
pub const PRIORITY: usize = 3;

/// Makes `ns` forward IPv4 between its interfaces.
pub fn enable_forwarding(ns: &Namespace) -> anyhow::Result<()> {
    let output = ns
        .command("sysctl")
        .args(["-qw", "net.ipv4.ip_forward=1"])
        .output()?;
    check("sysctl ip_forward", output).map(drop)
}

/// Detaches an interface (by its pin directory, so from any namespace) on drop, so a lab
/// leaves no pins behind on any exit.
pub struct Detach(pub PinDir);

impl Drop for Detach {
    fn drop(&mut self) {
        if let Err(e) = attach::detach_dir(&self.0) {
            eprintln!("warning: detaching {}: {e:#}", self.0.interface());
        }
    }
}

/// Jain's fairness index of `xs`: 1 when all are equal, 1/n when one has everything.
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if squares == 0.0 {
        return 0.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_bounds() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert_eq!(jain_index(&[1.0, 0.0]), 0.5);
        assert_eq!(jain_index(&[0.0, 0.0]), 0.0);
    }
}
