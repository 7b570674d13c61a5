/* `_` (don't care) as the argument of packet_in.extract<H>(_) (P4_16 1.2.x, as p4c accepts it):
 * the header is parsed, moving past its bytes, and its value dropped (p4c refuses it for a header
 * with a varbit field, and so does softswitch). Expected packets are computed independently by generators/dont_care_extract.py. */
#include <core.p4>
#include <v1model.p4>

header skip_t {
    bit<24> ignored;
}

header len_t {
    bit<8> bytes;
}

header pad_t {
    bit<8> a;
    bit<8> b;
}

header keep_t {
    bit<16> v;
}

struct headers {
    len_t  len;
    keep_t keep;
}

struct meta_t {
}

parser p(packet_in pkt, out headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    state start {
        pkt.extract<skip_t>(_);
        pkt.extract(hdr.len);
        pkt.extract<pad_t>(_);
        pkt.extract(hdr.keep);
        transition accept;
    }
}

control ingress(inout headers hdr, inout meta_t m, inout standard_metadata_t sm) {
    apply {
        sm.egress_spec = 1;
        hdr.keep.v = hdr.keep.v + 1;
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
