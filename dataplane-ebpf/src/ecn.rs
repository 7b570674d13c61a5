//! ECN marking: classify a frame to a priority, push it through that priority's phantom queue,
//! and let the RED profile decide whether an ECT packet becomes CE. Counts everything it sees.

use aya_ebpf::helpers::bpf_get_prandom_u32;
use aya_log_ebpf::{info, warn};
use dataplane_common::{
    config::Settings,
    counters::{HookCounters, ParseError},
    maps::queue_index,
    red, Hook,
};

use crate::{
    maps::{COUNTERS, DSCP_PRIO, ECN_PROFILES, QUEUES, SETTINGS},
    parse::{Network, Parsed},
};

const ECN_CE: u8 = 0b11;
const ECN_NOT_ECT: u8 = 0b00;

/// Runs the ECN mechanism on one frame of `len` bytes, parsed as `parsed` (a malformed frame is
/// counted here by kind), seen at `hook` at `now_ns` (`bpf_ktime_get_ns`, read once per frame
/// by the caller), and returns the frame's priority.
///
/// `tag_pcp` is the PCP of a VLAN tag the kernel keeps outside the frame (TC with VLAN
/// offload). `set_ce` marks the packet CE in place and returns whether it did.
#[inline(always)]
pub fn process<C: aya_ebpf::EbpfContext>(
    ctx: &C,
    parsed: Result<Parsed, ParseError>,
    len: u64,
    now_ns: u64,
    hook: Hook,
    tag_pcp: Option<u8>,
    set_ce: impl FnOnce(&Parsed) -> bool,
) -> usize {
    let Some(counters) = COUNTERS.get_ptr_mut(hook as u32) else {
        return 0;
    };
    // SAFETY: a per-CPU map value, only this CPU writes it while this program runs.
    let counters: &mut HookCounters = unsafe { &mut *counters };
    let settings = SETTINGS.get(0).copied().unwrap_or(Settings::DEFAULT);

    let parsed = match parsed {
        Ok(parsed) => Some(parsed),
        Err(kind) => {
            count_parse_error(counters, kind);
            if settings.flags & Settings::LOG_ERRORS != 0 {
                warn!(ctx, "malformed frame: {} ({} bytes)", kind.name(), len);
            }
            None
        }
    };
    let priority = parsed.map_or(0, |p| classify(&p, tag_pcp)) as usize & 7;

    let prio_counters = &mut counters.per_priority[priority];
    prio_counters.rx_packets += 1;
    prio_counters.rx_bytes += len;

    let (Some(profile), Some(queue)) = (
        ECN_PROFILES.get(priority as u32),
        QUEUES.get_ptr_mut(queue_index(hook, priority)),
    ) else {
        return priority;
    };
    // SAFETY: a shared map value. Updates from several CPUs may race; the model tolerates a
    // lost update (docs/host-ecn.md).
    let backlog = unsafe { (*queue).enqueue(now_ns, len, profile.rate_bytes_per_sec) };

    let Some(parsed) = parsed else {
        return priority;
    };
    if parsed.network == Network::Other {
        return priority;
    }
    if parsed.roce {
        prio_counters.roce_packets += 1;
    }
    match parsed.ecn {
        ECN_CE => {
            prio_counters.ce_on_arrival += 1;
            return priority;
        }
        ECN_NOT_ECT => {}
        _ => prio_counters.ect_packets += 1,
    }
    let eligible = parsed.roce || settings.flags & Settings::ROCE_ONLY == 0;
    if profile.enabled == 0 || !eligible {
        return priority;
    }
    // SAFETY: a helper that takes no arguments and touches no memory of the program's.
    if !red::should_mark(profile, backlog, || unsafe { bpf_get_prandom_u32() }) {
        return priority;
    }
    if parsed.ecn == ECN_NOT_ECT {
        prio_counters.would_mark_not_ect += 1;
        return priority;
    }
    if set_ce(&parsed) {
        prio_counters.ecn_marked += 1;
        if settings.flags & Settings::LOG_MARKS != 0 {
            info!(
                ctx,
                "CE marked: prio {} backlog {} bytes", priority, backlog
            );
        }
    }
    priority
}

/// The priority of a frame: its VLAN PCP when tagged, else its DSCP through the DSCP map.
#[inline(always)]
pub fn classify(parsed: &Parsed, tag_pcp: Option<u8>) -> u32 {
    if let Some(pcp) = tag_pcp.or(parsed.pcp) {
        return pcp as u32;
    }
    if parsed.network == Network::Other {
        return 0;
    }
    DSCP_PRIO.get(parsed.dscp as u32 & 63).copied().unwrap_or(0)
}

#[inline(always)]
fn count_parse_error(counters: &mut HookCounters, kind: ParseError) {
    if let Some(slot) = counters.parse_errors.get_mut(kind as usize) {
        *slot += 1;
    }
}
