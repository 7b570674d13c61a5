//! The eBPF programs attached to an interface now, whoever attached them: its XDP program
//! (from rtnetlink, as `ip -d link` shows it) and its TCX programs (BPF_PROG_QUERY), in the
//! calling thread's network namespace.

use std::io;

use aya::programs::{loaded_links, loaded_programs, tc::TcAttachType, SchedClassifier};
use netlink_packet_core::{NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_REQUEST};
use netlink_packet_route::{
    link::{LinkAttribute, LinkMessage, LinkXdp, XdpAttached},
    RouteNetlinkMessage,
};
use netlink_sys::{protocols::NETLINK_ROUTE, Socket, SocketAddr};

/// Largest RTM_NEWLINK answer read: one link's attributes (iproute2 reads 32 KiB too).
const ANSWER_BYTES: usize = 32 * 1024;

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
    let mut packet = NetlinkMessage::new(
        NetlinkHeader::default(),
        NetlinkPayload::from(RouteNetlinkMessage::GetLink(request)),
    );
    packet.header.flags = NLM_F_REQUEST;
    packet.header.sequence_number = 1;
    packet.finalize();
    let mut bytes = vec![0; packet.buffer_len()];
    packet.serialize(&mut bytes);

    let mut socket = Socket::new(NETLINK_ROUTE)?;
    socket.bind_auto()?;
    socket.connect(&SocketAddr::new(0, 0))?;
    socket.send(&bytes, 0)?;
    let mut answer = vec![0; ANSWER_BYTES];
    let size = socket.recv(&mut &mut answer[..], 0)?;
    let message = NetlinkMessage::<RouteNetlinkMessage>::deserialize(&answer[..size])
        .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
    let link = match message.payload {
        NetlinkPayload::InnerMessage(RouteNetlinkMessage::NewLink(link)) => link,
        NetlinkPayload::Error(error) => return Err(error.to_io()),
        other => {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("unexpected answer to RTM_GETLINK: {other:?}"),
            ))
        }
    };
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
