/* Header semantics: equality of headers (two invalid headers are equal), structs and stacks;
 * header unions (setValid and extract leave at most one member valid); copies of invalid
 * headers; setInvalid; struct initializers by position and by name; minSizeInBits/Bytes. */
#include <core.p4>
#include <v1model.p4>

header a_t {
    bit<8> x;
}

header b_t {
    bit<16> y;
}

header_union u_t {
    a_t a;
    b_t b;
}

header flags_t {
    bit<8> flags;
}

struct pair_t {
    bit<8> p;
    bit<8> q;
}

struct headers {
    flags_t res;
    a_t     first;
    a_t     second;
    u_t     u;
    a_t[2]  st;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.first);
        packet.extract(hdr.second);
        transition select(hdr.first.x) {
            1: union_a;
            2: union_b;
            default: accept;
        }
    }
    state union_a {
        packet.extract(hdr.u.a);
        transition accept;
    }
    state union_b {
        packet.extract(hdr.u.b);
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
        hdr.res.setValid();
        bit<8> f = 0;
        if (hdr.first == hdr.second) { f = f | 0x01; }
        if (hdr.u.isValid()) { f = f | 0x02; }
        if (hdr.u.a.isValid()) { f = f | 0x04; }
        if (hdr.u.b.isValid()) { f = f | 0x08; }
        pair_t s1 = { hdr.first.x, hdr.second.x };
        pair_t s2 = { q = hdr.second.x, p = hdr.first.x };
        if (s1 == s2 && s1.p == hdr.first.x) { f = f | 0x10; }
        a_t[2] tmp;
        tmp[0] = hdr.first;
        tmp[1] = hdr.second;
        hdr.st[0] = hdr.first;
        hdr.st[1] = hdr.second;
        if (tmp == hdr.st) { f = f | 0x20; }
        a_t never_valid;
        if (hdr.first.x == 4) {
            hdr.second = never_valid;      // copies the invalid header: second is not emitted
        }
        if (hdr.first.x == 5) {
            hdr.first.setInvalid();
        }
        if (hdr.u.a.isValid() && hdr.second.x == 0xff) {
            hdr.u.b.setValid();            // makes u.a invalid
            hdr.u.b.y = 0xbeef;
        }
        if (never_valid == hdr.st[0]) { f = f | 0x40; }  // never true: st[0] is valid
        if (hdr.first.minSizeInBits() == 8 && hdr.u.b.minSizeInBytes() == 2) { f = f | 0x80; }
        hdr.res.flags = f;
    }
}

control NoEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.res);
        packet.emit(hdr.first);
        packet.emit(hdr.second);
        packet.emit(hdr.u);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), NoEgress(), NoCompute(), MyDeparser()) main;
