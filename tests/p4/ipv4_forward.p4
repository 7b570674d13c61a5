/* IPv4 forwarding with fixed routes, for softswitch's port tests and benchmark:
 * 10.0.1.0/24 -> port 1, 10.0.2.0/24 -> port 2, 10.0.3.0/24 -> port 3, each rewriting the
 * destination MAC to 02:00:00:00:00:0P, decrementing the TTL and fixing the checksum;
 * everything else is dropped. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<8> tos; bit<16> total_len; bit<16> id;
    bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> checksum;
    bit<32> src; bit<32> dst;
}
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x800: ipv4; default: accept; }
    }
    state ipv4 { pk.extract(hdr.ipv4); transition accept; }
}

control Forward(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action drop() { mark_to_drop(sm); }
    action route(bit<48> mac, bit<9> port) {
        hdr.ethernet.src = hdr.ethernet.dst;
        hdr.ethernet.dst = mac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        sm.egress_spec = port;
    }
    table ipv4_lpm {
        key = { hdr.ipv4.dst: lpm; }
        actions = { route; drop; }
        default_action = drop();
        const entries = {
            0x0a000100 &&& 0xffffff00 : route(0x020000000001, 1);
            0x0a000200 &&& 0xffffff00 : route(0x020000000002, 2);
            0x0a000300 &&& 0xffffff00 : route(0x020000000003, 3);
        }
    }
    apply {
        if (hdr.ipv4.isValid()) { ipv4_lpm.apply(); } else { drop(); }
    }
}

control NoEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control NoVerify(inout headers hdr, inout metadata meta) { apply { } }
control Checksum(inout headers hdr, inout metadata meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.total_len, hdr.ipv4.id,
              hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.proto, hdr.ipv4.src,
              hdr.ipv4.dst },
            hdr.ipv4.checksum, HashAlgorithm.csum16);
    }
}
control Emit(packet_out pk, in headers hdr) { apply { pk.emit(hdr.ethernet); pk.emit(hdr.ipv4); } }

V1Switch(P(), NoVerify(), Forward(), NoEgress(), Checksum(), Emit()) main;
