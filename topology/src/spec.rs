//! What fabric to build, as a user writes it: a shape — `leaf-spine:S,L,H`, `fat-tree:K`,
//! `rail:G,S,R` — and options, either as a short form (`fat-tree:8,speed=100G,core-speed=400G,
//! buffer=32MB,cable=2m,os=1`) or as a table of the same keys (TOML: `shape = "fat-tree"`,
//! `k = 8`, `core-speed = "400G"`), read within written limits by one code path.
//!
//! Options: `speed`, `cable` (every link tier) and `TIER-speed`, `TIER-cable` (one tier, named by
//! [`Shape::link_tiers`]: `host` for the hosts' links, then the switch tier the links go up to);
//! `buffer` (every switch) and `TIER-buffer` (named by [`Shape::switch_tiers`]); `mtu`; `os`, the
//! oversubscription of the first switch tier (host ports per uplink). A tier's own option wins
//! over the general one wherever it is written.

use std::{collections::BTreeMap, fmt, str::FromStr};

use serde::Deserialize;

use crate::{
    quantity::{format_bytes, format_length, format_rate, parse_length_mm},
    Error,
};

/// The longest short form read, in bytes.
pub const MAX_SPEC_BYTES: usize = 4096;
/// The most keys a short form or table may have.
pub const MAX_KEYS: usize = 64;
/// The slowest link: 1 Gb/s (Mininet's fabrics read PAUSE times at this rate).
pub const MIN_RATE_BPS: u64 = 1_000_000_000;
/// The fastest link: 800 Gb/s.
pub const MAX_RATE_BPS: u64 = 800_000_000_000;
/// The longest cable: 10 km (single-mode optics between buildings).
pub const MAX_CABLE_MM: u64 = 10_000_000;
/// The smallest switch buffer: 64 KiB.
pub const MIN_BUFFER_BYTES: u64 = 64 << 10;
/// The largest switch buffer: 16 GiB (deep-buffer switches carry 8 GB of HBM).
pub const MAX_BUFFER_BYTES: u64 = 16 << 30;
/// The smallest MTU: 576 bytes, the IPv4 datagram every host must accept (RFC 791).
pub const MIN_MTU: u32 = 576;
/// The largest MTU: 9216 bytes, the usual jumbo-frame ceiling of data-centre switches.
pub const MAX_MTU: u32 = 9216;
/// The highest oversubscription.
pub const MAX_OVERSUBSCRIPTION: u16 = 16;
/// The most hosts (NICs) a fabric may have.
pub const MAX_HOSTS: usize = 16_384;
/// The most switches a fabric may have.
pub const MAX_SWITCHES: usize = 4096;
/// The most ports a switch may have (v1model's port 511 drops).
pub const MAX_PORTS: usize = 510;

/// The default link rate: 100 Gb/s.
pub const DEFAULT_RATE_BPS: u64 = 100_000_000_000;
/// The default cable of the hosts' links: 2 m, copper within a rack.
pub const DEFAULT_HOST_CABLE_MM: u64 = 2_000;
/// The default cable between the first two switch tiers: 20 m, fibre across a row.
pub const DEFAULT_FABRIC_CABLE_MM: u64 = 20_000;
/// The default cable up to a third tier: 100 m, fibre across the hall.
pub const DEFAULT_CORE_CABLE_MM: u64 = 100_000;
/// The default switch buffer: 32 MiB, a shallow-buffer data-centre switch.
pub const DEFAULT_BUFFER_BYTES: u64 = 32 << 20;
/// The default MTU: 9000 bytes, the jumbo frames RoCE fabrics run (a 4096-byte RoCE MTU fits).
pub const DEFAULT_MTU: u32 = 9000;

/// The form of a fabric and its size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shape {
    /// Two tiers, every leaf linked to every spine (a type of its own: `lossless net`'s
    /// experiments take it).
    LeafSpine(LeafSpine),
    /// Three tiers of radix-`k` switches (Al-Fares et al., SIGCOMM 2008): k pods of k/2 edge and
    /// k/2 aggregation switches, (k/2)² cores, k³/4 hosts.
    FatTree {
        /// The radix, even, 2..=32.
        k: u16,
    },
    /// Rail-optimised: `groups` scalable units of `servers` servers with `rails` NICs each; NIC
    /// r of every server of a unit on that unit's leaf of rail r; every leaf linked to every
    /// spine.
    Rail {
        /// Scalable units, 1..=64.
        groups: u16,
        /// Servers per unit, 1..=128.
        servers: u16,
        /// NICs per server, 1..=16.
        rails: u16,
    },
}

/// The size of a leaf-spine fabric.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafSpine {
    /// Spines, 1..=16.
    pub spines: u16,
    /// Leaves, 1..=128.
    pub leaves: u16,
    /// Hosts per leaf, 1..=64.
    pub hosts: u16,
}

/// A shape's name, its parameters' names and their ranges.
struct ShapeSyntax {
    name: &'static str,
    parameters: &'static [(&'static str, u16, u16)],
}

const SHAPES: [ShapeSyntax; 3] = [
    ShapeSyntax {
        name: "leaf-spine",
        parameters: &[("spines", 1, 16), ("leaves", 1, 128), ("hosts", 1, 64)],
    },
    ShapeSyntax {
        name: "fat-tree",
        parameters: &[("k", 2, 32)],
    },
    ShapeSyntax {
        name: "rail",
        parameters: &[("groups", 1, 64), ("servers", 1, 128), ("rails", 1, 16)],
    },
];

/// What every way of writing a spec says when the shape is unknown.
const SHAPES_HELP: &str = "leaf-spine:SPINES,LEAVES,HOSTS, fat-tree:K or rail:GROUPS,SERVERS,RAILS";

/// The names of the shapes: what a short form may start with (`NAME:`).
pub fn shape_names() -> impl Iterator<Item = &'static str> {
    SHAPES.iter().map(|s| s.name)
}

impl Shape {
    /// Its name in a spec: `leaf-spine`, `fat-tree`, `rail`.
    pub fn name(&self) -> &'static str {
        self.syntax().name
    }

    fn syntax(&self) -> &'static ShapeSyntax {
        match self {
            Shape::LeafSpine(_) => &SHAPES[0],
            Shape::FatTree { .. } => &SHAPES[1],
            Shape::Rail { .. } => &SHAPES[2],
        }
    }

    /// Its parameters, in the short form's order.
    fn parameters(&self) -> Vec<u16> {
        match *self {
            Shape::LeafSpine(LeafSpine {
                spines,
                leaves,
                hosts,
            }) => vec![spines, leaves, hosts],
            Shape::FatTree { k } => vec![k],
            Shape::Rail {
                groups,
                servers,
                rails,
            } => vec![groups, servers, rails],
        }
    }

    /// The names of its switch tiers, from the hosts up (tier 1 first).
    pub fn switch_tiers(&self) -> &'static [&'static str] {
        match self {
            Shape::LeafSpine(_) | Shape::Rail { .. } => &["leaf", "spine"],
            Shape::FatTree { .. } => &["edge", "agg", "core"],
        }
    }

    /// The names of its link tiers, from the hosts up: `host` for the hosts' links, then the
    /// switch tier each goes up to.
    pub fn link_tiers(&self) -> &'static [&'static str] {
        match self {
            Shape::LeafSpine(_) | Shape::Rail { .. } => &["host", "spine"],
            Shape::FatTree { .. } => &["host", "agg", "core"],
        }
    }

    /// Builds a shape from its name and its parameters by name, checking each's range.
    fn build(name: &str, parameters: &BTreeMap<&str, &str>) -> Result<Shape, Error> {
        let syntax = SHAPES.iter().find(|s| s.name == name).ok_or_else(|| {
            invalid(format!(
                "unknown shape '{}': {SHAPES_HELP}",
                name.escape_debug()
            ))
        })?;
        let mut values = Vec::new();
        for &(parameter, min, max) in syntax.parameters {
            let text = parameters.get(parameter).ok_or_else(|| {
                invalid(format!("{name}: {parameter} is missing ({SHAPES_HELP})"))
            })?;
            let value = text
                .trim()
                .parse::<u16>()
                .ok()
                .filter(|v| (min..=max).contains(v))
                .ok_or_else(|| {
                    invalid(format!(
                        "{name}: {parameter} '{}': a whole number {min}..={max}",
                        text.escape_debug()
                    ))
                })?;
            values.push(value);
        }
        let shape = match (name, &values[..]) {
            ("leaf-spine", &[spines, leaves, hosts]) => Shape::LeafSpine(LeafSpine {
                spines,
                leaves,
                hosts,
            }),
            ("fat-tree", &[k]) if k % 2 == 0 => Shape::FatTree { k },
            ("fat-tree", &[k]) => {
                return Err(invalid(format!("fat-tree: k {k} is odd: k is even")))
            }
            ("rail", &[groups, servers, rails]) => Shape::Rail {
                groups,
                servers,
                rails,
            },
            _ => unreachable!("every shape's parameters are read above"),
        };
        Ok(shape)
    }
}

/// The links of one tier.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LinkTier {
    /// Rate, bits per second.
    pub rate_bps: u64,
    /// Cable length, millimetres.
    pub cable_mm: u64,
}

/// A fabric's options, resolved per tier.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    /// Per link tier, as [`Shape::link_tiers`] names them.
    pub links: Vec<LinkTier>,
    /// Buffer of every switch of a tier, bytes, per switch tier as [`Shape::switch_tiers`]
    /// names them.
    pub buffers: Vec<u64>,
    /// MTU of every link, bytes (the largest IPv4 packet).
    pub mtu: u32,
    /// Host ports per uplink of a first-tier switch (fat-tree and rail; leaf-spine's is its
    /// shape's hosts per spine).
    pub oversubscription: u16,
}

impl Options {
    /// The defaults for `shape`.
    pub fn defaults(shape: &Shape) -> Options {
        let cable = |tier: usize| match tier {
            0 => DEFAULT_HOST_CABLE_MM,
            1 => DEFAULT_FABRIC_CABLE_MM,
            _ => DEFAULT_CORE_CABLE_MM,
        };
        Options {
            links: (0..shape.link_tiers().len())
                .map(|tier| LinkTier {
                    rate_bps: DEFAULT_RATE_BPS,
                    cable_mm: cable(tier),
                })
                .collect(),
            buffers: vec![DEFAULT_BUFFER_BYTES; shape.switch_tiers().len()],
            mtu: DEFAULT_MTU,
            oversubscription: 1,
        }
    }
}

/// A fabric to build: its shape and options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The shape.
    pub shape: Shape,
    /// The options.
    pub options: Options,
}

/// What an option sets.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Quantity {
    Speed,
    Cable,
    Buffer,
}

impl Spec {
    /// `shape` with the default options.
    pub fn new(shape: Shape) -> Spec {
        Spec {
            options: Options::defaults(&shape),
            shape,
        }
    }

    /// Reads the short form: `NAME:N,...` then `key=value` options, comma-separated.
    pub fn parse(text: &str) -> Result<Spec, Error> {
        if text.len() > MAX_SPEC_BYTES {
            return Err(invalid(format!(
                "a topology of {} bytes: at most {MAX_SPEC_BYTES}",
                text.len()
            )));
        }
        let (name, rest) = text.split_once(':').ok_or_else(|| {
            invalid(format!(
                "topology '{}': expected {SHAPES_HELP}",
                text.escape_debug()
            ))
        })?;
        let name = name.trim();
        let parts: Vec<&str> = rest.split(',').collect();
        if parts.len() > MAX_KEYS {
            return Err(invalid(format!(
                "{} parts: at most {MAX_KEYS}",
                parts.len()
            )));
        }
        let numbers = parts.iter().take_while(|p| !p.contains('=')).count();
        let syntax = SHAPES.iter().find(|s| s.name == name).ok_or_else(|| {
            invalid(format!(
                "unknown shape '{}': {SHAPES_HELP}",
                name.escape_debug()
            ))
        })?;
        let wanted = syntax.parameters.len();
        if let Some(part) = parts[..numbers].get(wanted) {
            if part.trim().parse::<u64>().is_err() {
                return Err(invalid(format!(
                    "'{}': the options come after the numbers, each KEY=VALUE",
                    part.escape_debug()
                )));
            }
        }
        if numbers != wanted {
            let names: Vec<&str> = syntax.parameters.iter().map(|p| p.0).collect();
            return Err(invalid(format!(
                "{name}: expected {} number{} ({}) before the options, got {numbers}",
                names.len(),
                if names.len() == 1 { "" } else { "s" },
                names.join(", ")
            )));
        }
        let parameters: BTreeMap<&str, &str> = syntax
            .parameters
            .iter()
            .map(|p| p.0)
            .zip(parts[..numbers].iter().copied())
            .collect();
        let mut options = Vec::new();
        for part in &parts[numbers..] {
            let (key, value) = part.split_once('=').ok_or_else(|| {
                invalid(format!(
                    "'{}': the options come after the numbers, each KEY=VALUE",
                    part.escape_debug()
                ))
            })?;
            options.push((key.trim(), value.trim()));
        }
        Spec::build(name, &parameters, &options)
    }

    /// Builds a spec from a table of the same keys: `shape`, the shape's parameters by name
    /// (`spines`, `leaves`, `hosts`; `k`; `groups`, `servers`, `rails`), and options.
    pub fn from_table(table: &BTreeMap<String, String>) -> Result<Spec, Error> {
        if table.len() > MAX_KEYS {
            return Err(invalid(format!("{} keys: at most {MAX_KEYS}", table.len())));
        }
        let name = table
            .get("shape")
            .ok_or_else(|| invalid(format!("shape is missing: {SHAPES_HELP}")))?;
        let syntax = SHAPES.iter().find(|s| s.name == name.as_str());
        let is_parameter =
            |key: &str| syntax.is_some_and(|s| s.parameters.iter().any(|p| p.0 == key));
        let parameters: BTreeMap<&str, &str> = table
            .iter()
            .filter(|(k, _)| is_parameter(k))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let options: Vec<(&str, &str)> = table
            .iter()
            .filter(|(k, _)| k.as_str() != "shape" && !is_parameter(k))
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        Spec::build(name, &parameters, &options)
    }

    fn build(
        name: &str,
        parameters: &BTreeMap<&str, &str>,
        options: &[(&str, &str)],
    ) -> Result<Spec, Error> {
        let mut spec = Spec::new(Shape::build(name, parameters)?);
        let mut seen = Vec::new();
        for (key, _) in options {
            if seen.contains(key) {
                return Err(invalid(format!("{key} is given twice")));
            }
            seen.push(*key);
        }
        // The general options first, so that a tier's own wins wherever it is written.
        let (general, specific): (Vec<_>, Vec<_>) =
            options.iter().partition(|(key, _)| !key.contains('-'));
        for (key, value) in general.into_iter().chain(specific) {
            spec.set(key, value)?;
        }
        spec.check()?;
        Ok(spec)
    }

    /// Sets one option.
    fn set(&mut self, key: &str, value: &str) -> Result<(), Error> {
        let shape = self.shape;
        let o = &mut self.options;
        match key {
            "mtu" => {
                let limits = units::ByteLimits {
                    min: MIN_MTU.into(),
                    max: MAX_MTU.into(),
                };
                let mtu =
                    units::parse_bytes(value, &limits).map_err(|e| invalid(format!("mtu: {e}")))?;
                o.mtu = u32::try_from(mtu).expect("within the MTU's limits");
                return Ok(());
            }
            "os" => {
                if let Shape::LeafSpine(_) = shape {
                    return Err(invalid(
                        "os: a leaf-spine's oversubscription is its hosts per spine \
                         (leaf-spine:SPINES,LEAVES,HOSTS); os is for fat-tree and rail"
                            .into(),
                    ));
                }
                o.oversubscription = value
                    .parse()
                    .ok()
                    .filter(|v| (1..=MAX_OVERSUBSCRIPTION).contains(v))
                    .ok_or_else(|| {
                        invalid(format!(
                            "os '{}': a whole number 1..={MAX_OVERSUBSCRIPTION}",
                            value.escape_debug()
                        ))
                    })?;
                return Ok(());
            }
            _ => {}
        }
        let (tier, what) = match key.rsplit_once('-') {
            Some((tier, what)) => (Some(tier), what),
            None => (None, key),
        };
        let quantity = match what {
            "speed" => Quantity::Speed,
            "cable" => Quantity::Cable,
            "buffer" => Quantity::Buffer,
            _ => {
                return Err(invalid(format!(
                    "unknown option '{}': speed, cable, buffer (each also per tier), mtu, os",
                    key.escape_debug()
                )))
            }
        };
        let tiers = if quantity == Quantity::Buffer {
            shape.switch_tiers()
        } else {
            shape.link_tiers()
        };
        let chosen: Vec<usize> = match tier {
            None => (0..tiers.len()).collect(),
            Some(tier) => vec![tiers.iter().position(|t| *t == tier).ok_or_else(|| {
                let kind = if quantity == Quantity::Buffer {
                    "switch"
                } else {
                    "link"
                };
                let names: Vec<String> = tiers.iter().map(|t| format!("{t}-{what}")).collect();
                invalid(format!(
                    "unknown option '{}': a {} has the {kind} tiers {}",
                    key.escape_debug(),
                    shape.name(),
                    names.join(", ")
                ))
            })?],
        };
        match quantity {
            Quantity::Speed => {
                let rate =
                    units::parse_rate_bps(value).map_err(|e| invalid(format!("{key}: {e}")))?;
                if !(MIN_RATE_BPS..=MAX_RATE_BPS).contains(&rate) {
                    return Err(invalid(format!(
                        "{key} '{}': the link rates here are 1G to 800G",
                        units::escaped(value)
                    )));
                }
                chosen.iter().for_each(|&t| o.links[t].rate_bps = rate);
            }
            Quantity::Cable => {
                let mm = parse_length_mm(value).map_err(|e| invalid(format!("{key}: {e}")))?;
                if mm > MAX_CABLE_MM {
                    return Err(invalid(format!(
                        "{key} '{}': cables here are 0m to 10km",
                        units::escaped(value)
                    )));
                }
                chosen.iter().for_each(|&t| o.links[t].cable_mm = mm);
            }
            Quantity::Buffer => {
                let limits = units::ByteLimits {
                    min: MIN_BUFFER_BYTES,
                    max: MAX_BUFFER_BYTES,
                };
                let bytes = units::parse_bytes(value, &limits)
                    .map_err(|e| invalid(format!("{key}: {e} (64KiB to 16GiB)")))?;
                chosen.iter().for_each(|&t| o.buffers[t] = bytes);
            }
        }
        Ok(())
    }

    /// Checks what depends on more than one value: the oversubscription divides the host
    /// ports, and the fabric's size is within [`MAX_HOSTS`], [`MAX_SWITCHES`], [`MAX_PORTS`].
    fn check(&self) -> Result<(), Error> {
        let os = self.options.oversubscription;
        let (hosts, switches, widest) = match self.shape {
            Shape::LeafSpine(LeafSpine {
                spines,
                leaves,
                hosts,
            }) => (
                usize::from(leaves) * usize::from(hosts),
                usize::from(spines) + usize::from(leaves),
                usize::from(leaves).max(usize::from(hosts + spines)),
            ),
            Shape::FatTree { k } => {
                let half = usize::from(k / 2);
                if half % usize::from(os) != 0 {
                    return Err(invalid(format!(
                        "fat-tree:{k}: os {os} must divide the edge's {half} host ports"
                    )));
                }
                let aggs = half / usize::from(os);
                (
                    usize::from(k) * half * half,
                    usize::from(k) * (half + aggs) + aggs * half,
                    usize::from(k),
                )
            }
            Shape::Rail {
                groups,
                servers,
                rails,
            } => {
                if servers % os != 0 {
                    return Err(invalid(format!(
                        "rail: os {os} must divide the leaf's {servers} host ports"
                    )));
                }
                let leaves = usize::from(groups) * usize::from(rails);
                let spines = usize::from(servers / os);
                (
                    leaves * usize::from(servers),
                    leaves + spines,
                    leaves.max(usize::from(servers) + spines),
                )
            }
        };
        if hosts > MAX_HOSTS {
            return Err(invalid(format!(
                "{self}: {hosts} hosts: at most {MAX_HOSTS}"
            )));
        }
        if switches > MAX_SWITCHES {
            return Err(invalid(format!(
                "{self}: {switches} switches: at most {MAX_SWITCHES}"
            )));
        }
        if widest > MAX_PORTS {
            return Err(invalid(format!(
                "{self}: a switch of {widest} ports: at most {MAX_PORTS}"
            )));
        }
        Ok(())
    }
}

impl FromStr for Spec {
    type Err = Error;

    fn from_str(text: &str) -> Result<Spec, Error> {
        Spec::parse(text)
    }
}

/// The short form, with every option that differs from its default, per tier; it reads back
/// as the same spec.
impl fmt::Display for Spec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let numbers: Vec<String> = self.shape.parameters().iter().map(u16::to_string).collect();
        write!(f, "{}:{}", self.shape.name(), numbers.join(","))?;
        let defaults = Options::defaults(&self.shape);
        let o = &self.options;
        for (tier, (link, default)) in o.links.iter().zip(&defaults.links).enumerate() {
            let name = self.shape.link_tiers()[tier];
            if link.rate_bps != default.rate_bps {
                write!(f, ",{name}-speed={}", format_rate(link.rate_bps))?;
            }
            if link.cable_mm != default.cable_mm {
                write!(f, ",{name}-cable={}", format_length(link.cable_mm))?;
            }
        }
        for (tier, (buffer, default)) in o.buffers.iter().zip(&defaults.buffers).enumerate() {
            if buffer != default {
                let name = self.shape.switch_tiers()[tier];
                write!(f, ",{name}-buffer={}", format_bytes(*buffer))?;
            }
        }
        if o.mtu != defaults.mtu {
            write!(f, ",mtu={}", o.mtu)?;
        }
        if o.oversubscription != defaults.oversubscription {
            write!(f, ",os={}", o.oversubscription)?;
        }
        Ok(())
    }
}

/// A value in a table (TOML, JSON): numbers and strings alike become the text the short form
/// would have.
#[derive(Deserialize)]
#[serde(untagged)]
enum TableValue {
    Integer(i64),
    Float(f64),
    Text(String),
}

/// A table of the short form's keys (`shape`, the shape's parameters, options).
impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Spec, D::Error> {
        let table = BTreeMap::<String, TableValue>::deserialize(deserializer)?;
        let table: BTreeMap<String, String> = table
            .into_iter()
            .map(|(k, v)| {
                let text = match v {
                    TableValue::Integer(i) => i.to_string(),
                    TableValue::Float(x) => x.to_string(),
                    TableValue::Text(s) => s,
                };
                (k, text)
            })
            .collect();
        Spec::from_table(&table).map_err(serde::de::Error::custom)
    }
}

fn invalid(message: String) -> Error {
    Error::Invalid(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_form_with_options_per_tier() {
        let spec =
            Spec::parse("fat-tree:8,speed=100G,core-speed=400G,buffer=32MB,cable=2m,os=2").unwrap();
        assert_eq!(spec.shape, Shape::FatTree { k: 8 });
        let o = &spec.options;
        let rates: Vec<u64> = o.links.iter().map(|l| l.rate_bps).collect();
        assert_eq!(rates, [100_000_000_000, 100_000_000_000, 400_000_000_000]);
        assert!(o.links.iter().all(|l| l.cable_mm == 2000));
        assert_eq!(o.buffers, [32_000_000; 3]);
        assert_eq!(o.oversubscription, 2);
        assert_eq!(o.mtu, DEFAULT_MTU);
        // A tier's own option wins wherever it is written.
        let later = Spec::parse("fat-tree:8,core-speed=400G,speed=25G").unwrap();
        assert_eq!(later.options.links[2].rate_bps, 400_000_000_000);
        assert_eq!(later.options.links[0].rate_bps, 25_000_000_000);
    }

    #[test]
    fn display_reads_back() {
        for text in [
            "leaf-spine:2,3,2",
            "fat-tree:4,host-speed=25G,agg-cable=50m,core-speed=400G,core-buffer=4GiB,mtu=4200",
            "rail:2,8,4,spine-speed=800G,leaf-buffer=64MB,os=2",
        ] {
            let spec = Spec::parse(text).unwrap();
            assert_eq!(spec.to_string(), text);
            assert_eq!(Spec::parse(&spec.to_string()).unwrap(), spec);
        }
        assert_eq!(
            Spec::parse("leaf-spine:2,2,2,speed=100G")
                .unwrap()
                .to_string(),
            "leaf-spine:2,2,2"
        );
    }

    #[test]
    fn a_table_of_the_same_keys() {
        let spec: Spec = toml::from_str(
            "shape = \"fat-tree\"\nk = 8\nspeed = \"100G\"\ncore-speed = \"400G\"\nbuffer = \"32MB\"\ncable = \"2m\"\nos = 2\nmtu = 4200\n",
        )
        .unwrap();
        assert_eq!(
            spec,
            Spec::parse("fat-tree:8,speed=100G,core-speed=400G,buffer=32MB,cable=2m,os=2,mtu=4200")
                .unwrap()
        );
        let spec: Spec = toml::from_str(
            "shape = \"leaf-spine\"\nspines = 2\nleaves = 3\nhosts = 2\ncable = 1.5\n",
        )
        .unwrap();
        assert_eq!(spec.options.links[0].cable_mm, 1500);
        let err = toml::from_str::<Spec>("shape = \"fat-tree\"\nk = 8\nspines = 2\n").unwrap_err();
        assert!(err.to_string().contains("unknown option 'spines'"), "{err}");
        let err = toml::from_str::<Spec>("k = 8\n").unwrap_err();
        assert!(err.to_string().contains("shape is missing"), "{err}");
    }

    #[test]
    fn limits_are_refused_with_what_they_are() {
        for (text, says) in [
            ("two-hosts", "expected leaf-spine:SPINES,LEAVES,HOSTS"),
            ("mesh:4", "unknown shape 'mesh'"),
            ("fat-tree:7", "k 7 is odd"),
            ("fat-tree:34", "k '34': a whole number 2..=32"),
            ("fat-tree:0", "k '0': a whole number 2..=32"),
            (
                "fat-tree:8,9",
                "expected 1 number (k) before the options, got 2",
            ),
            (
                "leaf-spine:2,2",
                "expected 3 numbers (spines, leaves, hosts)",
            ),
            ("leaf-spine:17,2,2", "spines '17': a whole number 1..=16"),
            ("leaf-spine:2,2,2,os=2", "os is for fat-tree and rail"),
            (
                "fat-tree:8,os=3",
                "os 3 must divide the edge's 4 host ports",
            ),
            ("fat-tree:8,speed=900G", "speed '900G': the link rates here are 1G to 800G"),
            ("fat-tree:8,speed=100M", "speed '100M': the link rates here are 1G to 800G"),
            ("fat-tree:8,speed=fast", "speed: 'fast' is not a rate"),
            ("fat-tree:8,cable=11km", "cable '11km': cables here are 0m to 10km"),
            ("fat-tree:8,cable=2 miles", "cable: '2 miles' is not a length"),
            ("fat-tree:8,buffer=1KB", "buffer: '1KB' is outside the sizes accepted here, 65536 to 17179869184 bytes (64KiB to 16GiB)"),
            ("fat-tree:8,buffer=1.5B", "buffer: '1.5B' is not a whole number of bytes"),
            ("fat-tree:8,mtu=9217", "mtu: '9217' is outside the sizes accepted here, 576 to 9216 bytes"),
            (
                "fat-tree:8,spine-speed=1G",
                "a fat-tree has the link tiers host-speed, agg-speed, core-speed",
            ),
            (
                "fat-tree:8,spine-buffer=1MB",
                "switch tiers edge-buffer, agg-buffer, core-buffer",
            ),
            ("fat-tree:8,color=red", "unknown option 'color'"),
            ("fat-tree:8,speed=1G,speed=2G", "speed is given twice"),
            ("fat-tree:8,speed", "each KEY=VALUE"),
            ("rail:64,128,16", "131072 hosts: at most 16384"),
            ("rail:64,4,16", "a switch of 1024 ports: at most 510"),
            (
                "rail:2,8,4,os=3",
                "os 3 must divide the leaf's 8 host ports",
            ),
        ] {
            let err = Spec::parse(text).unwrap_err().to_string();
            assert!(err.contains(says), "{text}: {err}");
        }
        let long = format!("fat-tree:8{}", ",mtu=9000".repeat(500));
        assert!(Spec::parse(&long)
            .unwrap_err()
            .to_string()
            .contains("at most 4096"));
    }
}
