/* The P4Runtime server tests' program of write restrictions: a table with const entries, a
 * keyless table with a const default action, a table implemented by an action profile, and
 * action references scoped @tableonly and @defaultonly. */
#include <core.p4>
#include <v1model.p4>

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
struct headers { ethernet_t ethernet; }
struct metadata { }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.ethernet); transition accept; }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table fixed {
        key = { hdr.ethernet.ether_type: exact; }
        actions = { forward; drop; }
        const entries = { 0x800: forward(1); }
        default_action = drop();
    }
    table keyless {
        actions = { forward; drop; }
        const default_action = drop();
    }
    action_profile(32w16) members;
    table indirect {
        key = { hdr.ethernet.src: exact; }
        actions = { forward; drop; }
        implementation = members;
    }
    table scoped {
        key = { hdr.ethernet.dst: exact; }
        actions = { @tableonly forward; @defaultonly drop; }
        default_action = drop();
    }
    apply { fixed.apply(); keyless.apply(); indirect.apply(); scoped.apply(); }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control Verify(inout headers hdr, inout metadata meta) { apply { } }
control Compute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pk, in headers hdr) { apply { pk.emit(hdr.ethernet); } }

V1Switch(P(), Verify(), MyIngress(), MyEgress(), Compute(), MyDeparser()) main;
