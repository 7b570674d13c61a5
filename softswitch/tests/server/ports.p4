/* A second program for the pipeline-replacement test: a port-to-port patch panel. */
#include <core.p4>
#include <v1model.p4>

struct headers { }
struct metadata { }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { transition accept; }
}
control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    action forward(bit<9> port) { sm.egress_spec = port; }
    action drop() { mark_to_drop(sm); }
    table patch {
        key = { sm.ingress_port: exact; }
        actions = { forward; drop; }
        default_action = drop();
    }
    apply { patch.apply(); }
}
control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control Verify(inout headers hdr, inout metadata meta) { apply { } }
control Compute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pk, in headers hdr) { apply { } }

V1Switch(P(), Verify(), MyIngress(), MyEgress(), Compute(), MyDeparser()) main;
