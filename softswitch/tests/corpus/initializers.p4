/* List and struct expressions where the type comes from the other side (P4_16 1.2.x): as
 * arguments typed by the parameter (a directionless struct parameter given a constant list,
 * `in` struct parameters of functions and actions given lists and struct expressions of run-time
 * values, nested), as return values, and as an operand of == and != typed by the other operand.
 * (p4c 1.2.5 lowers a struct expression on the left of == wrongly for BMv2, so they are on the
 * right here; softswitch takes either side.) Expected values are computed independently by
 * generators/initializers.py. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8>  a;
    bit<8>  b;
    bit<16> c;
}

header out_t {
    bit<8>  sum;
    bit<8>  diff;
    bit<8>  sx;
    bit<8>  sy;
    bit<8>  nx;
    bit<8>  ny;
    bit<16> c;
    bit<8>  flags;
}

struct pair_t {
    bit<8> x;
    bit<8> y;
}

struct wrap_t {
    pair_t  p;
    bit<16> c;
}

struct headers {
    in_t  i;
    out_t o;
}

struct meta_t {
}

// A directionless parameter: the argument is a compile-time constant.
bit<8> sum_pair(pair_t v) {
    return v.x + v.y;
}

bit<8> diff(in pair_t v) {
    return v.x - v.y;
}

pair_t swap(in pair_t v) {
    return { v.y, v.x };
}

pair_t named(in bit<8> a) {
    return { y = a, x = 8w0xff };
}

parser p(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.i);
        transition accept;
    }
}

control ingress(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set_c(in wrap_t w) {
        hdr.o.c = w.c + (bit<16>)w.p.x - (bit<16>)w.p.y;
    }

    apply {
        sm.egress_spec = 1;
        hdr.o.setValid();
        hdr.o.sum = sum_pair({ 8w3, 8w4 }) + sum_pair({ 8w20, 8w10 }) + hdr.i.a;
        hdr.o.diff = diff({ hdr.i.a, hdr.i.b });
        pair_t s = swap({ x = hdr.i.a, y = hdr.i.b });
        hdr.o.sx = s.x;
        hdr.o.sy = s.y;
        pair_t n = named(hdr.i.b);
        hdr.o.nx = n.x;
        hdr.o.ny = n.y;
        set_c({ { hdr.i.a, hdr.i.b }, hdr.i.c });
        wrap_t w = { s, hdr.i.c };
        bit<8> flags = 0;
        if (s == { hdr.i.b, hdr.i.a }) {
            flags = flags | 1;
        }
        if (s != { x = hdr.i.a, y = hdr.i.b }) {
            flags = flags | 2;
        }
        if (w == { { hdr.i.b, 8w7 }, hdr.i.c }) {
            flags = flags | 4;
        }
        if (n == { 8w0xff, 8w0x10 }) {
            flags = flags | 8;
        }
        hdr.o.flags = flags;
    }
}

control egress(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
    }
}

control vrfy(inout headers hdr, inout meta_t m) {
    apply {
    }
}

control update(inout headers hdr, inout meta_t m) {
    apply {
    }
}

control deparser(packet_out pkt, in headers hdr) {
    apply {
        pkt.emit(hdr);
    }
}

V1Switch(p(), vrfy(), ingress(), egress(), update(), deparser()) main;
