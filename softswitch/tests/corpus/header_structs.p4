/* Structs inside headers, as the P4_16 specification allows (fields of bit<W>, bool,
 * serializable enums, and such structs, nested): extracted and emitted in place on the wire,
 * read and written field by field, copied whole to and from a local, selected on in the
 * parser. Expected values are computed independently by generators/header_structs.py. */
#include <core.p4>
#include <v1model.p4>

enum bit<4> Kind { SHORT = 1, LONG = 2 }

struct inner_t {
    bit<4> low;
    Kind   kind;
}

struct addr_t {
    bit<8>  high;
    inner_t inner;
    bool    flag;
    bit<7>  pad;
}

header tagged_t {
    bit<8>  mark;
    addr_t  addr;
    bit<16> tail;
}

struct headers {
    tagged_t t;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.t);
        transition select(hdr.t.addr.inner.kind) {
            Kind.SHORT: short;
            default: accept;
        }
    }
    state short {
        hdr.t.mark = 0xaa;
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
        hdr.t.addr.high = hdr.t.addr.high + 1;
        if (hdr.t.addr.flag) {
            hdr.t.tail = 0xffff;
        }
        addr_t copy = hdr.t.addr;
        copy.inner.low = 3;
        hdr.t.addr = copy;
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
        packet.emit(hdr.t);
    }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(),
         MyDeparser()) main;
