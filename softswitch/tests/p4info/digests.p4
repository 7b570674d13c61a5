/* Three digests whose data types hold bit strings, an error, an enum and a serializable enum,
 * written to have the control-plane names of p4c's v1model-digest-containing-ser-enum.p4
 * sample. */
#include <core.p4>
#include <v1model.p4>

enum MyPacketTypes { IPv4, Other }
enum bit<8> MySerEnum1 { foo = 28, bar = 17, gah = 42 }

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<8> version_ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<16> flags_frag; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
struct headers { ethernet_t ethernet; ipv4_t ipv4; }

struct test_digest_t {
    bit<48> in_mac_srcAddr;
    error my_parser_error;
    MyPacketTypes pkt_type;
}
struct test_digest2_t { bit<48> in_mac_dstAddr; MySerEnum1 my_thing; }
struct test_digest3_t { bit<16> in_mac_etherType; }
struct metadata {
    test_digest_t d1;
    test_digest2_t d2;
    test_digest3_t d3;
    bit<32> nhop;
}

parser MyParser(packet_in packet, out headers hdr, inout metadata meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x800: ipv4; default: accept; }
    }
    state ipv4 { packet.extract(hdr.ipv4); transition accept; }
}

control MyVerifyChecksum(inout headers hdr, inout metadata meta) { apply { } }

control MyIngress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action set_dmac(bit<48> dstAddr) { hdr.ethernet.dstAddr = dstAddr; }
    action drop() { mark_to_drop(standard_metadata); }
    action set_nhop(bit<32> dstAddr, bit<9> port) {
        meta.nhop = dstAddr;
        standard_metadata.egress_spec = port;
    }
    action send_digest() {
        meta.d1.in_mac_srcAddr = hdr.ethernet.srcAddr;
        meta.d1.my_parser_error = error.PacketTooShort;
        meta.d1.pkt_type = MyPacketTypes.IPv4;
        digest(1, meta.d1);
        meta.d2.in_mac_dstAddr = hdr.ethernet.dstAddr;
        meta.d2.my_thing = MySerEnum1.bar;
        digest(2, meta.d2);
        meta.d3.in_mac_etherType = hdr.ethernet.etherType;
        digest<test_digest3_t>(3, meta.d3);
    }
    table forward {
        actions = { set_dmac; drop; NoAction; }
        key = { hdr.ipv4.dstAddr: exact; }
        default_action = NoAction();
    }
    table ipv4_lpm {
        actions = { set_nhop; drop; NoAction; }
        key = { hdr.ipv4.dstAddr: lpm; }
        default_action = NoAction();
    }
    apply {
        if (hdr.ipv4.isValid()) {
            ipv4_lpm.apply();
            forward.apply();
        }
        send_digest();
    }
}

control MyEgress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    action rewrite_mac(bit<48> srcAddr) { hdr.ethernet.srcAddr = srcAddr; }
    table send_frame {
        actions = { rewrite_mac; NoAction; }
        key = { standard_metadata.egress_port: exact; }
        default_action = NoAction();
    }
    apply { send_frame.apply(); }
}

control MyComputeChecksum(inout headers hdr, inout metadata meta) { apply { } }
control MyDeparser(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); }
}

V1Switch(MyParser(), MyVerifyChecksum(), MyIngress(), MyEgress(), MyComputeChecksum(), MyDeparser()) main;
