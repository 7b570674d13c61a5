/* The traffic manager: strict priority by standard_metadata.priority, per-queue depth (tail
 * drop) and rate, and the queueing metadata egress sees (enq_qdepth, deq_qdepth,
 * deq_timedelta in microseconds of the virtual clock). */
#include <core.p4>
#include <v1model.p4>

header q_t {
    bit<8>  prio;
    bit<8>  enq;
    bit<8>  deq;
    bit<32> delta;
}

struct headers {
    q_t q;
}

struct meta_t { }

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.q);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    apply {
        standard_metadata.egress_spec = 1;
        standard_metadata.priority = hdr.q.prio[2:0];
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        hdr.q.enq = (bit<8>) standard_metadata.enq_qdepth;
        hdr.q.deq = (bit<8>) standard_metadata.deq_qdepth;
        hdr.q.delta = standard_metadata.deq_timedelta;
    }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.q);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
