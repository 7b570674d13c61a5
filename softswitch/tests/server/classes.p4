/* The program of the scheduling test: every IPv4 packet goes to port 3 in the priority its DSCP's
 * class selector names (DSCP bits 5..3: CS1 is priority 1, CS2 priority 2). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> type; }
header ipv4_t {
    bit<4> version; bit<4> ihl; bit<6> dscp; bit<2> ecn; bit<16> len; bit<16> id;
    bit<3> flags; bit<13> frag; bit<8> ttl; bit<8> proto; bit<16> csum; bit<32> src; bit<32> dst;
}
struct headers { ethernet_t ethernet; ipv4_t ipv4; }
struct metadata { }

parser MyParser(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        pk.extract(hdr.ethernet);
        transition select(hdr.ethernet.type) { 0x0800: ipv4; default: accept; }
    }
    state ipv4 { pk.extract(hdr.ipv4); transition accept; }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    apply {
        if (hdr.ipv4.isValid()) {
            sm.egress_spec = 3;
            sm.priority = hdr.ipv4.dscp[5:3];
        } else {
            mark_to_drop(sm);
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control Verify(inout headers hdr, inout metadata meta) { apply { } }
control Compute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pk, in headers hdr) { apply { pk.emit(hdr.ethernet); pk.emit(hdr.ipv4); } }

V1Switch(MyParser(), Verify(), MyIngress(), MyEgress(), Compute(), MyDeparser()) main;
