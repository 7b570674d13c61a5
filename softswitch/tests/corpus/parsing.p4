/* Parsing: header stacks with next/last/lastIndex and pop_front, select on tuples with masks,
 * lookahead of bits and of headers, a parser value set filled by the control plane,
 * ranges and don't-cares, lookahead, advance, verify with a user error, parser errors as BMv2
 * reports them (the packet continues to ingress with standard_metadata.parser_error set),
 * verify_checksum, and tables with range, ternary and optional keys and const entries. */
#include <core.p4>
#include <v1model.p4>

error { BadVersion }

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etype;
}

header tag_t {
    bit<4>  pcp;
    bit<12> vid;
    bit<16> etype;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<8>  tos;
    bit<16> len;
    bit<16> id;
    bit<3>  flags;
    bit<13> frag;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> csum;
    bit<32> src;
    bit<32> dst;
}

header vhl_t {
    bit<4> version;
    bit<4> ihl;
}

header info_t {
    bit<8> ver;
    bit<8> tags;
    bit<8> perr;
    bit<8> cerr;
    bit<8> la;
    bit<8> cls;
    bit<8> opt;
}

struct headers {
    eth_t     eth;
    info_t    info;
    tag_t[3]  tags;
    ipv4_t    ipv4;
}

struct meta_t {
    bit<8> la;
    bit<8> ver;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x8100: parse_tag;
            0x0800: parse_ipv4;
            custom_types: parse_custom;
            0x9000 &&& 0xf000: skip;
            default: accept;
        }
    }
    state parse_tag {
        packet.extract(hdr.tags.next);
        transition select(hdr.tags.last.etype) {
            0x8100: parse_tag;
            0x0800: parse_ipv4;
            default: accept;
        }
    }
    vhl_t vhl;
    value_set<bit<16>>(4) custom_types;

    state parse_ipv4 {
        // A header read ahead whole, and a field of one read ahead.
        vhl = packet.lookahead<vhl_t>();
        meta.ver = vhl.version ++ packet.lookahead<vhl_t>().ihl;
        packet.extract(hdr.ipv4);
        verify(hdr.ipv4.version == 4, error.BadVersion);
        meta.la = packet.lookahead<bit<8>>();
        transition select(hdr.ipv4.ttl, hdr.ipv4.protocol) {
            (0, _): reject;
            (1 .. 9, 17): accept;
            default: accept;
        }
    }
    state parse_custom {
        meta.la = 0x77;
        transition accept;
    }
    state skip {
        packet.advance(16);
        meta.la = packet.lookahead<bit<8>>();
        transition accept;
    }
}

control MyVerify(inout headers hdr, inout meta_t meta) {
    Checksum16() ipv4_checksum;

    apply {
        // The deprecated Checksum16 extern agrees with verify_checksum: both see 0 on a good header.
        if (hdr.ipv4.isValid() && ipv4_checksum.get({ hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos,
                hdr.ipv4.len, hdr.ipv4.id, hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl,
                hdr.ipv4.protocol, hdr.ipv4.csum, hdr.ipv4.src, hdr.ipv4.dst }) != 0) {
            meta.ver = meta.ver | 0x80;
        }
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.tos, hdr.ipv4.len, hdr.ipv4.id,
              hdr.ipv4.flags, hdr.ipv4.frag, hdr.ipv4.ttl, hdr.ipv4.protocol,
              hdr.ipv4.src, hdr.ipv4.dst },
            hdr.ipv4.csum, HashAlgorithm.csum16);
    }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action set_cls(bit<8> c) {
        hdr.info.cls = c;
    }
    action set_opt(bit<8> o) {
        hdr.info.opt = o;
    }
    table classify {
        key = {
            hdr.ipv4.ttl: range;
            hdr.ipv4.protocol: ternary;
        }
        actions = { set_cls; }
        const default_action = set_cls(0xee);
        const entries = {
            (1 .. 9, 17): set_cls(1);
            (1 .. 100, 0x10 &&& 0xf0): set_cls(2);
            (_, _): set_cls(3);
        }
    }
    table optional_src {
        key = {
            hdr.eth.src[7:0]: optional;
        }
        actions = { set_opt; }
        default_action = set_opt(0);
        const entries = {
            0x01: set_opt(1);
            _: set_opt(2);
        }
    }
    apply {
        standard_metadata.egress_spec = 1;
        hdr.info.setValid();
        hdr.info.ver = meta.ver;
        hdr.info.tags = (bit<8>) (hdr.tags.lastIndex + 1);
        if (standard_metadata.parser_error == error.NoError) {
            hdr.info.perr = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.info.perr = 1;
        } else if (standard_metadata.parser_error == error.BadVersion) {
            hdr.info.perr = 2;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.info.perr = 3;
        } else {
            hdr.info.perr = 4;
        }
        hdr.info.cerr = (bit<8>) standard_metadata.checksum_error;
        hdr.info.la = meta.la;
        if (hdr.ipv4.isValid()) {
            classify.apply();
        }
        optional_src.apply();
        if (hdr.tags[0].isValid() && hdr.tags[0].vid == 5) {
            hdr.tags.pop_front(1);
        }
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
        packet.emit(hdr.eth);
        packet.emit(hdr.info);
        packet.emit(hdr.tags);
        packet.emit(hdr.ipv4);
    }
}

V1Switch(MyParser(), MyVerify(), MyIngress(), NoEgress(), NoCompute(), MyDeparser()) main;
