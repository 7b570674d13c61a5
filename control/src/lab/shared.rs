//! What the labs share: the priority of their traffic, forwarding namespaces and detaching
//! the data planes they attach on every exit.

use crate::{
    host::attach,
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

/// Detaches an interface on drop, so a lab leaves no pins behind on any exit.
pub struct Detach<'a>(pub &'a str);

impl Drop for Detach<'_> {
    fn drop(&mut self) {
        if let Err(e) = attach::detach(self.0) {
            eprintln!("warning: detaching {}: {e:#}", self.0);
        }
    }
}
