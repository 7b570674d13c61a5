/* Expressions with the P4_16 specification's semantics: wrapping and saturating arithmetic on
 * bit<W> and int<W>, shifts (arithmetic on int), concatenation, slices, casts (zero and sign
 * extension), comparisons, ?:, functions, serializable and plain enums, switch with fall-through
 * labels, exit, assert/assume, generic functions (explicit and inferred type arguments), tuples (initializer, copy, index, equality). Expected values are computed independently by generators/arith.py. */
#include <core.p4>
#include <v1model.p4>

enum bit<8> Kind { ADD = 1, SUB = 2, OTHER = 7 }
enum Plain { RED, GREEN }

header op_t {
    bit<8> a;
    bit<8> b;
    int<8> s;
    bit<8> kind;
}

header res_t {
    bit<8>  add;
    bit<8>  sub;
    bit<8>  addsat;
    bit<8>  subsat;
    bit<8>  mul;
    bit<8>  shl;
    bit<8>  shr;
    int<8>  sshr;
    bit<16> cat;
    bit<4>  hi;
    bit<12> widened;
    int<12> sext;
    bit<8>  flags;
    int<8>  ssat;
    bit<8>  fn;
    bit<8>  sw;
    bit<8>  neg;
    bit<8>  cpl;
    bit<4>  pad;
}

struct headers {
    op_t  op;
    res_t res;
}

struct meta_t {
    Plain  color;
    bit<8> tmp;
}

bit<8> max8(in bit<8> x, in bit<8> y) {
    return x > y ? x : y;
}

T pick<T>(in bool first, in T a, in T b) {
    return first ? a : b;
}

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
        assert(hdr.op.kind != 0xee);
        assume(hdr.op.a == hdr.op.a);
        if (hdr.op.kind == 0xff) {
            mark_to_drop(standard_metadata);
            exit;
        }
        hdr.res.setValid();
        hdr.res.add = hdr.op.a + hdr.op.b;
        hdr.res.sub = hdr.op.a - hdr.op.b;
        hdr.res.addsat = hdr.op.a |+| hdr.op.b;
        hdr.res.subsat = hdr.op.a |-| hdr.op.b;
        hdr.res.mul = hdr.op.a * hdr.op.b;
        hdr.res.shl = hdr.op.a << 3;
        hdr.res.shr = hdr.op.a >> 3;
        hdr.res.sshr = hdr.op.s >> 2;
        hdr.res.cat = hdr.op.a ++ hdr.op.b;
        hdr.res.hi = hdr.op.a[7:4];
        hdr.res.widened = (bit<12>) hdr.op.a;
        hdr.res.sext = (int<12>) hdr.op.s;
        hdr.res.flags = 5w0 ++ (bit<1>) (hdr.op.a < hdr.op.b) ++ (bit<1>) (hdr.op.a == hdr.op.b)
                        ++ (bit<1>) (hdr.op.s < 0);
        hdr.res.ssat = pick(false, hdr.op.s, hdr.op.s |+| 8s100);
        tuple<bit<8>, bit<8>> pair = { hdr.op.a, hdr.op.b };
        tuple<bit<8>, bit<8>> copy = pair;
        if (copy == pair) {
            hdr.res.fn = max8(copy[0], copy[1]);
        }
        switch (hdr.op.kind) {
            1: { meta.tmp = 10; }
            2:
            3: { meta.tmp = 20; }
            default: { meta.tmp = 30; }
        }
        if (hdr.op.kind == Kind.OTHER) {
            meta.tmp = meta.tmp + 1;
        }
        meta.color = Plain.GREEN;
        if (meta.color == Plain.GREEN) {
            meta.tmp = meta.tmp + 100;
        }
        hdr.res.sw = meta.tmp;
        hdr.res.neg = pick<bit<8>>(true, -hdr.op.a, hdr.op.b);
        hdr.res.cpl = ~hdr.op.a;
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
        packet.emit(hdr.op);
        packet.emit(hdr.res);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), NoEgress(), NoCompute(), MyDeparser()) main;
