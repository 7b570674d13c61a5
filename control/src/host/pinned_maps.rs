//! The pinned maps of one attached interface, opened by name: read and write the
//! configuration, read counters and queues. Works from any process, at any time after attach.

use anyhow::Context as _;
use aya::maps::{Array, Map, MapData, PerCpuArray};
use dataplane_common::{
    config::{AttachInfo, EcnProfile, Settings},
    counters::HookCounters,
    maps,
    phantom_queue::PhantomQueue,
    Hook, PRIORITIES,
};

use super::{config::HostConfig, pins::PinDir};

/// The maps of one attached interface.
pub struct PinnedMaps {
    dir: PinDir,
}

impl PinnedMaps {
    /// Opens the maps of `interface`; fails with a clear message if it is not attached.
    pub fn open(interface: &str) -> anyhow::Result<Self> {
        let dir = PinDir::new(interface)?;
        dir.require_attached()?;
        Ok(PinnedMaps { dir })
    }

    /// The pin directory.
    pub fn dir(&self) -> &PinDir {
        &self.dir
    }

    fn map(&self, name: &str) -> anyhow::Result<Map> {
        let path = self.dir.map(name);
        let data = MapData::from_pin(&path)
            .with_context(|| format!("opening pinned map {}", path.display()))?;
        Map::from_map_data(data).with_context(|| format!("map {}", path.display()))
    }

    fn array<T: aya::Pod>(&self, name: &str) -> anyhow::Result<Array<MapData, T>> {
        Array::try_from(self.map(name)?)
            .with_context(|| format!("map {name} has an unexpected type"))
    }

    /// Reads the configuration the programs run with now.
    pub fn read_config(&self) -> anyhow::Result<HostConfig> {
        let profiles = self.array::<EcnProfile>(maps::ECN_PROFILES)?;
        let dscp = self.array::<u32>(maps::DSCP_PRIO)?;
        let settings = self.array::<Settings>(maps::SETTINGS)?;
        let mut config = HostConfig::default();
        for (p, slot) in config.profiles.iter_mut().enumerate() {
            *slot = profiles.get(&(p as u32), 0)?;
        }
        for (d, slot) in config.dscp_priority.iter_mut().enumerate() {
            *slot = dscp.get(&(d as u32), 0)?;
        }
        config.settings = settings.get(&0, 0)?;
        Ok(config)
    }

    /// Writes a (validated) configuration; the programs use it from their next packet on.
    pub fn write_config(&self, config: &HostConfig) -> anyhow::Result<()> {
        config.validate()?;
        let mut profiles = self.array::<EcnProfile>(maps::ECN_PROFILES)?;
        let mut dscp = self.array::<u32>(maps::DSCP_PRIO)?;
        let mut settings = self.array::<Settings>(maps::SETTINGS)?;
        for (p, profile) in config.profiles.iter().enumerate() {
            profiles.set(p as u32, profile, 0)?;
        }
        for (d, prio) in config.dscp_priority.iter().enumerate() {
            dscp.set(d as u32, prio, 0)?;
        }
        settings.set(0, config.settings, 0)?;
        Ok(())
    }

    /// Reads what attach recorded.
    pub fn read_attach_info(&self) -> anyhow::Result<AttachInfo> {
        Ok(self.array::<AttachInfo>(maps::ATTACH_INFO)?.get(&0, 0)?)
    }

    /// Records what attach did.
    pub fn write_attach_info(&self, info: AttachInfo) -> anyhow::Result<()> {
        Ok(self
            .array::<AttachInfo>(maps::ATTACH_INFO)?
            .set(0, info, 0)?)
    }

    /// Sums the per-CPU counters of `hook`.
    pub fn read_counters(&self, hook: Hook) -> anyhow::Result<HookCounters> {
        let counters: PerCpuArray<MapData, HookCounters> =
            PerCpuArray::try_from(self.map(maps::COUNTERS)?)
                .context("map COUNTERS has an unexpected type")?;
        let mut total = HookCounters::default();
        for per_cpu in counters.get(&(hook as u32), 0)?.iter() {
            total.accumulate(per_cpu);
        }
        Ok(total)
    }

    /// The phantom queues of `hook`, by priority.
    pub fn read_queues(&self, hook: Hook) -> anyhow::Result<[PhantomQueue; PRIORITIES]> {
        let queues = self.array::<PhantomQueue>(maps::QUEUES)?;
        let mut out = [PhantomQueue::default(); PRIORITIES];
        for (p, slot) in out.iter_mut().enumerate() {
            *slot = queues.get(&maps::queue_index(hook, p), 0)?;
        }
        Ok(out)
    }
}
