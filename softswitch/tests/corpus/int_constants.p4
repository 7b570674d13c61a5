/* `int` constants folded with arbitrary precision, as the P4_16 specification says: 2^128 - 1
 * is not -1, 2^200 divides and shifts back down exactly, a negative int casts to bit<W> modulo
 * 2^W; `true && true` and comparisons of ints are compile-time constants; struct and list
 * expressions as arguments take their type from the parameter. Expected values are computed
 * independently by generators/int_constants.py. */
#include <core.p4>
#include <v1model.p4>

const int ALL_ONES = (1 << 128) - 1;
const int HUGE = 1 << 200;
const int DOWN = HUGE / (1 << 180) + HUGE % 7;
const int NEGATIVE = -(1 << 70) - 5;
const bool BOTH = true && true;
const bool BIGGER = ALL_ONES > (1 << 127);
const bit<128> WIDE = ALL_ONES;

header in_t {
    bit<8> a;
    bit<8> b;
}

header out_t {
    bit<128> wide;
    bit<64>  high;
    bit<32>  down;
    bit<16>  negative;
    bit<8>   flags;
    bit<8>   sum;
    bit<8>   sum2;
}

struct pair_t {
    bit<8> x;
    bit<8> y;
}

struct headers {
    in_t  i;
    out_t o;
}

struct meta_t { }

bit<8> add(in pair_t p) {
    return p.x + p.y;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.i);
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
        hdr.o.setValid();
        hdr.o.wide = WIDE;
        hdr.o.high = (bit<64>)(ALL_ONES >> 64);
        hdr.o.down = (bit<32>)DOWN;
        hdr.o.negative = (bit<16>)NEGATIVE;
        hdr.o.flags = 0;
        if (BOTH) {
            hdr.o.flags = hdr.o.flags | 1;
        }
        if (BIGGER) {
            hdr.o.flags = hdr.o.flags | 2;
        }
        if (ALL_ONES + 1 == 1 << 128) {
            hdr.o.flags = hdr.o.flags | 4;
        }
        hdr.o.sum = add({hdr.i.a, hdr.i.b});
        hdr.o.sum2 = add({ x = hdr.i.a, y = 1 });
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
