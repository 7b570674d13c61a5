//! What a rule reports: a severity, where, why it matters, the fix, and the arithmetic or the
//! routes behind it.

use serde::Serialize;

/// How bad a finding is; `lossless check` exits non-zero when any is an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// The fabric loses packets, deadlocks or spreads pauses it need not.
    Error,
    /// A setting the literature advises against, whose harm depends on the traffic.
    Warning,
    /// Something the check could not look at.
    Note,
}

impl Severity {
    /// Its name, as the table and JSON print it.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// Where a finding is: any of a switch, its port, a priority, a host.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Place {
    /// The switch.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub switch: Option<String>,
    /// Its port.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub port: Option<u16>,
    /// The priority (egress queue).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub priority: Option<u8>,
    /// The host (and its interface, `h11/eth0`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
}

impl Place {
    /// Switch `name`.
    pub fn switch(name: &str) -> Place {
        Place {
            switch: Some(name.to_owned()),
            ..Place::default()
        }
    }

    /// Host `name`.
    pub fn host(name: &str) -> Place {
        Place {
            host: Some(name.to_owned()),
            ..Place::default()
        }
    }

    /// This place at `port`.
    pub fn port(mut self, port: u16) -> Place {
        self.port = Some(port);
        self
    }

    /// This place at `priority`.
    pub fn priority(mut self, priority: u8) -> Place {
        self.priority = Some(priority);
        self
    }

    /// `switch:port prio N host`, the parts it has.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        match (&self.switch, self.port) {
            (Some(s), Some(p)) => parts.push(format!("{s}:{p}")),
            (Some(s), None) => parts.push(s.clone()),
            _ => {}
        }
        if let Some(p) = self.priority {
            parts.push(format!("prio {p}"));
        }
        if let Some(h) = &self.host {
            parts.push(h.clone());
        }
        parts.join(" ")
    }
}

/// One finding of one rule.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Finding {
    /// The rule's name (docs/check.md has a section per rule).
    pub rule: &'static str,
    /// How bad it is.
    pub severity: Severity,
    /// Where.
    #[serde(rename = "where")]
    pub place: Place,
    /// Why it matters, one sentence.
    pub why: String,
    /// The change that fixes it.
    pub fix: String,
    /// The arithmetic or the routes behind it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
    /// The link failure it happens after, if any (`--failures 1`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub after_failure: Option<String>,
    /// The entry changes that fix it, where the fix is one (`--fix` applies them).
    #[serde(skip)]
    pub edits: Vec<Edit>,
    /// The host settings that fix it, where the fix is one (`--fix` writes them into the
    /// hosts' configs).
    #[serde(skip)]
    pub settings: Vec<HostSetting>,
}

/// A `lossless host set` key of one host's NIC: `key` = `value` on `interface` of host `host`.
#[derive(Clone, Debug, PartialEq)]
pub struct HostSetting {
    /// The host (its index in the fabric).
    pub host: usize,
    /// The NIC's interface, as the host's configuration names it.
    pub interface: String,
    /// The key (`pfc.watchdog_ms`).
    pub key: String,
    /// Its new value, as `lossless host set` takes it.
    pub value: String,
}

/// A change to one action parameter of one of a switch's entries: the entry of `table` whose
/// match is `matches` gets `param` = `value`.
#[derive(Clone, Debug, PartialEq)]
pub struct Edit {
    /// The switch (its index in the fabric).
    pub switch: usize,
    /// The entry's table.
    pub table: String,
    /// The entry's match fields, as runtime JSON writes them.
    pub matches: std::collections::BTreeMap<String, serde_json::Value>,
    /// The action parameter.
    pub param: &'static str,
    /// Its new value.
    pub value: u64,
}

impl Edit {
    /// Applies the edit to `config`; whether an entry matched.
    pub fn apply(&self, config: &mut p4values::runtime_json::RuntimeConfig) -> bool {
        let found = config
            .table_entries
            .iter_mut()
            .find(|e| e.table == self.table && e.matches == self.matches);
        match found {
            Some(e) => {
                e.action_params
                    .insert(self.param.to_owned(), self.value.into());
                true
            }
            None => false,
        }
    }
}

impl Finding {
    /// A finding of `rule` without detail.
    pub fn new(
        rule: &'static str,
        severity: Severity,
        place: Place,
        why: String,
        fix: String,
    ) -> Finding {
        Finding {
            rule,
            severity,
            place,
            why,
            fix,
            detail: None,
            after_failure: None,
            edits: Vec::new(),
            settings: Vec::new(),
        }
    }

    /// This finding with `edits`, the entry changes that fix it.
    pub fn edits(mut self, edits: Vec<Edit>) -> Finding {
        self.edits = edits;
        self
    }

    /// This finding fixed by `setting`, a host's key; its fix says `KEY=VALUE`.
    pub fn setting(mut self, setting: HostSetting) -> Finding {
        self.fix = format!("{}={}", setting.key, setting.value);
        self.settings.push(setting);
        self
    }

    /// This finding with `detail`.
    pub fn detail(mut self, detail: String) -> Finding {
        self.detail = Some(detail);
        self
    }
}
