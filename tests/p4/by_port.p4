/* The replacement pipeline of the P4Runtime client's tests: forwards by ingress port alone
 * (no IPv4 table), to a port or through a multicast group, rewriting the destination MAC so the
 * receiving host accepts the frame, and counts packets per ingress port under a different name
 * than forward.p4. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct metadata { }

struct headers {
    ethernet_t ethernet;
}

parser PortParser(packet_in packet,
                  out headers hdr,
                  inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout metadata meta) {
    apply { }
}

control PortIngress(inout headers hdr,
                    inout metadata meta,
                    inout standard_metadata_t standard_metadata) {
    counter(512, CounterType.packets) ingress_packets;

    action to_port(bit<9> port, bit<48> dmac) {
        standard_metadata.egress_spec = port;
        hdr.ethernet.dstAddr = dmac;
    }

    action to_group(bit<16> group, bit<48> dmac) {
        standard_metadata.mcast_grp = group;
        hdr.ethernet.dstAddr = dmac;
    }

    action drop() {
        mark_to_drop(standard_metadata);
    }

    table by_port {
        key = {
            standard_metadata.ingress_port: exact;
        }
        actions = {
            to_port;
            to_group;
            drop;
        }
        size = 64;
        default_action = drop();
    }

    apply {
        ingress_packets.count((bit<32>) standard_metadata.ingress_port);
        by_port.apply();
    }
}

control NoEgress(inout headers hdr,
                 inout metadata meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control NoChecksum(inout headers hdr, inout metadata meta) {
    apply { }
}

control PortDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ethernet);
    }
}

V1Switch(PortParser(), NoVerify(), PortIngress(), NoEgress(), NoChecksum(), PortDeparser()) main;
