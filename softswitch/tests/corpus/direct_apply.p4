/* Direct type invocation (P4_16 1.2.x): `T.apply(...)` of a control type `T` and of a parser type
 * in a parser, each a fresh instance of `T` named `T` (as p4c names it); and control instances
 * given to constructor parameters of a control type, shared by every block they are given to
 * (one counter instance, counted by each). Expected values are computed independently by
 * generators/direct_apply.py. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<16> x;
    bit<8>  tag;
}

header extra_t {
    bit<8> v;
}

struct headers {
    h_t     h;
    extra_t e;
}

struct meta_t {
}

control step_t(inout bit<16> x);

control Inc(inout bit<16> x) {
    counter(32w16, CounterType.packets) seen;
    apply {
        x = x + 1;
        seen.count((bit<32>)x[3:0]);
    }
}

control Shl(inout bit<16> x)(step_t next) {
    apply {
        x = x << 1;
        next.apply(x);
    }
}

control Xor(inout bit<16> x)(step_t next) {
    apply {
        x = x ^ 16w0x00f0;
        next.apply(x);
    }
}

control Both(inout bit<16> x) {
    Inc() inc;
    Shl(inc) shl;
    Xor(inc) xor;
    apply {
        shl.apply(x);
        xor.apply(x);
    }
}

parser Extra(packet_in pkt, out extra_t e) {
    state start {
        pkt.extract(e);
        transition accept;
    }
}

parser p(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition select(hdr.h.tag) {
            1: extra;
            default: accept;
        }
    }
    state extra {
        Extra.apply(pkt, hdr.e);
        transition accept;
    }
}

control ingress(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        Both.apply(hdr.h.x);
        if (hdr.e.isValid()) {
            hdr.e.v = hdr.e.v + 1;
        }
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
