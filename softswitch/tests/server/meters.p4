/* The program of the P4Runtime meter tests: an indirect meter indexed by the ingress port and
 * a direct meter on a table keyed by it; each packet goes back out of the port it came in by,
 * with the two colours (0 green, 1 yellow, 2 red) written into its first two bytes. */
#include <core.p4>
#include <v1model.p4>

header colour_t { bit<8> indirect; bit<8> direct; }
struct headers { colour_t c; }
struct metadata { }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start { pk.extract(hdr.c); transition accept; }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    meter(8, MeterType.packets) port_meter;
    direct_meter<bit<8>>(MeterType.packets) entry_meter;
    action colour() { entry_meter.read(hdr.c.direct); }
    table by_port {
        key = { sm.ingress_port: exact; }
        actions = { colour; NoAction; }
        meters = entry_meter;
        default_action = NoAction();
    }
    apply {
        port_meter.execute_meter((bit<32>)sm.ingress_port, hdr.c.indirect);
        by_port.apply();
        sm.egress_spec = sm.ingress_port;
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control Verify(inout headers hdr, inout metadata meta) { apply { } }
control Compute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pk, in headers hdr) { apply { pk.emit(hdr.c); } }

V1Switch(P(), Verify(), MyIngress(), MyEgress(), Compute(), MyDeparser()) main;
