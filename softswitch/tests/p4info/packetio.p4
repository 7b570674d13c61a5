/* Controller packet metadata, indirect and direct counters, a meter and a digest, written to
 * have the control-plane names the P4Info of the UP4 (omec-project/up4) BMv2 program uses for
 * them, so ids can be compared with that p4c output. */
#include <core.p4>
#include <v1model.p4>

@controller_header("packet_out")
header packet_out_t { bit<8> reserved; }

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> _pad; }

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
struct headers { packet_out_t packet_out; packet_in_t packet_in; ethernet_t ethernet; }
struct ddn_digest_t { bit<32> ue_address; }
struct metadata { ddn_digest_t ddn; bit<16> ctr_idx; }

parser P(packet_in packet, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) { 255: packet_out; default: ethernet; }
    }
    state packet_out { packet.extract(hdr.packet_out); transition ethernet; }
    state ethernet { packet.extract(hdr.ethernet); transition accept; }
}

control PreQosPipe(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(1024, CounterType.packets_and_bytes) pre_qos_counter;
    @name(".acls") direct_counter(CounterType.packets_and_bytes) acl_counter;
    meter(64, MeterType.bytes) app_meter;
    action punt() {
        sm.egress_spec = 255;
        hdr.packet_in.setValid();
        hdr.packet_in.ingress_port = sm.ingress_port;
    }
    action notify() { meta.ddn.ue_address = 1; digest(1, meta.ddn); }
    table acl {
        key = { sm.ingress_port: ternary; hdr.ethernet.etherType: ternary @name("eth_type"); }
        actions = { punt; notify; @defaultonly NoAction; }
        counters = acl_counter;
        const default_action = NoAction();
    }
    apply {
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = (bit<9>)hdr.packet_out.reserved;
            hdr.packet_out.setInvalid();
            exit;
        }
        pre_qos_counter.count((bit<32>)meta.ctr_idx);
        acl.apply();
    }
}

control PostQosPipe(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(1024, CounterType.packets_and_bytes) post_qos_counter;
    apply { post_qos_counter.count((bit<32>)meta.ctr_idx); }
}

control D(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.packet_in); packet.emit(hdr.ethernet); }
}
control V(inout headers hdr, inout metadata meta) { apply { } }
control C(inout headers hdr, inout metadata meta) { apply { } }

V1Switch(P(), V(), PreQosPipe(), PostQosPipe(), C(), D()) main;
