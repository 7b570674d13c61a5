//! Steering received frames to an AF_XDP socket: an XSKMAP holding the socket at key 0 and the
//! XDP program `bpf_redirect_map(&xsks, ctx->rx_queue_index, XDP_PASS)` — frames of queue 0 go
//! to the socket, others (there are none: [`receive_queues`] is checked first) to the kernel's
//! stack — attached through a BPF link, native mode first, generic (skb) mode else.
//!
//! The program is six instructions, loaded from this array with bpf(2) as libbpf's own `xsk.c`
//! loaded its default program: no eBPF toolchain is needed to build softswitch or the sender,
//! and nothing is pinned: closing the link (dropping [`Steering`], or the process ending)
//! detaches it. aya (the project's eBPF loader) loads programs only from ELF objects, so using it
//! here would put the nightly eBPF build into softswitch's build for these six instructions.

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// bpf(2) commands (enum bpf_cmd).
const BPF_MAP_CREATE: libc::c_long = 0;
const BPF_MAP_UPDATE_ELEM: libc::c_long = 2;
const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_LINK_CREATE: libc::c_long = 28;
/// enum bpf_map_type, enum bpf_prog_type, enum bpf_attach_type.
const BPF_MAP_TYPE_XSKMAP: u32 = 17;
const BPF_PROG_TYPE_XDP: u32 = 6;
const BPF_XDP: u32 = 37;
/// XDP attach flags (linux/if_link.h).
const XDP_FLAGS_SKB_MODE: u32 = 1 << 1;
const XDP_FLAGS_DRV_MODE: u32 = 1 << 2;
/// The helper `bpf_redirect_map` and the verdict it returns when the key has no socket.
const BPF_FUNC_REDIRECT_MAP: i32 = 51;
const XDP_PASS: i32 = 2;
/// `offsetof(struct xdp_md, rx_queue_index)`.
const XDP_MD_RX_QUEUE_INDEX: i16 = 16;
/// `src_reg` of a 64-bit immediate load that the kernel replaces a map's fd with its address.
const BPF_PSEUDO_MAP_FD: u8 = 1;

/// One eBPF instruction (struct bpf_insn): opcode, dst_reg in the low and src_reg in the high
/// nibble, offset, immediate.
#[repr(C)]
#[derive(Clone, Copy)]
struct Insn {
    code: u8,
    regs: u8,
    off: i16,
    imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: dst | (src << 4),
        off,
        imm,
    }
}

/// The program, with the XSKMAP's fd in its 64-bit immediate load.
fn program(map_fd: RawFd) -> [Insn; 6] {
    [
        // r2 = ctx->rx_queue_index (BPF_LDX | BPF_MEM | BPF_W)
        insn(0x61, 2, 1, XDP_MD_RX_QUEUE_INDEX, 0),
        // r1 = &xsks (BPF_LD | BPF_IMM | BPF_DW, two instructions)
        insn(0x18, 1, BPF_PSEUDO_MAP_FD, 0, map_fd),
        insn(0, 0, 0, 0, 0),
        // r3 = XDP_PASS (BPF_ALU64 | BPF_MOV | BPF_K)
        insn(0xb7, 3, 0, 0, XDP_PASS),
        // r0 = bpf_redirect_map(r1, r2, r3) (BPF_JMP | BPF_CALL)
        insn(0x85, 0, 0, 0, BPF_FUNC_REDIRECT_MAP),
        // return r0 (BPF_JMP | BPF_EXIT)
        insn(0x95, 0, 0, 0, 0),
    ]
}

#[repr(C)]
#[derive(Default)]
struct MapCreate {
    map_type: u32,
    key_size: u32,
    value_size: u32,
    max_entries: u32,
    map_flags: u32,
    inner_map_fd: u32,
    numa_node: u32,
    map_name: [u8; 16],
}

#[repr(C)]
struct MapUpdate {
    map_fd: u32,
    _pad: u32,
    key: u64,
    value: u64,
    flags: u64,
}

#[repr(C)]
#[derive(Default)]
struct ProgLoad {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

#[repr(C)]
struct LinkCreate {
    prog_fd: u32,
    target_ifindex: u32,
    attach_type: u32,
    flags: u32,
}

/// bpf(2) with `attr`; the fd it returns, if any.
fn bpf<T>(cmd: libc::c_long, attr: &mut T, what: &str) -> io::Result<libc::c_long> {
    // SAFETY: attr is a live, initialised bpf_attr prefix of the size given.
    let ret = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            (attr as *mut T).cast::<libc::c_void>(),
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if ret < 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("{what}: {e}")));
    }
    Ok(ret)
}

fn owned(fd: libc::c_long) -> OwnedFd {
    // SAFETY: a fresh fd the kernel just returned, owned from here on.
    unsafe { OwnedFd::from_raw_fd(fd as RawFd) }
}

fn name16(name: &str) -> [u8; 16] {
    let mut out = [0u8; 16];
    out[..name.len()].copy_from_slice(name.as_bytes());
    out
}

/// The XDP program steering an interface's frames to a socket, attached while this lives.
pub struct Steering {
    _link: OwnedFd,
    _program: OwnedFd,
    _map: OwnedFd,
    /// Whether the program runs in the driver (native) rather than in generic (skb) mode.
    pub native: bool,
}

impl Steering {
    /// Loads the program with a map holding `xsk` (a bound AF_XDP socket) and attaches it to
    /// interface `ifindex` (`iface`): native mode if the driver has it, else generic. Fails if
    /// the interface already runs an XDP program.
    pub fn attach(iface: &str, ifindex: u32, xsk: RawFd) -> io::Result<Steering> {
        let mut create = MapCreate {
            map_type: BPF_MAP_TYPE_XSKMAP,
            key_size: 4,
            value_size: 4,
            max_entries: 1,
            map_name: name16("xsks"),
            ..MapCreate::default()
        };
        let map = owned(bpf(BPF_MAP_CREATE, &mut create, "create the XSKMAP")?);
        let (key, value) = (0u32, xsk as u32);
        let mut update = MapUpdate {
            map_fd: map.as_raw_fd() as u32,
            _pad: 0,
            key: &key as *const u32 as u64,
            value: &value as *const u32 as u64,
            flags: 0,
        };
        bpf(
            BPF_MAP_UPDATE_ELEM,
            &mut update,
            "put the socket in the XSKMAP",
        )?;
        let insns = program(map.as_raw_fd());
        let license = CString::new("Dual MIT/GPL").expect("no NUL");
        let mut load = ProgLoad {
            prog_type: BPF_PROG_TYPE_XDP,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: license.as_ptr() as u64,
            prog_name: name16("xsk_redirect"),
            expected_attach_type: BPF_XDP,
            ..ProgLoad::default()
        };
        let program = owned(bpf(BPF_PROG_LOAD, &mut load, "load the XDP program")?);
        let link = |flags| LinkCreate {
            prog_fd: program.as_raw_fd() as u32,
            target_ifindex: ifindex,
            attach_type: BPF_XDP,
            flags,
        };
        let what = format!("attach the XDP program to {iface}");
        let (link, native) = match bpf(BPF_LINK_CREATE, &mut link(XDP_FLAGS_DRV_MODE), &what) {
            Ok(fd) => (fd, true),
            Err(e) if e.kind() == io::ErrorKind::ResourceBusy => {
                return Err(io::Error::new(
                    e.kind(),
                    format!("{e} ({iface} already runs an XDP program)"),
                ))
            }
            Err(_) => (
                bpf(BPF_LINK_CREATE, &mut link(XDP_FLAGS_SKB_MODE), &what)?,
                false,
            ),
        };
        Ok(Steering {
            _link: owned(link),
            _program: program,
            _map: map,
            native,
        })
    }
}

/// SIOCETHTOOL and ETHTOOL_GCHANNELS (linux/sockios.h, linux/ethtool.h).
const SIOCETHTOOL: libc::c_ulong = 0x8946;
const ETHTOOL_GCHANNELS: u32 = 0x3c;

/// struct ethtool_channels.
#[repr(C)]
#[derive(Default)]
struct Channels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

/// struct ifreq with its data pointer.
#[repr(C)]
struct IfReq {
    name: [libc::c_char; libc::IFNAMSIZ],
    data: *mut libc::c_void,
    _pad: [u8; 16],
}

/// How many receive queues `iface` has (`ethtool -l`); 1 for a driver that does not say.
pub fn receive_queues(iface: &str) -> io::Result<u32> {
    if iface.len() >= libc::IFNAMSIZ {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "an interface name is shorter than 16 bytes",
        ));
    }
    let mut channels = Channels {
        cmd: ETHTOOL_GCHANNELS,
        ..Channels::default()
    };
    let mut req = IfReq {
        name: [0; libc::IFNAMSIZ],
        data: (&mut channels as *mut Channels).cast(),
        _pad: [0; 16],
    };
    for (to, from) in req.name.iter_mut().zip(iface.bytes()) {
        *to = from as libc::c_char;
    }
    // SAFETY: a plain datagram socket for the ioctl, owned below.
    let raw = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if raw < 0 {
        return Err(io::Error::last_os_error());
    }
    let socket = owned(raw as libc::c_long);
    // SAFETY: req is a valid ifreq pointing at a valid ethtool_channels.
    let ret = unsafe { libc::ioctl(socket.as_raw_fd(), SIOCETHTOOL, &mut req) };
    if ret < 0 {
        let e = io::Error::last_os_error();
        return match e.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(1),
            _ => Err(e),
        };
    }
    Ok((channels.rx_count + channels.combined_count).max(1))
}
