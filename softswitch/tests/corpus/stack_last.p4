/* A header stack's last element in a parser: `s.last.v` as a select key and read into
 * metadata, and `s.lastIndex` (p4c writes them as BMv2's stack_field and last_stack_index).
 * The parser extracts elements up to one whose v is 0; a fifth is StackOutOfBounds, which
 * leaves what the fourth set. Expected packets are computed independently by
 * generators/stack_last.py. */
#include <core.p4>
#include <v1model.p4>

header info_t {
    bit<32> last_index;
    bit<8>  last_v;
}

header elem_t {
    bit<8> v;
}

struct headers {
    info_t    info;
    elem_t[4] s;
}

struct meta_t {
    bit<32> last_index;
    bit<8>  last_v;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.s.next);
        meta.last_index = hdr.s.lastIndex;
        meta.last_v = hdr.s.last.v;
        transition select(hdr.s.last.v) {
            0: accept;
            default: start;
        }
    }
}

control MyVerifyChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.info.setValid();
        hdr.info.last_index = meta.last_index;
        hdr.info.last_v = meta.last_v;
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
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
