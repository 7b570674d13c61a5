#include <core.p4>
#include <v1model.p4>
#define TWICE(x) ((x) + (x))
const bit<32> A = TWICE(3) * 7 - (1 << 4) ^ 0xff;
const int B = 2 ** 10;
const bool C = true && !false || (A > 5);
header h_t { bit<8> a; bit<16> b; }
struct headers { h_t h; }
struct meta { bit<32> x; }
parser P(packet_in pk, out headers h, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(h.h); transition accept; }
}
control V(inout headers h, inout meta m) { apply { } }
control I(inout headers h, inout meta m, inout standard_metadata_t sm) {
    apply {
        m.x = (bit<32>)h.h.a + (C ? A : 32w1);
        if (h.h.b[3:0] == 4w0xf) { h.h.a = h.h.a |+| 8w200; } else { h.h.a = h.h.a |-| 1; }
        h.h.b = h.h.b ++ 8w0 == 24w0 ? 16w1 : 16w2;
    }
}
control E(inout headers h, inout meta m, inout standard_metadata_t sm) { apply { } }
control C2(inout headers h, inout meta m) { apply { } }
control D(packet_out pk, in headers h) { apply { pk.emit(h.h); } }
V1Switch(P(), V(), I(), E(), C2(), D()) main;
