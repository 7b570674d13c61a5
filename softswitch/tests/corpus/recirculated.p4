/* What a resubmitted or recirculated packet starts with, as in BMv2's simple_switch: all
 * metadata is reset, standard metadata included (ingress_port and ingress_global_timestamp are 0
 * on the later pass), and only the user fields of the preserved field list carry over. */
#include <core.p4>
#include <v1model.p4>

header seen_t {
    bit<8>  mode;
    bit<8>  pass;
    bit<8>  port;
    bit<8>  unkept;
    bit<48> arrival;
}

struct headers {
    seen_t seen;
}

struct meta_t {
    @field_list(1)
    bit<8> passes;
    bit<8> unkept;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.seen);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 2;
        if (meta.passes == 0) {
            meta.unkept = 0x11;
        }
        hdr.seen.pass = meta.passes;
        hdr.seen.port = (bit<8>)standard_metadata.ingress_port;
        hdr.seen.unkept = meta.unkept;
        hdr.seen.arrival = standard_metadata.ingress_global_timestamp;
        if (hdr.seen.mode == 1 && meta.passes == 0) {
            meta.passes = 1;
            resubmit_preserving_field_list(1);
        }
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.seen.mode == 2 && meta.passes == 0) {
            meta.passes = 1;
            recirculate_preserving_field_list(1);
        }
    }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.seen);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
