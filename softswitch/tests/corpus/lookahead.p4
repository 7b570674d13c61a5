/* packet.lookahead<T>() of every type p4c takes for BMv2, as a value, a field chain and a
 * statement: a struct with a nested struct, a struct holding a header (made valid), a header
 * (and its isValid()), bit<1>, a serializable enum and int<8> (lookahead<bool> works too, but
 * p4c writes it as a b2d of a lookahead, which simple_switch refuses). Each needs its bits after the
 * cursor: a packet too short stops the parser there with PacketTooShort, what came before
 * kept. Nothing is consumed, so the bytes looked at follow as payload. Expected packets are
 * computed independently by generators/lookahead.py. */
#include <core.p4>
#include <v1model.p4>

header pre_t {
    bit<8> kind;
}

struct nibbles_t {
    bit<4> hi;
    bit<4> lo;
}

struct peek_t {
    bit<8>    first;
    nibbles_t second;
}

header two_t {
    bit<8> a;
    bit<8> b;
}

struct wrapped_t {
    two_t  h;
    bit<8> z;
}

enum bit<8> kind_t {
    SMALL = 1,
    BIG = 2
}

header report_t {
    bit<8> first;
    bit<4> hi;
    bit<4> lo;
    bit<8> lo_again;
    bit<8> a;
    bit<8> b;
    bit<8> z;
    bit<8> wrapped_valid;
    bit<8> top_bit;
    bit<8> kind;
    int<8> signed_byte;
    bit<8> peek_valid;
    bit<8> too_short;
}

struct headers {
    pre_t    pre;
    report_t report;
}

struct meta_t {
    peek_t    peek;
    bit<4>    lo;
    wrapped_t wrapped;
    bool      top_bit;
    kind_t    kind;
    int<8>    signed_byte;
    bool      peek_valid;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.pre);
        packet.lookahead<peek_t>();
        meta.peek = packet.lookahead<peek_t>();
        meta.lo = packet.lookahead<peek_t>().second.lo;
        transition select(hdr.pre.kind) {
            1: more;
            default: accept;
        }
    }
    state more {
        meta.wrapped = packet.lookahead<wrapped_t>();
        meta.top_bit = packet.lookahead<bit<1>>() == 1;
        meta.kind = packet.lookahead<kind_t>();
        meta.signed_byte = packet.lookahead<int<8>>();
        meta.peek_valid = packet.lookahead<two_t>().isValid();
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
        hdr.report.setValid();
        hdr.report.first = meta.peek.first;
        hdr.report.hi = meta.peek.second.hi;
        hdr.report.lo = meta.peek.second.lo;
        hdr.report.lo_again = (bit<8>) meta.lo;
        hdr.report.a = meta.wrapped.h.a;
        hdr.report.b = meta.wrapped.h.b;
        hdr.report.z = meta.wrapped.z;
        hdr.report.wrapped_valid = meta.wrapped.h.isValid() ? 8w1 : 8w0;
        hdr.report.top_bit = meta.top_bit ? 8w1 : 8w0;
        hdr.report.kind = (bit<8>) meta.kind;
        hdr.report.signed_byte = meta.signed_byte;
        hdr.report.peek_valid = meta.peek_valid ? 8w1 : 8w0;
        if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.report.too_short = 1;
        } else {
            hdr.report.too_short = 0;
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
