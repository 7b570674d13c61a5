/* Whole header-stack elements picked at run time, as far as BMv2 runs them: copied out of a
 * stack (`h = hdr.s[i]`), written with a list (`hdr.s[i] = {..}`), made invalid with
 * setInvalid, at an unsigned or a signed (int<8>) index. The packets keep the indices in
 * range: out of range BMv2's simple_switch aborts. Copies into an element (`hdr.s[i] = h`),
 * out of range and negative indices are in stack_bounds.p4, which simple_switch cannot run.
 * Expected packets are computed independently by generators/stack_elements.py. */
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

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        if (hdr.op.op == 1) {
            hdr.one = hdr.s[hdr.op.src];
        } else if (hdr.op.op == 2) {
            hdr.s[hdr.op.dst] = {0xaa, 0xbb};
        } else if (hdr.op.op == 3) {
            // An invalid element copied makes its destination invalid.
            hdr.t[hdr.op.src].setInvalid();
            hdr.one = hdr.t[hdr.op.src];
        } else if (hdr.op.op == 4) {
            hdr.one = hdr.t[hdr.op.sdst];
            hdr.s[hdr.op.sdst].a = 0x55;
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
