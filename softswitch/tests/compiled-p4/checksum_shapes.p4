// Checksum externs of every shape the compiled path packs: verify and update, with and
// without the payload, by csum16, crc16, crc32, identity and xor16, over lists with constants,
// metadata, a bool, fields of 64 bits and wider, a whole header, headers and lists whose widths
// are not whole bytes, under conditions read from the packet (so some hold and some do not);
// the verify's error flag is copied into the packet. `checksum_shapes.packets` holds packets
// that reach every call: the compiled test compares both execution paths on them and on their
// mutations.
#include <core.p4>
#include <v1model.p4>
header n_t { bit<4> a; }
header w_t { bit<70> x; bit<3> y; bit<65> z; bit<6> w; bit<1> f; bit<13> g; bit<64> h; bit<2> i; }
header o_t { bit<8> sel; bit<16> c1; bit<32> c2; bit<16> c3; bit<64> c4; bit<16> c5; bit<8> err; bit<4> pad; }
struct headers { n_t n; w_t w; o_t o; }
struct meta_t { bit<7> m; bool b; }
parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.n); packet.extract(hdr.w); packet.extract(hdr.o); transition accept; }
}
control V(inout headers hdr, inout meta_t meta) { apply {
    verify_checksum(hdr.o.sel[0:0] == 1, { hdr.n.a, hdr.w.y, hdr.w.x }, hdr.o.c1, HashAlgorithm.csum16);
    verify_checksum_with_payload(hdr.o.sel[1:1] == 1, { hdr.w.z, 3w5, hdr.w.y }, hdr.o.c3, HashAlgorithm.crc16);
} }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply {
    sm.egress_spec = 1;
    hdr.o.err = (bit<8>)(bit<1>)sm.checksum_error;
    meta.m = hdr.w.x[6:0];
    meta.b = hdr.w.f == 1;
} }
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t meta) { apply {
    update_checksum(hdr.o.sel[2:2] == 1, { hdr.w.x, meta.m, meta.b, 5w3, hdr.w.y }, hdr.o.c2, HashAlgorithm.crc32);
    update_checksum_with_payload(hdr.o.sel[3:3] == 1, { hdr.n.a, hdr.w.g, meta.m }, hdr.o.c4, HashAlgorithm.identity);
    update_checksum_with_payload(hdr.o.sel[4:4] == 1, { meta.m }, hdr.o.c5, HashAlgorithm.csum16);
    update_checksum(hdr.o.sel[5:5] == 1, { hdr.w, meta.m, hdr.n }, hdr.o.c1, HashAlgorithm.xor16);
} }
control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.o); packet.emit(hdr.n); packet.emit(hdr.w); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
