//! Digest lists as the specification's DigestEntry section has them: the digest messages of a
//! configured digest are buffered until `max_list_size` distinct ones are there or the first has
//! waited `max_timeout_ns` (0: at once), then sent as one DigestList; a message sent and not
//! yet acknowledged (DigestListAck) nor older than `ack_timeout_ns` is in the cache and is not
//! buffered or sent again.
//!
//! The settings come from the controller and the messages from traffic, so together they could
//! make the switch hold without end (a long `ack_timeout_ns` and a stream of new data): at most
//! [`MAX_DIGEST_MESSAGES`] messages are held, buffered and cached together; past it the cache
//! drops what has timed out, and a new message that still does not fit is dropped and counted.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use p4runtime::p4::v1 as p4v1;

/// Digest messages a pipeline holds at once, buffered and cached together.
pub const MAX_DIGEST_MESSAGES: usize = 1 << 16;

/// The digest settings, buffers and cache of a pipeline.
#[derive(Debug)]
pub struct Digests {
    /// Settings as written, by digest id: a digest is streamed once it has one.
    pub entries: BTreeMap<u32, p4v1::DigestEntry>,
    next_list_id: u64,
    /// Messages sent, by digest id and data: the list that carried each and when.
    cache: HashMap<(u32, Vec<u128>), (u64, Instant)>,
    /// Messages waiting to be sent, by digest id: since when, and each one's data.
    buffers: BTreeMap<u32, (Instant, Vec<Message>)>,
    /// The digest id and data of every buffered message.
    buffered: HashSet<(u32, Vec<u128>)>,
    /// Messages dropped because [`MAX_DIGEST_MESSAGES`] were held.
    pub dropped: u64,
}

/// A digest message: the values the pipeline sent, and as P4Data.
type Message = (Vec<u128>, p4v1::P4Data);

impl Default for Digests {
    fn default() -> Self {
        Digests {
            entries: BTreeMap::new(),
            next_list_id: 1,
            cache: HashMap::new(),
            buffers: BTreeMap::new(),
            buffered: HashSet::new(),
            dropped: 0,
        }
    }
}

fn nanos(ns: i64) -> Duration {
    Duration::from_nanos(ns.max(0) as u64)
}

impl Digests {
    fn config(&self, digest_id: u32) -> p4v1::digest_entry::Config {
        self.entries
            .get(&digest_id)
            .and_then(|e| e.config)
            .unwrap_or_default()
    }

    /// A digest message the pipeline sent: buffered unless the digest is not configured or the
    /// same data is cached or already buffered. `data` makes its P4Data.
    pub fn add(
        &mut self,
        digest_id: u32,
        values: Vec<u128>,
        data: impl FnOnce(&[u128]) -> p4v1::P4Data,
        now: Instant,
    ) {
        if !self.entries.contains_key(&digest_id) {
            return;
        }
        let ack_timeout = nanos(self.config(digest_id).ack_timeout_ns);
        let key = (digest_id, values);
        if let Some((_, at)) = self.cache.get(&key) {
            if now.duration_since(*at) < ack_timeout {
                return;
            }
            self.cache.remove(&key);
        }
        if self.buffered.contains(&key) {
            return;
        }
        if self.cache.len() + self.buffered.len() >= MAX_DIGEST_MESSAGES {
            self.forget_timed_out(now);
            if self.cache.len() + self.buffered.len() >= MAX_DIGEST_MESSAGES {
                self.dropped += 1;
                return;
            }
        }
        let message = data(&key.1);
        let (_, buffer) = self.buffers.entry(digest_id).or_insert((now, Vec::new()));
        buffer.push((key.1.clone(), message));
        self.buffered.insert(key);
    }

    /// Drops the cached messages whose acknowledgement timed out.
    fn forget_timed_out(&mut self, now: Instant) {
        let timeouts: HashMap<u32, Duration> = self
            .entries
            .keys()
            .map(|&id| (id, nanos(self.config(id).ack_timeout_ns)))
            .collect();
        self.cache.retain(|(id, _), (_, at)| {
            timeouts
                .get(id)
                .is_some_and(|t| now.duration_since(*at) < *t)
        });
    }

    /// The lists to send at `now`: every buffer that is full or has waited long enough (each
    /// list at most `max_list_size` long); their messages go into the cache.
    pub fn due(&mut self, now: Instant) -> Vec<p4v1::DigestList> {
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as i64);
        let mut lists = Vec::new();
        let ids: Vec<u32> = self.buffers.keys().copied().collect();
        for digest_id in ids {
            let config = self.config(digest_id);
            let size = usize::try_from(config.max_list_size).unwrap_or(0);
            let (since, buffer) = &self.buffers[&digest_id];
            let full = size > 0 && buffer.len() >= size;
            if !full && now.duration_since(*since) < nanos(config.max_timeout_ns) {
                continue;
            }
            let (_, messages) = self.buffers.remove(&digest_id).expect("listed above");
            let chunk = if size == 0 { messages.len() } else { size };
            let mut messages = messages.into_iter().peekable();
            while messages.peek().is_some() {
                let list_id = self.next_list_id;
                self.next_list_id += 1;
                let mut data = Vec::new();
                for (values, message) in messages.by_ref().take(chunk) {
                    self.buffered.remove(&(digest_id, values.clone()));
                    if config.ack_timeout_ns > 0 {
                        self.cache.insert((digest_id, values), (list_id, now));
                    }
                    data.push(message);
                }
                lists.push(p4v1::DigestList {
                    digest_id,
                    list_id,
                    data,
                    timestamp,
                });
            }
        }
        lists
    }

    /// When the next buffer will be due, if any waits.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.buffers
            .iter()
            .map(|(id, (since, _))| *since + nanos(self.config(*id).max_timeout_ns))
            .min()
    }

    /// A DigestListAck: the list's messages may be sent again.
    pub fn acknowledge(&mut self, ack: &p4v1::DigestListAck) {
        self.cache
            .retain(|(id, _), (list, _)| (*id, *list) != (ack.digest_id, ack.list_id));
    }

    /// A digest's settings were deleted: its buffer and cache go.
    pub fn forget(&mut self, digest_id: u32) {
        self.entries.remove(&digest_id);
        self.buffers.remove(&digest_id);
        self.buffered.retain(|(id, _)| *id != digest_id);
        self.cache.retain(|(id, _), _| *id != digest_id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(values: &[u128]) -> p4v1::P4Data {
        p4v1::P4Data {
            data: Some(p4v1::p4_data::Data::Bitstring(vec![values[0] as u8])),
        }
    }

    fn configured(max_timeout_ns: i64, max_list_size: i32, ack_timeout_ns: i64) -> Digests {
        let mut d = Digests::default();
        d.entries.insert(
            5,
            p4v1::DigestEntry {
                digest_id: 5,
                config: Some(p4v1::digest_entry::Config {
                    max_timeout_ns,
                    max_list_size,
                    ack_timeout_ns,
                }),
            },
        );
        d
    }

    #[test]
    fn the_messages_held_are_bounded() {
        // Lists of the largest size, waiting a minute, acknowledged after an hour.
        let mut d = configured(60_000_000_000, i32::MAX, 3_600_000_000_000);
        let now = Instant::now();
        for v in 0..MAX_DIGEST_MESSAGES as u128 + 10 {
            d.add(5, vec![v], data, now);
        }
        assert_eq!(d.dropped, 10);
        // Once sent, they wait in the cache; new data is dropped until they time out.
        let lists = d.due(now + Duration::from_secs(61));
        let sent: usize = lists.iter().map(|l| l.data.len()).sum();
        assert_eq!(sent, MAX_DIGEST_MESSAGES);
        d.add(5, vec![u128::MAX], data, now + Duration::from_secs(62));
        assert_eq!(d.dropped, 11);
        let later = now + Duration::from_secs(3700);
        d.add(5, vec![u128::MAX], data, later);
        assert_eq!(d.dropped, 11, "the timed-out cache made room");
    }

    #[test]
    fn lists_fill_up_to_their_size_then_go() {
        let mut d = configured(60_000_000_000, 2, 0);
        let now = Instant::now();
        d.add(5, vec![1], data, now);
        assert!(d.due(now).is_empty(), "one of two");
        d.add(5, vec![1], data, now);
        assert!(
            d.due(now).is_empty(),
            "a duplicate in the buffer is not counted"
        );
        d.add(5, vec![2], data, now);
        let lists = d.due(now);
        assert_eq!(lists.len(), 1);
        assert_eq!(lists[0].data, [data(&[1]), data(&[2])]);
        assert_eq!(d.next_deadline(), None);
    }

    #[test]
    fn a_buffer_goes_when_its_first_message_has_waited_max_timeout() {
        let mut d = configured(1_000, 100, 0);
        let now = Instant::now();
        d.add(5, vec![1], data, now);
        assert_eq!(d.next_deadline(), Some(now + Duration::from_nanos(1_000)));
        assert!(d.due(now).is_empty());
        assert_eq!(d.due(now + Duration::from_micros(1)).len(), 1);
    }

    #[test]
    fn the_cache_holds_sent_messages_until_acknowledged_or_timed_out() {
        let mut d = configured(0, 1, 1_000_000);
        let now = Instant::now();
        d.add(5, vec![1], data, now);
        let sent = d.due(now);
        d.add(5, vec![1], data, now);
        assert!(d.due(now).is_empty(), "cached");
        d.acknowledge(&p4v1::DigestListAck {
            digest_id: 5,
            list_id: sent[0].list_id,
        });
        d.add(5, vec![1], data, now);
        assert_eq!(d.due(now).len(), 1, "acknowledged");
        let later = now + Duration::from_millis(2);
        d.add(5, vec![1], data, later);
        assert_eq!(d.due(later).len(), 1, "timed out");
        d.add(9, vec![1], data, now);
        assert!(d.due(later).is_empty(), "not configured");
    }
}
