//! The user-space notification point of `traffic recv --cnp`: a CE-marked
//! RoCEv2 data frame is answered with a CNP to its sender, at most one per QP
//! per interval (DCQCN's notification point; PROTOCOLS.md).

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use crate::counters::FlowKey;
use wire::cnp;
use wire::ip::Ecn;
use wire::roce::RoceFrame;

/// How the receiver answers CE marks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CnpConfig {
    /// At most one CNP per QP per this long (DCQCN: 50 µs).
    pub interval: Duration,
    /// DSCP of the CNPs (48: priority 6 in the usual RoCE map).
    pub dscp: u8,
    /// Receiver QP → sender QP: the DestQP a CNP carries; a QP without an
    /// entry gets a CNP with the data frame's own DestQP.
    pub qp_map: BTreeMap<u32, u32>,
}

impl Default for CnpConfig {
    /// 50 µs, DSCP 48, no QP map.
    fn default() -> Self {
        CnpConfig {
            interval: Duration::from_micros(50),
            dscp: 48,
            qp_map: BTreeMap::new(),
        }
    }
}

/// The rate limiter and CNP builder of the notification point.
#[derive(Debug, Clone)]
pub struct NotificationPoint {
    config: CnpConfig,
    /// When (ns since the receiver started) each flow last got a CNP.
    last_sent_ns: HashMap<FlowKey, u64>,
}

impl NotificationPoint {
    /// A notification point with `config` that has sent nothing yet.
    pub fn new(config: CnpConfig) -> NotificationPoint {
        NotificationPoint {
            config,
            last_sent_ns: HashMap::new(),
        }
    }

    /// Whether a CE-marked frame of `key` arriving at `now_ns` gets a CNP (the
    /// flow's last CNP is at least an interval old); if so, it counts as sent now.
    pub fn admit(&mut self, key: FlowKey, now_ns: u64) -> bool {
        let interval = u64::try_from(self.config.interval.as_nanos()).unwrap_or(u64::MAX);
        match self.last_sent_ns.get(&key) {
            Some(&last) if now_ns.saturating_sub(last) < interval => false,
            _ => {
                self.last_sent_ns.insert(key, now_ns);
                true
            }
        }
    }

    /// The CNP answering `data`: MACs and IPs swapped, the data's UDP source
    /// port and VLAN tags, DSCP from the configuration, not-ECT, DestQP mapped.
    pub fn cnp_for(&self, data: &RoceFrame) -> RoceFrame {
        let dest_qp = self
            .config
            .qp_map
            .get(&data.bth.dest_qp)
            .copied()
            .unwrap_or(data.bth.dest_qp);
        RoceFrame {
            src_mac: data.dst_mac,
            dst_mac: data.src_mac,
            vlan: data.vlan,
            src_ip: data.dst_ip,
            dst_ip: data.src_ip,
            dscp: self.config.dscp,
            ecn: Ecn::NotEct,
            ttl: 64,
            flow_label: 0,
            src_port: data.src_port,
            bth: cnp::Repr {
                dest_qp,
                pkey: data.bth.pkey,
            }
            .bth(),
            payload_len: cnp::RESERVED_LEN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use wire::bth::{self, Opcode};
    use wire::vectors;

    fn data() -> RoceFrame {
        RoceFrame {
            ecn: Ecn::Ce,
            bth: bth::Repr::new(Opcode::RcSendOnly, 0x101, 7),
            payload_len: 100,
            ..vectors::ROCE_V4_FRAME
        }
    }

    #[test]
    fn one_cnp_per_flow_per_interval() {
        let mut np = NotificationPoint::new(CnpConfig::default());
        let a = FlowKey {
            src: "10.0.0.1".parse().unwrap(),
            qp: 1,
        };
        let b = FlowKey { qp: 2, ..a };
        assert!(np.admit(a, 1_000));
        assert!(!np.admit(a, 50_999));
        assert!(np.admit(b, 50_999));
        assert!(np.admit(a, 51_000));
        assert!(!np.admit(a, 51_000));
    }

    #[test]
    fn cnp_answers_the_sender() {
        let mut config = CnpConfig::default();
        config.qp_map.insert(0x101, 0x2002);
        let data = data();
        let mut buffer = [0u8; 128];
        for (np, qp) in [
            (NotificationPoint::new(config), 0x2002),
            (NotificationPoint::new(CnpConfig::default()), 0x101),
        ] {
            let cnp = np.cnp_for(&data);
            let len = cnp.emit(&mut buffer, |reserved| reserved.fill(0)).unwrap();
            assert_eq!(len, 74);
            let (parsed, reserved) = RoceFrame::parse(&buffer[..len]).unwrap();
            assert_eq!(
                (parsed.src_mac, parsed.dst_mac),
                (data.dst_mac, data.src_mac)
            );
            assert_eq!((parsed.src_ip, parsed.dst_ip), (data.dst_ip, data.src_ip));
            assert_eq!((parsed.dscp, parsed.ecn), (48, Ecn::NotEct));
            assert_eq!((parsed.bth.opcode, parsed.bth.dest_qp), (Opcode::Cnp, qp));
            assert_eq!(reserved, [0; 16]);
        }
    }
}
