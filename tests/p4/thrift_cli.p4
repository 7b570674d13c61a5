// The program simple_switch_CLI drives in the Thrift test (tests/tests/softswitch_thrift.rs):
// a port-to-port table whose actions forward, multicast or drop, a per-port counter, a
// register, a per-port meter, and a clone to session 5 of every frame of EtherType 0x88b5.
#include <core.p4>
#include <v1model.p4>

header ethernet_t {
    bit<48> dst;
    bit<48> src;
    bit<16> ether_type;
}

struct headers_t {
    ethernet_t ethernet;
}

struct metadata_t {
    bit<8> colour;
}

parser ThriftParser(packet_in pkt, out headers_t hdr, inout metadata_t meta,
                    inout standard_metadata_t std) {
    state start {
        pkt.extract(hdr.ethernet);
        transition accept;
    }
}

control ThriftVerify(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ThriftIngress(inout headers_t hdr, inout metadata_t meta,
                      inout standard_metadata_t std) {
    counter(512, CounterType.packets_and_bytes) rx;
    register<bit<32>>(8) scratch;
    meter(8, MeterType.packets) police;

    action to_port(bit<9> port) {
        std.egress_spec = port;
    }
    action to_group(bit<16> group) {
        std.mcast_grp = group;
    }
    action drop() {
        mark_to_drop(std);
    }
    table forward {
        key = { std.ingress_port: exact; }
        actions = { to_port; to_group; drop; }
        default_action = drop();
    }
    apply {
        rx.count((bit<32>) std.ingress_port);
        scratch.write(0, (bit<32>) std.ingress_port);
        police.execute_meter((bit<32>) std.ingress_port, meta.colour);
        forward.apply();
        if (hdr.ethernet.ether_type == 0x88b5) {
            clone(CloneType.I2E, 5);
        }
    }
}

control ThriftEgress(inout headers_t hdr, inout metadata_t meta,
                     inout standard_metadata_t std) {
    apply { }
}

control ThriftCompute(inout headers_t hdr, inout metadata_t meta) {
    apply { }
}

control ThriftDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.ethernet);
    }
}

V1Switch(ThriftParser(), ThriftVerify(), ThriftIngress(), ThriftEgress(), ThriftCompute(),
         ThriftDeparser()) main;
