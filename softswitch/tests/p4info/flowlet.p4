/* Flowlet switching with ECMP, written to have the control-plane names of p4c's
 * flowlet_switching-bmv2.p4 sample (relative @name annotations, two controls declaring an
 * action of the same name), so its P4Info can be compared with p4c's. */
#include <core.p4>
#include <v1model.p4>

struct ingress_metadata_t {
    bit<32> flow_ipg;
    bit<13> flowlet_map_index;
    bit<16> flowlet_id;
    bit<32> flowlet_lasttime;
    bit<14> ecmp_offset;
    bit<32> nhop_ipv4;
}

header ethernet_t { bit<48> dstAddr; bit<48> srcAddr; bit<16> etherType; }
header ipv4_t {
    bit<8> version_ihl; bit<8> diffserv; bit<16> totalLen; bit<16> identification;
    bit<16> flags_frag; bit<8> ttl; bit<8> protocol; bit<16> hdrChecksum;
    bit<32> srcAddr; bit<32> dstAddr;
}
header tcp_t { bit<16> srcPort; bit<16> dstPort; bit<128> rest; }

struct metadata { ingress_metadata_t ingress_metadata; }
struct headers { ethernet_t ethernet; ipv4_t ipv4; tcp_t tcp; }

parser ParserImpl(packet_in packet, out headers hdr, inout metadata meta,
                  inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.ethernet);
        transition select(hdr.ethernet.etherType) { 0x800: ipv4; default: accept; }
    }
    state ipv4 {
        packet.extract(hdr.ipv4);
        transition select(hdr.ipv4.protocol) { 6: tcp; default: accept; }
    }
    state tcp { packet.extract(hdr.tcp); transition accept; }
}

control egress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    @name("rewrite_mac") action rewrite_mac(bit<48> smac) { hdr.ethernet.srcAddr = smac; }
    @name("_drop") action drop_it() { mark_to_drop(standard_metadata); }
    @name("send_frame") table frame {
        actions = { rewrite_mac; drop_it; NoAction; }
        key = { standard_metadata.egress_port: exact; }
        size = 256;
        default_action = NoAction();
    }
    apply { frame.apply(); }
}

control ingress(inout headers hdr, inout metadata meta, inout standard_metadata_t standard_metadata) {
    @name("flowlet_id") register<bit<16>>(32w8192) ids;
    @name("flowlet_lasttime") register<bit<32>>(32w8192) lasttime;
    @name("_drop") action drop_it() { mark_to_drop(standard_metadata); }
    action set_ecmp_select(bit<8> ecmp_base, bit<8> ecmp_count) {
        hash(meta.ingress_metadata.ecmp_offset, HashAlgorithm.crc16, (bit<10>)ecmp_base,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol, hdr.tcp.srcPort,
               hdr.tcp.dstPort, meta.ingress_metadata.flowlet_id }, (bit<20>)ecmp_count);
    }
    action set_nhop(bit<32> nhop_ipv4, bit<9> port) {
        meta.ingress_metadata.nhop_ipv4 = nhop_ipv4;
        standard_metadata.egress_spec = port;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }
    action lookup_flowlet_map() {
        hash(meta.ingress_metadata.flowlet_map_index, HashAlgorithm.crc16, (bit<13>)0,
             { hdr.ipv4.srcAddr, hdr.ipv4.dstAddr, hdr.ipv4.protocol, hdr.tcp.srcPort,
               hdr.tcp.dstPort }, (bit<26>)13);
        ids.read(meta.ingress_metadata.flowlet_id, (bit<32>)meta.ingress_metadata.flowlet_map_index);
        lasttime.read(meta.ingress_metadata.flowlet_lasttime,
                      (bit<32>)meta.ingress_metadata.flowlet_map_index);
        meta.ingress_metadata.flow_ipg = (bit<32>)standard_metadata.ingress_global_timestamp
                                         - meta.ingress_metadata.flowlet_lasttime;
        lasttime.write((bit<32>)meta.ingress_metadata.flowlet_map_index,
                       (bit<32>)standard_metadata.ingress_global_timestamp);
    }
    action set_dmac(bit<48> dmac) { hdr.ethernet.dstAddr = dmac; }
    action update_flowlet_id() {
        meta.ingress_metadata.flowlet_id = meta.ingress_metadata.flowlet_id + 1;
        ids.write((bit<32>)meta.ingress_metadata.flowlet_map_index, meta.ingress_metadata.flowlet_id);
    }
    table ecmp_group {
        actions = { drop_it; set_ecmp_select; NoAction; }
        key = { hdr.ipv4.dstAddr: lpm; }
        size = 1024;
        default_action = NoAction();
    }
    table ecmp_nhop {
        actions = { drop_it; set_nhop; NoAction; }
        key = { meta.ingress_metadata.ecmp_offset: exact; }
        size = 16384;
        default_action = NoAction();
    }
    table flowlet { actions = { lookup_flowlet_map; NoAction; } default_action = NoAction(); }
    table forward {
        actions = { set_dmac; drop_it; NoAction; }
        key = { meta.ingress_metadata.nhop_ipv4: exact; }
        size = 512;
        default_action = NoAction();
    }
    table new_flowlet { actions = { update_flowlet_id; NoAction; } default_action = NoAction(); }
    apply {
        flowlet.apply();
        if (meta.ingress_metadata.flow_ipg > 50000) { new_flowlet.apply(); }
        ecmp_group.apply();
        ecmp_nhop.apply();
        forward.apply();
    }
}

control DeparserImpl(packet_out packet, in headers hdr) {
    apply { packet.emit(hdr.ethernet); packet.emit(hdr.ipv4); packet.emit(hdr.tcp); }
}
control verifyChecksum(inout headers hdr, inout metadata meta) { apply { } }
control computeChecksum(inout headers hdr, inout metadata meta) { apply { } }

V1Switch(ParserImpl(), verifyChecksum(), ingress(), egress(), computeChecksum(), DeparserImpl()) main;
