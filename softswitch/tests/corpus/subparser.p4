/* A parser applied from a parser: it reads the caller's packet, takes in/out arguments by
 * copy-in/copy-out, and its parser errors end the caller's parse. */
#include <core.p4>
#include <v1model.p4>

error { BadOption }

header tag_t {
    bit<8> kind;
    bit<8> note;
}

header opt_t {
    bit<16> value;
}

struct headers {
    tag_t tag;
    opt_t opt;
    tag_t second;
}

struct meta_t { }

parser Options(packet_in pk, out opt_t o, in bit<8> kind) {
    state start {
        transition select(kind) {
            1: take;
            default: accept;
        }
    }
    state take {
        pk.extract(o);
        verify(o.value != 0xdead, error.BadOption);
        transition accept;
    }
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    Options() opts;

    state start {
        packet.extract(hdr.tag);
        opts.apply(packet, hdr.opt, hdr.tag.kind);
        packet.extract(hdr.second);
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
        if (standard_metadata.parser_error == error.BadOption) {
            hdr.tag.note = 0xee;
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
        packet.emit(hdr);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), NoEgress(), NoCompute(), MyDeparser()) main;
