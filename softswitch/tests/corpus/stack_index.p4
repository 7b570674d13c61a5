/* Header stack elements picked at run time: a field read and written at indices the packet
 * gives. Out of range, BMv2's simple_switch aborts (an uncaught std::out_of_range), so the
 * packets here stay in range; softswitch reads 0 and ignores the write (docs/softswitch.md).
 * (isValid and setValid at a run-time index work in softswitch too, header_union_stacks.p4;
 * p4c writes a JSON simple_switch refuses for them, as for lastIndex in a select.) Expected values are computed independently by
 * generators/stack_index.py. */
#include <core.p4>
#include <v1model.p4>

header index_t {
    bit<8> read_at;
    bit<8> write_at;
    bit<8> read;
    bit<8> pad;
}

header elem_t {
    bit<8> v;
}

struct headers {
    index_t  idx;
    elem_t[4] elems;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.idx);
        transition more;
    }
    state more {
        transition select(packet.lookahead<bit<8>>()) {
            0: accept;
            default: elem;
        }
    }
    state elem {
        packet.extract(hdr.elems.next);
        transition more;
    }
}

control MyVerifyChecksum(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        hdr.idx.read = hdr.elems[hdr.idx.read_at].v;
        hdr.elems[hdr.idx.write_at].v = hdr.idx.read + 1;
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
