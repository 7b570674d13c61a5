//! The counters of `lossless host stats` as Prometheus metrics, in the text exposition format
//! (version 0.0.4, which `promtool check metrics` and every scraper read): what the agent's
//! `/metrics` serves and `host stats --format prometheus` prints for the node exporter's
//! textfile collector.
//!
//! The metrics are made from the typed [`Stats`] the CLI prints, field by field: each record is
//! destructured without `..`, so a counter added to `Stats` or to one of its records does not
//! compile until it is exported here (or named as the sum of others). Names follow Prometheus'
//! conventions: the `lossless_` prefix, `_total` on counters, base units (bytes, seconds), and
//! bounded labels (`interface`, `priority`, `hook`, `kind`, `qp`, `syndrome`, `uplink`). docs/agent.md
//! lists them.

use std::collections::BTreeMap;

use anyhow::Context as _;
use dataplane_common::{
    cnp::CnpCounters, counters::PrioCounters, lb::LbCounters, lb::UplinkCounters,
    mirror::MirrorCounters, nak::NakCounters,
};
use prometheus::{
    core::{MetricVec, MetricVecBuilder},
    CounterVec, GaugeVec, Opts, Registry,
};

use crate::{
    lb::stats::{FlowletTable, LbStats, UplinkStats},
    mirror::MirrorStats,
    stats::{CnpQpStats, NakQpStats, PriorityStats, Stats},
};

/// The media type of the text exposition format, for HTTP responses.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Labels of one sample: (name, value) pairs, the same names in the same order for every
/// sample of a family.
pub type Labels<'a> = [(&'static str, &'a str)];

/// The sample with the label values of `labels` in the family `name` of `families`, the family
/// made by `make` with the label names of `labels` and registered on first use.
fn sample<T: MetricVecBuilder + 'static>(
    registry: &Registry,
    families: &mut BTreeMap<String, MetricVec<T>>,
    name: &str,
    help: &str,
    labels: &Labels,
    make: fn(Opts, &[&str]) -> prometheus::Result<MetricVec<T>>,
) -> anyhow::Result<T::M> {
    if !families.contains_key(name) {
        let names: Vec<&str> = labels.iter().map(|(n, _)| *n).collect();
        let family = make(Opts::new(name, help), &names)?;
        registry.register(Box::new(family.clone()))?;
        families.insert(name.to_owned(), family);
    }
    let values: Vec<&str> = labels.iter().map(|(_, v)| *v).collect();
    families[name]
        .get_metric_with_label_values(&values)
        .with_context(|| format!("metric {name}"))
}

/// Metric families being filled, then encoded. Families are created on first use; every
/// sample of a family must carry the same label names.
#[derive(Default)]
pub struct Exposition {
    registry: Registry,
    counters: BTreeMap<String, CounterVec>,
    gauges: BTreeMap<String, GaugeVec>,
}

impl Exposition {
    /// An empty exposition.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one sample of the counter family `name` (which ends in `_total`).
    pub fn counter(
        &mut self,
        name: &str,
        help: &str,
        labels: &Labels,
        value: f64,
    ) -> anyhow::Result<()> {
        let registry = &self.registry;
        sample(
            registry,
            &mut self.counters,
            name,
            help,
            labels,
            CounterVec::new,
        )?
        .inc_by(value);
        Ok(())
    }

    /// Sets one sample of the gauge family `name`.
    pub fn gauge(
        &mut self,
        name: &str,
        help: &str,
        labels: &Labels,
        value: f64,
    ) -> anyhow::Result<()> {
        let registry = &self.registry;
        sample(
            registry,
            &mut self.gauges,
            name,
            help,
            labels,
            GaugeVec::new,
        )?
        .set(value);
        Ok(())
    }

    /// Adds one sample, with the labels `labels`, to each of the counter families `families`
    /// (name, help, value).
    fn add_counters<'a, N: AsRef<str>>(
        &mut self,
        labels: &Labels,
        families: impl IntoIterator<Item = (N, &'a str, u64)>,
    ) -> anyhow::Result<()> {
        for (name, help, value) in families {
            self.counter(name.as_ref(), help, labels, value as f64)?;
        }
        Ok(())
    }

    /// Every family, sorted by name, in the text exposition format.
    pub fn encode(&self) -> anyhow::Result<String> {
        Ok(prometheus::TextEncoder::new().encode_to_string(&self.registry.gather())?)
    }

    /// Adds every counter and gauge of one interface's [`Stats`].
    pub fn add_stats(&mut self, stats: &Stats) -> anyhow::Result<()> {
        // Without `..`: a new field must be exported, or named here as the sum of others.
        let Stats {
            interface,
            totals: _,       // the sum of per_priority
            parse_errors: _, // the sum of parse_errors_by_kind
            parse_errors_by_kind,
            per_priority,
            per_hook,
            pfc_pause_rx: _, // per_priority's
            pfc_resume_rx: _,
            pfc_storms: _,
            pfc_violations: _,
            pfc_paused_ns,
            pfc_pause_tx,
            pfc_resume_tx,
            pfc_relayed,
            pfc_buffer_bytes,
            cnp,
            cnp_qps,
            nak_received,
            nak_sent,
            nak_qps,
            nak_unpinned: _,
            lb,
            uplinks,
            mirror,
        } = stats;
        let interface = interface.as_str();
        for queue in per_priority {
            let PriorityStats {
                priority,
                counters,
                parse_errors: _, // by kind, below
                vq_bytes,
                vq_high_water_bytes,
            } = queue;
            let p = *priority;
            let priority = p.to_string();
            let labels = [("interface", interface), ("priority", priority.as_str())];
            self.prio_counters("", &labels, counters)?;
            self.gauge(
                "lossless_phantom_queue_bytes",
                "Backlog of the priority's phantom (virtual) queue after the last packet, largest over hooks.",
                &labels,
                *vq_bytes as f64,
            )?;
            self.gauge(
                "lossless_phantom_queue_high_water_bytes",
                "Largest backlog of the priority's phantom queue since attach, largest over hooks.",
                &labels,
                *vq_high_water_bytes as f64,
            )?;
            self.counter(
                "lossless_pfc_paused_seconds_total",
                "Time the priority has been paused by received PFC frames.",
                &labels,
                pfc_paused_ns[p] as f64 / 1e9,
            )?;
            self.counter(
                "lossless_pfc_pause_frames_sent_total",
                "PFC PAUSE frames this host sent for the priority (first ones and refreshes).",
                &labels,
                pfc_pause_tx[p] as f64,
            )?;
            self.counter(
                "lossless_pfc_resume_frames_sent_total",
                "PFC resume (XON) frames this host sent for the priority.",
                &labels,
                pfc_resume_tx[p] as f64,
            )?;
            self.counter(
                "lossless_pfc_pause_frames_relayed_total",
                "PFC PAUSE frames this host received and passed on to its pfc.relay interfaces.",
                &labels,
                pfc_relayed[p] as f64,
            )?;
            self.gauge(
                "lossless_pfc_ingress_buffer_bytes",
                "This host's modelled ingress buffer occupancy for the priority after the last packet.",
                &labels,
                pfc_buffer_bytes[p] as f64,
            )?;
        }
        for (hook, counters) in per_hook {
            self.prio_counters(
                "hook_",
                &[("interface", interface), ("hook", hook)],
                counters,
            )?;
        }
        for (kind, count) in parse_errors_by_kind {
            self.counter(
                "lossless_parse_errors_total",
                "Malformed frames the parser counted, by kind (passed untouched, accounted at priority 0).",
                &[("interface", interface), ("kind", kind)],
                *count as f64,
            )?;
        }
        self.cnp_counters(interface, cnp)?;
        for qp in cnp_qps {
            let CnpQpStats {
                qp,
                cnp_sent,
                cnp_suppressed,
            } = qp;
            let qp = qp.to_string();
            let labels = [("interface", interface), ("qp", qp.as_str())];
            self.counter(
                "lossless_qp_cnp_sent_total",
                "CNPs sent for one receiver QP (the CNP_QPS table, at most 4096 QPs, least recently used go first).",
                &labels,
                *cnp_sent as f64,
            )?;
            self.counter(
                "lossless_qp_cnp_suppressed_total",
                "CE packets of one receiver QP inside its CNP interval, not answered.",
                &labels,
                *cnp_suppressed as f64,
            )?;
        }
        self.naks("", &[("interface", interface)], nak_received, nak_sent)?;
        for qp in nak_qps {
            let NakQpStats { qp, received, sent } = qp;
            let qp = qp.to_string();
            self.naks(
                "qp_",
                &[("interface", interface), ("qp", qp.as_str())],
                received,
                sent,
            )?;
        }
        if let Some(lb) = lb {
            self.lb(interface, lb)?;
        }
        for uplink in uplinks {
            self.uplink(interface, uplink)?;
        }
        if let Some(mirror) = mirror {
            self.mirror(interface, mirror)?;
        }
        Ok(())
    }

    /// The ERSPAN mirroring counters of one interface.
    fn mirror(&mut self, interface: &str, mirror: &MirrorStats) -> anyhow::Result<()> {
        let MirrorStats {
            session: _, // configuration, not a measurement
            counters,
            mirrored: _, // the sum of the kinds
        } = mirror;
        let MirrorCounters {
            rx_cnps,
            rx_naks,
            rx_priority,
            tx_cnps,
            tx_naks,
            tx_priority,
            skipped,
            failed,
        } = *counters;
        for (direction, kind, value) in [
            ("rx", "cnp", rx_cnps),
            ("rx", "nak", rx_naks),
            ("rx", "priority", rx_priority),
            ("tx", "cnp", tx_cnps),
            ("tx", "nak", tx_naks),
            ("tx", "priority", tx_priority),
        ] {
            self.counter(
                "lossless_mirrored_frames_total",
                "Frames received (rx) or sent (tx) that were mirrored to the ERSPAN collector, by kind.",
                &[
                    ("interface", interface),
                    ("direction", direction),
                    ("kind", kind),
                ],
                value as f64,
            )?;
        }
        for (name, help, value) in [
            (
                "lossless_mirror_skipped_total",
                "Frames the mirroring session selected but the programs do not mirror (VLAN tag outside the frame, GSO, not IP to the kernel).",
                skipped,
            ),
            (
                "lossless_mirror_failed_total",
                "Frames whose mirror could not be made or sent.",
                failed,
            ),
        ] {
            self.counter(name, help, &[("interface", interface)], value as f64)?;
        }
        Ok(())
    }

    /// The counters of one priority, or of one hook (`family` = `hook_`).
    fn prio_counters(
        &mut self,
        family: &str,
        labels: &Labels,
        counters: &PrioCounters,
    ) -> anyhow::Result<()> {
        let PrioCounters {
            rx_packets,
            rx_bytes,
            roce_packets,
            ect_packets,
            ce_on_arrival,
            ecn_marked,
            would_mark_not_ect,
            pfc_pause_rx,
            pfc_resume_rx,
            pfc_storms,
            pfc_violations,
        } = *counters;
        let families = [
            (
                "rx_packets_total",
                "Frames seen (at XDP: received; at TC egress: sent).",
                rx_packets,
            ),
            (
                "rx_bytes_total",
                "Bytes of the frames seen, from the Ethernet header on.",
                rx_bytes,
            ),
            (
                "roce_packets_total",
                "RoCEv2 packets seen (UDP port 4791 with a whole BTH).",
                roce_packets,
            ),
            (
                "ect_packets_total",
                "IP packets that arrived ECT(0) or ECT(1).",
                ect_packets,
            ),
            (
                "ce_on_arrival_packets_total",
                "IP packets that arrived with CE already set.",
                ce_on_arrival,
            ),
            (
                "ecn_marked_packets_total",
                "ECT packets this host's programs marked CE.",
                ecn_marked,
            ),
            (
                "ecn_would_mark_not_ect_packets_total",
                "Not-ECT packets the RED profile would have marked (left unchanged).",
                would_mark_not_ect,
            ),
            (
                "pfc_pause_frames_received_total",
                "802.1Qbb PAUSE frames received with a non-zero time.",
                pfc_pause_rx,
            ),
            (
                "pfc_resume_frames_received_total",
                "802.1Qbb PAUSE frames received with time 0 (XON).",
                pfc_resume_rx,
            ),
            (
                "pfc_storms_total",
                "Pause storms the watchdog saw (runs of pauses longer than its limit).",
                pfc_storms,
            ),
            (
                "pfc_violation_packets_total",
                "Frames that left (TC egress) while their priority was paused.",
                pfc_violations,
            ),
        ]
        .map(|(name, help, value)| (format!("lossless_{family}{name}"), help, value));
        self.add_counters(labels, families)
    }

    fn cnp_counters(&mut self, interface: &str, cnp: &CnpCounters) -> anyhow::Result<()> {
        let CnpCounters {
            cnp_sent,
            cnp_suppressed,
            cnp_received,
            cnp_unsupported,
        } = *cnp;
        let labels = [("interface", interface)];
        self.add_counters(
            &labels,
            [
                (
                    "lossless_cnp_sent_total",
                    "CNPs the kernel sent for CE-marked RoCEv2 packets.",
                    cnp_sent,
                ),
                (
                    "lossless_cnp_suppressed_total",
                    "CE-marked packets inside their QP's CNP interval: no CNP.",
                    cnp_suppressed,
                ),
                (
                    "lossless_cnp_received_total",
                    "CNPs that arrived (this host is a sender).",
                    cnp_received,
                ),
                (
                    "lossless_cnp_unsupported_total",
                    "CE packets whose CNP could not be made (IPv4 options, IPv6, clone failed).",
                    cnp_unsupported,
                ),
            ],
        )
    }

    /// NAKs received and sent by syndrome, of an interface or of one QP (`family` = `qp_`);
    /// a direction not counted (`None`) is not exported. A QP's syndromes appear once non-zero
    /// (the QP table holds up to 4096 QPs).
    fn naks(
        &mut self,
        family: &str,
        labels: &Labels,
        received: &Option<NakCounters>,
        sent: &Option<NakCounters>,
    ) -> anyhow::Result<()> {
        let per_qp = !family.is_empty();
        for (direction, help, naks) in [
            (
                "received",
                "RoCEv2 NAKs that arrived (XDP), by AETH syndrome.",
                received,
            ),
            (
                "sent",
                "RoCEv2 NAKs that left (TC egress), by AETH syndrome.",
                sent,
            ),
        ] {
            let Some(naks) = naks else { continue };
            for (syndrome, value) in naks.by_syndrome() {
                if per_qp && value == 0 {
                    continue;
                }
                let mut labels = labels.to_vec();
                labels.push(("syndrome", syndrome));
                self.counter(
                    &format!("lossless_{family}nak_{direction}_total"),
                    help,
                    &labels,
                    value as f64,
                )?;
            }
        }
        Ok(())
    }

    fn lb(&mut self, interface: &str, lb: &LbStats) -> anyhow::Result<()> {
        let LbStats {
            policy,
            lb_failovers,
            counters,
            flowlet_table,
        } = lb;
        let labels = [("interface", interface)];
        self.gauge(
            "lossless_lb_info",
            "The load balancer's policy (value 1).",
            &[("interface", interface), ("policy", policy)],
            1.0,
        )?;
        self.counter(
            "lossless_lb_failovers_total",
            "Uplinks that left the live set (carrier lost, deleted, removed).",
            &labels,
            *lb_failovers as f64,
        )?;
        let LbCounters {
            not_owned,
            not_ip,
            malformed,
            ttl_expired,
            no_uplink,
            flowlet_inserts,
            sprayed,
            qp_hashed,
        } = *counters;
        self.add_counters(
            &labels,
            [
                (
                    "lossless_lb_not_owned_packets_total",
                    "IP packets whose destination is not in lb.prefixes: passed to the stack.",
                    not_owned,
                ),
                (
                    "lossless_lb_not_ip_packets_total",
                    "Frames that are not IP: passed to the stack.",
                    not_ip,
                ),
                (
                    "lossless_lb_malformed_packets_total",
                    "Malformed frames: passed to the stack untouched.",
                    malformed,
                ),
                (
                    "lossless_lb_ttl_expired_packets_total",
                    "Owned packets with TTL or hop limit at most 1: passed to the stack.",
                    ttl_expired,
                ),
                (
                    "lossless_lb_no_uplink_packets_total",
                    "Owned packets with no live uplink: passed to the stack.",
                    no_uplink,
                ),
                (
                    "lossless_lb_flowlet_inserts_total",
                    "Packets whose flowlet table entry last saw another flow, or none (the flows seen).",
                    flowlet_inserts,
                ),
                (
                    "lossless_lb_sprayed_packets_total",
                    "Packets sent by the spray policy.",
                    sprayed,
                ),
                (
                    "lossless_lb_qp_hashed_packets_total",
                    "RoCEv2 packets the e-ecmp policy hashed with their BTH destination QP.",
                    qp_hashed,
                ),
            ],
        )?;
        let FlowletTable {
            capacity,
            occupancy,
            inserts: _, // lossless_lb_flowlet_inserts_total
            evictions,
        } = flowlet_table;
        self.gauge(
            "lossless_lb_flowlet_table_capacity",
            "Entries the flowlet table holds at most.",
            &labels,
            *capacity as f64,
        )?;
        self.gauge(
            "lossless_lb_flowlet_table_entries",
            "Entries the flowlet table holds now.",
            &labels,
            *occupancy as f64,
        )?;
        self.counter(
            "lossless_lb_flowlet_evictions_total",
            "Flowlet entries taken over by another flow.",
            &labels,
            *evictions as f64,
        )
    }

    fn uplink(&mut self, interface: &str, uplink: &UplinkStats) -> anyhow::Result<()> {
        let UplinkStats {
            ifname,
            slot: _, // an index of the maps, not a measurement
            alive,
            weight,
            counters,
            load_bytes,
        } = uplink;
        let labels = [("interface", interface), ("uplink", ifname.as_str())];
        self.gauge(
            "lossless_lb_uplink_up",
            "1 while the uplink takes traffic (configured, carrier up, present), else 0.",
            &labels,
            f64::from(u8::from(*alive)),
        )?;
        self.gauge(
            "lossless_lb_uplink_weight",
            "The uplink's WCMP weight.",
            &labels,
            f64::from(*weight),
        )?;
        self.gauge(
            "lossless_lb_uplink_load_bytes",
            "The uplink's load estimate now (the backlog dlb compares).",
            &labels,
            *load_bytes as f64,
        )?;
        let UplinkCounters {
            tx_packets,
            tx_bytes,
            flowlets,
            path_changes,
            redirect_errors,
        } = *counters;
        self.add_counters(
            &labels,
            [
                (
                    "lossless_lb_uplink_tx_packets_total",
                    "Frames redirected to the uplink.",
                    tx_packets,
                ),
                (
                    "lossless_lb_uplink_tx_bytes_total",
                    "Bytes redirected to the uplink.",
                    tx_bytes,
                ),
                (
                    "lossless_lb_uplink_flowlets_total",
                    "Flowlets started on the uplink.",
                    flowlets,
                ),
                (
                    "lossless_lb_uplink_path_changes_total",
                    "Flowlets that moved onto the uplink from another one (flows sharing a flowlet entry count once).",
                    path_changes,
                ),
                (
                    "lossless_lb_uplink_redirect_errors_total",
                    "Redirects the kernel refused (the device map entry vanished).",
                    redirect_errors,
                ),
            ],
        )
    }
}

/// The exposition of several interfaces' stats.
pub fn encode_stats(all: &[Stats]) -> anyhow::Result<String> {
    let mut exposition = Exposition::new();
    for stats in all {
        exposition.add_stats(stats)?;
    }
    exposition.encode()
}

#[cfg(test)]
mod tests {
    use std::{cell::Cell, collections::BTreeSet};

    use dataplane_common::PRIORITIES;
    use serde_json::Value;

    use super::*;

    /// Distinct values, so a sample can only match the field it came from.
    struct Distinct(Cell<u64>);

    impl Distinct {
        fn next(&self) -> u64 {
            self.0.set(self.0.get() + 1);
            1_000_003 * self.0.get()
        }
        fn array<const N: usize>(&self) -> [u64; N] {
            std::array::from_fn(|_| self.next())
        }
    }

    /// A record of `N` u64 counters with distinct values.
    fn record<T, const N: usize>(values: &Distinct) -> T {
        assert_eq!(std::mem::size_of::<T>(), N * 8);
        // SAFETY: the counter records are `#[repr(C)]` structs of N `u64`s (size checked).
        unsafe { std::mem::transmute_copy(&values.array::<N>()) }
    }

    fn stats(values: &Distinct) -> Stats {
        let per_priority: Vec<PriorityStats> = (0..PRIORITIES)
            .map(|priority| PriorityStats {
                priority,
                counters: record::<_, 11>(values),
                parse_errors: 0,
                vq_bytes: values.next(),
                vq_high_water_bytes: values.next(),
            })
            .collect();
        let counters: Vec<PrioCounters> = per_priority.iter().map(|p| p.counters).collect();
        let lb: LbCounters = record::<_, 8>(values);
        Stats {
            interface: "eth0".into(),
            totals: PrioCounters::default(),
            parse_errors: 0,
            parse_errors_by_kind: [
                ("truncated_udp", values.next()),
                ("bad_pfc_opcode", values.next()),
            ]
            .into_iter()
            .collect(),
            per_priority,
            per_hook: [
                ("xdp", record::<_, 11>(values)),
                ("tc", record::<_, 11>(values)),
            ]
            .into_iter()
            .collect(),
            pfc_pause_rx: std::array::from_fn(|p| counters[p].pfc_pause_rx),
            pfc_resume_rx: std::array::from_fn(|p| counters[p].pfc_resume_rx),
            pfc_paused_ns: values.array(),
            pfc_storms: std::array::from_fn(|p| counters[p].pfc_storms),
            pfc_violations: std::array::from_fn(|p| counters[p].pfc_violations),
            pfc_pause_tx: values.array(),
            pfc_resume_tx: values.array(),
            pfc_relayed: values.array(),
            pfc_buffer_bytes: values.array(),
            cnp: record::<_, 4>(values),
            cnp_qps: vec![CnpQpStats {
                qp: 17,
                cnp_sent: values.next(),
                cnp_suppressed: values.next(),
            }],
            nak_received: Some(record::<_, 7>(values)),
            nak_sent: Some(record::<_, 7>(values)),
            nak_qps: vec![NakQpStats {
                qp: 18,
                received: Some(record::<_, 7>(values)),
                sent: Some(record::<_, 7>(values)),
            }],
            nak_unpinned: false,
            lb: Some(LbStats {
                policy: "flowlet",
                lb_failovers: values.next(),
                counters: lb,
                flowlet_table: FlowletTable {
                    capacity: values.next(),
                    occupancy: values.next(),
                    inserts: lb.flowlet_inserts,
                    evictions: values.next(),
                },
            }),
            uplinks: vec![UplinkStats {
                ifname: "up0".into(),
                slot: 0,
                alive: true,
                weight: 3,
                counters: record::<_, 5>(values),
                load_bytes: values.next(),
            }],
            mirror: {
                let counters: MirrorCounters = record::<_, 8>(values);
                Some(MirrorStats {
                    session: None,
                    mirrored: counters.mirrored(),
                    counters,
                })
            },
        }
    }

    /// The numeric leaves of `value` with their paths (array indices and map keys as `*`).
    fn leaves(path: &str, value: &Value, out: &mut Vec<(String, f64)>) {
        match value {
            Value::Object(map) => map
                .iter()
                .for_each(|(k, v)| leaves(&format!("{path}.{k}"), v, out)),
            Value::Array(items) => items
                .iter()
                .for_each(|v| leaves(&format!("{path}[]"), v, out)),
            Value::Number(n) => out.push((path.to_owned(), n.as_f64().unwrap())),
            _ => {}
        }
    }

    /// Every number `host stats --json` prints is a sample (pause times in seconds), except
    /// the sums of other numbers and the labels.
    #[test]
    fn every_number_of_stats_json_is_a_sample() {
        let values = Distinct(Cell::new(0));
        let stats = stats(&values);
        let text = encode_stats(std::slice::from_ref(&stats)).unwrap();
        let samples: Vec<f64> = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .map(|l| l.rsplit(' ').next().unwrap().parse().unwrap())
            .collect();
        let Value::Object(totals) = serde_json::to_value(PrioCounters::default()).unwrap() else {
            panic!("PrioCounters is an object");
        };
        let sums: BTreeSet<String> = totals
            .keys()
            .map(|k| format!(".{k}"))
            .chain([
                ".parse_errors".into(),
                ".per_priority[].parse_errors".into(),
            ])
            .chain([".per_priority[].priority".into(), ".cnp_qps[].qp".into()])
            .chain([".nak_qps[].qp".into(), ".mirror.mirrored".into()])
            .chain([".uplinks[].slot".into(), ".uplinks[].weight".into()])
            .collect();
        let mut numbers = Vec::new();
        leaves("", &serde_json::to_value(&stats).unwrap(), &mut numbers);
        let mut missing = Vec::new();
        for (path, value) in numbers.iter().filter(|(p, _)| !sums.contains(p)) {
            let expected = if path.ends_with("_ns[]") {
                value / 1e9
            } else {
                *value
            };
            if !samples
                .iter()
                .any(|s| (s - expected).abs() <= expected * 1e-12)
            {
                missing.push(format!("{path} = {value}"));
            }
        }
        assert!(missing.is_empty(), "not exported: {missing:?}\n{text}");
        assert!(text.contains("lossless_lb_uplink_weight{interface=\"eth0\",uplink=\"up0\"} 3"));
        assert!(text.contains("lossless_qp_cnp_sent_total{interface=\"eth0\",qp=\"17\"}"));
        assert!(text.contains(
            "lossless_nak_received_total{interface=\"eth0\",syndrome=\"psn_sequence_error\"}"
        ));
        assert!(text.contains(
            "lossless_qp_nak_sent_total{interface=\"eth0\",qp=\"18\",syndrome=\"rnr_nak\"}"
        ));
    }

    /// The NAK counters' JSON keys (serde's field names) and their metric labels
    /// (`NakCounters::by_syndrome`, from `NakCode::name`) name the same fields.
    #[test]
    fn nak_json_keys_are_the_syndrome_labels() {
        let naks: NakCounters = record::<_, 7>(&Distinct(Cell::new(0)));
        let json = serde_json::to_value(naks).unwrap();
        let by_syndrome = naks.by_syndrome();
        assert_eq!(json.as_object().unwrap().len(), by_syndrome.len(), "{json}");
        for (name, value) in by_syndrome {
            assert_eq!(json[name], value, "{name} in {json}");
        }
    }

    /// A NAK direction not counted (its hook not attached, or programs pinned before NAK
    /// counting) is neither exported nor in the JSON: "not counted" is no "0 NAKs".
    #[test]
    fn nak_directions_not_counted_are_absent() {
        let mut stats = stats(&Distinct(Cell::new(0)));
        stats.nak_received = None;
        stats.nak_qps[0].received = None;
        let text = encode_stats(std::slice::from_ref(&stats)).unwrap();
        assert!(!text.contains("nak_received_total"), "{text}");
        assert!(text.contains("lossless_qp_nak_sent_total{"), "{text}");
        let json = serde_json::to_value(&stats).unwrap();
        assert!(json.get("nak_received").is_none());
        assert!(json["nak_qps"][0].get("received").is_none());
        assert!(json["nak_sent"].is_object());
    }

    /// Counters end in `_total`, every family has help and a type, labels are bounded names.
    #[test]
    fn families_follow_the_conventions() {
        let text = encode_stats(&[stats(&Distinct(Cell::new(0)))]).unwrap();
        for line in text.lines().filter(|l| l.starts_with("# TYPE")) {
            let mut words = line.split(' ').skip(2);
            let (name, kind) = (words.next().unwrap(), words.next().unwrap());
            assert!(name.starts_with("lossless_"), "{line}");
            assert_eq!(name.ends_with("_total"), kind == "counter", "{line}");
            assert!(
                text.contains(&format!("# HELP {name} ")),
                "{name} has no help"
            );
        }
    }

    /// Two interfaces share the families; a family's label names cannot change.
    #[test]
    fn interfaces_share_families() {
        let values = Distinct(Cell::new(0));
        let mut second = stats(&values);
        second.interface = "eth1".into();
        let text = encode_stats(&[stats(&values), second]).unwrap();
        assert_eq!(
            text.matches("# TYPE lossless_cnp_sent_total counter")
                .count(),
            1
        );
        assert_eq!(text.matches("lossless_cnp_sent_total{").count(), 2);
        let mut exposition = Exposition::new();
        exposition
            .counter("lossless_x_total", "x", &[("interface", "a")], 1.0)
            .unwrap();
        assert!(exposition
            .counter(
                "lossless_x_total",
                "x",
                &[("interface", "a"), ("priority", "1")],
                1.0
            )
            .is_err());
    }

    /// The Grafana dashboard asks only for metrics that exist.
    #[test]
    fn the_dashboard_names_exported_metrics() {
        let dashboard = include_str!("../../deploy/grafana/lossless.json");
        let text = encode_stats(&[stats(&Distinct(Cell::new(0)))]).unwrap();
        let mut names: BTreeSet<&str> = dashboard
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|word| word.starts_with("lossless_"))
            .collect();
        // The agent's own (agent/mod.rs).
        names.remove("lossless_agent_interface_attached");
        assert!(names.len() > 10, "{names:?}");
        for name in names {
            assert!(
                text.contains(&format!("# TYPE {name} ")),
                "{name} is not exported"
            );
        }
    }
}
