/* A program's own PortId_t: v1model's default version (20180101) declares none, as p4c's
 * v1model.p4, so a program may declare it, here wider than a port (the P4 tutorials' flowcache
 * declares it as bit<9>). standard_metadata's ports stay bit<9>: the recorded ingress port is
 * widened, the egress port given in the frame cut to its low 9 bits. */
#include <core.p4>
#include <v1model.p4>

typedef bit<16> PortId_t;

header ports_h {
    PortId_t ingress;
    PortId_t egress;
}

struct headers {
    ports_h ports;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ports);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        // A frame too short for the header is dropped: the fields of an invalid header are
        // undefined (BMv2 reads the previous packet's).
        if (!hdr.ports.isValid()) {
            mark_to_drop(standard_metadata);
            return;
        }
        hdr.ports.ingress = (PortId_t)standard_metadata.ingress_port;
        standard_metadata.egress_spec = (bit<9>)hdr.ports.egress;
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.ports);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
