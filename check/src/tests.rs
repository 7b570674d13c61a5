//! One test per rule: a configuration that trips it and one that does not, each built from
//! text the project's parsers read (a fabric spec, a tuning's TOML, runtime-JSON entries, a
//! host configuration's TOML) and the entries the control plane computes from them.

use hostconfig::config::HostConfig;
use p4values::runtime_json::{RuntimeConfig, TableEntrySpec};
use topology::{entries, Spec, Tuning};

use crate::{check, Assumptions, Fabric, Finding, Severity};

/// The host configuration that agrees with a default fabric of 100 Gb/s links.
const GOOD_HOST: &str = "[pfc]\nlink_speed_bps = \"100g\"\nwatchdog_ignore = true\n";

/// The entries the control plane computes for `spec` with the tuning `tuning` (TOML).
fn configs(spec: &str, tuning: &str) -> (topology::Fabric, Vec<RuntimeConfig>) {
    let fabric = topology::build(&Spec::parse(spec).unwrap());
    let tuning: Tuning = toml::from_str(tuning).unwrap();
    let configs = entries::compute(&fabric, &tuning).unwrap();
    (fabric, configs)
}

/// The fabric `spec` with `configs`, every host configured by `host` (TOML) if given.
fn fabric(spec: &topology::Fabric, configs: &[RuntimeConfig], host: Option<&str>) -> Fabric {
    let mut f = Fabric::generated(spec, configs, 64).unwrap();
    if let Some(text) = host {
        let config = HostConfig::from_toml(text).unwrap();
        for h in &mut f.hosts {
            h.nics = vec![crate::fabric::Nic {
                interface: "eth0".into(),
                config: config.clone(),
            }];
        }
    }
    f
}

/// The findings on `spec` with `tuning`, hosts configured by `host`.
fn findings(spec: &str, tuning: &str, host: Option<&str>) -> Vec<Finding> {
    let (f, c) = configs(spec, tuning);
    check(&fabric(&f, &c, host), &Assumptions::default())
}

/// Replaces, in switch `switch`'s entries, the entry of the same table and match as the
/// runtime-JSON entry `json` with it.
fn replace(f: &topology::Fabric, configs: &mut [RuntimeConfig], switch: &str, json: &str) {
    let new: TableEntrySpec = serde_json::from_str(json).unwrap();
    let s = f.switch_named(switch).unwrap().0;
    let old = configs[s]
        .table_entries
        .iter_mut()
        .find(|e| e.table == new.table && e.matches == new.matches)
        .unwrap_or_else(|| panic!("{switch} has no entry like {json}"));
    *old = new;
}

/// lossless.p4's RED entry of port 1, priority 3, as runtime JSON.
fn red_entry(kmin: u32, kmax: u32, pmax_q16: u32) -> String {
    format!(
        r#"{{"table": "LosslessEgress.ecn_profile",
            "match": {{"standard_metadata.egress_port": 1, "standard_metadata.priority": 3}},
            "action_name": "LosslessEgress.red",
            "action_params": {{"kmin_packets": {kmin}, "kmax_packets": {kmax}, "pmax_q16": {pmax_q16}}}}}"#
    )
}

/// lossless.p4's pause quantum entry of port 1, as runtime JSON.
fn quantum_entry(q10: u32) -> String {
    format!(
        r#"{{"table": "LosslessIngress.pfc_rx_port",
            "match": {{"standard_metadata.ingress_port": 1}},
            "action_name": "LosslessIngress.set_pause_quantum",
            "action_params": {{"quantum_q10": {q10}}}}}"#
    )
}

/// lossless.p4's classification entry of `dscp`, as runtime JSON.
fn dscp_entry(dscp: u8, priority: u8) -> String {
    format!(
        r#"{{"table": "LosslessIngress.dscp_priority", "match": {{"hdr.ipv4.dscp": {dscp}}},
            "action_name": "LosslessIngress.set_priority", "action_params": {{"priority": {priority}}}}}"#
    )
}

/// The findings of `rule`.
fn of<'a>(found: &'a [Finding], rule: &str) -> Vec<&'a Finding> {
    found.iter().filter(|f| f.rule == rule).collect()
}

/// The fabric most rules are tried on: two leaves, two spines, a host per leaf.
const SMALL: &str = "leaf-spine:2,2,1";

/// The findings of `rule` on [`SMALL`] with `tuning`, hosts configured by `host`.
fn findings_of(rule: &str, tuning: &str, host: Option<&str>) -> Vec<Finding> {
    let mut found = findings(SMALL, tuning, host);
    found.retain(|f| f.rule == rule);
    found
}

/// Asserts that the findings on [`SMALL`] with `tuning`, hosts configured by `host`, have
/// none of `rule`.
fn assert_none(tuning: &str, host: Option<&str>, rule: &str) {
    let found = findings_of(rule, tuning, host);
    assert!(found.is_empty(), "{found:#?}");
}

/// A tuning whose Kmax is below XOFF (the default's 20 packets are not below its 16).
const GOOD_TUNING: &str = "[ecn]\nkmax_packets = 15\n";

#[test]
fn the_computed_entries_and_a_matching_host_are_clean() {
    let found = findings("leaf-spine:2,3,2", GOOD_TUNING, Some(GOOD_HOST));
    assert!(found.is_empty(), "{found:#?}");
    let found = findings("fat-tree:4", GOOD_TUNING, None);
    assert!(found.is_empty(), "{found:#?}");
    // The default tuning marks every packet only from 20 packets deep, after its XOFF of 16: a
    // warning on every switch, and nothing else.
    let found = findings("leaf-spine:2,3,2", "", Some(GOOD_HOST));
    assert_eq!(found.len(), 5, "{found:#?}");
    assert!(found
        .iter()
        .all(|f| f.rule == "ecn-above-xoff" && f.severity == Severity::Warning));
}

#[test]
fn pfc_on_a_priority_without_lossless_traffic() {
    let zero = findings_of("pfc-unused-priority", "lossless = [3, 0]", None);
    assert_eq!(zero.len(), 4, "{zero:#?}");
    assert!(zero
        .iter()
        .all(|f| f.severity == Severity::Error && f.place.priority == Some(0)));
    let empty = findings_of("pfc-unused-priority", "lossless = [3, 5]", None);
    assert_eq!(empty.len(), 4);
    assert!(empty.iter().all(|f| f.severity == Severity::Warning));
    let host = findings_of(
        "pfc-unused-priority",
        "",
        Some(&format!("{GOOD_HOST}[pfc.prio5]\nenabled = true\n")),
    );
    assert_eq!(host.len(), 2, "{host:#?}");
    assert_eq!(host[0].place.host.as_deref(), Some("h11/eth0"));
    assert_none("", None, "pfc-unused-priority");
}

#[test]
fn lossless_traffic_through_a_queue_without_pfc() {
    let (f, mut c) = configs(SMALL, "");
    let spine1 = f.switch_named("spine1").unwrap().0;
    c[spine1].table_entries.retain(|e| {
        !(e.table.ends_with("pfc_profile")
            && e.matches["standard_metadata.egress_spec"] == serde_json::json!(2))
    });
    let found = check(&fabric(&f, &c, None), &Assumptions::default());
    let missing = of(&found, "lossless-without-pfc");
    assert_eq!(missing.len(), 1, "{found:#?}");
    assert_eq!(missing[0].place.describe(), "spine1:2 prio 3");
    assert!(missing[0].detail.as_deref().unwrap().contains("h21"));
}

#[test]
fn dscp_maps_that_disagree() {
    let (f, mut c) = configs("leaf-spine:2,3,1", "");
    replace(&f, &mut c, "spine2", &dscp_entry(26, 2));
    let found = check(&fabric(&f, &c, None), &Assumptions::default());
    let maps = of(&found, "dscp-map-disagrees");
    assert_eq!(maps.len(), 1, "{found:#?}");
    assert_eq!(maps[0].place.describe(), "spine2 prio 2");
    assert!(maps[0]
        .why
        .contains("DSCP 26 goes to priority 2 here and to 3"));
    // Its traffic is lossy there too.
    assert!(!of(&found, "lossless-without-pfc").is_empty());
    let host = findings_of(
        "dscp-map-disagrees",
        "",
        Some(&format!("{GOOD_HOST}[dscp.26]\nprio = 4\n")),
    );
    assert_eq!(host.len(), 2);
    assert_eq!(host[0].fix, "dscp.26.prio=3");
}

#[test]
fn cnps_not_above_the_data() {
    let low = findings_of(
        "cnp-not-above-data",
        "classes = [{dscp = 26, priority = 3}, {dscp = 48, priority = 2}]",
        None,
    );
    assert_eq!(low.len(), 4, "{low:#?}");
    assert!(low[0]
        .why
        .contains("priority 2, not above the data they answer (priority 3)"));
    let host = findings_of(
        "cnp-not-above-data",
        "",
        Some(&format!("{GOOD_HOST}[cnp]\ndscp = 10\n")),
    );
    assert_eq!(host.len(), 2, "{host:#?}");
    assert_eq!(host[0].place.priority, Some(0));
}

#[test]
fn ecn_thresholds_against_pfc() {
    let above = findings_of(
        "ecn-above-xoff",
        "[ecn]\nkmin_packets = 16\nkmax_packets = 30\n",
        None,
    );
    // Kmin (an error) and Kmax (a warning), per switch.
    assert_eq!(above.len(), 8, "{above:#?}");
    assert!(above
        .iter()
        .any(|f| f.severity == Severity::Error && f.why.starts_with("Kmin (16")));
    assert!(above
        .iter()
        .any(|f| f.severity == Severity::Warning && f.why.starts_with("Kmax (30")));
    let (f, mut c) = configs(SMALL, "");
    replace(&f, &mut c, "leaf1", &red_entry(10, 10, 0));
    let found = check(&fabric(&f, &c, None), &Assumptions::default());
    let red = of(&found, "ecn-thresholds");
    assert_eq!(red.len(), 2, "{found:#?}");
    assert!(red.iter().all(|f| f.place.describe() == "leaf1:1 prio 3"));
    let host = findings_of(
        "ecn-above-xoff",
        GOOD_TUNING,
        Some(&format!(
            "{GOOD_HOST}[pfc.prio3]\nenabled = true\nxoff_bytes = 150000\n"
        )),
    );
    assert_eq!(host.len(), 2, "{host:#?}");
    assert!(host[0].why.contains("kmax (200000 B)"));
    assert_none(GOOD_TUNING, Some(GOOD_HOST), "ecn-above-xoff");
}

#[test]
fn headroom_below_what_the_links_need() {
    // A queue of 64 packets with XOFF at 62 leaves 2; a 100 Gb/s link of 20 m with 9000-byte
    // frames needs 4.
    let short = findings_of("headroom", "[pfc]\nxoff_packets = 62\n", None);
    assert_eq!(short.len(), 4, "{short:#?}");
    assert!(short[0]
        .why
        .contains("leaves 2 packets of headroom, and 4 packets still arrive"));
    assert!(short[0].fix.contains("at most 60"));
    assert!(short[0].detail.as_deref().unwrap().contains("= 2500 B"));
    assert_none("[pfc]\nxoff_packets = 60\n", None, "headroom");
}

#[test]
fn a_watchdog_that_only_counts_or_waits_too_long() {
    let slow = findings_of(
        "watchdog",
        "",
        Some("[pfc]\nlink_speed_bps = \"100g\"\nwatchdog_ms = 1000\n"),
    );
    // Each host: it only counts storms, and it waits 1000 ms.
    assert_eq!(slow.len(), 4, "{slow:#?}");
    assert!(slow.iter().any(|f| f.fix == "pfc.watchdog_ms=200"));
    assert!(slow.iter().any(|f| f.fix == "pfc.watchdog_ignore=true"));
    assert_none("", Some(GOOD_HOST), "watchdog");
}

#[test]
fn pause_quanta_of_another_speed() {
    let (f, mut c) = configs(SMALL, "");
    replace(&f, &mut c, "leaf2", &quantum_entry(52));
    let found = check(&fabric(&f, &c, None), &Assumptions::default());
    let quanta = of(&found, "pause-quanta");
    assert_eq!(quanta.len(), 1, "{found:#?}");
    assert_eq!(quanta[0].place.describe(), "leaf2:1");
    assert_eq!(
        quanta[0].fix,
        "set_pause_quantum quantum_q10=5 on pfc_rx_port 1"
    );
    // The agent's example profile reads pauses at 25 Gb/s.
    let host = findings_of(
        "pause-quanta",
        "",
        Some("[pfc]\nlink_speed_bps = \"25g\"\n"),
    );
    assert_eq!(host.len(), 2);
    assert_eq!(host[0].fix, "pfc.link_speed_bps=100000000000");
}

#[test]
fn a_route_back_up_closes_a_buffer_cycle() {
    let (f, mut c) = configs(SMALL, "");
    assert!(of(
        &check(&fabric(&f, &c, None), &Assumptions::default()),
        "buffer-cycle"
    )
    .is_empty());
    // spine1 sends leaf2's subnet down to leaf1, which sends it up again over both spines.
    replace(
        &f,
        &mut c,
        "spine1",
        r#"{"table": "LosslessIngress.ipv4_lpm",
            "match": {"hdr.ipv4.dstAddr": ["10.0.2.0", 24]},
            "action_name": "LosslessIngress.set_nexthop", "action_params": {"nexthop": 1}}"#,
    );
    let found = check(&fabric(&f, &c, None), &Assumptions::default());
    let cycles = of(&found, "buffer-cycle");
    assert_eq!(cycles.len(), 1, "{found:#?}");
    let why = &cycles[0].why;
    assert!(
        why.contains("leaf1:2 → spine1:1") && why.contains("spine1:1 → leaf1:2"),
        "{why}"
    );
    assert!(cycles[0]
        .detail
        .as_deref()
        .unwrap()
        .contains("by the routes to h21"));
}

#[test]
fn malformed_entries_are_named() {
    let config = RuntimeConfig::parse(
        r#"{"table_entries": [{"table": "LosslessIngress.dscp_priority",
            "match": {"hdr.ipv4.dscp": 26}, "action_name": "LosslessIngress.set_priority",
            "action_params": {"priority": 9}}]}"#,
    )
    .unwrap();
    let err = format!("{:#}", crate::tables::Tables::read(&config).unwrap_err());
    assert!(
        err.contains("table_entries[0]") && err.contains("0..=7"),
        "{err}"
    );
}

/// A route without a match key is the /0 a P4Runtime read gives back for a default route; a
/// route keyed on anything but the destination is a mistake the switches would refuse too.
#[test]
fn a_route_without_a_key_is_the_default_and_a_misnamed_key_is_an_error() {
    let route = |matches: &str| {
        RuntimeConfig::parse(&format!(
            r#"{{"table_entries": [{{"table": "LosslessIngress.ipv4_lpm", "match": {matches},
                "action_name": "LosslessIngress.set_nexthop", "action_params": {{"nexthop": 1}}}}]}}"#
        ))
        .unwrap()
    };
    assert!(crate::tables::Tables::read(&route("{}")).is_ok());
    let err =
        crate::tables::Tables::read(&route(r#"{"hdr.ipv4.dst": ["10.0.0.0", 8]}"#)).unwrap_err();
    let err = format!("{err:#}");
    assert!(
        err.contains("table_entries[0]") && err.contains("no hdr.ipv4.dstAddr"),
        "{err}"
    );
}

/// The suggested tuning, applied, leaves no headroom or ECN finding on a fabric whose default
/// tuning has both (long 100 Gb/s cables, jumbo frames, a 1 µs response, 64-packet queues).
#[test]
fn the_suggested_thresholds_pass_their_own_rules() {
    let spec = "leaf-spine:2,2,1,spine-cable=300m";
    let bad = findings(spec, "[pfc]\nxoff_packets = 60\n", Some(GOOD_HOST));
    assert!(!of(&bad, "headroom").is_empty(), "{bad:#?}");
    let (f, c) = configs(spec, "");
    let suggestion =
        crate::suggest::suggest(&fabric(&f, &c, None), &Assumptions::default()).unwrap();
    // 300 m: a 3 µs round trip at 12.5 B/ns is 37500 B; with 2 frames and the response 68036 B,
    // 8 packets of 9018 B: XOFF 56.
    assert!(
        suggestion.tuning.contains("xoff_packets = 56"),
        "{}",
        suggestion.tuning
    );
    let good = findings(spec, &suggestion.tuning, Some(GOOD_HOST));
    assert!(good.is_empty(), "{}\n{good:#?}", suggestion.tuning);
    let (_, keys) = &suggestion.hosts[0];
    let host = HostConfig::from_toml("").and_then(|mut h| {
        h.apply_assignments(keys)?;
        Ok(h)
    });
    assert_eq!(host.unwrap().settings.link_speed_bps, 100_000_000_000);
    // A queue too shallow for the headroom is said so.
    let (f, c) = configs("leaf-spine:2,2,1,spine-cable=10km", "");
    let err = crate::suggest::suggest(&fabric(&f, &c, None), &Assumptions::default()).unwrap_err();
    assert!(err.contains("deepen the queues"), "{err}");
}

/// The findings' edits, applied to the entries, fix what they are about: short headroom, a
/// wrong pause quantum, a DSCP mapped apart, Pmax 0 (ECN at XOFF: control/tests/check_cli.rs).
#[test]
fn the_edits_fix_their_findings() {
    let (f, c) = configs("leaf-spine:2,2,1", "[pfc]\nxoff_packets = 62\n");
    let mut c = c;
    replace(&f, &mut c, "leaf2", &quantum_entry(52));
    replace(&f, &mut c, "spine2", &dscp_entry(48, 1));
    replace(&f, &mut c, "leaf1", &red_entry(5, 20, 0));
    let found = check(&fabric(&f, &c, None), &Assumptions::default());
    for rule in [
        "headroom",
        "pause-quanta",
        "dscp-map-disagrees",
        "ecn-thresholds",
    ] {
        assert!(!of(&found, rule).is_empty(), "{rule}: {found:#?}");
    }
    let mut configs: Vec<Option<RuntimeConfig>> = c.into_iter().map(Some).collect();
    let (changed, missed) = crate::fix(&found, &mut configs);
    assert!(missed.is_empty(), "{missed:#?}");
    assert_eq!(changed.len(), 4);
    let fixed: Vec<RuntimeConfig> = configs.into_iter().map(Option::unwrap).collect();
    let after = check(&fabric(&f, &fixed, None), &Assumptions::default());
    assert!(after.is_empty(), "{after:#?}");
}
