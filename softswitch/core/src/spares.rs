//! What the per-packet path keeps for the next packet instead of allocating: values behind an
//! `Rc` (a packet's bytes, shared with its copies; its lineage) and plain buffers (slots,
//! deparser output). A switch keeps at most [`KEPT`] of each.

use std::rc::Rc;

/// Spares of each kind a switch keeps: more than a burst of packets in flight at once needs
/// (the engine's batches are 64 frames), few enough not to matter.
pub const KEPT: usize = 64;

/// `Rc`s kept for reuse: [`Shared::wrap`] puts a value into a kept one rather than allocating
/// a new `Rc`.
#[derive(Debug, Default)]
pub(crate) struct Shared<T> {
    kept: Vec<Rc<T>>,
}

impl<T: Default> Shared<T> {
    /// An `Rc` holding `value` (a kept one if there is one), and what the kept one held (the
    /// default if none).
    pub fn wrap(&mut self, value: T) -> (Rc<T>, T) {
        if let Some(mut rc) = self.kept.pop() {
            if let Some(inner) = Rc::get_mut(&mut rc) {
                let old = std::mem::replace(inner, value);
                return (rc, old);
            }
        }
        (Rc::new(value), T::default())
    }

    /// Keeps `rc` for reuse if nothing else holds it; otherwise it is just dropped.
    pub fn keep(&mut self, mut rc: Rc<T>) {
        if self.kept.len() < KEPT && Rc::get_mut(&mut rc).is_some() {
            self.kept.push(rc);
        }
    }
}

/// Buffers kept for reuse, emptied but holding their allocation.
#[derive(Debug, Default)]
pub(crate) struct Buffers<T> {
    kept: Vec<Vec<T>>,
}

impl<T> Buffers<T> {
    /// An empty buffer: a kept one if there is one.
    pub fn take(&mut self) -> Vec<T> {
        self.kept.pop().unwrap_or_default()
    }

    /// Keeps `buffer` (emptied) for reuse, if it holds an allocation.
    pub fn keep(&mut self, mut buffer: Vec<T>) {
        if self.kept.len() < KEPT && buffer.capacity() > 0 {
            buffer.clear();
            self.kept.push(buffer);
        }
    }
}

/// Slot buffers kept for reuse as the last packet left them, so that the next packet clears
/// only the slots it must ([`crate::ir::Program::packet_state`]) rather than all of them.
#[derive(Debug, Default)]
pub(crate) struct Slots {
    kept: Vec<Vec<u128>>,
}

impl Slots {
    /// A buffer of `len` slots, zeroed in the ranges of `zeroed`: a kept one of that length
    /// (its other slots hold what a packet left there) if there is one, else a new one, zeroed
    /// whole.
    pub fn take(&mut self, len: usize, zeroed: &[std::ops::Range<usize>]) -> Vec<u128> {
        match self.kept.pop() {
            Some(mut slots) if slots.len() == len => {
                for r in zeroed {
                    slots[r.clone()].fill(0);
                }
                slots
            }
            Some(mut slots) => {
                slots.clear();
                slots.resize(len, 0);
                slots
            }
            None => vec![0; len],
        }
    }

    /// Keeps `slots` (as they are) for reuse, if it holds an allocation.
    pub fn keep(&mut self, slots: Vec<u128>) {
        if self.kept.len() < KEPT && slots.capacity() > 0 {
            self.kept.push(slots);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A kept `Rc` is reused, and gives back what it held; one still shared is not kept.
    #[test]
    fn shared_values_are_reused_only_when_unshared() {
        let mut spares = Shared::<Vec<u8>>::default();
        let (first, old) = spares.wrap(vec![1, 2, 3]);
        assert!(old.is_empty());
        let at = Rc::as_ptr(&first);
        spares.keep(first);
        let (second, old) = spares.wrap(vec![4]);
        assert_eq!((Rc::as_ptr(&second), old), (at, vec![1, 2, 3]));
        let copy = Rc::clone(&second);
        spares.keep(second);
        let (third, _) = spares.wrap(vec![5]);
        assert_ne!(
            Rc::as_ptr(&third),
            Rc::as_ptr(&copy),
            "a shared Rc is not reused"
        );
    }

    #[test]
    fn buffers_come_back_empty_with_their_allocation() {
        let mut spares = Buffers::default();
        let mut b = Vec::with_capacity(100);
        b.extend_from_slice(&[1u8; 10]);
        spares.keep(b);
        let b = spares.take();
        assert!(b.is_empty() && b.capacity() >= 100);
        assert_eq!(spares.take().capacity(), 0, "none kept: a new, empty one");
    }
}
