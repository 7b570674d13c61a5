/* Contextual keywords as names, as the P4_16 1.2.x grammar allows (its nonTypeName and name
 * productions): header fields, action and function parameters, local variables and constants
 * named type, key, actions, entries, state, priority, apply and list. Expected values are
 * computed independently by generators/names.py. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> type;
    bit<8> key;
    bit<8> actions;
    bit<8> entries;
    bit<8> state;
    bit<8> priority;
    bit<8> apply;
    bit<8> list;
}

struct headers {
    h_t h;
}

struct meta_t {
    bit<8> state;
    bit<8> type;
}

const bit<8> priority = 3;

bit<8> mix(in bit<8> type, in bit<8> key) {
    bit<8> apply = type ^ key;
    return apply;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        meta.state = hdr.h.state;
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set(bit<8> entries, bit<8> actions) {
        hdr.h.entries = entries;
        hdr.h.actions = actions;
    }
    table by_type {
        key = {
            hdr.h.type : exact;
        }
        actions = {
            set;
            NoAction;
        }
        const entries = {
            1 : set(10, 11);
            2 : set(20, 21);
        }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        bit<8> state = meta.state;
        bit<8> type = hdr.h.type;
        by_type.apply();
        hdr.h.key = mix(type, hdr.h.key);
        hdr.h.priority = hdr.h.priority + priority;
        hdr.h.apply = state + 1;
        hdr.h.list = hdr.h.list |+| type;
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.h);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
