/* Controls applied from controls: two instances of one control keep their own tables and
 * registers, take arguments by copy-in/copy-out, and an exit inside one ends the whole ingress.
 * Constructor parameters configure each instance (and the ingress itself, from main). Names
 * are p4c's: main's MyIngress(8w0xaa) is its specialization MyIngress_0, so the instances'
 * tables and registers are MyIngress_0.first.* and MyIngress_0.second.*. */
#include <core.p4>
#include <v1model.p4>

header data_t {
    bit<8> tag;
    bit<8> first;
    bit<8> second;
    bit<8> after;
}

struct headers {
    data_t d;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.d);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control Stamp(in bit<8> tag, inout bit<8> field, inout standard_metadata_t sm)(bit<8> bonus) {
    register<bit<8>>(1) uses;

    action set(bit<8> v) {
        field = v;
    }
    action stop() {
        sm.egress_spec = 3;
        exit;
    }
    table by_tag {
        key = {
            tag: exact;
        }
        actions = { set; stop; NoAction; }
        default_action = NoAction();
    }
    apply {
        bit<8> n;
        uses.read(n, 0);
        uses.write(0, n + 1);
        by_tag.apply();
        field = field + n + bonus;
    }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata)(bit<8> after_value) {
    Stamp(8w0) first;
    Stamp(8w0x40) second;

    apply {
        standard_metadata.egress_spec = 1;
        first.apply(hdr.d.tag, hdr.d.first, standard_metadata);
        second.apply(hdr.d.tag, hdr.d.second, standard_metadata);
        hdr.d.after = after_value;
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
        packet.emit(hdr.d);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(8w0xaa), NoEgress(), NoCompute(), MyDeparser()) main;
