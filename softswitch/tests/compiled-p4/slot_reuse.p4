// A packet's slots start zeroed but for the locals, which the program zeroes where it declares
// them (the switch reuses the last packet's slot buffer and clears only the rest): a local, a
// metadata field and a header the parser may not extract, each read before it is written.
#include <core.p4>
#include <v1model.p4>

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> type;
}

header tag_t {
    bit<32> value;
}

struct headers_t {
    eth_t eth;
    tag_t tag;
}

struct metadata_t {
    bit<32> seen;
}

parser Parse(packet_in pkt, out headers_t h, inout metadata_t m,
             inout standard_metadata_t sm) {
    state start {
        pkt.extract(h.eth);
        transition select(h.eth.type) {
            0x1234: tag;
            default: accept;
        }
    }
    state tag {
        pkt.extract(h.tag);
        transition accept;
    }
}

control Verify(inout headers_t h, inout metadata_t m) {
    apply { }
}

control SlotIngress(inout headers_t h, inout metadata_t m, inout standard_metadata_t sm) {
    bit<32> total;

    apply {
        bit<32> local;
        local = local + 1;
        total = total + 1;
        m.seen = m.seen + 1;
        if (h.tag.isValid()) {
            local = local + h.tag.value;
            total = total + h.tag.value;
        }
        // The tag's value of a packet without one: 0, never the last packet's.
        h.eth.dst = m.seen ++ h.tag.value[15:0];
        h.eth.src = local ++ total[15:0];
        sm.egress_spec = 1;
    }
}

control SlotEgress(inout headers_t h, inout metadata_t m, inout standard_metadata_t sm) {
    apply { }
}

control Compute(inout headers_t h, inout metadata_t m) {
    apply { }
}

control Deparse(packet_out pkt, in headers_t h) {
    apply {
        pkt.emit(h.eth);
        pkt.emit(h.tag);
    }
}

V1Switch(Parse(), Verify(), SlotIngress(), SlotEgress(), Compute(), Deparse()) main;
