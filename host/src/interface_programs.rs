//! The eBPF programs attached to an interface now, whoever attached them: its XDP program
//! (from rtnetlink, as `ip -d link` shows it) and its TCX programs (BPF_PROG_QUERY), in the
//! calling thread's network namespace.

use std::io;

use aya::programs::{loaded_links, loaded_programs, tc::TcAttachType, SchedClassifier};
use netlink_packet_route::{
    link::{LinkAttribute, LinkMessage, LinkXdp, XdpAttached},
    RouteNetlinkMessage,
};

use sysutil::netlink;

/// A program attached to an interface.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttachedProgram {
    /// Its kernel id.
    pub id: u32,
    /// Its name (empty if the kernel does not say).
    pub name: String,
    /// The bpf_link that holds it, if one does (else it was attached through netlink).
    pub link_id: Option<u32>,
}

impl AttachedProgram {
    fn by_id(id: u32) -> Self {
        let name = loaded_programs()
            .filter_map(Result::ok)
            .find(|p| p.id() == id)
            .and_then(|p| p.name_as_str().map(str::to_owned))
            .unwrap_or_default();
        let link_id = loaded_links()
            .filter_map(Result::ok)
            .find(|l| l.program_id() == id)
            .map(|l| l.id());
        AttachedProgram { id, name, link_id }
    }
}

/// The XDP program of the interface `ifindex` and its mode (`native`, `skb`, `hw` or
/// `multi`), or `None` if it has none.
pub fn xdp_program(ifindex: u32) -> io::Result<Option<(AttachedProgram, &'static str)>> {
    let mut request = LinkMessage::default();
    request.header.index = ifindex;
    let link = netlink::ask(
        RouteNetlinkMessage::GetLink(request),
        false,
        |message| match message {
            RouteNetlinkMessage::NewLink(link) => Some(link),
            _ => None,
        },
    )?
    .ok_or_else(|| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            "no link in the answer to RTM_GETLINK",
        )
    })?;
    let xdp = link.attributes.iter().find_map(|a| match a {
        LinkAttribute::Xdp(xdp) => Some(xdp),
        _ => None,
    });
    let (mut id, mut mode) = (None, None);
    for attribute in xdp.into_iter().flatten() {
        match attribute {
            LinkXdp::ProgId(prog) => id = Some(*prog),
            LinkXdp::Attached(attached) => {
                mode = match attached {
                    XdpAttached::Driver => Some("native"),
                    XdpAttached::SocketBuffer => Some("skb"),
                    XdpAttached::Hardware => Some("hw"),
                    XdpAttached::Multiple => Some("multi"),
                    _ => None,
                }
            }
            // With programs in several modes there is no ProgId; any of them will do.
            LinkXdp::DrvProgId(prog) | LinkXdp::SkbProgId(prog) => {
                id = id.or(Some(*prog));
            }
            _ => {}
        }
    }
    Ok(id
        .filter(|id| *id != 0)
        .zip(mode)
        .map(|(id, mode)| (AttachedProgram::by_id(id), mode)))
}

/// The ids of the TCX programs (ingress and egress) of `interface`.
pub fn tcx_program_ids(interface: &str) -> Vec<u32> {
    [TcAttachType::Ingress, TcAttachType::Egress]
        .into_iter()
        .filter_map(|direction| SchedClassifier::query_tcx(interface, direction).ok())
        .flat_map(|(_, programs)| programs.into_iter().map(|p| p.id()))
        .collect()
}
