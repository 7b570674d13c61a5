/* Whole header-stack elements picked at run time, where BMv2 cannot follow: copied into a
 * stack (`hdr.s[i] = h`, `hdr.s[i] = hdr.t[j]`), passed as inout arguments, isValid() at a
 * run-time index, and indices out of range or negative. Out of range (a negative index is),
 * an element reads as an invalid header with zero fields and a write to it does nothing, as
 * for a field (docs/softswitch.md); BMv2's simple_switch aborts there, and refuses the JSON
 * p4c writes for a copy into an element and for isValid() (testkit::bmv2::SOFTSWITCH_ONLY).
 * Expected packets are computed independently by generators/stack_bounds.py. */
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;
    bit<8> src;
    bit<8> dst;
    int<8> sdst;
}

header elem_t {
    bit<8> a;
    bit<8> b;
}

struct headers {
    op_t      op;
    elem_t    one;
    elem_t[3] s;
    elem_t[3] t;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.op);
        packet.extract(hdr.one);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        packet.extract(hdr.s.next);
        packet.extract(hdr.t.next);
        packet.extract(hdr.t.next);
        packet.extract(hdr.t.next);
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

void swap(inout elem_t x, inout elem_t y) {
    elem_t saved = x;
    x = y;
    y = saved;
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        elem_t tmp;
        if (hdr.op.op == 1) {
            // Swap `one` with s[src] through a local.
            tmp = hdr.s[hdr.op.src];
            hdr.s[hdr.op.src] = hdr.one;
            hdr.one = tmp;
        } else if (hdr.op.op == 2) {
            hdr.s[hdr.op.dst] = hdr.t[hdr.op.src];
        } else if (hdr.op.op == 3) {
            swap(hdr.s[hdr.op.src], hdr.t[hdr.op.dst]);
        } else if (hdr.op.op == 4) {
            hdr.t[hdr.op.sdst] = hdr.one;
            hdr.one = hdr.s[hdr.op.sdst];
            hdr.s[hdr.op.sdst] = {0xaa, 0xbb};
        } else if (hdr.op.op == 5) {
            if (hdr.s[hdr.op.dst].isValid()) {
                hdr.op.src = 1;
            } else {
                hdr.op.src = 0;
            }
            hdr.s[hdr.op.dst].setInvalid();
        }
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
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
