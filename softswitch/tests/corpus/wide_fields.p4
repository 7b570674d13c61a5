/* Fields wider than 128 bits (bit<336>, as in p4c's issue1879-bmv2.p4, and bit<200>): extract
 * and emit, a wide local variable (a swap), == and != of wide values, slices that read within
 * one 128-bit part of a value and across two, writes to a slice, int constants, and &, ^, |,
 * ~ and shifts by constants. Expected values are computed independently by
 * generators/wide_fields.py. */
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;
    bit<8> equal;
    bit<8> differ;
    bit<16> mid;
    bit<8> top;
}

header wide_t {
    bit<336> a;
    bit<336> b;
    bit<200> c;
}

struct headers {
    op_t   op;
    wide_t w;
}

struct meta_t {
    bit<336> saved;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.op);
        packet.extract(hdr.w);
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
        hdr.op.equal = hdr.w.a == hdr.w.b ? 8w1 : 8w0;
        hdr.op.differ = hdr.w.a != hdr.w.b ? 8w1 : 8w0;
        // Bits 135..120 of c lie in both of its parts; bits 199..192 in its first alone.
        hdr.op.mid = hdr.w.c[135:120];
        hdr.op.top = hdr.w.c[199:192];
        if (hdr.op.op == 1) {
            bit<336> t = hdr.w.a;
            hdr.w.a = hdr.w.b;
            hdr.w.b = t;
        } else if (hdr.op.op == 2) {
            meta.saved = hdr.w.b;
            hdr.w.a = meta.saved;
            hdr.w.c[7:0] = 8w0xff;
            hdr.w.c[199:196] = 4w0;
        } else if (hdr.op.op == 3) {
            hdr.w.b = 0x1234;
            meta.saved = (1 << 300) + 0xabcd;
            hdr.w.a = meta.saved;
        } else if (hdr.op.op == 4) {
            hdr.w.b = (hdr.w.a & hdr.w.b) ^ (hdr.w.a << 100);
            hdr.w.a = hdr.w.b >> 200 | 0xff;
            hdr.w.c = ~hdr.w.c;
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
        packet.emit(hdr.op);
        packet.emit(hdr.w);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
