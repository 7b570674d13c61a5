/* Two-rate three-colour meters: an indirect meter indexed by the ingress port and a direct
 * meter on a table; colours (0 green, 1 yellow, 2 red) are written into the packet. */
#include <core.p4>
#include <v1model.p4>

header color_t {
    bit<8> indirect;
    bit<8> direct;
}

struct headers {
    color_t c;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.c);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    meter(4, MeterType.packets) per_port;
    direct_meter<bit<8>>(MeterType.packets) per_entry;

    action colour() {
        per_entry.read(hdr.c.direct);
    }
    table by_port {
        key = {
            standard_metadata.ingress_port: exact;
        }
        actions = { colour; NoAction; }
        meters = per_entry;
        default_action = NoAction();
    }
    apply {
        per_port.execute_meter((bit<32>) standard_metadata.ingress_port, hdr.c.indirect);
        by_port.apply();
        standard_metadata.egress_spec = 0;
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
        packet.emit(hdr.c);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), NoEgress(), NoCompute(), MyDeparser()) main;
