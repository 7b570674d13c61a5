//! Frames a port received together: one buffer holds their bytes, handed to the engine in one
//! event and sent back to its port empty. A port owns a fixed number of batches ([`BatchPool`]),
//! so receiving allocates nothing per frame nor, once its batches exist, per batch; and when the
//! engine holds them all, the port stops reading and frames wait (or are dropped) in the
//! kernel's ring, as on a NIC whose host is behind.

use std::sync::mpsc;
use std::time::Duration;

/// Most frames in a batch.
pub const MAX_FRAMES: usize = 64;

/// Bytes a batch reserves when it is made: room for [`MAX_FRAMES`] frames of a 1500-byte MTU.
const RESERVED_BYTES: usize = MAX_FRAMES * 1536;

/// Frames received on one port, back to back.
pub struct FrameBatch {
    bytes: Vec<u8>,
    /// Where each frame ends in `bytes`.
    ends: Vec<usize>,
    /// Where the batch goes back to when the engine is done with it.
    home: mpsc::Sender<FrameBatch>,
}

impl FrameBatch {
    /// Appends a frame made of `parts`, one after the other.
    pub fn push(&mut self, parts: &[&[u8]]) {
        for part in parts {
            self.bytes.extend_from_slice(part);
        }
        self.ends.push(self.bytes.len());
    }

    /// The number of frames.
    pub fn len(&self) -> usize {
        self.ends.len()
    }

    /// Whether there is no frame.
    pub fn is_empty(&self) -> bool {
        self.ends.is_empty()
    }

    /// Whether no frame more fits.
    pub fn is_full(&self) -> bool {
        self.ends.len() >= MAX_FRAMES
    }

    /// The frames, in the order they were pushed.
    pub fn frames(&self) -> impl Iterator<Item = &[u8]> {
        let starts = std::iter::once(0).chain(self.ends.iter().copied());
        starts
            .zip(self.ends.iter().copied())
            .map(|(start, end)| &self.bytes[start..end])
    }

    /// Forgets the frames.
    pub fn clear(&mut self) {
        self.bytes.clear();
        self.ends.clear();
    }

    /// Empties the batch and gives it back to its port (dropped if the port has stopped).
    pub fn recycle(mut self) {
        self.clear();
        let home = self.home.clone();
        let _ = home.send(self);
    }
}

/// A port's batches that the engine does not hold.
pub struct BatchPool {
    free: mpsc::Receiver<FrameBatch>,
}

impl BatchPool {
    /// A pool of `count` empty batches.
    pub fn new(count: usize) -> BatchPool {
        let (home, free) = mpsc::channel();
        for _ in 0..count {
            let _ = home.send(FrameBatch {
                bytes: Vec::with_capacity(RESERVED_BYTES),
                ends: Vec::with_capacity(MAX_FRAMES),
                home: home.clone(),
            });
        }
        BatchPool { free }
    }

    /// An empty batch, waiting up to `timeout` for the engine to give one back; `None` if it
    /// holds them all still.
    pub fn take(&self, timeout: Duration) -> Option<FrameBatch> {
        self.free.recv_timeout(timeout).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_come_out_as_pushed_and_the_batch_comes_home() {
        let pool = BatchPool::new(1);
        let mut batch = pool.take(Duration::ZERO).unwrap();
        assert!(pool.take(Duration::ZERO).is_none());
        batch.push(&[b"ab", b"c"]);
        batch.push(&[]);
        batch.push(&[b"defg"]);
        let frames: Vec<&[u8]> = batch.frames().collect();
        assert_eq!(frames, [&b"abc"[..], b"", b"defg"]);
        assert_eq!(batch.len(), 3);
        batch.recycle();
        let batch = pool.take(Duration::ZERO).unwrap();
        assert!(batch.is_empty());
    }
}
