/* Parser errors exactly as BMv2 reports them: ParserInvalidArgument for a varbit extract or an
 * advance that is not whole bytes (and from verify), PacketTooShort before HeaderTooShort for a
 * varbit longer than its field, StackOutOfBounds for a full stack before any check of the
 * bytes left, PacketTooShort for lookahead. The packet goes on to ingress with
 * standard_metadata.parser_error set and what was extracted before the error still valid; the
 * payload starts at the parser's cursor. Expected values are computed independently by
 * generators/parser_errors.py. */
#include <core.p4>
#include <v1model.p4>

header op_t {
    bit<8> op;
    bit<8> arg;
    bit<8> result;
}

header var_t {
    varbit<16> bytes;
}

header tag_t {
    bit<8> v;
}

struct headers {
    op_t     op;
    var_t    var;
    tag_t[2] tags;
}

struct meta_t {
    bit<32> peeked;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.op);
        transition select(hdr.op.op) {
            1: extract_varbit;
            2: invalid_argument;
            3: advance;
            4: tags;
            5: peek;
            default: accept;
        }
    }
    state extract_varbit {
        packet.extract(hdr.var, (bit<32>)hdr.op.arg);
        transition accept;
    }
    state invalid_argument {
        verify(hdr.op.arg == 0, error.ParserInvalidArgument);
        transition accept;
    }
    state advance {
        packet.advance((bit<32>)hdr.op.arg);
        transition accept;
    }
    state tags {
        packet.extract(hdr.tags.next);
        transition tags;
    }
    state peek {
        meta.peeked = packet.lookahead<bit<32>>();
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
        if (standard_metadata.parser_error == error.NoError) {
            hdr.op.result = 0;
        } else if (standard_metadata.parser_error == error.PacketTooShort) {
            hdr.op.result = 1;
        } else if (standard_metadata.parser_error == error.NoMatch) {
            hdr.op.result = 2;
        } else if (standard_metadata.parser_error == error.StackOutOfBounds) {
            hdr.op.result = 3;
        } else if (standard_metadata.parser_error == error.HeaderTooShort) {
            hdr.op.result = 4;
        } else if (standard_metadata.parser_error == error.ParserTimeout) {
            hdr.op.result = 5;
        } else if (standard_metadata.parser_error == error.ParserInvalidArgument) {
            hdr.op.result = 6;
        } else {
            hdr.op.result = 7;
        }
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
