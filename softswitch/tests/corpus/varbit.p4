/* varbit: IPv4 with options in a varbit<320> field sized from the IHL read ahead; the header
 * checksum covers the options; an IHL below 5 makes the options too long (HeaderTooShort). */
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etype;
}

header vhl_t {
    bit<4> version;
    bit<4> ihl;
}

header ipv4_t {
    bit<4>      version;
    bit<4>      ihl;
    bit<8>      tos;
    bit<16>     len;
    bit<16>     id;
    bit<3>      flags;
    bit<13>     frag;
    bit<8>      ttl;
    bit<8>      protocol;
    bit<16>     csum;
    bit<32>     src;
    bit<32>     dst;
    varbit<320> options;
}

struct headers {
    ethernet_t eth;
    ipv4_t     ipv4;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    state parse_ipv4 {
        bit<32> ihl = (bit<32>) packet.lookahead<vhl_t>().ihl;
        packet.extract(hdr.ipv4, (ihl - 5) * 32);
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
        if (hdr.ipv4.isValid()) {
            hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
        }
    }
}

control NoEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control MyCompute(inout headers hdr, inout meta_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len, hdr.ipv4.id,
              hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src, hdr.ipv4.dst, hdr.ipv4.options },
            hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.eth);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), NoEgress(), MyCompute(), MyDeparser()) main;
