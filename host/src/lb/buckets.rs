//! The resilient bucket table of ecmp and wcmp: flows hash to buckets, buckets name uplinks,
//! and a change of the member set moves as few buckets as it can.
//!
//! Plain `hash % members` would move almost every flow when one member comes or goes; here a
//! bucket keeps its member unless that member left or holds more than its share, so only the
//! buckets that must move do (the scheme of resilient hashing in Linux nexthop groups).

use dataplane_common::lb::BUCKETS;

/// The buckets each member should hold: in proportion to its weight, the remainders given to
/// the largest fractions first (ties to the member listed first), so the counts sum to
/// [`BUCKETS`].
fn shares(members: &[(u8, u32)]) -> Vec<usize> {
    let total: u64 = members.iter().map(|&(_, w)| u64::from(w)).sum();
    if total == 0 {
        return vec![0; members.len()];
    }
    let exact: Vec<u64> = members
        .iter()
        .map(|&(_, w)| u64::from(w) * BUCKETS as u64)
        .collect();
    let mut counts: Vec<usize> = exact.iter().map(|e| (e / total) as usize).collect();
    let mut by_remainder: Vec<usize> = (0..members.len()).collect();
    by_remainder.sort_by_key(|&i| std::cmp::Reverse(exact[i] % total));
    let missing = BUCKETS - counts.iter().sum::<usize>();
    for &i in by_remainder.iter().take(missing) {
        counts[i] += 1;
    }
    counts
}

/// The table for `members` (slot, weight > 0), starting from `old`: each bucket keeps its slot
/// while that slot is still a member under its share; the rest go to members below theirs.
/// With no members the table is returned unchanged (the data path finds no live slot anyway).
pub fn rebalance(old: &[u8; BUCKETS], members: &[(u8, u32)]) -> [u8; BUCKETS] {
    if members.is_empty() {
        return *old;
    }
    let targets = shares(members);
    let index_of = |slot: u8| members.iter().position(|&(s, _)| s == slot);
    let mut held = vec![0usize; members.len()];
    let mut table = *old;
    let mut free = Vec::new();
    for (bucket, &slot) in old.iter().enumerate() {
        match index_of(slot) {
            Some(i) if held[i] < targets[i] => held[i] += 1,
            _ => free.push(bucket),
        }
    }
    let mut free = free.into_iter();
    for (i, &(slot, _)) in members.iter().enumerate() {
        for bucket in free.by_ref().take(targets[i] - held[i]) {
            table[bucket] = slot;
        }
    }
    table
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(table: &[u8; BUCKETS], slot: u8) -> usize {
        table.iter().filter(|&&s| s == slot).count()
    }

    #[test]
    fn equal_members_hold_equal_shares() {
        let table = rebalance(&[0; BUCKETS], &[(0, 1), (1, 1), (2, 1)]);
        let counts: Vec<usize> = (0..3).map(|s| count(&table, s)).collect();
        assert_eq!(counts.iter().sum::<usize>(), BUCKETS);
        assert!(counts.iter().all(|&c| c == 85 || c == 86), "{counts:?}");
    }

    #[test]
    fn weights_set_the_shares() {
        let table = rebalance(&[0; BUCKETS], &[(0, 3), (1, 1)]);
        assert_eq!((count(&table, 0), count(&table, 1)), (192, 64));
    }

    #[test]
    fn the_bucket_left_over_goes_to_the_largest_fraction() {
        // 3:1:1 of 256 is 153.6, 51.2, 51.2: the heavy member's .6 takes the 256th bucket.
        let table = rebalance(&[0; BUCKETS], &[(0, 3), (1, 1), (2, 1)]);
        let counts: Vec<usize> = (0..3).map(|s| count(&table, s)).collect();
        assert_eq!(counts, [154, 51, 51]);
    }

    #[test]
    fn removing_a_member_moves_only_its_buckets() {
        let before = rebalance(&[0; BUCKETS], &[(0, 1), (1, 1), (2, 1), (3, 1)]);
        let after = rebalance(&before, &[(0, 1), (1, 1), (3, 1)]);
        for bucket in 0..BUCKETS {
            if before[bucket] != 2 {
                assert_eq!(before[bucket], after[bucket], "bucket {bucket} moved");
            }
        }
        assert_eq!(count(&after, 2), 0);
    }

    #[test]
    fn adding_a_member_moves_only_its_new_share() {
        let before = rebalance(&[0; BUCKETS], &[(0, 1), (1, 1), (2, 1)]);
        let after = rebalance(&before, &[(0, 1), (1, 1), (2, 1), (5, 1)]);
        let moved = (0..BUCKETS).filter(|&b| before[b] != after[b]).count();
        assert_eq!(moved, count(&after, 5));
        assert_eq!(moved, 64);
    }

    #[test]
    fn the_same_members_give_the_same_table() {
        let members = [(0, 2), (1, 1), (4, 1)];
        let once = rebalance(&[7; BUCKETS], &members);
        assert_eq!(rebalance(&once, &members), once);
    }
}
