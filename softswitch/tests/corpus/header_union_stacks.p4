/* What softswitch does with a stack of header unions beyond header_unions.p4: a run-time index
 * into the stack (a member's fields and validity, setValid of a member of the element it picks
 * invalidating the others), isValid() of an element (any member valid), and pop_front, which
 * moves whole unions and leaves the elements coming in invalid, as the P4_16 specification
 * says. Softswitch-only in the corpus list: p4c's front end crashes on the run-time index, its
 * BMv2 back end writes a JSON simple_switch refuses for isValid() of an element, and
 * simple_switch's pop_front of a union stack rotates the popped elements to the end, still
 * valid. Expected values are computed independently by generators/header_union_stacks.py. */
#include <core.p4>
#include <v1model.p4>

header info_t {
    bit<8> op;
    bit<8> sel;
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
        if (hdr.info.op == 1 && hdr.opts[hdr.info.sel].small.isValid()) {
            // Widen the selected small option: big becomes valid, small invalid.
            meta.widened = hdr.opts[hdr.info.sel].small.v;
            hdr.opts[hdr.info.sel].big.setValid();
            hdr.opts[hdr.info.sel].big.kind = 2;
            hdr.opts[hdr.info.sel].big.v = 8w0xee ++ meta.widened;
        } else if (hdr.info.op == 2) {
            hdr.opts.push_front(1);
            hdr.opts[0].small.setValid();
            hdr.opts[0].small.kind = 1;
            hdr.opts[0].small.v = 0x55;
        } else if (hdr.info.op == 3) {
            hdr.opts.pop_front(1);
        } else if (hdr.info.op == 4) {
            hdr.opts[hdr.info.sel].big.setInvalid();
        }
        hdr.info.valid_mask = 0;
        if (hdr.opts[0].isValid()) {
            hdr.info.valid_mask = hdr.info.valid_mask | 1;
        }
        if (hdr.opts[1].isValid()) {
            hdr.info.valid_mask = hdr.info.valid_mask | 2;
        }
        if (hdr.opts[2].isValid()) {
            hdr.info.valid_mask = hdr.info.valid_mask | 4;
        }
        if (!hdr.opts[hdr.info.sel].isValid()) {
            hdr.info.sel_kind = 0;
        } else if (hdr.opts[hdr.info.sel].big.isValid()) {
            hdr.info.sel_kind = 2;
        } else {
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
