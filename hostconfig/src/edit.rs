//! `lossless host set` keys written into a config file's TOML text (a host config, or an agent
//! interface's profile) with the rest of the file kept as it was: comments, order, the other
//! keys and how they are written (toml_edit). `lossless check --fix` writes its fixed copies
//! of hosts' configs with it.

use anyhow::{bail, Context as _};
use toml_edit::{DocumentMut, Item, Table, TableLike, Value};

use crate::config::HostConfig;

/// Which configuration of a file the keys go into.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Target<'a> {
    /// The whole file: a host config (`lossless host attach --config`).
    Host,
    /// An agent's interface by name: its profile (given one named `IFACE-fixed` when it has
    /// none, as an interface without a profile runs the defaults).
    AgentInterface(&'a str),
}

/// `text` (a config file's TOML, within [`crate::config::MAX_CONFIG_BYTES`]) with each
/// `(KEY, VALUE)` of `settings` set in `target`: keys checked as `lossless host set` checks
/// them, an existing key's value replaced in place (its comments kept), a new key added as a
/// dotted key of its table. The new text is parsed back as the config it is (an agent's, or a
/// host's) and refused if it would not be one: a shape this cannot edit (profiles written as
/// an inline table, interfaces as an inline array) is an error, never a broken copy.
pub fn set_keys(
    text: &str,
    target: Target,
    settings: &[(String, String)],
) -> anyhow::Result<String> {
    if text.len() as u64 > crate::config::MAX_CONFIG_BYTES {
        bail!(
            "a config file is at most {} bytes",
            crate::config::MAX_CONFIG_BYTES
        );
    }
    let mut doc: DocumentMut = text.parse().context("TOML")?;
    let mut check = HostConfig::default();
    for (key, value) in settings {
        check.apply(key, value)?;
    }
    let table: &mut dyn TableLike = match target {
        Target::Host => doc.as_table_mut(),
        Target::AgentInterface(name) => profile_of(&mut doc, name)?,
    };
    for (key, value) in settings {
        set(table, key, value)?;
    }
    let edited = doc.to_string();
    match target {
        Target::Host => HostConfig::from_toml(&edited).map(drop),
        Target::AgentInterface(_) => crate::agent::AgentConfig::from_toml(&edited).map(drop),
    }
    .context("the edited config would not read back (write its tables as [table] headers)")?;
    Ok(edited)
}

/// The profile table of the agent's interface `name`, made (and named on the interface) when
/// it has none.
fn profile_of<'d>(doc: &'d mut DocumentMut, name: &str) -> anyhow::Result<&'d mut dyn TableLike> {
    // The profile made for an interface without one, unless that name is taken already.
    let made = format!("{name}-fixed");
    let made_taken = doc
        .get("profiles")
        .and_then(Item::as_table_like)
        .is_some_and(|p| p.contains_key(&made));
    let interface = doc
        .get_mut("interfaces")
        .and_then(Item::as_array_of_tables_mut)
        .and_then(|a| {
            a.iter_mut()
                .find(|t| t.get("name").and_then(Item::as_str) == Some(name))
        })
        .with_context(|| format!("no [[interfaces]] named {name}"))?;
    let profile = match interface.get("profile").and_then(Item::as_str) {
        Some(p) => p.to_owned(),
        None if made_taken => bail!("{name} has no profile and one named {made} exists already"),
        None => {
            interface.insert("profile", toml_edit::value(made.clone()));
            made
        }
    };
    let profiles = doc.entry("profiles").or_insert_with(|| {
        let mut t = Table::new();
        t.set_implicit(true);
        Item::Table(t)
    });
    let profiles = profiles
        .as_table_like_mut()
        .context("profiles is not a table")?;
    profiles
        .entry(&profile)
        .or_insert_with(|| Item::Table(Table::new()))
        .as_table_like_mut()
        .with_context(|| format!("profiles.{profile} is not a table"))
}

/// Sets the dotted `key` to `value` (a boolean, integer or float as written, else a string)
/// in `table`.
fn set(table: &mut dyn TableLike, key: &str, value: &str) -> anyhow::Result<()> {
    let parts: Vec<&str> = key.split('.').collect();
    let (last, path) = parts.split_last().context("an empty key")?;
    let mut at = table;
    for part in path {
        if at.get(part).is_none() {
            let mut t = Table::new();
            t.set_dotted(true);
            at.insert(part, Item::Table(t));
        }
        at = at
            .get_mut(part)
            .and_then(Item::as_table_like_mut)
            .with_context(|| format!("{key}: {part} is not a table in the file"))?;
    }
    let mut new = if let Ok(b) = value.parse::<bool>() {
        Value::from(b)
    } else if let Ok(i) = value.parse::<i64>() {
        Value::from(i)
    } else if let Ok(f) = value
        .parse::<f64>()
        .map_err(drop)
        .and_then(|f| f.is_finite().then_some(f).ok_or(()))
    {
        Value::from(f)
    } else {
        Value::from(value)
    };
    match at.get_mut(last) {
        // Replaced in place: the key and its comments stay.
        Some(old) => {
            if let Some(value) = old.as_value() {
                *new.decor_mut() = value.decor().clone();
            }
            *old = Item::Value(new);
        }
        None => {
            at.insert(last, Item::Value(new));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::agent::AgentConfig;

    fn keys(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn a_host_config_keeps_its_comments_and_order() {
        let text = "# the NIC\npfc.watchdog_ms = 5000 # too slow\n\n[ecn]\nroce_only = true\n";
        let fixed = set_keys(
            text,
            Target::Host,
            &keys(&[
                ("pfc.watchdog_ms", "200"),
                ("pfc.watchdog_ignore", "true"),
                ("dscp.26.prio", "3"),
                ("pfc.link_speed_bps", "25g"),
            ]),
        )
        .unwrap();
        assert!(
            fixed.starts_with("# the NIC\npfc.watchdog_ms = 200 # too slow\n"),
            "{fixed}"
        );
        assert!(fixed.contains("[ecn]\nroce_only = true\n"), "{fixed}");
        let config = HostConfig::from_toml(&fixed).unwrap();
        let view = config.view();
        assert_eq!(view.pfc_watchdog_ms, 200);
        assert!(view.pfc_watchdog_ignore);
        assert!(view.roce_only);
        assert_eq!(view.link_speed_bps, 25_000_000_000);
        assert_eq!(view.dscp_priority[26], 3);
    }

    #[test]
    fn an_agent_interface_gets_its_profile_fixed_or_one_made() {
        let text = "[profiles.roce]\npfc.link_speed_bps = \"25g\"\n\n\
                    [[interfaces]]\nname = \"eth0\"\nprofile = \"roce\"\n\n\
                    [[interfaces]]\nname = \"eth1\"\n";
        let fixed = set_keys(
            text,
            Target::AgentInterface("eth0"),
            &keys(&[("pfc.watchdog_ignore", "true")]),
        )
        .unwrap();
        let fixed = set_keys(
            &fixed,
            Target::AgentInterface("eth1"),
            &keys(&[("pfc.watchdog_ms", "100")]),
        )
        .unwrap();
        let agent = AgentConfig::from_toml(&fixed).unwrap();
        let eth0 = agent.interfaces["eth0"].config.view();
        assert!(eth0.pfc_watchdog_ignore);
        assert_eq!(eth0.link_speed_bps, 25_000_000_000);
        let eth1 = &agent.interfaces["eth1"];
        assert_eq!(eth1.profile.as_deref(), Some("eth1-fixed"));
        assert_eq!(eth1.config.view().pfc_watchdog_ms, 100);
    }

    #[test]
    fn unknown_keys_and_values_are_refused() {
        for (key, value) in [("pfc.nothing", "1"), ("dscp.3.prio", "8")] {
            assert!(set_keys("", Target::Host, &keys(&[(key, value)])).is_err());
        }
        assert!(set_keys(
            "pfc = 3\n",
            Target::Host,
            &keys(&[("pfc.watchdog_ms", "9")])
        )
        .is_err());
        assert!(set_keys("", Target::AgentInterface("eth9"), &[]).is_err());
    }

    /// Shapes the edit cannot keep valid are errors, never a copy that names a profile it
    /// lacks or takes over another's: profiles as an inline table, interfaces as an inline
    /// array, a profile already called IFACE-fixed.
    #[test]
    fn agent_files_it_cannot_edit_are_refused() {
        let watchdog = keys(&[("pfc.watchdog_ms", "100")]);
        for (text, interface) in [
            (
                "profiles = { roce = { pfc.watchdog_ms = 50 } }\n[[interfaces]]\nname = \"eth1\"\n",
                "eth1",
            ),
            ("interfaces = [{ name = \"eth0\" }]\n", "eth0"),
            (
                "[profiles.eth0-fixed]\npfc.watchdog_ignore = true\n\n[[interfaces]]\nname = \"eth0\"\n",
                "eth0",
            ),
        ] {
            AgentConfig::from_toml(text).unwrap();
            let edited = set_keys(text, Target::AgentInterface(interface), &watchdog);
            assert!(edited.is_err(), "{text}: {edited:?}");
        }
    }
}
