//! Package `p4.tmp` of PI (p4lang/PI, `proto/p4/tmp/p4config.proto`): `P4DeviceConfig`, the
//! wrapper that PI's clients — the P4 tutorials' `p4runtime_lib` among them — put around a
//! device config before sending it as `ForwardingPipelineConfig.p4_device_config`, and that
//! simple_switch_grpc unwraps. Not part of the P4Runtime specification, and not in the official
//! `p4runtime` package, so the message is written here by hand, with PI's field numbers:
//!
//! ```text
//! message P4DeviceConfig {
//!   message Extras { map<string, string> kv = 1; }
//!   bool reassign = 1;
//!   Extras extras = 2;
//!   bytes device_data = 3;
//! }
//! ```

use std::collections::BTreeMap;

use prost::Message as _;

/// A device config as PI's clients wrap it: for BMv2, `device_data` is p4c-bm2-ss's JSON.
#[derive(Clone, PartialEq, prost::Message)]
pub struct P4DeviceConfig {
    /// Whether the device is to be assigned again (PI removes and re-adds it; a switch that
    /// always replaces its pipeline on commit can ignore it).
    #[prost(bool, tag = "1")]
    pub reassign: bool,
    /// Target-specific options, passed to PI's `pi_assign_device`.
    #[prost(message, optional, tag = "2")]
    pub extras: Option<p4_device_config::Extras>,
    /// The target's own device config.
    #[prost(bytes = "vec", tag = "3")]
    pub device_data: Vec<u8>,
}

/// The messages nested in [`P4DeviceConfig`].
pub mod p4_device_config {
    use super::BTreeMap;

    /// Target-specific options as key/value strings.
    #[derive(Clone, PartialEq, prost::Message)]
    pub struct Extras {
        /// The options.
        #[prost(btree_map = "string, string", tag = "1")]
        pub kv: BTreeMap<String, String>,
    }
}

impl P4DeviceConfig {
    /// `bytes` decoded as a `P4DeviceConfig` that carries device data, or `None` when they are
    /// not one (as PI does, a config that does not decode is taken to be the device data
    /// itself; one without device data wraps nothing).
    pub fn unwrap_from(bytes: &[u8]) -> Option<P4DeviceConfig> {
        P4DeviceConfig::decode(bytes)
            .ok()
            .filter(|config| !config.device_data.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_what_pi_clients_send() {
        // reassign = true, device_data = "{}", as the tutorials' bmv2.py builds it (the bytes
        // of its SerializeToString).
        let wire = [0x08, 0x01, 0x1a, 0x02, b'{', b'}'];
        let config = P4DeviceConfig::unwrap_from(&wire).expect("a wrapper");
        assert!(config.reassign);
        assert_eq!(config.device_data, b"{}");
        assert_eq!(config.encode_to_vec(), wire);

        let mut kv = BTreeMap::new();
        kv.insert("port".to_string(), "9090".to_string());
        let with_extras = P4DeviceConfig {
            reassign: false,
            extras: Some(p4_device_config::Extras { kv }),
            device_data: b"data".to_vec(),
        };
        assert_eq!(
            P4DeviceConfig::unwrap_from(&with_extras.encode_to_vec()),
            Some(with_extras)
        );
    }

    #[test]
    fn text_and_empty_wrappers_are_not_taken_for_one() {
        for raw in [
            &b"#include <core.p4>\ncontrol C() { apply {} }\n"[..],
            b"{\"header_types\": []}",
            b"",
            &[0x08, 0x01],
        ] {
            assert_eq!(P4DeviceConfig::unwrap_from(raw), None, "{raw:?}");
        }
    }
}
