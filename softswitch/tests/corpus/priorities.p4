/* Priorities of the entries a program gives a table, as p4c places them for BMv2: `priority = N`,
 * entries without one taking the one before them less 1, the entries then ordered winner first.
 * A table without priorities: the first entry that matches wins (priority_annotations.p4 has
 * `@priority`, `largest_priority_wins` and `priority_delta`).
 * Expected values are computed independently by generators/priorities.py. */
#include <core.p4>
#include <v1model.p4>

header key_t {
    bit<8> a;
    bit<8> b;
    bit<8> r1;
    bit<8> r2;
}

struct headers {
    key_t k;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.k);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set1(bit<8> v) {
        hdr.k.r1 = v;
    }
    action set2(bit<8> v) {
        hdr.k.r2 = v;
    }
    table written {
        key = {
            hdr.k.a : ternary;
            hdr.k.b : ternary;
        }
        actions = { set1; }
        default_action = set1(0xff);
        entries = {
            priority = 100 : (0x01 &&& 0x0f, _) : set1(1);
            (_, 0x02 &&& 0xff) : set1(2);
            priority = 50 : (0x11 &&& 0xff, _) : set1(3);
            (0x03 &&& 0x03, _) : set1(4);
            priority = 20 : (0x80 &&& 0x80, 0x80 &&& 0x80) : set1(5);
            (0x80 &&& 0x80, _) : set1(6);
        }
    }
    table in_order {
        key = {
            hdr.k.a : range;
        }
        actions = { set2; }
        default_action = set2(0xff);
        const entries = {
            0x10 .. 0x1f : set2(1);
            0x00 .. 0x7f : set2(2);
            0x18 .. 0x18 : set2(3);
        }
    }
    apply {
        written.apply();
        in_order.apply();
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.k);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
