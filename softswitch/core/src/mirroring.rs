//! Mirroring (clone) sessions, as BMv2's `mirroring_sessions`: a session id names the egress
//! port that `clone` and `clone_preserving_field_list` copies go to.

use std::collections::HashMap;

/// Clone sessions by id.
#[derive(Clone, Debug, Default)]
pub struct MirroringSessions {
    ports: HashMap<u32, u16>,
}

impl MirroringSessions {
    /// Adds (or replaces) session `session`, sending to `port`.
    pub fn set(&mut self, session: u32, port: u16) {
        self.ports.insert(session, port);
    }

    /// Removes session `session`.
    pub fn remove(&mut self, session: u32) {
        self.ports.remove(&session);
    }

    /// The port session `session` sends to, if it exists.
    pub fn port(&self, session: u32) -> Option<u16> {
        self.ports.get(&session).copied()
    }
}
