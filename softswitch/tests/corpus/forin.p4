/* for-in loops (P4_16 1.2.x) over a header stack, a list (cast to list<T>, as p4c wants it)
 * and a range lo .. hi (both ends included), with break and continue, and a three-clause loop
 * in a control's apply block.
 * softswitch only: p4c's BMv2 back end refuses for-in loops ("BMV2 does not support for-in
 * loops") and, in an apply block, drops a loop's condition and update (it runs the body once).
 * Expected values are computed independently by generators/forin.py. */
#include <core.p4>
#include <v1model.p4>

header item_t {
    bit<8> v;
}

header res_t {
    bit<8> stack_sum;
    bit<8> valid;
    bit<8> list_sum;
    bit<8> range_sum;
    bit<8> range_top;
    bit<8> apply_loop;
}

struct headers {
    item_t[4] items;
    res_t     res;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    // Items up to and including the first 0, four at most.
    state start {
        packet.extract(hdr.items.next);
        transition select(hdr.items.last.v, hdr.items.lastIndex) {
            (0, _): accept;
            (_, 3): accept;
            default: start;
        }
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.res.setValid();
        // Every element, valid or not (an invalid one reads as zeros here, as it was never
        // extracted); the loop variable is a copy.
        bit<8> sum = 0;
        bit<8> valid = 0;
        for (item_t it in hdr.items) {
            if (!it.isValid()) {
                continue;
            }
            valid += 1;
            sum = sum + it.v;
            it.v = 0;
        }
        hdr.res.stack_sum = sum;
        hdr.res.valid = valid;
        // A list: stops at the first element above the first item's value.
        bit<8> list_sum = 0;
        for (bit<8> x in (list<bit<8>>){8w1, 8w2, 8w40, 8w3}) {
            if (x > hdr.items[0].v) {
                break;
            }
            list_sum = list_sum + x;
        }
        hdr.res.list_sum = list_sum;
        // A range up to the type's largest value ends rather than wrapping.
        bit<8> range_sum = 0;
        bit<8> top = 0;
        for (bit<8> r in hdr.items[0].v .. 255) {
            range_sum = range_sum + 1;
            top = r;
            r = 0;
        }
        hdr.res.range_sum = range_sum;
        hdr.res.range_top = top;
        // A three-clause loop in the apply block itself.
        bit<8> n = 0;
        for (bit<8> i = 0; i < hdr.items[0].v && i < 10; i = i + 1) {
            n = n + 2;
        }
        hdr.res.apply_loop = n;
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
        packet.emit(hdr.items);
        packet.emit(hdr.res);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
