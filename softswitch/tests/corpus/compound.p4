/* Compound assignments (P4_16 1.2.x): += -= *= &= |= ^= <<= >>= |+|= |-|= on bit<8>, the
 * saturating and shifting ones on int<8> too (>>= is arithmetic on a signed value), on a
 * header field, a local and a slice. Expected values are computed independently by
 * generators/compound.py. */
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> a;
    bit<8> b;
    int<8> s;
    bit<8> sh;
}

header res_t {
    bit<8> add;
    bit<8> sub;
    bit<8> mul;
    bit<8> and;
    bit<8> or;
    bit<8> xor;
    bit<8> shl;
    bit<8> shr;
    bit<8> addsat;
    bit<8> subsat;
    int<8> sshr;
    int<8> saddsat;
    int<8> ssubsat;
    bit<8> slice;
}

struct headers {
    op_t  op;
    res_t res;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.op);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        // A packet too short for the header passes unchanged (an invalid header's fields are
        // undefined: BMv2 reads the previous packet's values).
        if (!hdr.op.isValid()) {
            exit;
        }
        hdr.res.setValid();
        bit<8> a = hdr.op.a;
        bit<8> b = hdr.op.b;
        bit<8> sh = hdr.op.sh & 7;
        hdr.res.add = a;
        hdr.res.add += b;
        hdr.res.sub = a;
        hdr.res.sub -= b;
        hdr.res.mul = a;
        hdr.res.mul *= b;
        hdr.res.and = a;
        hdr.res.and &= b;
        hdr.res.or = a;
        hdr.res.or |= b;
        hdr.res.xor = a;
        hdr.res.xor ^= b;
        bit<8> t = a;
        t <<= sh;
        hdr.res.shl = t;
        t = a;
        t >>= sh;
        hdr.res.shr = t;
        t = a;
        t |+|= b;
        hdr.res.addsat = t;
        t = a;
        t |-|= b;
        hdr.res.subsat = t;
        int<8> s = hdr.op.s;
        s >>= sh;
        hdr.res.sshr = s;
        s = hdr.op.s;
        s |+|= (int<8>)b;
        hdr.res.saddsat = s;
        s = hdr.op.s;
        s |-|= (int<8>)b;
        hdr.res.ssubsat = s;
        hdr.res.slice = a;
        hdr.res.slice[7:4] += b[3:0];
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
        packet.emit(hdr.op);
        packet.emit(hdr.res);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
