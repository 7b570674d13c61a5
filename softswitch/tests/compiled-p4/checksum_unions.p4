// Checksum lists over a header union, a header stack's elements and a whole stack, with the
// union's members extracted one, the other or both, stack elements by `next` and by index, and
// an emit of the whole `headers`. `checksum_unions.packets` holds a packet
// per parser path: the compiled test compares both execution paths on them and on their
// mutations.
#include <core.p4>
#include <v1model.p4>
header a_t { bit<8> k; bit<8> v; }
header b_t { bit<16> v; bit<3> q; bit<5> r; }
header_union u_t { a_t a; b_t b; }
header s_t { bit<8> v; }
struct headers { s_t first; u_t u; s_t[3] st; a_t tail; }
struct meta_t { }
parser P(packet_in packet, out headers hdr, inout meta_t meta, inout standard_metadata_t sm) {
    state start { packet.extract(hdr.first); packet.extract(hdr.st[1]);
      transition select(hdr.first.v[1:0]) { 0: ua; 1: ub; 2: both; default: stk; } }
    state ua { packet.extract(hdr.u.a); transition stk; }
    state ub { packet.extract(hdr.u.b); transition stk; }
    state both { packet.extract(hdr.u.a); packet.extract(hdr.u.b); transition stk; }
    state stk { packet.extract(hdr.st.next); packet.extract(hdr.st.next); packet.extract(hdr.tail); transition accept; }
}
control V(inout headers hdr, inout meta_t meta) { apply {
    verify_checksum(true, { hdr.u.a, hdr.u.b, hdr.st[0], hdr.st[2] }, hdr.tail.v, HashAlgorithm.csum16);
} }
control I(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply {
    sm.egress_spec = 1;
    hdr.first.v = (bit<8>)(bit<1>)sm.checksum_error;
    if (hdr.first.v == 0) { hdr.st[0].setInvalid(); }
} }
control E(inout headers hdr, inout meta_t meta, inout standard_metadata_t sm) { apply { } }
control C(inout headers hdr, inout meta_t meta) { apply {
    update_checksum(hdr.u.b.isValid(), { hdr.u, hdr.st }, hdr.tail.k, HashAlgorithm.crc16);
} }
control D(packet_out packet, in headers hdr) { apply { packet.emit(hdr.tail); packet.emit(hdr); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
