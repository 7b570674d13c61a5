/* Action profiles and selectors: a table whose entries point to members (actions with data)
 * of an action profile, and an ECMP table whose entries point to a group of an action
 * selector, which runs the member the CRC-16 of the selector keys picks. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etype;
}

header ipv4_t {
    bit<8>  vihl;
    bit<8>  tos;
    bit<16> len;
    bit<32> id_frag;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> csum;
    bit<32> src;
    bit<32> dst;
}

header ports_t {
    bit<16> src;
    bit<16> dst;
}

struct headers {
    ethernet_t eth;
    ipv4_t     ipv4;
    ports_t    ports;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        packet.extract(hdr.ipv4);
        packet.extract(hdr.ports);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action_profile(8) by_type_members;

    action set_port(bit<9> port, bit<48> dmac) {
        standard_metadata.egress_spec = port;
        hdr.eth.dst = dmac;
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table ecmp {
        key = {
            hdr.ipv4.dst: lpm;
            hdr.ipv4.src: selector;
            hdr.ports.src: selector;
        }
        actions = { set_port; drop; }
        implementation = action_selector(HashAlgorithm.crc16, 32w16, 32w14);
        default_action = drop();
    }
    table by_type {
        key = {
            hdr.eth.etype: exact;
        }
        actions = { set_port; NoAction; }
        implementation = by_type_members;
        default_action = NoAction();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            ecmp.apply();
        } else {
            by_type.apply();
        }
    }
}

control NoEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), NoEgress(), NoCompute(), MyDeparser()) main;
