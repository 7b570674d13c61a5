/* Packet flow through the architecture: resubmit and recirculate preserving a field list,
 * E2E clone, instance_type, and the deprecated resubmit(data) and clone3; hash algorithms (crc32, xor16, identity), random, digest, log_msg;
 * functions with out parameters, actions with inout parameters called directly, exit from an
 * action, a table miss; a function-like macro. Expected values come from generators/flow.py (zlib's CRC-32). */
#include <core.p4>
#include <v1model.p4>

#define INSTANCE_TYPE_I2E_CLONE 1
#define IS_I2E_CLONE(std_meta) (std_meta.instance_type == INSTANCE_TYPE_I2E_CLONE)

header eth_t {
    bit<48> dst;
    bit<48> src;
    bit<16> etype;
}

header rec_t {
    bit<8>  pass;
    bit<8>  kind;
    bit<32> crc;
    bit<16> xor;
    bit<16> ident;
    bit<8>  rnd;
    bit<8>  fn_out;
    bit<8>  inst;
}

struct headers {
    eth_t eth;
    rec_t rec;
}

struct inner_t {
    @field_list(1)
    bit<8> carried;
}

struct meta_t {
    @field_list(1)
    bit<8> passes;
    bit<8> scratch;
    inner_t inner;
}

void twice(in bit<8> x, out bit<8> y) {
    y = x + x;
}

parser MyParser(packet_in packet, out headers hdr, inout meta_t meta,
                inout standard_metadata_t standard_metadata) {
    state start {
        packet.extract(hdr.eth);
        transition select(hdr.eth.etype) {
            0x88b5: parse_rec;
            default: accept;
        }
    }
    state parse_rec {
        packet.extract(hdr.rec);
        transition accept;
    }
}

control NoVerify(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyIngress(inout headers hdr, inout meta_t meta,
                  inout standard_metadata_t standard_metadata) {
    action bump(inout bit<8> v, in bit<8> by) {
        v = v + by;
    }
    action stop() {
        standard_metadata.egress_spec = 9;
        exit;
    }
    table stopper {
        key = {
            hdr.eth.dst: exact;
        }
        actions = { stop; }
        default_action = stop();
    }
    table empty {
        key = {
            hdr.eth.dst: exact;
        }
        actions = { NoAction; }
    }
    apply {
        standard_metadata.egress_spec = 2;
        if (!hdr.rec.isValid()) {
            standard_metadata.egress_spec = 1;
            exit;
        }
        hdr.rec.inst = (bit<8>) standard_metadata.instance_type;
        hdr.rec.pass = meta.passes;
        if (hdr.rec.kind == 1) {
            // A field list may reach into nested structs: inner.carried survives too.
            if (meta.passes == 0) {
                meta.inner.carried = 0x42;
            }
            hdr.rec.rnd = meta.inner.carried;
        }
        if (hdr.rec.kind == 1 && meta.passes < 2) {
            meta.passes = meta.passes + 1;
            resubmit_preserving_field_list(1);
        } else if (hdr.rec.kind == 4) {
            hash(hdr.rec.crc, HashAlgorithm.crc32, 32w0, { hdr.eth.dst, hdr.eth.src }, 64w0x100000000);
            hash(hdr.rec.xor, HashAlgorithm.xor16, 16w0, { hdr.eth.dst, hdr.eth.src }, 32w0x10000);
            hash(hdr.rec.ident, HashAlgorithm.identity, 16w0, { hdr.rec.kind, 8w0x5a }, 32w0x10000);
            random(hdr.rec.rnd, 7, 7);
            twice(hdr.rec.kind, hdr.rec.fn_out);
            bump(hdr.rec.fn_out, 1);
            if (empty.apply().miss) {
                hdr.rec.pass = 0x77;
            }
            digest(1, { hdr.eth.src });
            log_msg("kind {}", { hdr.rec.kind });
        } else if (hdr.rec.kind == 5) {
            stop();
            hdr.rec.pass = 0xff;
        } else if (hdr.rec.kind == 6 && meta.passes < 1) {
            // The deprecated form: the data argument lists the fields to preserve.
            meta.passes = meta.passes + 1;
            resubmit({ meta.passes });
        } else if (hdr.rec.kind == 8) {
            // The miss runs stop(), whose exit ends ingress before either branch.
            if (stopper.apply().hit) {
                hdr.rec.pass = 0xdd;
            } else {
                hdr.rec.pass = 0xee;
            }
        } else if (hdr.rec.kind == 7) {
            meta.scratch = 0x5c;
            clone3(CloneType.I2E, 7, { meta.scratch });
        }
    }
}

control MyEgress(inout headers hdr, inout meta_t meta,
                 inout standard_metadata_t standard_metadata) {
    apply {
        if (hdr.rec.kind == 2 && meta.passes < 1) {
            meta.passes = meta.passes + 1;
            recirculate_preserving_field_list(1);
        }
        if (hdr.rec.kind == 7 && IS_I2E_CLONE(standard_metadata)) {
            hdr.rec.fn_out = meta.scratch;
        }
        if (hdr.rec.kind == 3) {
            if (standard_metadata.instance_type == 0) {
                clone(CloneType.E2E, 7);
            } else if (standard_metadata.instance_type == 2) {
                hdr.rec.inst = 0x22;
            }
        }
    }
}

control NoCompute(inout headers hdr, inout meta_t meta) {
    apply { }
}

control MyDeparser(packet_out packet, in headers hdr) {
    apply {
        packet.emit(hdr.eth);
        packet.emit(hdr.rec);
    }
}

V1Switch(MyParser(), NoVerify(), MyIngress(), MyEgress(), NoCompute(), MyDeparser()) main;
