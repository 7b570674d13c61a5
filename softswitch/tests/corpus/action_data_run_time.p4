/* Action data bound at run time: an action's directionless parameters given run-time values
 * when it is called directly, as p4c's BMv2 back end compiles and BMv2 runs it — from another
 * action (the P4 tutorials' calc: `send_back(a + b)`) and from an apply block (their firewall:
 * `compute_hashes(hdr.ipv4.srcAddr, ...)`), with an expression, a header field, a metadata
 * field and a local variable as arguments, evaluated before the body runs (copy-in: `order`
 * swaps two fields). The same action in a table takes its data from the entry
 * (`send_back(7)`). Expected values are worked out in the STF's comments. */
#include <core.p4>
#include <v1model.p4>

header calc_t {
    bit<8>  op;
    bit<32> a;
    bit<32> b;
    bit<32> res;
    bit<8>  swap;
    bit<16> x;
    bit<16> y;
}

struct headers {
    calc_t calc;
}

struct meta_t {
    bit<16> first;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.calc);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action send_back(bit<32> result) {
        hdr.calc.res = result;
        standard_metadata.egress_spec = standard_metadata.ingress_port;
    }

    action operation_add() {
        send_back(hdr.calc.a + hdr.calc.b);
    }

    action operation_sub() {
        send_back(hdr.calc.a - hdr.calc.b);
    }

    action operation_drop() {
        mark_to_drop(standard_metadata);
    }

    table calculate {
        key = {
            hdr.calc.op : exact;
        }
        actions = {
            operation_add;
            operation_sub;
            operation_drop;
            send_back;
        }
        const default_action = operation_drop();
        const entries = {
            0x2b : operation_add();
            0x2d : operation_sub();
            0x3d : send_back(7);
        }
    }

    action order(bit<16> first, bit<16> second) {
        hdr.calc.x = first;
        hdr.calc.y = second;
    }

    apply {
        calculate.apply();
        meta.first = hdr.calc.x;
        if (hdr.calc.swap == 0) {
            order(meta.first, hdr.calc.y);
        } else {
            bit<16> second = hdr.calc.x;
            order(hdr.calc.y, second);
        }
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply { }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.calc);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
