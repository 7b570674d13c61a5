/* An action profile and an action selector named with absolute @name annotations, written to
 * have the control-plane names of p4c's action_profile_max_group_size_annotation.p4 sample. */
#include <core.p4>
#include <v1model.p4>

struct H { }
struct M { bit<32> hash1; }

parser ParserI(packet_in pk, out H hdr, inout M meta, inout standard_metadata_t smeta) {
    state start { transition accept; }
}

control IngressI(inout H hdr, inout M meta, inout standard_metadata_t smeta) {
    @name(".ap") action_profile(32w128) profile;
    @name(".ap_ws") @max_group_size(200)
    action_selector(HashAlgorithm.identity, 32w1024, 32w10) sel;
    action drop() { mark_to_drop(smeta); }
    table indirect {
        key = { }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        implementation = profile;
    }
    table indirect_ws {
        key = { meta.hash1 : selector; }
        actions = { drop; NoAction; }
        const default_action = NoAction();
        implementation = sel;
    }
    apply { indirect.apply(); indirect_ws.apply(); }
}

control EgressI(inout H hdr, inout M meta, inout standard_metadata_t smeta) { apply { } }
control DeparserI(packet_out pk, in H hdr) { apply { } }
control VerifyChecksumI(inout H hdr, inout M meta) { apply { } }
control ComputeChecksumI(inout H hdr, inout M meta) { apply { } }

V1Switch(ParserI(), VerifyChecksumI(), IngressI(), EgressI(), ComputeChecksumI(), DeparserI()) main;
