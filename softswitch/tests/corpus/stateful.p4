/* Externs and the packet replication engine: register, counter, direct_counter, a ternary
 * table with priorities and a switch on action_run, I2E clone to a mirroring session,
 * multicast groups with replication ids, truncate, and instance_type in egress. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dstAddr;
    bit<48> srcAddr;
    bit<16> etherType;
}

struct headers {
    ethernet_t eth;
}

struct meta_t {
    bit<32> seen;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    register<bit<32>>(16) seen_per_port;
    counter(8, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets) classify_counter;

    action to_port(bit<9> port) {
        standard_metadata.egress_spec = port;
    }
    action flood(bit<16> group) {
        standard_metadata.mcast_grp = group;
    }
    action mirror(bit<32> session, bit<9> port) {
        standard_metadata.egress_spec = port;
        clone(CloneType.I2E, session);
    }
    action drop() {
        mark_to_drop(standard_metadata);
    }
    table classify {
        key = {
            hdr.eth.dstAddr: ternary;
        }
        actions = {
            to_port;
            flood;
            mirror;
            drop;
        }
        counters = classify_counter;
        default_action = drop();
    }
    apply {
        bit<32> index = (bit<32>) standard_metadata.ingress_port;
        @atomic {
            seen_per_port.read(meta.seen, index);
            meta.seen = meta.seen + 1;
            seen_per_port.write(index, meta.seen);
        }
        port_counter.count(index);
        switch (classify.apply().action_run) {
            to_port: {
                // The low byte of the source address carries the per-port packet count.
                hdr.eth.srcAddr[7:0] = meta.seen[7:0];
            }
            drop: { }
        }
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (standard_metadata.instance_type == 1) {
            // An I2E clone: marked, and cut to its Ethernet header.
            hdr.eth.etherType = 0xc10e;
            truncate(14);
        } else if (standard_metadata.instance_type == 5) {
            hdr.eth.etherType = standard_metadata.egress_rid;
        }
    }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.eth);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
