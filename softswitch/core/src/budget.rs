//! The state budget: how much memory what the control plane writes into a switch may take, so
//! that no client grows a switch without bound. Table entries (with the controller data kept
//! beside them), action profile members and groups, parser value set members, multicast groups
//! and nodes, clone sessions, and what a front door keeps of its own beside them (the P4Runtime
//! server's copies of replication entries) are each charged an estimate of the memory they take
//! when written, and refunded when they go. The estimates ([`ENTRY_BYTES`] and the others) are
//! what the structures holding them take on a 64-bit build, rounded up: a budget bounds the
//! memory to within a small factor, it does not measure it.

use thiserror::Error;

/// The budget a switch starts with: 1 GiB, about four million entries of a table with a few
/// keys and parameters (softswitch's `--state-budget` sets another).
pub const DEFAULT_STATE_BUDGET: usize = 1 << 30;

/// What a table entry is charged beyond its keys, action data and controller data: the entry,
/// its slot, its place in the table's index and the allocations' headers.
pub const ENTRY_BYTES: usize = 256;
/// What each key of an entry adds (its match, and its value in the index).
pub const MATCH_BYTES: usize = 64;
/// What each action parameter value adds, of an entry or an action profile member.
pub const ARG_BYTES: usize = 16;
/// What a member or a group of an action profile is charged, beyond its data or members.
pub const PROFILE_ITEM_BYTES: usize = 64;
/// What each member of an action selector's group adds.
pub const GROUP_MEMBER_BYTES: usize = 8;
/// What a parser value set member is charged.
pub const VALUE_SET_MEMBER_BYTES: usize = 48;
/// What a multicast group or a replication node is charged, beyond its nodes or ports.
pub const REPLICATION_ITEM_BYTES: usize = 64;
/// What each port of a replication node (or node of a group) adds.
pub const REPLICA_BYTES: usize = 8;
/// What a clone session is charged.
pub const SESSION_BYTES: usize = 32;

/// A write the budget has no room for.
#[derive(Clone, Copy, Debug, Error, PartialEq, Eq)]
#[error(
    "the switch's state budget of {limit} bytes has no room for this write: {used} bytes are \
     in use and it needs {needed} more (delete entries, or start the switch with a larger \
     --state-budget)"
)]
pub struct BudgetExceeded {
    /// Bytes the write would add.
    pub needed: usize,
    /// Bytes in use.
    pub used: usize,
    /// The budget.
    pub limit: usize,
}

/// Bytes in use of a budget.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Budget {
    limit: usize,
    used: usize,
}

impl Default for Budget {
    fn default() -> Self {
        Budget::new(DEFAULT_STATE_BUDGET)
    }
}

impl Budget {
    /// An unused budget of `limit` bytes.
    pub fn new(limit: usize) -> Self {
        Budget { limit, used: 0 }
    }

    /// The budget, in bytes.
    pub fn limit(&self) -> usize {
        self.limit
    }

    /// Bytes in use.
    pub fn used(&self) -> usize {
        self.used
    }

    /// Sets the budget to `limit` bytes. What is in use stays, even above it: writes that add
    /// are refused until enough is removed.
    pub fn set_limit(&mut self, limit: usize) {
        self.limit = limit;
    }

    /// Whether `needed` more bytes fit.
    pub fn check(&self, needed: usize) -> Result<(), BudgetExceeded> {
        if needed <= self.limit.saturating_sub(self.used) {
            Ok(())
        } else {
            Err(BudgetExceeded {
                needed,
                used: self.used,
                limit: self.limit,
            })
        }
    }

    /// Something that was charged `before` bytes now takes `after` (0: it was written, or is
    /// gone): charges or refunds the difference, refusing (and changing nothing) growth that
    /// does not fit.
    pub fn replace(&mut self, before: usize, after: usize) -> Result<(), BudgetExceeded> {
        if after > before {
            self.check(after - before)?;
        }
        self.adjust(before, after);
        Ok(())
    }

    /// [`Budget::replace`] without the check: for changes already made (or that only shrink).
    pub fn adjust(&mut self, before: usize, after: usize) {
        self.used = self.used.saturating_sub(before).saturating_add(after);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn growth_past_the_limit_is_refused_and_changes_nothing() {
        let mut b = Budget::new(1000);
        b.replace(0, 600).unwrap();
        let refused = b.replace(0, 500).unwrap_err();
        assert_eq!(
            refused,
            BudgetExceeded {
                needed: 500,
                used: 600,
                limit: 1000
            }
        );
        assert_eq!(b.used(), 600);
        b.replace(0, 400).unwrap();
        assert_eq!(b.used(), 1000);
        // Shrinking and removing always go through, even over a lowered limit.
        b.set_limit(100);
        b.replace(400, 300).unwrap();
        b.replace(300, 0).unwrap();
        assert!(b.replace(0, 1).is_err());
        b.replace(600, 0).unwrap();
        assert_eq!(b.used(), 0);
        b.replace(0, 100).unwrap();
    }
}
