#include <core.p4>
#include <v1model.p4>

header eth_t { bit<48> dst; bit<48> src; bit<16> type; }
struct headers { eth_t eth; }
struct meta { }

parser P(packet_in pk, out headers h, inout meta m, inout standard_metadata_t sm) {
    state start { pk.extract(h.eth); transition select(h.eth.type) { 0x800: accept; default: reject; } }
}
control V(inout headers h, inout meta m) { apply { } }
control I(inout headers h, inout meta m, inout standard_metadata_t sm) {
    action fwd(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table t {
        key = { h.eth.dst: exact; h.eth.type: ternary; }
        actions = { fwd; drop; }
        default_action = drop();
        size = 64;
    }
    apply { if (h.eth.isValid()) { t.apply(); } }
}
control E(inout headers h, inout meta m, inout standard_metadata_t sm) { apply { } }
control C(inout headers h, inout meta m) { apply { } }
control D(packet_out pk, in headers h) { apply { pk.emit(h.eth); } }
V1Switch(P(), V(), I(), E(), C(), D()) main;
