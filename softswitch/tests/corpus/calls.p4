/* Calls whose value is not used (P4_16 1.2.x): a function returning a value called as a
 * statement, packet_in.lookahead as a statement (it still needs the bits: a packet too short
 * for them is a parser error, PacketTooShort, as in BMv2), and `_` (don't care) as an out
 * argument of a function and of an action. Expected values are computed independently by
 * generators/calls.py. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> hi;
    bit<8> lo;
    bit<8> calls;
    bit<8> short;
}

struct headers {
    h_t h;
}

struct meta_t {
    bit<8> calls;
}

// Splits x into its nibbles; returns how many times it ran, counted in `calls`.
bit<8> split(in bit<8> x, out bit<8> hi, out bit<8> lo, inout bit<8> calls) {
    hi = x >> 4;
    lo = x & 0xf;
    calls = calls + 1;
    return calls;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        packet.lookahead<bit<16>>();
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action nibbles(out bit<8> hi, out bit<8> lo) {
        hi = hdr.h.a >> 4;
        lo = hdr.h.a & 0xf;
    }
    apply {
        standard_metadata.egress_spec = 1;
        bit<8> calls = 0;
        bit<8> lo;
        split(hdr.h.a, _, lo, calls);
        hdr.h.lo = lo;
        split(hdr.h.a, hdr.h.hi, _, calls);
        bit<8> hi2;
        nibbles(hi2, _);
        hdr.h.hi = hdr.h.hi + hi2;
        hdr.h.calls = calls;
        hdr.h.short = standard_metadata.parser_error == error.PacketTooShort ? 8w1 : 8w0;
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
