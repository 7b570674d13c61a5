/* A stack of header unions: options parsed into `stack.next.member`, setValid of a member
 * invalidating the others, push_front moving whole unions, emit of the stack (each
 * element's valid member). softswitch also takes a run-time index into such a stack and
 * isValid() of an element, which p4c does not (its front end crashes on the first; its BMv2
 * back end writes a JSON that simple_switch refuses for the second), and pop_front, which
 * simple_switch gets wrong; header_union_stacks.p4 tests those. Expected values are computed
 * independently by generators/header_unions.py. */
#include <core.p4>
#include <v1model.p4>

header info_t {
    bit<8> op;
    bit<8> unused;
    bit<8> valid_mask;
    bit<8> sel_kind;
}

header small_t {
    bit<8> kind;
    bit<8> v;
}

header big_t {
    bit<8>  kind;
    bit<16> v;
}

header_union option_u {
    small_t small;
    big_t   big;
}

header end_t {
    bit<8> kind;
}

struct headers {
    info_t      info;
    option_u[3] opts;
    end_t       end;
}

struct meta_t {
    bit<8> widened;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.info);
        transition next_option;
    }
    state next_option {
        transition select(packet.lookahead<bit<8>>()) {
            1: small;
            2: big;
            default: end;
        }
    }
    state small {
        packet.extract(hdr.opts.next.small);
        transition next_option;
    }
    state big {
        packet.extract(hdr.opts.next.big);
        transition next_option;
    }
    state end {
        packet.extract(hdr.end);
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
        if (hdr.info.op == 1 && hdr.opts[1].small.isValid()) {
            // Widen the second option: big becomes valid, small invalid.
            meta.widened = hdr.opts[1].small.v;
            hdr.opts[1].big.setValid();
            hdr.opts[1].big.kind = 2;
            hdr.opts[1].big.v = 8w0xee ++ meta.widened;
        } else if (hdr.info.op == 2) {
            hdr.opts.push_front(1);
            hdr.opts[0].small.setValid();
            hdr.opts[0].small.kind = 1;
            hdr.opts[0].small.v = 0x55;
        } else if (hdr.info.op == 4) {
            hdr.opts[1].big.setInvalid();
        }
        hdr.info.valid_mask = 0;
        if (hdr.opts[0].small.isValid() || hdr.opts[0].big.isValid()) {
            hdr.info.valid_mask = hdr.info.valid_mask | 1;
        }
        if (hdr.opts[1].small.isValid() || hdr.opts[1].big.isValid()) {
            hdr.info.valid_mask = hdr.info.valid_mask | 2;
        }
        if (hdr.opts[2].small.isValid() || hdr.opts[2].big.isValid()) {
            hdr.info.valid_mask = hdr.info.valid_mask | 4;
        }
        hdr.info.sel_kind = 0;
        if (hdr.opts[2].big.isValid()) {
            hdr.info.sel_kind = 2;
        } else if (hdr.opts[2].small.isValid()) {
            hdr.info.sel_kind = 1;
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
