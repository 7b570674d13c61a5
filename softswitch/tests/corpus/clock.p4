/* The virtual clock: ingress and egress timestamps (µs) written into the packet, so an STF test
 * can see time pass with softswitch's `advance` command and queue delay on a rate-limited queue. */
#include <core.p4>
#include <v1model.p4>

header stamps_t {
    bit<48> ingress;
    bit<48> egress;
}

struct headers {
    stamps_t stamps;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.stamps);
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
        hdr.stamps.ingress = standard_metadata.ingress_global_timestamp;
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.stamps.egress = standard_metadata.egress_global_timestamp;
    }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.stamps);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
