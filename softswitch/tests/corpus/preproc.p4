/* The preprocessor as in C: `##` pastes tokens (field names, a width-prefixed literal, a
 * table name), `#` makes a string of a macro argument (the table's @name, which the STF
 * test uses as the control plane's name for it), `#line` renumbers lines (only diagnostics
 * see it). Expected values are computed independently by generators/preproc.py. */
#include <core.p4>
#include <v1model.p4>

#define STR(x) #x
#define FIELDS(p) bit<8> p ## _a; bit<8> p ## _b;
#define LIT(width) width ## w7
#define TABLE(t) @name(STR(t ## _table)) table t

header h_t {
    FIELDS(in)
    FIELDS(out)
}

struct headers {
    h_t h;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.h);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

#line 1000
control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set_out(bit<8> v) {
        hdr.h.out_a = v;
    }
    TABLE(fwd) {
        key = {
            hdr.h.in_a : exact;
        }
        actions = {
            set_out;
            NoAction;
        }
        default_action = NoAction();
    }
    apply {
        standard_metadata.egress_spec = 1;
        fwd.apply();
        hdr.h.out_b = hdr.h.in_b + LIT(8);
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
