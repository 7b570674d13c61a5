/* Parser value sets over several select expressions: `value_set<S>` of a struct matched
 * against a select of as many expressions (a member holds the fields one after the other, as
 * BMv2's pvs_add takes them), between constant cases. (parsing.p4 has a value set of bit<W>:
 * BMv2's simple_switch_CLI of this build writes such a value one byte too long, so it never
 * matches there.) Expected values are computed independently by generators/value_sets.py. */
#include <core.p4>
#include <v1model.p4>

header key_t {
    bit<8>  kind;
    bit<16> port;
    bit<8>  path;
}

struct kind_port_t {
    bit<8>  kind;
    bit<16> port;
}

struct headers {
    key_t k;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    value_set<kind_port_t>(4) pairs;

    state start {
        packet.extract(hdr.k);
        transition select(hdr.k.kind, hdr.k.port) {
            (0x01, 0x0001): constant;
            pairs: in_pairs;
            (_, 0x00ff): any_kind;
            default: other;
        }
    }
    state constant {
        hdr.k.path = 1;
        transition accept;
    }
    state in_pairs {
        hdr.k.path = 2;
        transition accept;
    }
    state any_kind {
        hdr.k.path = 3;
        transition accept;
    }
    state other {
        hdr.k.path = 4;
        transition accept;
    }
}

control MyVerifyChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyComputeChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.k);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
