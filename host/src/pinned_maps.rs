//! The pinned maps of one attached interface, opened through their definitions in
//! `dataplane_common::maps` (name, kind, key and value types): read and write the
//! configuration, read counters and queues. Works from any process, at any time after attach.

use anyhow::Context as _;
use aya::maps::{HashMap as AyaHashMap, MapData, PerCpuValues};
use dataplane_common::{
    cnp::{CnpCounters, CnpQpState},
    config::AttachInfo,
    counters::HookCounters,
    maps::{self, kind, MapDef},
    mirror::{MirrorCounters, MirrorSession},
    nak::{NakCounters, NakQpCounters},
    pfc::{IngressBuffer, PfcState, PfcTxCounters, MAX_RELAY_PORTS},
    phantom_queue::PhantomQueue,
    Hook, PRIORITIES,
};

use crate::lifecycle;
use hostconfig::config::HostConfig;
use sysutil::{
    interface::Interface,
    pins::{Open, PinDir},
};

/// The maps of one attached interface.
pub struct PinnedMaps {
    dir: PinDir,
}

impl PinnedMaps {
    /// Opens the maps of `interface` in the calling thread's network namespace; fails with a
    /// clear message if it is not attached there. (The maps stay usable from any thread.)
    pub fn open(interface: &str) -> anyhow::Result<Self> {
        let dir = lifecycle::locate(interface)?;
        dir.require_attached()?;
        Ok(PinnedMaps { dir })
    }

    /// The maps pinned in `dir`, whatever its state (attach uses it while building).
    pub fn at(dir: PinDir) -> Self {
        PinnedMaps { dir }
    }

    /// The pin directory.
    pub fn dir(&self) -> &PinDir {
        &self.dir
    }

    /// Opens the pinned map of `def` as the aya map of its kind and types.
    pub fn map<K: Open<Key, Value>, Key, Value>(
        &self,
        def: &MapDef<K, Key, Value>,
    ) -> anyhow::Result<K::Map> {
        self.dir.open_map(def)
    }

    /// Whether the map of `def` is pinned (programs pinned by an older build lack newer maps).
    pub fn is_pinned<K, Key, Value>(&self, def: &MapDef<K, Key, Value>) -> bool {
        self.dir.map(&def.spec).exists()
    }

    /// Reads `N` consecutive entries of the array map `def`, from index `first`.
    pub(crate) fn read_entries<T: aya::Pod, const N: usize>(
        &self,
        def: &MapDef<kind::Array, u32, T>,
        first: u32,
    ) -> anyhow::Result<[T; N]> {
        let array = self.map(def)?;
        let entries = (first..first + N as u32)
            .map(|index| array.get(&index, 0))
            .collect::<Result<Vec<T>, _>>()?;
        entries
            .try_into()
            .map_err(|_| anyhow::anyhow!("map {} has fewer than {N} entries", def.name()))
    }

    /// Reads entry `index` of the array map `def`.
    pub(crate) fn read<T: aya::Pod>(
        &self,
        def: &MapDef<kind::Array, u32, T>,
        index: u32,
    ) -> anyhow::Result<T> {
        Ok(self.map(def)?.get(&index, 0)?)
    }

    /// Reads the configuration the programs run with now.
    pub fn read_config(&self) -> anyhow::Result<HostConfig> {
        Ok(HostConfig {
            profiles: self.read_entries(&maps::ECN_PROFILES, 0)?,
            pfc_profiles: self.read_entries(&maps::PFC_PROFILES, 0)?,
            dscp_priority: self.read_entries(&maps::DSCP_PRIO, 0)?,
            settings: self.read(&maps::SETTINGS, 0)?,
            pfc_relay: self.read_pfc_relay()?,
            lb: self.read_lb_config()?,
        })
    }

    /// Writes a (validated) configuration; the programs use it from their next packet on.
    pub fn write_config(&self, config: &HostConfig) -> anyhow::Result<()> {
        config.validate()?;
        self.write_entries(&maps::ECN_PROFILES, &config.profiles)?;
        self.write_entries(&maps::PFC_PROFILES, &config.pfc_profiles)?;
        self.write_entries(&maps::DSCP_PRIO, &config.dscp_priority)?;
        self.write_lb_config(&config.lb)?;
        self.write_pfc_relay(&config.pfc_relay)?;
        self.write_entries(&maps::SETTINGS, &[config.settings])
    }

    /// The interfaces of `pfc.relay`, by name in this namespace (one deleted since is left
    /// out: the kernel emptied its slot).
    fn read_pfc_relay(&self) -> anyhow::Result<Vec<String>> {
        let devmap = self.map(&maps::PFC_RELAY)?;
        Ok((0..MAX_RELAY_PORTS as u32)
            .filter_map(|slot| devmap.get(slot, 0).ok())
            .filter_map(|target| Interface::name_of(target.if_index))
            .collect())
    }

    /// Points the relay slots at the interfaces named `names` (in this namespace), the rest
    /// empty.
    fn write_pfc_relay(&self, names: &[String]) -> anyhow::Result<()> {
        // Every name resolved before a slot changes: an unknown one leaves the relay as it was.
        let indexes = names
            .iter()
            .map(|name| {
                Interface::lookup(name)
                    .map(|i| i.index)
                    .with_context(|| format!("pfc.relay: {name}"))
            })
            .collect::<anyhow::Result<Vec<u32>>>()?;
        let mut devmap = self.map(&maps::PFC_RELAY)?;
        for slot in 0..MAX_RELAY_PORTS {
            let ifindex = indexes.get(slot).copied().unwrap_or(0);
            devmap.set(slot as u32, ifindex, None, 0)?;
        }
        Ok(())
    }

    /// Writes `entries` to the array map `def` from index 0.
    pub(crate) fn write_entries<T: aya::Pod>(
        &self,
        def: &MapDef<kind::Array, u32, T>,
        entries: &[T],
    ) -> anyhow::Result<()> {
        let mut array = self.map(def)?;
        for (index, entry) in entries.iter().enumerate() {
            array.set(index as u32, entry, 0)?;
        }
        Ok(())
    }

    /// PFC frames sent, summed over CPUs.
    pub fn read_pfc_tx_counters(&self) -> anyhow::Result<PfcTxCounters> {
        self.sum_per_cpu(&maps::PFC_TX_COUNTERS, 0, PfcTxCounters::accumulate)
    }

    /// This host's ingress buffers, by priority.
    pub fn read_pfc_buffers(&self) -> anyhow::Result<[IngressBuffer; PRIORITIES]> {
        self.read_entries(&maps::PFC_BUFFERS, 0)
    }

    /// Reads what attach recorded.
    pub fn read_attach_info(&self) -> anyhow::Result<AttachInfo> {
        self.read(&maps::ATTACH_INFO, 0)
    }

    /// Records what attach did.
    pub fn write_attach_info(&self, info: AttachInfo) -> anyhow::Result<()> {
        self.write_entries(&maps::ATTACH_INFO, &[info])
    }

    /// Sums the per-CPU counters of `hook`.
    pub fn read_counters(&self, hook: Hook) -> anyhow::Result<HookCounters> {
        self.sum_per_cpu(&maps::COUNTERS, hook as u32, HookCounters::accumulate)
    }

    /// Entry `index` of the per-CPU array map `def`, its CPUs' copies added with `add`.
    pub(crate) fn sum_per_cpu<T: aya::Pod + Default>(
        &self,
        def: &MapDef<kind::PerCpuArray, u32, T>,
        index: u32,
        add: fn(&mut T, &T),
    ) -> anyhow::Result<T> {
        let counters = self.map(def)?;
        let mut total = T::default();
        counters
            .get(&index, 0)?
            .iter()
            .for_each(|per_cpu| add(&mut total, per_cpu));
        Ok(total)
    }

    /// Sets entry `index` of the per-CPU array map `def` to `T::default()` on every CPU.
    pub(crate) fn zero_per_cpu<T: aya::Pod + Default>(
        &self,
        def: &MapDef<kind::PerCpuArray, u32, T>,
        index: u32,
    ) -> anyhow::Result<()> {
        let mut counters = self.map(def)?;
        let cpus =
            aya::util::nr_cpus().map_err(|(what, error)| anyhow::anyhow!("{what}: {error}"))?;
        let zeros = PerCpuValues::try_from(vec![T::default(); cpus])?;
        counters.set(index, zeros, 0)?;
        Ok(())
    }

    /// The notification-point counters, summed over CPUs.
    pub fn read_cnp_counters(&self) -> anyhow::Result<CnpCounters> {
        self.sum_per_cpu(&maps::CNP_COUNTERS, 0, CnpCounters::accumulate)
    }

    /// CNP state of every QP that has had a CE packet (the LRU map keeps the latest 4096).
    pub fn read_cnp_qps(&self) -> anyhow::Result<Vec<(u32, CnpQpState)>> {
        self.read_qp_table(&maps::CNP_QPS)
    }

    /// NAKs by syndrome (indexed by hook: XDP received, TC egress sent), summed over CPUs.
    pub fn read_nak_counters(&self) -> anyhow::Result<[NakCounters; Hook::COUNT]> {
        let mut out = [NakCounters::default(); Hook::COUNT];
        for hook in Hook::ALL {
            out[hook as usize] =
                self.sum_per_cpu(&maps::NAK_COUNTERS, hook as u32, NakCounters::accumulate)?;
        }
        Ok(out)
    }

    /// NAKs of every QP that has sent or received one (the LRU map keeps the latest 4096).
    pub fn read_nak_qps(&self) -> anyhow::Result<Vec<(u32, NakQpCounters)>> {
        self.read_qp_table(&maps::NAK_QPS)
    }

    /// Every entry of the per-QP table `def`, by QP.
    fn read_qp_table<T: aya::Pod>(
        &self,
        def: &MapDef<kind::LruHashMap, u32, T>,
    ) -> anyhow::Result<Vec<(u32, T)>> {
        let mut entries = self.map(def)?.iter().collect::<Result<Vec<_>, _>>()?;
        entries.sort_by_key(|(qp, _)| *qp);
        Ok(entries)
    }

    /// The receiver QP → sender QP map of CNPs.
    pub fn qp_map(&self) -> anyhow::Result<AyaHashMap<MapData, u32, u32>> {
        self.map(&maps::QP_MAP)
    }

    /// The ERSPAN mirroring session (off when it selects nothing).
    pub fn read_mirror_session(&self) -> anyhow::Result<MirrorSession> {
        self.read(&maps::MIRROR_SESSION, 0)
    }

    /// Replaces the ERSPAN mirroring session; the mirror programs use it from their next frame.
    pub fn write_mirror_session(&self, session: &MirrorSession) -> anyhow::Result<()> {
        self.write_entries(&maps::MIRROR_SESSION, &[*session])
    }

    /// Frames mirrored, summed over CPUs.
    pub fn read_mirror_counters(&self) -> anyhow::Result<MirrorCounters> {
        self.sum_per_cpu(&maps::MIRROR_COUNTERS, 0, MirrorCounters::accumulate)
    }

    /// The received pause state, by priority.
    pub fn read_pfc_states(&self) -> anyhow::Result<[PfcState; PRIORITIES]> {
        self.read_entries(&maps::PFC_STATE, 0)
    }

    /// The phantom queues of `hook`, by priority.
    pub fn read_queues(&self, hook: Hook) -> anyhow::Result<[PhantomQueue; PRIORITIES]> {
        self.read_entries(&maps::QUEUES, maps::queue_index(hook, 0))
    }
}
