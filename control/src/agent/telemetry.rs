//! The agent's counters as a gNMI tree: the counters of `/metrics`, at OpenConfig paths where
//! OpenConfig has one (interface packets and octets in and out) and under the `lossless` origin
//! elsewhere (per priority, PFC per priority, CNPs, NAKs, parse errors, the agent's own state).
//! docs/telemetry.md lists the paths.

use std::sync::{Arc, Mutex};

use dataplane_common::{cnp::CnpCounters, counters::PrioCounters, mirror::MirrorCounters, Hook};
use gnmi::{
    path::{DataPath, Elem},
    proto::gnmi::ModelData,
    tree::{CounterTree, Leaf, Leaves},
};
use host::stats::{PriorityStats, Stats};

use super::{attached_stats, reconcile::State, Shared};

/// The origin of the paths OpenConfig has no model for.
pub const ORIGIN: &str = "lossless";

/// The agent's tree, read from the pins and the reconciler's state.
pub struct AgentTree(pub(super) Arc<Mutex<Shared>>);

impl CounterTree for AgentTree {
    fn read(&self) -> anyhow::Result<Vec<Leaf>> {
        let mut leaves = Leaves::default();
        for stats in attached_stats()? {
            add_stats(&mut leaves, &stats);
        }
        let shared = self.0.lock().expect("agent state");
        let agent = DataPath::root(ORIGIN).join("agent");
        for (name, state) in &shared.states {
            leaves.under(
                &agent
                    .join("interfaces")
                    .child(Elem::keyed("interface", "name", name))
                    .join("state"),
                [("attached", u64::from(*state == State::Attached))],
            );
        }
        leaves.under(
            &agent.join("state"),
            [
                ("reconciles", shared.reconciles),
                ("reconcile-errors", shared.reconcile_errors),
                ("config-errors", shared.config_errors),
            ],
        );
        Ok(leaves.0)
    }

    fn origins(&self) -> &[&str] {
        &["", ORIGIN]
    }

    fn models(&self) -> Vec<ModelData> {
        vec![
            ModelData {
                name: "openconfig-interfaces".into(),
                organization: "OpenConfig working group".into(),
                version: "3.0.0".into(),
            },
            ModelData {
                name: "lossless".into(),
                organization: "lossless".into(),
                version: env!("CARGO_PKG_VERSION").into(),
            },
        ]
    }
}

/// Every counter of one interface's [`Stats`].
fn add_stats(leaves: &mut Leaves, stats: &Stats) {
    // Without `..`: a new field is served here, or named as the sum of others.
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
        cnp_qps: _, // per QP: unbounded keys, on /metrics only
        nak_received,
        nak_sent,
        nak_qps: _,      // per QP: bounded by the map, but many keys; on /metrics only
        nak_unpinned: _, // then both directions are absent
        lb: _,           // the load balancer's: on /metrics only
        uplinks: _,
        mirror,
    } = stats;
    let openconfig = DataPath::root("")
        .join("interfaces")
        .child(Elem::keyed("interface", "name", interface))
        .join("state")
        .join("counters");
    for (hook, direction) in [(Hook::Xdp, "in"), (Hook::TcEgress, "out")] {
        if let Some(counters) = per_hook.get(hook.name()) {
            leaves.under(
                &openconfig,
                [
                    (format!("{direction}-pkts").as_str(), counters.rx_packets),
                    (format!("{direction}-octets").as_str(), counters.rx_bytes),
                ],
            );
        }
    }
    let ours = DataPath::root(ORIGIN).join("interfaces").child(Elem::keyed(
        "interface",
        "name",
        interface,
    ));
    for queue in per_priority {
        let PriorityStats {
            priority,
            counters,
            parse_errors: _, // by kind, below
            vq_bytes,
            vq_high_water_bytes,
        } = queue;
        let p = *priority;
        let index = p.to_string();
        let at = |what: &str| {
            ours.join(what)
                .child(Elem::keyed("priority", "index", &index))
                .join("state")
        };
        prio_counters(leaves, &at("priorities"), counters);
        leaves.under(
            &at("priorities"),
            [
                ("phantom-queue-bytes", *vq_bytes),
                ("phantom-queue-high-water-bytes", *vq_high_water_bytes),
            ],
        );
        leaves.under(
            &at("pfc"),
            [
                ("pause-frames-received", counters.pfc_pause_rx),
                ("resume-frames-received", counters.pfc_resume_rx),
                ("storms", counters.pfc_storms),
                ("violation-packets", counters.pfc_violations),
                ("paused-ns", pfc_paused_ns[p]),
                ("pause-frames-sent", pfc_pause_tx[p]),
                ("resume-frames-sent", pfc_resume_tx[p]),
                ("pause-frames-relayed", pfc_relayed[p]),
                ("ingress-buffer-bytes", pfc_buffer_bytes[p]),
            ],
        );
    }
    for (kind, count) in parse_errors_by_kind {
        leaves.under(
            &ours
                .join("parse-errors")
                .child(Elem::keyed("parse-error", "kind", kind))
                .join("state"),
            [("count", *count)],
        );
    }
    // A direction not counted (its hook not attached, or pins older than NAK counting) is
    // not served: "not counted" is no "0 NAKs".
    for (direction, naks) in [("received", nak_received), ("sent", nak_sent)] {
        let Some(naks) = naks else { continue };
        let at = ours
            .join("naks")
            .child(Elem::keyed("nak", "direction", direction))
            .join("state");
        for (syndrome, count) in naks.by_syndrome() {
            leaves.under(&at, [(syndrome.replace('_', "-").as_str(), count)]);
        }
    }
    // Without the mirror hook nothing is counted: not served.
    if let Some(mirror) = mirror {
        let MirrorCounters {
            rx_cnps,
            rx_naks,
            rx_priority,
            tx_cnps,
            tx_naks,
            tx_priority,
            skipped,
            failed,
        } = mirror.counters;
        leaves.under(
            &ours.join("mirror").join("state"),
            [
                ("received-cnps", rx_cnps),
                ("received-naks", rx_naks),
                ("received-priority", rx_priority),
                ("sent-cnps", tx_cnps),
                ("sent-naks", tx_naks),
                ("sent-priority", tx_priority),
                ("skipped", skipped),
                ("failed", failed),
            ],
        );
    }
    let CnpCounters {
        cnp_sent,
        cnp_suppressed,
        cnp_received,
        cnp_unsupported,
    } = *cnp;
    leaves.under(
        &ours.join("cnp").join("state"),
        [
            ("sent", cnp_sent),
            ("suppressed", cnp_suppressed),
            ("received", cnp_received),
            ("unsupported", cnp_unsupported),
        ],
    );
}

/// The counters of one priority (PFC's go under `pfc`).
fn prio_counters(leaves: &mut Leaves, parent: &DataPath, counters: &PrioCounters) {
    let PrioCounters {
        rx_packets,
        rx_bytes,
        roce_packets,
        ect_packets,
        ce_on_arrival,
        ecn_marked,
        would_mark_not_ect,
        pfc_pause_rx: _, // under pfc
        pfc_resume_rx: _,
        pfc_storms: _,
        pfc_violations: _,
    } = *counters;
    leaves.under(
        parent,
        [
            ("packets", rx_packets),
            ("octets", rx_bytes),
            ("roce-packets", roce_packets),
            ("ect-packets", ect_packets),
            ("ce-on-arrival-packets", ce_on_arrival),
            ("ecn-marked-packets", ecn_marked),
            ("ecn-would-mark-not-ect-packets", would_mark_not_ect),
        ],
    );
}
