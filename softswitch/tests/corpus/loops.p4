/* Three-clause for loops (P4_16 1.2.x) in actions, where p4c's BMv2 back end compiles them
 * (as _jump primitives): break, continue, nested loops, several init and update statements,
 * a compound assignment as the update, a loop that runs no iteration and one that counts down
 * through zero. Expected values are computed independently by generators/loops.py. */
#include <core.p4>
#include <v1model.p4>

header in_t {
    bit<8> n;
    bit<8> skip;
    bit<8> stop;
    bit<8> x;
}

header out_t {
    bit<8>  sum;
    bit<8>  count;
    bit<16> prod;
    bit<8>  nested;
    bit<8>  down;
    bit<8>  none;
}

struct headers {
    in_t  in_;
    out_t res;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.in_);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    // Sums 0 .. n-1 but `skip` (continue), stopping at `stop` (break).
    action sum_up() {
        bit<8> sum = 0;
        bit<8> count = 0;
        for (bit<8> i = 0; i < hdr.in_.n; i += 1) {
            if (i == hdr.in_.skip) {
                continue;
            }
            if (i == hdr.in_.stop) {
                break;
            }
            sum = sum + i;
            count += 1;
        }
        hdr.res.sum = sum;
        hdr.res.count = count;
    }

    // min(x, 8)! modulo 2^16, with two init and two update statements.
    action factorial() {
        bit<16> p;
        bit<8> k;
        for (p = 1, k = 1; k <= hdr.in_.x && k <= 8; k = k + 1, p = p) {
            p = p * (bit<16>)k;
        }
        hdr.res.prod = p;
    }

    // Nested loops: the sum of a * b for 1 <= a <= 3, 0 <= b < a, and x; an inner break.
    action nested() {
        bit<8> acc = 0;
        for (bit<8> a = 1; a <= 3; a = a + 1) {
            for (bit<8> b = 0; b < a; b = b + 1) {
                if (b == 2) {
                    break;
                }
                acc = acc + a * b + hdr.in_.x;
            }
        }
        hdr.res.nested = acc;
    }

    // Counts down from n through 0 with a signed counter; and a loop whose condition is false
    // from the start (p4c 1.2.5.16 crashes, "Null body", on a loop whose body only stores a
    // constant).
    action edges() {
        bit<8> down = 0;
        for (int<16> j = (int<16>)(bit<16>)hdr.in_.n; j >= 0; j = j - 1) {
            down = down + 1;
        }
        hdr.res.down = down;
        bit<8> none = 7;
        for (bit<8> z = hdr.in_.x; z < hdr.in_.x; z = z + 1) {
            none = none + z;
        }
        hdr.res.none = none;
    }

    apply {
        standard_metadata.egress_spec = 1;
        // A packet too short for the header passes unchanged (an invalid header's fields are
        // undefined: BMv2 reads the previous packet's values).
        if (!hdr.in_.isValid()) {
            exit;
        }
        hdr.res.setValid();
        sum_up();
        factorial();
        nested();
        edges();
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
        packet.emit(hdr.in_);
        packet.emit(hdr.res);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
