/* Enums where p4c accepts them: a serializable enum as a header field, matched in a parser's
 * select (also with a mask), in a table key with its members in const entries, as an action
 * parameter, switched on, cast to and from its underlying type and converted to it implicitly; a
 * plain enum in metadata and a switch; `switch (t.apply().action_run)`. (softswitch also takes a
 * plain enum's members in const entries, which p4c's BMv2 back end refuses.)
 * Expected values are computed independently by generators/enums.py. */
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind {
    A = 1,
    B = 2,
    C = 8w3
}

enum Color {
    Red,
    Green
}

header h_t {
    Kind   k;
    bit<8> v;
    bit<8> w;
}

struct headers {
    h_t h;
}

struct meta_t {
    Color c;
    Kind  k2;
}

parser p(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        m.c = Color.Red;
        transition select(hdr.h.k) {
            Kind.A: green;
            Kind.B &&& 0xff: accept;
            default: accept;
        }
    }
    state green {
        m.c = Color.Green;
        transition accept;
    }
}

control ingress(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    action set(Kind k) {
        hdr.h.w = (bit<8>)k;
        m.k2 = k;
    }
    action nop() {
    }
    table t {
        key = {
            hdr.h.k : exact;
        }
        actions = {
            set;
            nop;
        }
        const entries = {
            Kind.A : set(Kind.C);
            Kind.B : set(Kind.A);
        }
        default_action = nop();
    }
    apply {
        sm.egress_spec = 1;
        switch (t.apply().action_run) {
            set: {
                hdr.h.v = 1;
            }
            default: {
                hdr.h.v = 2;
            }
        }
        switch (hdr.h.k) {
            Kind.A: {
                hdr.h.v = hdr.h.v + 10;
            }
            Kind.B: {
            }
            default: {
                hdr.h.v = hdr.h.v + 20;
            }
        }
        switch (m.c) {
            Color.Green: {
                hdr.h.v = hdr.h.v + 100;
            }
            Color.Red: {
            }
        }
        Kind kk = (Kind)hdr.h.w;
        if (kk == Kind.C) {
            hdr.h.v = hdr.h.v + 1;
        }
        bit<8> raw = Kind.B;
        hdr.h.w = hdr.h.w + raw;
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
