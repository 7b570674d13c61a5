/* Entry priorities past the specification's defaults: `largest_priority_wins = false` with
 * `priority_delta = 10` (each entry without a priority takes the one before it plus 10, and the
 * smallest wins), and BMv2's `@priority(N)` after an entry's action, which gives BMv2 N in place
 * of the entry's place in p4c's list. p4c warns about all three (its BMv2 back end does not know
 * the properties, which its front end honours; its P4Runtime serializer ignores the annotation,
 * its BMv2 JSON keeps it), so the program is softswitch-only in the corpus list; its STF passes
 * on BMv2 (`softswitch stf --target bmv2`). Expected values are computed independently by
 * generators/priority_annotations.py. */
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
    table smallest {
        key = {
            hdr.k.a : ternary;
            hdr.k.b : ternary;
        }
        actions = { set1; }
        default_action = set1(0xff);
        largest_priority_wins = false;
        priority_delta = 10;
        entries = {
            priority = 5 : (0x01 &&& 0x0f, _) : set1(1);
            (_, 0x02 &&& 0xff) : set1(2);
            priority = 12 : (0x11 &&& 0xff, _) : set1(3);
            (0x03 &&& 0x03, _) : set1(4);
        }
    }
    table annotated {
        key = {
            hdr.k.a : ternary;
        }
        actions = { set2; }
        default_action = set2(0xff);
        entries = {
            0x01 &&& 0x0f : set2(1) @priority(10);
            0x11 &&& 0xff : set2(2);
            0x01 &&& 0x01 : set2(3);
        }
    }
    apply {
        smallest.apply();
        annotated.apply();
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
