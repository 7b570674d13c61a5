/* list<T> types (P4_16 1.2.4): local variables of list type given their values by a list
 * expression cast to list<T> (as p4c wants it), of run-time values, of scalars and of structs,
 * copied from another list variable and assigned anew, and run over by for-in loops. p4c's BMv2
 * back end refuses for-in loops, so this program is softswitch's only (p4test accepts it).
 * Expected values are computed independently by generators/list_types.py. */
#include <core.p4>
#include <v1model.p4>

header h_t {
    bit<8> a;
    bit<8> b;
    bit<8> c;
    bit<8> sum;
    bit<8> max;
    bit<8> weighted;
    bit<8> count;
}

struct pair_t {
    bit<8> value;
    bit<8> weight;
}

struct headers {
    h_t h;
}

struct meta_t {
}

parser p(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract(hdr.h);
        transition accept;
    }
}

control ingress(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        list<bit<8>> values = (list<bit<8>>){ hdr.h.a, hdr.h.b, hdr.h.c, 8w1 };
        bit<8> sum = 0;
        for (bit<8> v in values) {
            sum = sum + v;
        }
        hdr.h.sum = sum;
        list<bit<8>> copy = values;
        bit<8> max = 0;
        for (bit<8> v in copy) {
            if (v > max) {
                max = v;
            }
        }
        hdr.h.max = max;
        list<pair_t> pairs = (list<pair_t>){ { hdr.h.a, 8w1 }, { hdr.h.b, 8w2 }, { value = hdr.h.c, weight = 8w3 } };
        bit<8> weighted = 0;
        for (pair_t q in pairs) {
            weighted = weighted + q.value * q.weight;
        }
        hdr.h.weighted = weighted;
        values = (list<bit<8>>){ 8w0, hdr.h.a, 8w0, hdr.h.b };
        bit<8> count = 0;
        for (bit<8> v in values) {
            if (v == 0) {
                continue;
            }
            count = count + 1;
        }
        hdr.h.count = count;
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
