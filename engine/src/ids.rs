//! Dense ids of nodes and zones inside one [`Topology`](crate::Topology), and the map keyed by
//! pairs of them.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};

/// Dense index of a node inside one [`Topology`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct NodeId(pub u32);

/// Dense index of a zone inside one [`Topology`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ZoneId(pub u32);

/// A fast hasher for the dense `(NodeId, NodeId)` and `(ZoneId, ZoneId)` keys (Fibonacci hashing;
/// the keys are small integers chosen by us, not by an attacker).
#[derive(Debug, Default, Clone, Copy)]
pub struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(*b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u32(&mut self, v: u32) {
        self.0 = (self.0.rotate_left(32) ^ u64::from(v)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
}

/// A `HashMap` keyed by dense id pairs.
pub type PairMap<K, V> = HashMap<K, V, BuildHasherDefault<PairHasher>>;
