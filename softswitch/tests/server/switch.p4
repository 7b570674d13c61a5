/* The program of the P4Runtime server tests: a table of every match kind, an action parameter
 * with an @id, an indirect and a direct counter, a register, a digest, a table with idle
 * timeouts, multicast, and packet I/O with the controller. */
#include <core.p4>
#include <v1model.p4>

const bit<9> CPU_PORT = 255;

@controller_header("packet_in")
header packet_in_t { bit<9> ingress_port; bit<7> pad; }

@controller_header("packet_out")
header packet_out_t { bit<9> egress_port; bit<7> pad; }

header ethernet_t { bit<48> dst; bit<48> src; bit<16> ether_type; }
header ipv4_t {
    bit<8> version_ihl; bit<8> tos; bit<16> total_len; bit<16> id; bit<16> frag;
    bit<8> ttl; bit<8> proto; bit<16> checksum; bit<32> src; bit<32> dst;
}
struct headers { packet_in_t packet_in; packet_out_t packet_out; ethernet_t ethernet; ipv4_t ipv4; }
struct learn_t { bit<48> src; bit<9> port; }
struct metadata { learn_t learn; }

parser P(packet_in pk, out headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    state start {
        transition select(sm.ingress_port) { CPU_PORT: packet_out; default: ethernet; }
    }
    state packet_out { pk.extract(hdr.packet_out); transition ethernet; }
    state ethernet {
        pk.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) { 0x800: ipv4; default: accept; }
    }
    state ipv4 { pk.extract(hdr.ipv4); transition accept; }
}

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) {
    counter(512, CounterType.packets_and_bytes) port_counter;
    direct_counter(CounterType.packets_and_bytes) route_counter;
    register<bit<32>>(16) last_length;
    action drop() { mark_to_drop(sm); }
    action forward(bit<9> port) { sm.egress_spec = port; }
    action to_cpu() { sm.egress_spec = CPU_PORT; }
    action flood(bit<16> group) { sm.mcast_grp = group; }
    action set_tos(@id(5) bit<8> tos) { hdr.ipv4.tos = tos; }
    action learn() {
        meta.learn.src = hdr.ethernet.src;
        meta.learn.port = sm.ingress_port;
        digest(1, meta.learn);
    }
    table route {
        key = { hdr.ipv4.dst: lpm; }
        actions = { forward; drop; flood; to_cpu; }
        counters = route_counter;
        default_action = drop();
    }
    table acl {
        key = { hdr.ipv4.src: ternary; hdr.ipv4.proto: range; hdr.ipv4.tos: optional; }
        actions = { drop; NoAction; }
        default_action = NoAction();
    }
    table smac {
        key = { hdr.ethernet.src: exact; }
        actions = { learn; NoAction; set_tos; }
        default_action = learn();
        support_timeout = true;
    }
    apply {
        port_counter.count((bit<32>)sm.ingress_port);
        last_length.write((bit<32>)sm.ingress_port, sm.packet_length);
        if (hdr.packet_out.isValid()) {
            sm.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
        } else {
            smac.apply();
            if (hdr.ipv4.isValid()) {
                route.apply();
                acl.apply();
            }
            if (sm.egress_spec == CPU_PORT) {
                hdr.packet_in.setValid();
                hdr.packet_in.ingress_port = sm.ingress_port;
            }
        }
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t sm) { apply { } }
control Verify(inout headers hdr, inout metadata meta) { apply { } }
control Compute(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out pk, in headers hdr) {
    apply { pk.emit(hdr.packet_in); pk.emit(hdr.ethernet); pk.emit(hdr.ipv4); }
}

V1Switch(P(), Verify(), MyIngress(), MyEgress(), Compute(), MyDeparser()) main;
