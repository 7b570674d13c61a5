//! `lossless check --suggest`: starting thresholds from the fabric's link speeds, cables, MTU
//! and queue depth, with the reasoning, written as what the user applies: a tuning (the TOML
//! of `--tuning` and of `lossless sim`'s `[tuning]`) and the hosts' `lossless host set` keys.
//! One tuning serves every switch (the control plane computes one), so it is sized for the
//! fabric's worst link.

use crate::{fabric::Fabric, headroom::Need, Assumptions};

/// The suggested settings.
#[derive(Clone, Debug, PartialEq)]
pub struct Suggestion {
    /// A tuning's TOML (`[pfc]` and `[ecn]`), the reasoning as comments.
    pub tuning: String,
    /// `KEY=VALUE` host settings, per host name (hosts with a link only).
    pub hosts: Vec<(String, Vec<String>)>,
}

/// Thresholds for `fabric`: headroom for its worst link ([`Need`]), XOFF the shallowest queue
/// less that headroom, XON a quarter of XOFF (the default tuning's ratio), Kmax just below
/// XOFF (marking full before any pause: DCQCN wants ECN before PFC), Kmin a quarter of Kmax,
/// Pmax 0.2; hosts reading pause quanta at their link's speed, a watchdog that acts, and the
/// switches' DSCP map.
pub fn suggest(fabric: &Fabric, assumptions: &Assumptions) -> Result<Suggestion, String> {
    let need = fabric
        .links
        .iter()
        .map(|l| Need::of(l, assumptions.pause_response_ns))
        .max_by_key(Need::packets)
        .ok_or("the fabric has no links to size thresholds for")?;
    let queue = fabric
        .switches
        .iter()
        .map(|s| s.queue_packets)
        .min()
        .ok_or("the fabric has no switches")?;
    let headroom = need.packets();
    let xoff = u64::from(queue).saturating_sub(headroom);
    if xoff < 4 {
        return Err(format!(
            "a queue of {queue} packets cannot hold the {headroom} packets of headroom the worst \
             link needs and still mark and pause before it ({need}); deepen the queues to at \
             least {} packets (--queue-packets)",
            headroom + 4
        ));
    }
    let xon = (xoff / 4).max(1);
    let kmax = xoff - 1;
    let kmin = (kmax / 4).max(1);
    let tuning = format!(
        "# Headroom for the worst link: {need}.\n\
         # XOFF: the {queue}-packet queue less {headroom} packets of headroom.\n\
         # XON: a quarter of XOFF, so a resumed upstream refills a queue that has drained.\n\
         [pfc]\nxoff_packets = {xoff}\nxon_packets = {xon}\n\
         # Kmax just below XOFF: every packet marked before any pause (ECN before PFC, DCQCN).\n\
         # Kmin a quarter of Kmax, Pmax 0.2: marking rises gently from there.\n\
         [ecn]\nkmin_packets = {kmin}\nkmax_packets = {kmax}\npmax = 0.2\n"
    );
    let hosts = (0..fabric.hosts.len())
        .filter_map(|h| {
            let (s, _, link) = fabric.attachment(h)?;
            let mut keys = vec![
                format!("pfc.link_speed_bps={}", link.rate_bps),
                "pfc.watchdog_ignore=true".to_owned(),
                format!("pfc.watchdog_ms={}", assumptions.max_watchdog_ms),
            ];
            keys.extend(
                fabric.switches[s]
                    .tables
                    .dscp_priority
                    .iter()
                    .map(|(d, p)| format!("dscp.{d}.prio={p}")),
            );
            Some((fabric.hosts[h].name.clone(), keys))
        })
        .collect();
    Ok(Suggestion { tuning, hosts })
}
