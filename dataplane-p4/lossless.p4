/* lossless.p4: a v1model leaf/spine switch for RoCEv2-style lossless Ethernet.
 *
 * One program, four mechanisms, each switched on and tuned by table entries that the control
 * plane writes at run time (docs/p4-programs.md is the reference):
 *
 *   - L3 forwarding: IPv4 LPM to a next hop or an ECMP group, MAC rewrite, TTL, IPv4 checksum;
 *     RoCEv2 (UDP 4791 + BTH) classification; priority from DSCP through a table.
 *   - Load balancing per ECMP group, chosen by the group's entry: ecmp (5-tuple hash), flowlet
 *     (new path only after an idle gap), dlb (least-loaded member at a flowlet boundary, from a
 *     per-port load estimate kept by egress), spray (per packet: each flow takes the members
 *     in turn), e-ecmp (the 5-tuple and the RoCEv2 destination QP hashed).
 *   - ECN: RED marking on enq_qdepth per (egress port, priority), Kmin/Kmax/Pmax from a table.
 *   - Switch CNP fast path: a RoCEv2 packet this switch marks is cloned into a CNP (BTH opcode
 *     0x81, ICRC computed here) sent back out of the port the packet came in on, at most one per
 *     flow per interval.
 *   - Mirroring: CNPs and NAKs leaving the switch (and, on request, every frame of chosen
 *     priorities) cloned to a collector, encapsulated here as ERSPAN type II or III over GRE.
 *   - PFC: PAUSE for the packet's priority out of its ingress port when the packet will find
 *     XOFF packets ahead in its egress queue (known in ingress, so the PAUSE leaves at once;
 *     refreshed while that lasts), resume once that upstream's packets have drained to XON;
 *     received PAUSE frames record paused-until per (port, priority) and are consumed; packets
 *     of a lossless queue bound for a paused port are held, in order, by recirculating through
 *     that queue until the pause ends.
 *
 * Plain P4_16 for v1model, written for p4c's BMv2 back end (p4c-bm2-ss) and softswitch alike. */
#include <core.p4>
/* The v1model whose registers and counters take an index type (register<T, I>, counter<I>).
 * p4c's v1model.p4 defaults to the 2018 version, where they do not. */
#define V1MODEL_VERSION 20200408
#include <v1model.p4>

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_MAC_CONTROL = 0x8808;
const bit<16> MAC_CONTROL_PFC = 0x0101;
const bit<48> PFC_DESTINATION = 0x0180c2000001;
const bit<8>  IP_PROTO_TCP = 6;
const bit<8>  IP_PROTO_UDP = 17;
const bit<8>  IP_PROTO_GRE = 47;
/* GRE protocol types of ERSPAN type II and type III. */
const bit<16> GRE_PROTO_ERSPAN_II = 0x88be;
const bit<16> GRE_PROTO_ERSPAN_III = 0x22eb;
const bit<16> ROCEV2_PORT = 4791;
const bit<8>  BTH_OPCODE_CNP = 0x81;
const bit<8>  BTH_OPCODE_RC_ACK = 0x11;
/* The UDP length of an RC Acknowledge: UDP header, BTH, AETH and ICRC (8 + 12 + 4 + 4). A
 * shorter one has no AETH: the byte after its BTH is its ICRC or Ethernet padding. */
const bit<16> UDP_LEN_RC_ACK = 28;

/* What an RC Acknowledge's AETH syndrome says, in its top three bits (InfiniBand 9.7.5.2.6);
 * a NAK's low five bits are its code (0 PSN sequence error .. 4 invalid RD request). */
const bit<3>  AETH_RNR_NAK = 1;
const bit<3>  AETH_NAK = 3;
/* The cells of nak_rx per port: NAK codes 0..4, then these two. */
const bit<3>  NAK_RESERVED_CODE = 5;
const bit<3>  NAK_RNR = 6;
const bit<9>  DROP_PORT = 511;

/* standard_metadata.instance_type values of BMv2. */
const bit<32> INSTANCE_NORMAL = 0;
const bit<32> INSTANCE_INGRESS_CLONE = 1;
const bit<32> INSTANCE_EGRESS_CLONE = 2;

/* Clone session of the reverse path: a PAUSE or a CNP leaves through session
 * REVERSE_SESSION_BASE + P, which the control plane points at port P. */
const bit<32> REVERSE_SESSION_BASE = 100;

/* Clone sessions of mirroring: ERSPAN session S (0..1023) leaves through clone session
 * MIRROR_SESSION_BASE + S, which the control plane points at the collector's port. */
const bit<32> MIRROR_SESSION_BASE = 1024;
const bit<32> ERSPAN_SESSIONS = 1024;

/* What mirror_policy's meta.mirror_kind says of a frame. */
const bit<2> MIRROR_KIND_OTHER = 0;
const bit<2> MIRROR_KIND_CNP = 1;
const bit<2> MIRROR_KIND_NAK = 2;

/* Register and counter sizes: one cell per (port, priority) for every bit<9> port. */
const bit<32> QUEUES = 4096;
const bit<32> PORTS = 512;
const bit<32> GROUPS = 1024;
const bit<32> FLOWLET_SLOTS = 4096;
const bit<32> CNP_FLOW_SLOTS = 4096;

/* Load-balancing policies of an ECMP group. */
const bit<3> LB_ECMP = 0;
const bit<3> LB_FLOWLET = 1;
const bit<3> LB_DLB = 2;
const bit<3> LB_SPRAY = 3;
const bit<3> LB_EECMP = 4;

/* What an egress-to-egress clone becomes. */
const bit<3> CLONE_NONE = 0;
const bit<3> CLONE_CNP = 1;
const bit<3> CLONE_PAUSE = 2;
const bit<3> CLONE_RESUME = 3;
const bit<3> CLONE_MIRROR = 4;

/* Field lists preserved by clone_preserving_field_list and recirculate_preserving_field_list. */
const bit<8> FL_CLONE = 1;
const bit<8> FL_HOLD = 2;

/* Sizes of the frames this switch builds. */
const bit<32> PFC_FRAME_BYTES = 60;
const bit<32> CNP_FRAME_BYTES = 74;
/* The bytes ERSPAN puts before the mirrored frame: outer IPv4 (20), GRE with its sequence
 * number (8), and the ERSPAN II (8) or III (12) header. */
const bit<16> ERSPAN_II_OVERHEAD = 36;
const bit<16> ERSPAN_III_OVERHEAD = 40;
const bit<16> ETHERNET_BYTES = 14;

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

/* 802.1Qbb priority flow control: opcode, class-enable vector, eight pause times. */
header pfc_t {
    bit<16> opcode;
    bit<16> classEnable;
    bit<16> time0;
    bit<16> time1;
    bit<16> time2;
    bit<16> time3;
    bit<16> time4;
    bit<16> time5;
    bit<16> time6;
    bit<16> time7;
}

/* Zeros that pad a PFC frame to the 60-byte minimum (without FCS). */
header pfc_pad_t {
    bit<128> zeros0;
    bit<80>  zeros1;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> totalLen;
    bit<16> identification;
    bit<3>  flags;
    bit<13> fragOffset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdrChecksum;
    bit<32> srcAddr;
    bit<32> dstAddr;
}

header udp_t {
    bit<16> srcPort;
    bit<16> dstPort;
    bit<16> length;
    bit<16> checksum;
}

/* The first four bytes of TCP: enough for the 5-tuple. */
header tcp_ports_t {
    bit<16> srcPort;
    bit<16> dstPort;
}

/* InfiniBand base transport header, as RoCEv2 carries it after UDP 4791. */
header bth_t {
    bit<8>  opcode;
    bit<1>  solicited;
    bit<1>  migReq;
    bit<2>  padCount;
    bit<4>  version;
    bit<16> pkey;
    bit<1>  fecn;
    bit<1>  becn;
    bit<6>  resv6;
    bit<24> dstQP;
    bit<1>  ackReq;
    bit<7>  resv7;
    bit<24> psn;
}

/* The 16 reserved bytes of a CNP after its BTH. */
header cnp_pad_t {
    bit<128> reserved;
}

/* The invariant CRC that ends a RoCEv2 packet, as stored (little-endian). */
header icrc_t {
    bit<32> value;
}

/* GRE (RFC 2784) with the sequence number of RFC 2890: flags C R K S s, recursion, flags,
 * version, protocol, then the sequence number (S = 1, as ERSPAN II and III need). */
header gre_t {
    bit<1>  checksumPresent;
    bit<1>  routingPresent;
    bit<1>  keyPresent;
    bit<1>  sequencePresent;
    bit<1>  strictRoute;
    bit<3>  recursion;
    bit<5>  flags;
    bit<3>  version;
    bit<16> protocol;
    bit<32> sequence;
}

/* ERSPAN type II (draft-foschiano-erspan, 4.2): version 1, VLAN, CoS, encapsulation,
 * truncated, session id, reserved, index (here the port the original left on). */
header erspan2_t {
    bit<4>  version;
    bit<12> vlan;
    bit<3>  cos;
    bit<2>  encap;
    bit<1>  truncated;
    bit<10> session;
    bit<12> reserved;
    bit<20> index;
}

/* ERSPAN type III (draft-foschiano-erspan, 4.3), without the optional platform subheader:
 * version 2, VLAN, CoS, BSO, truncated, session id, timestamp, SGT, P, frame type, hardware
 * id, direction, timestamp granularity, O. */
header erspan3_t {
    bit<4>  version;
    bit<12> vlan;
    bit<3>  cos;
    bit<2>  bso;
    bit<1>  truncated;
    bit<10> session;
    bit<32> timestamp;
    bit<16> sgt;
    bit<1>  p;
    bit<5>  frameType;
    bit<6>  hwId;
    bit<1>  direction;
    bit<2>  granularity;
    bit<1>  o;
}

struct headers {
    /* The ERSPAN encapsulation of a mirror clone, before the mirrored frame. */
    ethernet_t  mirror_ethernet;
    ipv4_t      mirror_ipv4;
    gre_t       gre;
    erspan2_t   erspan2;
    erspan3_t   erspan3;
    ethernet_t  ethernet;
    pfc_t       pfc;
    pfc_pad_t   pfc_pad;
    ipv4_t      ipv4;
    udp_t       udp;
    tcp_ports_t tcp;
    bth_t       bth;
    cnp_pad_t   cnp_pad;
    icrc_t      icrc;
}

/* Field lists (p4c wants literals in @field_list): 1 = FL_CLONE, 2 = FL_HOLD. */
struct metadata {
    /* The 5-tuple's ports (UDP or TCP; 0 otherwise), and a RoCEv2 packet's destination QP (0
     * otherwise), which e-ecmp hashes too. */
    bit<16> l4_src;
    bit<16> l4_dst;
    bit<24> dst_qp;
    /* Forwarding: the next hop, or the ECMP group and the member chosen in it. */
    bit<16> nexthop;
    bit<16> group;
    bit<16> member;
    bit<3>  lb_policy;
    bit<16> group_size;
    bit<48> flowlet_timeout;
    bit<9>  dlb_port0;
    bit<9>  dlb_port1;
    bit<9>  dlb_port2;
    bit<9>  dlb_port3;
    bit<9>  dlb_port4;
    bit<9>  dlb_port5;
    bit<9>  dlb_port6;
    bit<9>  dlb_port7;
    bit<48> dlb_load_age;
    /* The PFC profile of the packet's queue, from ingress to egress (lossless = 1: it has one). */
    bit<1>  lossless;
    bit<32> pfc_xon;
    bit<16> hold_limit;
    bit<48> hold_stall;
    /* The link the packet came in on: its port and MAC addresses, for the upstream's PFC state
     * and for frames sent back over it. The port is kept here because BMv2 zeroes
     * standard_metadata, ingress_port included, when it recirculates a packet. */
    @field_list(2)
    bit<9>  ingress_port;
    @field_list(1, 2)
    bit<48> prev_hop_mac;
    @field_list(1, 2)
    bit<48> own_mac;
    /* What an egress-to-egress clone is to become, and what it needs. */
    @field_list(1)
    bit<3>  clone_kind;
    @field_list(1)
    bit<3>  clone_priority;
    @field_list(1)
    bit<16> pause_quanta;
    @field_list(1)
    bit<24> cnp_qp;
    @field_list(1)
    bit<6>  cnp_dscp;
    /* Mirroring: what the frame is to mirror_policy, the ERSPAN session it is mirrored to, and
     * the port it left on (the ERSPAN index). */
    bit<2>  mirror_kind;
    @field_list(1)
    bit<10> mirror_session;
    @field_list(1)
    bit<9>  mirror_port;
    /* An RC Acknowledge's AETH syndrome (read ahead of the parser, not extracted), and
     * whether there was one (its UDP length has room for the AETH). */
    bit<1>  rc_ack;
    bit<8>  aeth_syndrome;
    /* A packet held for a paused port: its place in line, its passes, where it goes, and when
     * (µs) it was last sent round (BMv2 zeroes ingress_global_timestamp on recirculation). */
    @field_list(2)
    bit<1>  held;
    @field_list(2)
    bit<48> recirculated_at;
    @field_list(2)
    bit<32> hold_ticket;
    @field_list(2)
    bit<16> hold_passes;
    @field_list(2)
    bit<9>  hold_port;
    @field_list(2)
    bit<3>  hold_priority;
}

/* The register or counter cell of (port, priority). */
bit<32> queue_index(in bit<9> port, in bit<3> priority) {
    return ((bit<32>)port << 3) | (bit<32>)priority;
}

/* Whether ticket `a` comes at or before ticket `b` (32-bit tickets that wrap). */
bool ticket_not_after(in bit<32> a, in bit<32> b) {
    return b - a < 32w0x80000000;
}

/* Written by ingress when a PAUSE arrives, read by egress to hold: per (port, priority), the
 * time (µs) until which that port may not send that priority. */
register<bit<48>, bit<32>>(QUEUES) pfc_paused_until;

/* Per (port, priority): the time (µs) received PAUSE frames have paused that priority of that
 * port, counted when a PAUSE arrives up to its paused-until (so it includes the rest of a pause
 * still in force): a PAUSE that extends or cuts short (a resume) the pause in force adds or
 * takes off the difference; one after the last has ended adds its whole time. */
register<bit<48>, bit<32>>(QUEUES) pfc_paused_us;

/* PFC's view of each lossless queue, per (egress port, priority): packets in it, counted up by
 * ingress as it sends one there and set to deq_qdepth by egress as one leaves. Ingress reads it
 * as the enq_qdepth the packet will find, so XOFF is seen at once, not after the queueing delay
 * (under BMv2, whose ingress and egress run in different threads, a race may leave it off by a
 * packet until the next departure sets it again). */
register<bit<32>, bit<32>>(QUEUES) pfc_queue_depth;

/* Per (upstream port, priority): when this switch last paused it (µs + 1; 0 = not paused).
 * Ingress pauses and refreshes; egress resumes. */
register<bit<48>, bit<32>>(QUEUES) pfc_upstream_paused;

/* Per (upstream port, priority): the packets of a lossless queue that came in on that port and
 * have not left yet (counted up by ingress, down by egress). The resume waits for these to
 * fall to XON: the queue that paused an upstream may not be the queue another of its packets
 * leaves, and an upstream is resumed only once what it sent has drained. (Under BMv2 a race
 * between its ingress and egress threads may skew the count; the pause time then ends the
 * pause instead of the resume.) */
register<bit<32>, bit<32>>(QUEUES) pfc_upstream_packets;

/* Kept by egress, read by ingress for DLB: per port, an EWMA of enq_qdepth in 1/256 packets
 * (weight 1/4), and when it was last updated (µs + 1; 0 = never). */
register<bit<32>, bit<32>>(PORTS) port_load;
register<bit<48>, bit<32>>(PORTS) port_load_stamp;

parser LosslessParser(packet_in packet, out headers hdr, inout metadata meta,
                      inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_MAC_CONTROL: parse_mac_control;
            default: accept;
        }
    }
    state parse_mac_control {
        transition select(packet.lookahead<bit<16>>()) {
            MAC_CONTROL_PFC: parse_pfc;
            default: accept;
        }
    }
    state parse_pfc {
        packet.extract(hdr.pfc);
        transition accept;
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.ihl, hdr.ipv4.fragOffset, hdr.ipv4.protocol) {
            (5, 0, IP_PROTO_UDP): parse_udp;
            (5, 0, IP_PROTO_TCP): parse_tcp;
            default: accept;
        }
    }
    state parse_udp {
        packet.extract(hdr.udp);
        meta.l4_src = hdr.udp.srcPort;
        meta.l4_dst = hdr.udp.dstPort;
        transition select(hdr.udp.dstPort) {
            ROCEV2_PORT: parse_bth;
            default: accept;
        }
    }
    state parse_tcp {
        packet.extract(hdr.tcp);
        meta.l4_src = hdr.tcp.srcPort;
        meta.l4_dst = hdr.tcp.dstPort;
        transition accept;
    }
    state parse_bth {
        packet.extract(hdr.bth);
        meta.dst_qp = hdr.bth.dstQP;
        transition select(hdr.bth.opcode) {
            BTH_OPCODE_RC_ACK: parse_aeth;
            default: accept;
        }
    }
    state parse_aeth {
        meta.aeth_syndrome = packet.lookahead<bit<8>>();
        meta.rc_ack = (bit<1>)(hdr.udp.length >= UDP_LEN_RC_ACK);
        transition accept;
    }
}

control LosslessVerifyChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control LosslessIngress(inout headers hdr, inout metadata meta,
                        inout standard_metadata_t standard_metadata) {
    /* Per (port, priority): PAUSE frames received that name the priority (pauses and resumes). */
    counter<bit<32>>(QUEUES, CounterType.packets) pfc_rx;
    /* Per (port the frame left on, priority): PAUSE frames with a pause time sent. */
    counter<bit<32>>(QUEUES, CounterType.packets) pfc_pause_tx;
    /* Per (ingress port, priority): packets this program dropped (no route, TTL, not IPv4). */
    counter<bit<32>>(QUEUES, CounterType.packets) dropped;
    /* Per ECMP group: flowlets started (flowlet and dlb policies). */
    counter<bit<32>>(GROUPS, CounterType.packets) flowlets;
    /* Per port: frames that arrived on it from the wire (recirculated packets not again). */
    counter<bit<32>>(PORTS, CounterType.packets_and_bytes) port_rx;
    /* Per (ingress port, syndrome): RoCEv2 NAKs that arrived on it, cell (port << 3) | kind,
     * kind 0..4 the NAK code, NAK_RESERVED_CODE a NAK with another code, NAK_RNR an RNR NAK. */
    counter<bit<32>>(QUEUES, CounterType.packets) nak_rx;
    /* Per route: the packets that matched it. */
    direct_counter(CounterType.packets_and_bytes) route_hits;

    /* Per flowlet slot: last packet (µs + 1; 0 = never), flowlet number, member in use. */
    register<bit<48>, bit<32>>(FLOWLET_SLOTS) flowlet_last_seen;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_id;
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) flowlet_member;
    /* Per flow slot: the next member of the spray policy. */
    register<bit<16>, bit<32>>(FLOWLET_SLOTS) spray_next;

    bit<48> pause_quantum_q10 = 0;
    bool routed = false;
    bit<32> pfc_xoff = 0;
    bit<16> pfc_quanta = 0;
    bit<48> pfc_refresh = 0;

    /* A lossless queue (egress port, priority): PAUSE the upstream a packet comes from when the
     * packet will find `xoff_packets` or more ahead of it, with `quanta`, again at most every
     * `refresh_us`; resume it when its packets still in this switch fall to `xon_packets`.
     * Packets bound for the queue while its port is paused are held; a held packet goes anyway
     * after `limit` passes; a line of held packets that has not moved for `stall_us` while not
     * paused skips a lost ticket. */
    action lossless(bit<19> xoff_packets, bit<19> xon_packets, bit<16> quanta,
                    bit<32> refresh_us, bit<16> limit, bit<32> stall_us) {
        meta.lossless = 1;
        pfc_xoff = (bit<32>)xoff_packets;
        meta.pfc_xon = (bit<32>)xon_packets;
        pfc_quanta = quanta;
        pfc_refresh = (bit<48>)refresh_us;
        meta.hold_limit = limit;
        meta.hold_stall = (bit<48>)stall_us;
    }
    table pfc_profile {
        key = {
            standard_metadata.egress_spec: exact;
            standard_metadata.priority: exact;
        }
        actions = { lossless; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    /* DSCP -> priority (standard_metadata.priority: the egress queue). */
    action set_priority(bit<3> priority) {
        standard_metadata.priority = priority;
    }
    table dscp_priority {
        key = { hdr.ipv4.dscp: exact; }
        actions = { set_priority; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    /* The length of one pause quantum (512 bit times) of a port's link, in 1/1024 µs. */
    action set_pause_quantum(bit<32> quantum_q10) {
        pause_quantum_q10 = (bit<48>)quantum_q10;
    }
    table pfc_rx_port {
        key = { standard_metadata.ingress_port: exact; }
        actions = { set_pause_quantum; NoAction; }
        default_action = NoAction();
        size = 512;
    }

    /* A PAUSE frame names `priority` with `quanta`: that priority of this port is paused until
     * now + quanta x quantum (0 quanta: resumed now). Called from apply with the frame's fields,
     * so its parameters are `in`: p4c wants compile-time constants for action data. */
    action record_pause(in bit<3> priority, in bit<16> quanta) {
        bit<32> cell = queue_index(standard_metadata.ingress_port, priority);
        bit<48> now = standard_metadata.ingress_global_timestamp;
        bit<48> until = now + (((bit<48>)quanta * pause_quantum_q10) >> 10);
        bit<48> before;
        bit<48> paused;
        pfc_paused_until.read(before, cell);
        pfc_paused_us.read(paused, cell);
        /* From the end of the pause in force, or from now if there is none; a shorter new pause
         * takes the difference off, but never more than the total (which a controller may have
         * reset while a pause was in force). */
        bit<48> from = before > now ? before : now;
        bit<48> cut = from - until;
        pfc_paused_us.write(cell, until >= from ? paused + (until - from)
                                                : (cut > paused ? 48w0 : paused - cut));
        pfc_paused_until.write(cell, until);
        pfc_rx.count(cell);
    }

    action set_nexthop(bit<16> nexthop) {
        meta.nexthop = nexthop;
        routed = true;
    }
    action set_ecmp_group(bit<16> group) {
        meta.group = group;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dstAddr: lpm; }
        actions = { set_nexthop; set_ecmp_group; drop; }
        default_action = drop();
        counters = route_hits;
        size = 1024;
    }

    /* An ECMP group: its policy (0 ecmp, 1 flowlet, 2 dlb, 3 spray, 4 e-ecmp), its number of
     * members, and the idle gap (µs) after which a flow may change member (flowlet, dlb). */
    action set_group(bit<3> policy, bit<16> size, bit<48> flowlet_timeout_us) {
        meta.lb_policy = policy;
        meta.group_size = size;
        meta.flowlet_timeout = flowlet_timeout_us;
    }
    table ecmp_group {
        key = { meta.group: exact; }
        actions = { set_group; drop; }
        default_action = drop();
        size = 1024;
    }

    /* The egress ports of a DLB group's members 0..7, and the age (µs) past which a port's load
     * estimate counts as idle. */
    action set_dlb_ports(bit<9> port0, bit<9> port1, bit<9> port2, bit<9> port3,
                         bit<9> port4, bit<9> port5, bit<9> port6, bit<9> port7,
                         bit<48> load_age_us) {
        meta.dlb_port0 = port0;
        meta.dlb_port1 = port1;
        meta.dlb_port2 = port2;
        meta.dlb_port3 = port3;
        meta.dlb_port4 = port4;
        meta.dlb_port5 = port5;
        meta.dlb_port6 = port6;
        meta.dlb_port7 = port7;
        meta.dlb_load_age = load_age_us;
    }
    table dlb_members {
        key = { meta.group: exact; }
        actions = { set_dlb_ports; NoAction; }
        default_action = NoAction();
        size = 1024;
    }

    /* Member `member` of group `group` is a next hop. */
    table ecmp_member {
        key = {
            meta.group: exact;
            meta.member: exact;
        }
        actions = { set_nexthop; drop; }
        default_action = drop();
        size = 4096;
    }

    /* A next hop: the port, and the MAC addresses of its link. */
    action forward(bit<9> port, bit<48> src_mac, bit<48> dst_mac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.srcAddr = src_mac;
        hdr.ethernet.dstAddr = dst_mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    table nexthop {
        key = { meta.nexthop: exact; }
        actions = { forward; drop; }
        default_action = drop();
        size = 1024;
    }

    /* The switch's hash offset: a member is (hash >> offset) mod size. Switches of successive
     * tiers that pick with the same hash bits send all the flows one upper switch gets from
     * below to one of its uplinks (hash polarization); a different offset per tier picks
     * with other bits. CRCs are linear, so a per-switch seed mixed into the hash would not. */
    bit<16> lb_hash = 0;
    bit<4> hash_offset = 0;
    action set_hash_offset(bit<4> offset) {
        hash_offset = offset;
    }
    table ecmp_hash {
        actions = { set_hash_offset; }
        default_action = set_hash_offset(0);
    }

    /* The member lb_hash picks: (lb_hash >> hash_offset) mod size (p4c allows no run-time
     * `%`; the identity hash's modulo is one). */
    action pick_member() {
        bit<16> bits = lb_hash >> hash_offset;
        hash(meta.member, HashAlgorithm.identity, 16w0, { bits }, (bit<32>)meta.group_size);
    }

    /* The member the flow's 5-tuple hash picks, with `salt` mixed in (0 for ecmp; for a new
     * flowlet, its number plus the flow's slot). `in`, not action data: p4c wants action data
     * passed from apply to be constant, and BMv2 cannot hash action data. */
    action hash_member(in bit<16> salt) {
        hash(lb_hash, HashAlgorithm.crc16, 16w0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_src, meta.l4_dst, salt },
             32w65536);
        pick_member();
    }

    /* e-ecmp (Meta's enhanced ECMP for RoCE): the member crc32(5-tuple, destination QP) picks,
     * so the QPs of one connection, which share its 5-tuple, spread over the members. CRC-32:
     * a connection's QPs are usually numbered in a row, and CRC-16/ARC maps a row of trailing
     * numbers onto two members of four, where CRC-32's low bits reach all four. */
    action hash_member_qp() {
        hash(lb_hash, HashAlgorithm.crc32, 16w0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_src, meta.l4_dst, meta.dst_qp },
             32w65536);
        pick_member();
    }

    /* The flow's slot in the per-flow registers (flowlet, dlb, spray): crc32(5-tuple) % 4096.
     * flowlet and dlb: a flow keeps its member until it has been idle longer than the group's
     * timeout; its next packet starts a new flowlet, which may take another member. */
    bit<32> flowlet_slot = 0;
    bit<16> flowlet_number = 0;
    bool new_flowlet = false;
    action find_flow_slot() {
        hash(flowlet_slot, HashAlgorithm.crc32, 32w0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol,
               meta.l4_src, meta.l4_dst },
             FLOWLET_SLOTS);
    }
    action find_flowlet() {
        bit<48> last;
        flowlet_last_seen.read(last, flowlet_slot);
        flowlet_id.read(flowlet_number, flowlet_slot);
        flowlet_member.read(meta.member, flowlet_slot);
        bit<48> now = standard_metadata.ingress_global_timestamp;
        new_flowlet = last == 0 || now + 1 - last > meta.flowlet_timeout
                      || meta.member >= meta.group_size;
        flowlet_last_seen.write(flowlet_slot, now + 1);
    }

    /* DLB at a flowlet boundary: the least-loaded of the group's first eight members; ties keep
     * the hash's pick, so equal loads spread like ECMP. A load older than the group's load age
     * counts as idle, and so does a pick past the eighth member (whose port DLB does not know),
     * which therefore stays. */
    action load_of(out bit<32> load, in bit<9> port) {
        bit<48> stamp;
        port_load.read(load, (bit<32>)port);
        port_load_stamp.read(stamp, (bit<32>)port);
        bit<48> now = standard_metadata.ingress_global_timestamp;
        load = stamp == 0 || now + 1 - stamp > meta.dlb_load_age ? 32w0 : load;
    }
    action least_loaded() {
        bit<32> load0;
        bit<32> load1;
        bit<32> load2;
        bit<32> load3;
        bit<32> load4;
        bit<32> load5;
        bit<32> load6;
        bit<32> load7;
        load_of(load0, meta.dlb_port0);
        load_of(load1, meta.dlb_port1);
        load_of(load2, meta.dlb_port2);
        load_of(load3, meta.dlb_port3);
        load_of(load4, meta.dlb_port4);
        load_of(load5, meta.dlb_port5);
        load_of(load6, meta.dlb_port6);
        load_of(load7, meta.dlb_port7);
        /* The load of the hash's pick. One ?: per statement: p4c turns each ?: into an if, and
         * nested ifs in an action go through its Predication pass, which has miscompiled them. */
        bit<32> best = meta.member == 0 ? load0 : 32w0;
        best = meta.member == 1 ? load1 : best;
        best = meta.member == 2 ? load2 : best;
        best = meta.member == 3 ? load3 : best;
        best = meta.member == 4 ? load4 : best;
        best = meta.member == 5 ? load5 : best;
        best = meta.member == 6 ? load6 : best;
        best = meta.member == 7 ? load7 : best;
        meta.member = load0 < best ? 16w0 : meta.member;
        best = load0 < best ? load0 : best;
        meta.member = meta.group_size > 1 && load1 < best ? 16w1 : meta.member;
        best = meta.group_size > 1 && load1 < best ? load1 : best;
        meta.member = meta.group_size > 2 && load2 < best ? 16w2 : meta.member;
        best = meta.group_size > 2 && load2 < best ? load2 : best;
        meta.member = meta.group_size > 3 && load3 < best ? 16w3 : meta.member;
        best = meta.group_size > 3 && load3 < best ? load3 : best;
        meta.member = meta.group_size > 4 && load4 < best ? 16w4 : meta.member;
        best = meta.group_size > 4 && load4 < best ? load4 : best;
        meta.member = meta.group_size > 5 && load5 < best ? 16w5 : meta.member;
        best = meta.group_size > 5 && load5 < best ? load5 : best;
        meta.member = meta.group_size > 6 && load6 < best ? 16w6 : meta.member;
        best = meta.group_size > 6 && load6 < best ? load6 : best;
        meta.member = meta.group_size > 7 && load7 < best ? 16w7 : meta.member;
    }

    /* Records the flowlet that starts now: its number and member. */
    action start_flowlet() {
        flowlet_id.write(flowlet_slot, flowlet_number);
        flowlet_member.write(flowlet_slot, meta.member);
        flowlets.count((bit<32>)meta.group);
    }

    /* spray: each flow's packets take the group's members in turn. (Per flow, not per group:
     * with one turn for the whole group, flows sending in step would each keep one member.) */
    action spray() {
        bit<16> next;
        spray_next.read(next, flowlet_slot);
        meta.member = next < meta.group_size ? next : 16w0;
        next = meta.member + 1;
        spray_next.write(flowlet_slot, next < meta.group_size ? next : 16w0);
    }

    apply {
        if (standard_metadata.instance_type == INSTANCE_NORMAL) {
            port_rx.count((bit<32>)standard_metadata.ingress_port);
            /* An RC Acknowledge that is a NAK or an RNR NAK: counted by syndrome. */
            if (meta.rc_ack == 1 && meta.aeth_syndrome[7:5] == AETH_RNR_NAK) {
                nak_rx.count(queue_index(standard_metadata.ingress_port, NAK_RNR));
            } else if (meta.rc_ack == 1 && meta.aeth_syndrome[7:5] == AETH_NAK) {
                nak_rx.count(queue_index(standard_metadata.ingress_port,
                    meta.aeth_syndrome[4:0] < 5 ? meta.aeth_syndrome[2:0] : NAK_RESERVED_CODE));
            }
        }
        /* A PAUSE frame: record paused-until for each priority it names, then consume it. */
        if (hdr.pfc.isValid()) {
            pfc_rx_port.apply();
            if (hdr.pfc.classEnable[0:0] == 1) { record_pause(0, hdr.pfc.time0); }
            if (hdr.pfc.classEnable[1:1] == 1) { record_pause(1, hdr.pfc.time1); }
            if (hdr.pfc.classEnable[2:2] == 1) { record_pause(2, hdr.pfc.time2); }
            if (hdr.pfc.classEnable[3:3] == 1) { record_pause(3, hdr.pfc.time3); }
            if (hdr.pfc.classEnable[4:4] == 1) { record_pause(4, hdr.pfc.time4); }
            if (hdr.pfc.classEnable[5:5] == 1) { record_pause(5, hdr.pfc.time5); }
            if (hdr.pfc.classEnable[6:6] == 1) { record_pause(6, hdr.pfc.time6); }
            if (hdr.pfc.classEnable[7:7] == 1) { record_pause(7, hdr.pfc.time7); }
            drop();
            return;
        }

        if (meta.held == 1) {
            /* A held packet back from recirculation: to its queue again, untouched. */
            standard_metadata.egress_spec = meta.hold_port;
            standard_metadata.priority = meta.hold_priority;
        } else if (!hdr.ipv4.isValid() || hdr.ipv4.ttl <= 1) {
            drop();
            dropped.count(queue_index(standard_metadata.ingress_port, 0));
            return;
        } else {
            dscp_priority.apply();
            meta.ingress_port = standard_metadata.ingress_port;
            meta.prev_hop_mac = hdr.ethernet.srcAddr;
            meta.own_mac = hdr.ethernet.dstAddr;
            switch (ipv4_lpm.apply().action_run) {
                set_ecmp_group: {
                    if (ecmp_group.apply().hit) {
                        ecmp_hash.apply();
                        find_flow_slot();
                        if (meta.lb_policy == LB_ECMP) {
                            hash_member(0);
                        } else if (meta.lb_policy == LB_EECMP) {
                            hash_member_qp();
                        } else if (meta.lb_policy == LB_SPRAY) {
                            spray();
                        } else if (meta.lb_policy == LB_FLOWLET || meta.lb_policy == LB_DLB) {
                            find_flowlet();
                            if (new_flowlet) {
                                flowlet_number = flowlet_number + 1;
                                /* CRCs are linear: with the flowlet number alone as salt, every
                                 * flow would move (or stay) alike at a boundary. Adding the
                                 * flow's slot makes the salt, and so the move, differ per flow. */
                                hash_member(flowlet_number + (bit<16>)flowlet_slot);
                                if (meta.lb_policy == LB_DLB) {
                                    if (dlb_members.apply().hit) {
                                        least_loaded();
                                    }
                                }
                                start_flowlet();
                            }
                        }
                        ecmp_member.apply();
                    }
                }
            }
            if (routed) {
                nexthop.apply();
            }
            if (standard_metadata.egress_spec == DROP_PORT) {
                dropped.count(queue_index(standard_metadata.ingress_port,
                                          standard_metadata.priority));
                return;
            }
        }

        /* PFC: this packet joins its lossless queue; if it finds XOFF packets or more ahead,
         * the upstream it came from is paused (or the pause refreshed) by a clone sent back. */
        if (pfc_profile.apply().hit) {
            bit<32> queue = queue_index(standard_metadata.egress_spec,
                                        standard_metadata.priority);
            bit<32> upstream = queue_index(meta.ingress_port, standard_metadata.priority);
            bit<32> ahead;
            pfc_queue_depth.read(ahead, queue);
            pfc_queue_depth.write(queue, ahead + 1);
            if (meta.held == 0) {
                bit<32> inside;
                pfc_upstream_packets.read(inside, upstream);
                pfc_upstream_packets.write(upstream, inside + 1);
            }
            if (ahead >= pfc_xoff) {
                bit<48> paused_at;
                pfc_upstream_paused.read(paused_at, upstream);
                bit<48> now = meta.held == 1 ? meta.recirculated_at
                              : standard_metadata.ingress_global_timestamp;
                if (paused_at == 0 || now + 1 - paused_at >= pfc_refresh) {
                    pfc_upstream_paused.write(upstream, now + 1);
                    meta.clone_kind = CLONE_PAUSE;
                    meta.clone_priority = standard_metadata.priority;
                    meta.pause_quanta = pfc_quanta;
                    pfc_pause_tx.count(upstream);
                    clone_preserving_field_list(CloneType.I2E,
                        REVERSE_SESSION_BASE + (bit<32>)meta.ingress_port, FL_CLONE);
                }
            }
        }
    }
}

control LosslessEgress(inout headers hdr, inout metadata meta,
                       inout standard_metadata_t standard_metadata) {
    /* Per egress port: packets marked CE here. */
    counter<bit<32>>(PORTS, CounterType.packets) ecn_marked;
    /* Per port the CNP left on (the marked packet's ingress port): CNPs sent. */
    counter<bit<32>>(PORTS, CounterType.packets) cnp_sent;
    /* Per (port the frame left on, priority): resumes (PFC frames with pause time 0) sent. */
    counter<bit<32>>(QUEUES, CounterType.packets) pfc_resume_tx;
    /* Per (egress port, priority): passes of held packets through their queue, and packets let
     * go while still paused because they reached the hold limit. */
    counter<bit<32>>(QUEUES, CounterType.packets) pfc_hold;
    counter<bit<32>>(QUEUES, CounterType.packets) pfc_hold_expired;

    /* Per (egress port, priority): the hold line. Tickets are handed out in queue order; the
     * ticket served next; when the line last moved or was paused (µs). */
    register<bit<32>, bit<32>>(QUEUES) hold_next_ticket;
    register<bit<32>, bit<32>>(QUEUES) hold_serving;
    register<bit<48>, bit<32>>(QUEUES) hold_moved;
    /* Per flow slot: when this switch last sent a CNP for the flow (µs + 1; 0 = never). */
    register<bit<48>, bit<32>>(CNP_FLOW_SLOTS) cnp_last_sent;
    /* Per ERSPAN session: frames mirrored to it, and frames it would have mirrored but for a
     * PFC resume or a CNP of this switch taking the frame's one egress clone. */
    counter<bit<32>>(ERSPAN_SESSIONS, CounterType.packets) mirror_sent;
    counter<bit<32>>(ERSPAN_SESSIONS, CounterType.packets) mirror_skipped;
    /* Per ERSPAN session: the GRE sequence number of its next frame. */
    register<bit<32>, bit<32>>(ERSPAN_SESSIONS) erspan_sequence;

    bit<32> kmin = 0;
    bit<32> kmax = 0;
    bit<32> pmax = 0;
    bit<48> cnp_interval = 0;

    /* RED on enq_qdepth (packets): no mark at or below `kmin_packets`, probability rising
     * linearly to `pmax` (in 1/65536) just below `kmax_packets`, every packet at or above it. */
    action red(bit<19> kmin_packets, bit<19> kmax_packets, bit<32> pmax_q16) {
        kmin = (bit<32>)kmin_packets;
        kmax = (bit<32>)kmax_packets;
        pmax = pmax_q16;
    }
    table ecn_profile {
        key = {
            standard_metadata.egress_port: exact;
            standard_metadata.priority: exact;
        }
        actions = { red; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    /* The switch CNP fast path for a priority: at most one CNP per flow per `interval_us`, sent
     * with DSCP `dscp`. */
    action cnp(bit<32> interval_us, bit<6> dscp) {
        cnp_interval = (bit<48>)interval_us;
        meta.cnp_dscp = dscp;
    }
    table cnp_config {
        key = { standard_metadata.priority: exact; }
        actions = { cnp; NoAction; }
        default_action = NoAction();
        size = 8;
    }

    /* The QP of a flow's sender, to address its CNPs (default: the packet's own DestQP). */
    action set_cnp_qp(bit<24> qp) {
        meta.cnp_qp = qp;
    }
    table cnp_qp {
        key = {
            hdr.ipv4.srcAddr: exact;
            hdr.ipv4.dstAddr: exact;
            hdr.bth.dstQP: exact;
        }
        actions = { set_cnp_qp; NoAction; }
        default_action = NoAction();
        size = 4096;
    }

    /* Mirrors the frame to ERSPAN session `session`. */
    action mirror_to(bit<10> session) {
        meta.mirror_session = session;
    }
    /* Which IPv4 frames leaving the switch are mirrored, by kind (meta.mirror_kind: 0 other,
     * 1 CNP, 2 NAK or RNR NAK) and priority, both ternary: CNPs and NAKs of every priority are
     * two entries, every frame of priority P one (kind 0&&&0, priority P&&&7). */
    table mirror_policy {
        key = {
            meta.mirror_kind: ternary;
            standard_metadata.priority: ternary;
        }
        actions = { mirror_to; NoAction; }
        default_action = NoAction();
        size = 64;
    }

    /* The outer headers of an ERSPAN frame of `overhead` bytes before the mirrored frame, GRE
     * protocol `protocol`, with the session's next sequence number. Its parameters are `in`:
     * p4c wants compile-time constants for action data passed from another action. */
    action encapsulate(in bit<48> src_mac, in bit<48> dst_mac, in bit<32> src_ip,
                       in bit<32> dst_ip, in bit<6> dscp, in bit<8> ttl, in bit<16> overhead,
                       in bit<16> protocol) {
        hdr.mirror_ethernet.setValid();
        hdr.mirror_ethernet.dstAddr = dst_mac;
        hdr.mirror_ethernet.srcAddr = src_mac;
        hdr.mirror_ethernet.etherType = ETHERTYPE_IPV4;
        hdr.mirror_ipv4.setValid();
        hdr.mirror_ipv4.version = 4;
        hdr.mirror_ipv4.ihl = 5;
        hdr.mirror_ipv4.dscp = dscp;
        hdr.mirror_ipv4.ecn = 0;
        hdr.mirror_ipv4.totalLen = overhead + ETHERNET_BYTES + hdr.ipv4.totalLen;
        hdr.mirror_ipv4.identification = 0;
        hdr.mirror_ipv4.flags = 0;
        hdr.mirror_ipv4.fragOffset = 0;
        hdr.mirror_ipv4.ttl = ttl;
        hdr.mirror_ipv4.protocol = IP_PROTO_GRE;
        hdr.mirror_ipv4.srcAddr = src_ip;
        hdr.mirror_ipv4.dstAddr = dst_ip;
        hdr.gre.setValid();
        hdr.gre.checksumPresent = 0;
        hdr.gre.routingPresent = 0;
        hdr.gre.keyPresent = 0;
        hdr.gre.sequencePresent = 1;
        hdr.gre.strictRoute = 0;
        hdr.gre.recursion = 0;
        hdr.gre.flags = 0;
        hdr.gre.version = 0;
        hdr.gre.protocol = protocol;
        bit<32> sequence;
        erspan_sequence.read(sequence, (bit<32>)meta.mirror_session);
        erspan_sequence.write((bit<32>)meta.mirror_session, sequence + 1);
        hdr.gre.sequence = sequence;
    }

    /* ERSPAN type II from `src_mac`/`src_ip` to the collector at `dst_mac`/`dst_ip` (the MAC
     * of the next hop toward it), outer DSCP `dscp` and TTL `ttl`. */
    action erspan_ii(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip,
                     bit<6> dscp, bit<8> ttl) {
        encapsulate(src_mac, dst_mac, src_ip, dst_ip, dscp, ttl, ERSPAN_II_OVERHEAD,
                    GRE_PROTO_ERSPAN_II);
        hdr.erspan2.setValid();
        hdr.erspan2.version = 1;
        hdr.erspan2.vlan = 0;
        hdr.erspan2.cos = meta.clone_priority;
        hdr.erspan2.encap = 0;
        hdr.erspan2.truncated = 0;
        hdr.erspan2.session = meta.mirror_session;
        hdr.erspan2.reserved = 0;
        hdr.erspan2.index = (bit<20>)meta.mirror_port;
    }
    /* ERSPAN type III, as erspan_ii, with hardware id `hw_id`, direction egress and the
     * switch's µs clock as timestamp (granularity 3, user-defined: µs). */
    action erspan_iii(bit<48> src_mac, bit<48> dst_mac, bit<32> src_ip, bit<32> dst_ip,
                      bit<6> dscp, bit<8> ttl, bit<6> hw_id) {
        encapsulate(src_mac, dst_mac, src_ip, dst_ip, dscp, ttl, ERSPAN_III_OVERHEAD,
                    GRE_PROTO_ERSPAN_III);
        hdr.erspan3.setValid();
        hdr.erspan3.version = 2;
        hdr.erspan3.vlan = 0;
        hdr.erspan3.cos = meta.clone_priority;
        hdr.erspan3.bso = 0;
        hdr.erspan3.truncated = 0;
        hdr.erspan3.session = meta.mirror_session;
        hdr.erspan3.timestamp = standard_metadata.egress_global_timestamp[31:0];
        hdr.erspan3.sgt = 0;
        hdr.erspan3.p = 0;
        hdr.erspan3.frameType = 0;
        hdr.erspan3.hwId = hw_id;
        hdr.erspan3.direction = 1;
        hdr.erspan3.granularity = 3;
        hdr.erspan3.o = 0;
    }
    action drop_mirror() {
        mark_to_drop(standard_metadata);
    }
    /* An ERSPAN session: its encapsulation and addresses. A mirror clone of a session without
     * an entry is dropped. */
    table erspan_session {
        key = { meta.mirror_session: exact; }
        actions = { erspan_ii; erspan_iii; drop_mirror; }
        default_action = drop_mirror();
        size = 1024;
    }

    /* Sends this packet's clone back out of the port it came in on, to become meta.clone_kind. */
    action send_back() {
        clone_preserving_field_list(CloneType.E2E,
            REVERSE_SESSION_BASE + (bit<32>)meta.ingress_port, FL_CLONE);
    }

    /* The clone becomes a PFC frame for meta.clone_priority with meta.pause_quanta (0: resume). */
    action build_pfc_frame() {
        hdr.ipv4.setInvalid();
        hdr.udp.setInvalid();
        hdr.tcp.setInvalid();
        hdr.bth.setInvalid();
        hdr.ethernet.dstAddr = PFC_DESTINATION;
        hdr.ethernet.srcAddr = meta.own_mac;
        hdr.ethernet.etherType = ETHERTYPE_MAC_CONTROL;
        hdr.pfc.setValid();
        hdr.pfc.opcode = MAC_CONTROL_PFC;
        hdr.pfc.classEnable = 16w1 << meta.clone_priority;
        hdr.pfc.time0 = meta.clone_priority == 0 ? meta.pause_quanta : 16w0;
        hdr.pfc.time1 = meta.clone_priority == 1 ? meta.pause_quanta : 16w0;
        hdr.pfc.time2 = meta.clone_priority == 2 ? meta.pause_quanta : 16w0;
        hdr.pfc.time3 = meta.clone_priority == 3 ? meta.pause_quanta : 16w0;
        hdr.pfc.time4 = meta.clone_priority == 4 ? meta.pause_quanta : 16w0;
        hdr.pfc.time5 = meta.clone_priority == 5 ? meta.pause_quanta : 16w0;
        hdr.pfc.time6 = meta.clone_priority == 6 ? meta.pause_quanta : 16w0;
        hdr.pfc.time7 = meta.clone_priority == 7 ? meta.pause_quanta : 16w0;
        hdr.pfc_pad.setValid();
        hdr.pfc_pad.zeros0 = 0;
        hdr.pfc_pad.zeros1 = 0;
        truncate(PFC_FRAME_BYTES);
    }

    /* The clone of a marked RoCEv2 packet becomes a CNP to the flow's sender: addresses
     * swapped, BTH opcode 0x81 with BECN to meta.cnp_qp, 16 reserved bytes, ICRC. */
    action build_cnp() {
        hdr.ethernet.dstAddr = meta.prev_hop_mac;
        hdr.ethernet.srcAddr = meta.own_mac;
        bit<32> sender = hdr.ipv4.srcAddr;
        hdr.ipv4.srcAddr = hdr.ipv4.dstAddr;
        hdr.ipv4.dstAddr = sender;
        hdr.ipv4.dscp = meta.cnp_dscp;
        hdr.ipv4.ecn = 0;
        hdr.ipv4.totalLen = 60;
        hdr.ipv4.identification = 0;
        hdr.ipv4.flags = 2;
        hdr.ipv4.fragOffset = 0;
        hdr.ipv4.ttl = 64;
        hdr.udp.dstPort = ROCEV2_PORT;
        hdr.udp.length = 40;
        hdr.udp.checksum = 0;
        hdr.bth.opcode = BTH_OPCODE_CNP;
        hdr.bth.solicited = 0;
        hdr.bth.migReq = 0;
        hdr.bth.padCount = 0;
        hdr.bth.version = 0;
        hdr.bth.pkey = 0xffff;
        hdr.bth.fecn = 0;
        hdr.bth.becn = 1;
        hdr.bth.resv6 = 0;
        hdr.bth.dstQP = meta.cnp_qp;
        hdr.bth.ackReq = 0;
        hdr.bth.resv7 = 0;
        hdr.bth.psn = 0;
        hdr.cnp_pad.setValid();
        hdr.cnp_pad.reserved = 0;
        /* ICRC: CRC-32 over 8 bytes of ones, then IP, UDP, BTH and the reserved bytes with the
         * variant fields (TOS, TTL, IP checksum, UDP checksum, the BTH byte after P_Key) all
         * ones; stored least significant byte first. hash() gives base + CRC % max: max 2^32
         * keeps all 32 bits (2^32 - 1 would turn a CRC of 0xffffffff into 0). */
        bit<32> crc;
        hash(crc, HashAlgorithm.crc32, 32w0,
             { 64w0xffffffffffffffff,
               hdr.ipv4.version, hdr.ipv4.ihl, 8w0xff, hdr.ipv4.totalLen,
               hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, 8w0xff,
               hdr.ipv4.protocol, 16w0xffff, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr,
               hdr.udp.srcPort, hdr.udp.dstPort, hdr.udp.length, 16w0xffff,
               hdr.bth.opcode, hdr.bth.solicited, hdr.bth.migReq, hdr.bth.padCount,
               hdr.bth.version, hdr.bth.pkey, 8w0xff, hdr.bth.dstQP, hdr.bth.ackReq,
               hdr.bth.resv7, hdr.bth.psn, hdr.cnp_pad.reserved },
             64w0x100000000);
        hdr.icrc.setValid();
        hdr.icrc.value = crc[7:0] ++ crc[15:8] ++ crc[23:16] ++ crc[31:24];
        truncate(CNP_FRAME_BYTES);
    }

    apply {
        if (standard_metadata.instance_type == INSTANCE_INGRESS_CLONE
            || standard_metadata.instance_type == INSTANCE_EGRESS_CLONE) {
            if (meta.clone_kind == CLONE_MIRROR) {
                erspan_session.apply();
            } else if (meta.clone_kind == CLONE_CNP) {
                build_cnp();
            } else {
                build_pfc_frame();
            }
            return;
        }

        bit<48> now = standard_metadata.egress_global_timestamp;
        bit<32> enq = (bit<32>)standard_metadata.enq_qdepth;
        bit<32> deq = (bit<32>)standard_metadata.deq_qdepth;
        bit<32> port = (bit<32>)standard_metadata.egress_port;
        bit<32> queue = queue_index(standard_metadata.egress_port, standard_metadata.priority);
        bit<32> upstream = queue_index(meta.ingress_port, standard_metadata.priority);

        /* DLB's load estimate of this port: load += (enq_qdepth - load) / 4, in 1/256 packets. */
        bit<32> load;
        port_load.read(load, port);
        port_load.write(port, load - (load >> 2) + (enq << 6));
        port_load_stamp.write(port, now + 1);

        /* The packet's clone, if any, is decided afresh here (ingress may have sent a PAUSE). */
        meta.clone_kind = CLONE_NONE;
        if (meta.lossless == 1) {
            /* PFC's view of the queue, as this packet leaves it. */
            pfc_queue_depth.write(queue, deq);

            /* The hold: while this port is paused for this priority, and until everyone held
             * before has gone, packets take a ticket and recirculate through this queue; they
             * leave in ticket order once the pause is over. */
            bit<48> until;
            bit<32> next;
            bit<32> serving;
            bit<48> moved;
            pfc_paused_until.read(until, queue);
            hold_next_ticket.read(next, queue);
            hold_serving.read(serving, queue);
            hold_moved.read(moved, queue);
            bool paused = now < until;
            if (paused) {
                moved = now;
                hold_moved.write(queue, now);
            }
            if (meta.held == 0 && (paused || next != serving)) {
                meta.held = 1;
                meta.hold_ticket = next;
                meta.hold_passes = 0;
                hold_next_ticket.write(queue, next + 1);
            }
            if (meta.held == 1) {
                bool turn = ticket_not_after(meta.hold_ticket, serving)
                            || now - moved >= meta.hold_stall;
                bool expired = meta.hold_passes >= meta.hold_limit;
                if (turn && (!paused || expired)) {
                    if (ticket_not_after(serving, meta.hold_ticket)) {
                        hold_serving.write(queue, meta.hold_ticket + 1);
                    }
                    hold_moved.write(queue, now);
                    meta.held = 0;
                    if (paused) {
                        pfc_hold_expired.count(queue);
                    }
                } else {
                    meta.hold_passes = meta.hold_passes + 1;
                    meta.hold_port = standard_metadata.egress_port;
                    meta.hold_priority = standard_metadata.priority;
                    meta.recirculated_at = now;
                    pfc_hold.count(queue);
                    recirculate_preserving_field_list(FL_HOLD);
                    return;
                }
            }

            /* The packet leaves: one fewer from its upstream; at XON, resume that upstream if
             * this switch paused it. */
            bit<32> inside;
            pfc_upstream_packets.read(inside, upstream);
            inside = inside == 0 ? 32w0 : inside - 1;
            pfc_upstream_packets.write(upstream, inside);
            bit<48> paused_at;
            pfc_upstream_paused.read(paused_at, upstream);
            if (inside <= meta.pfc_xon && paused_at != 0) {
                meta.clone_kind = CLONE_RESUME;
                meta.clone_priority = standard_metadata.priority;
                meta.pause_quanta = 0;
                pfc_upstream_paused.write(upstream, 0);
                pfc_resume_tx.count(upstream);
            }
        }

        /* ECN: RED on the depth this packet found. */
        bool marked = false;
        if (hdr.ipv4.isValid() && (hdr.ipv4.ecn == 1 || hdr.ipv4.ecn == 2)) {
            if (ecn_profile.apply().hit) {
                if (enq >= kmax) {
                    marked = true;
                } else if (enq > kmin) {
                    /* Mark with probability pmax (enq - kmin) / (kmax - kmin). */
                    bit<16> r;
                    random(r, 16w0, 16w0xffff);
                    marked = (bit<64>)r * (bit<64>)(kmax - kmin)
                             < (bit<64>)pmax * (bit<64>)(enq - kmin);
                }
                if (marked) {
                    hdr.ipv4.ecn = 3;
                    ecn_marked.count(port);
                }
            }
        }

        /* The switch CNP fast path: a marked RoCEv2 data packet sends its sender a CNP, at most
         * one per flow per interval, unless a PFC frame takes this packet's one clone. */
        bool cnp_wanted = marked && hdr.ipv4.isValid() && hdr.bth.isValid()
                          && hdr.bth.opcode != BTH_OPCODE_CNP && meta.clone_kind == CLONE_NONE;
        if (cnp_wanted) {
            if (cnp_config.apply().hit) {
                bit<32> flow;
                hash(flow, HashAlgorithm.crc32, 32w0,
                     { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.bth.dstQP }, CNP_FLOW_SLOTS);
                bit<48> last;
                cnp_last_sent.read(last, flow);
                if (last == 0 || now + 1 - last >= cnp_interval) {
                    cnp_last_sent.write(flow, now + 1);
                    meta.cnp_qp = hdr.bth.dstQP;
                    cnp_qp.apply();
                    meta.clone_kind = CLONE_CNP;
                    cnp_sent.count((bit<32>)meta.ingress_port);
                }
            }
        }

        /* Mirroring: CNPs, NAKs or every frame of a priority, as mirror_policy says. A frame has
         * one egress clone: a resume or a CNP of this switch takes it before a mirror. */
        bool mirrored = false;
        if (hdr.ipv4.isValid()) {
            meta.mirror_kind = MIRROR_KIND_OTHER;
            if (hdr.bth.isValid() && hdr.bth.opcode == BTH_OPCODE_CNP) {
                meta.mirror_kind = MIRROR_KIND_CNP;
            } else if (meta.rc_ack == 1 && (meta.aeth_syndrome[7:5] == AETH_NAK
                                            || meta.aeth_syndrome[7:5] == AETH_RNR_NAK)) {
                meta.mirror_kind = MIRROR_KIND_NAK;
            }
            mirrored = mirror_policy.apply().hit;
        }

        if (meta.clone_kind != CLONE_NONE) {
            if (mirrored) {
                mirror_skipped.count((bit<32>)meta.mirror_session);
            }
            send_back();
        } else if (mirrored) {
            meta.clone_kind = CLONE_MIRROR;
            meta.clone_priority = standard_metadata.priority;
            meta.mirror_port = standard_metadata.egress_port;
            mirror_sent.count((bit<32>)meta.mirror_session);
            clone_preserving_field_list(CloneType.E2E,
                MIRROR_SESSION_BASE + (bit<32>)meta.mirror_session, FL_CLONE);
        }
    }
}

control LosslessComputeChecksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(
            hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.totalLen,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.fragOffset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.srcAddr, hdr.ipv4.dstAddr },
            hdr.ipv4.hdrChecksum,
            HashAlgorithm.csum16);
        update_checksum(
            hdr.mirror_ipv4.isValid(),
            { hdr.mirror_ipv4.version, hdr.mirror_ipv4.ihl, hdr.mirror_ipv4.dscp,
              hdr.mirror_ipv4.ecn, hdr.mirror_ipv4.totalLen, hdr.mirror_ipv4.identification,
              hdr.mirror_ipv4.flags, hdr.mirror_ipv4.fragOffset, hdr.mirror_ipv4.ttl,
              hdr.mirror_ipv4.protocol, hdr.mirror_ipv4.srcAddr, hdr.mirror_ipv4.dstAddr },
            hdr.mirror_ipv4.hdrChecksum,
            HashAlgorithm.csum16);
    }
}

control LosslessDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.mirror_ethernet);
        packet.emit(hdr.mirror_ipv4);
        packet.emit(hdr.gre);
        packet.emit(hdr.erspan2);
        packet.emit(hdr.erspan3);
        packet.emit(hdr.ethernet);
        packet.emit(hdr.pfc);
        packet.emit(hdr.pfc_pad);
        packet.emit(hdr.ipv4);
        packet.emit(hdr.udp);
        packet.emit(hdr.tcp);
        packet.emit(hdr.bth);
        packet.emit(hdr.cnp_pad);
        packet.emit(hdr.icrc);
    }
}

V1Switch(LosslessParser(), LosslessVerifyChecksum(), LosslessIngress(), LosslessEgress(),
         LosslessComputeChecksum(), LosslessDeparser()) main;
