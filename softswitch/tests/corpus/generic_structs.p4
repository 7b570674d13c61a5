/* Generic structs and headers: `struct pair_t<T>` and `header wrap_t<T>` given type arguments
 * where they are used (once per list of arguments: pair_t<bit<8>> and pair_t<bit<16>> are two
 * types), in headers, metadata and locals, with list and struct initializers. Expected values
 * are computed independently by generators/generic_structs.py. */
#include <core.p4>
#include <v1model.p4>

struct pair_t<T> {
    T first;
    T second;
}

header wrap_t<T> {
    T value;
}

header bytes_t {
    bit<8> a;
    bit<8> b;
}

struct headers {
    bytes_t          bytes;
    wrap_t<bit<16>>  wide;
    wrap_t<bit<8>>   narrow;
}

struct meta_t {
    pair_t<bit<8>> p;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.bytes);
        packet.extract(hdr.wide);
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
        meta.p = { hdr.bytes.a, hdr.bytes.b };
        pair_t<bit<16>> w = { first = hdr.wide.value, second = 16w0x0101 };
        hdr.wide.value = w.first + w.second;
        hdr.narrow.setValid();
        hdr.narrow.value = meta.p.first ^ meta.p.second;
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
