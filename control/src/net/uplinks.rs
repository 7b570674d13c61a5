//! The control plane's live writes to a generated fabric's leaves: each leaf's uplink group
//! (its load-balancing policy, and the spines it spreads over), rewritten over P4Runtime with
//! Modify updates while traffic flows. `lossless net policy` switches the policy; the lb
//! experiment switches it between runs, and on a link failure drains the dead link's spine
//! from every leaf's group, as a fabric's routing withdraws the paths over a dead link.

use p4runtime::p4::{config::v1::P4Info, v1::update};

use super::{
    leaf_spine::{self, Policy, Shape, Tuning},
    state::Status,
};
use p4client::{
    client::{Client, ElectionId, Target},
    entries,
};
use p4values::runtime_json::RuntimeConfig;

/// Every leaf's P4Runtime server, in the fabric's order.
pub fn leaf_targets(status: &Status) -> Vec<Target> {
    status
        .nodes
        .iter()
        .filter(|n| n.name.starts_with("leaf"))
        .filter_map(|n| {
            Some(Target {
                address: n.grpc.clone()?,
                device_id: n.device_id?,
                election_id: ElectionId::Fixed(1),
                tls: None,
            })
        })
        .collect()
}

/// Connections to every leaf, kept open between writes.
pub struct Uplinks {
    shape: Shape,
    tuning: Tuning,
    leaves: Vec<(Client, P4Info)>,
}

impl Uplinks {
    /// Connects to every leaf of a fabric of `shape` (from inside its network), to write
    /// groups with `tuning`'s flowlet timeout and DLB load age.
    pub async fn connect(
        shape: Shape,
        tuning: Tuning,
        targets: Vec<Target>,
    ) -> anyhow::Result<Uplinks> {
        let mut leaves = Vec::new();
        for target in targets {
            let mut client = Client::connect(target).await?;
            let p4info = client.p4info().await?;
            leaves.push((client, p4info));
        }
        Ok(Uplinks {
            shape,
            tuning,
            leaves,
        })
    }

    /// Rewrites every leaf's uplink group: `policy` over the spines `live` (numbered from 1,
    /// at least one).
    pub async fn write(&mut self, policy: Policy, live: &[u16]) -> anyhow::Result<()> {
        let config = RuntimeConfig {
            table_entries: leaf_spine::uplink_group(self.shape, &self.tuning, policy, live)?,
            ..Default::default()
        };
        for (client, p4info) in &mut self.leaves {
            let mut updates = entries::updates(&config, p4info)?;
            for u in &mut updates {
                u.update.r#type = update::Type::Modify as i32;
            }
            client.write(&updates).await?;
        }
        Ok(())
    }
}
