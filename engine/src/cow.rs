//! A vector whose copies share their elements until one of them writes: the engine's tables
//! (nodes, rows of paths, sums) are held in these so that publishing a [`Snapshot`](crate::Snapshot)
//! copies no element, and the writer copies only the chunks it changes afterwards.
//!
//! Why our own and not a persistent vector crate (`imbl`, `rpds`): readers index these tables
//! hundreds of thousands of times per query (a placement reads a path for every pair it weighs),
//! and an index here is two dependent loads, where a tree of 64-way nodes walks three levels at
//! 5,000 nodes. The price is paid by the writer, once per published snapshot: the first write
//! after a publish copies the table of chunk pointers (one pointer per [`CHUNK`] elements: 79 at
//! 5,000 nodes, 313 at 20,000) and the chunks it writes to.

use std::fmt;
use std::sync::Arc;

/// Elements per chunk.
pub const CHUNK: usize = 64;

/// A vector of `T` in shared chunks (see the module docs).
#[derive(Clone)]
pub struct CowVec<T> {
    chunks: Arc<Vec<Arc<Vec<T>>>>,
    len: usize,
}

impl<T> Default for CowVec<T> {
    fn default() -> Self {
        Self {
            chunks: Arc::new(Vec::new()),
            len: 0,
        }
    }
}

impl<T: fmt::Debug> fmt::Debug for CowVec<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl<T: PartialEq> PartialEq for CowVec<T> {
    fn eq(&self, other: &Self) -> bool {
        self.len == other.len && self.iter().eq(other.iter())
    }
}

impl<T> CowVec<T> {
    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The element at `i`.
    ///
    /// # Panics
    /// When `i` is out of bounds, as slices do.
    pub fn get(&self, i: usize) -> &T {
        assert!(i < self.len, "index {i} out of bounds of {}", self.len);
        &self.chunks[i / CHUNK][i % CHUNK]
    }

    /// The elements in order.
    pub fn iter(&self) -> Iter<'_, T> {
        Iter {
            chunks: &self.chunks,
            next: 0,
            len: self.len,
        }
    }
}

impl<T: Clone> CowVec<T> {
    /// The element at `i`, to change: its chunk is copied first if a snapshot shares it.
    pub fn get_mut(&mut self, i: usize) -> &mut T {
        assert!(i < self.len, "index {i} out of bounds of {}", self.len);
        let chunks = Arc::make_mut(&mut self.chunks);
        &mut Arc::make_mut(&mut chunks[i / CHUNK])[i % CHUNK]
    }

    /// Appends an element.
    pub fn push(&mut self, value: T) {
        let chunks = Arc::make_mut(&mut self.chunks);
        match chunks.last_mut() {
            Some(last) if last.len() < CHUNK => Arc::make_mut(last).push(value),
            _ => {
                let mut chunk = Vec::with_capacity(CHUNK);
                chunk.push(value);
                chunks.push(Arc::new(chunk));
            }
        }
        self.len += 1;
    }
}

impl<T: Clone> FromIterator<T> for CowVec<T> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v = Self::default();
        for x in iter {
            v.push(x);
        }
        v
    }
}

/// The elements of a [`CowVec`] in order.
#[derive(Debug)]
pub struct Iter<'a, T> {
    chunks: &'a [Arc<Vec<T>>],
    next: usize,
    len: usize,
}

impl<T> Clone for Iter<'_, T> {
    fn clone(&self) -> Self {
        Self { ..*self }
    }
}

impl<'a, T> Iterator for Iter<'a, T> {
    type Item = &'a T;

    fn next(&mut self) -> Option<&'a T> {
        if self.next >= self.len {
            return None;
        }
        let item = &self.chunks[self.next / CHUNK][self.next % CHUNK];
        self.next += 1;
        Some(item)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.len - self.next;
        (left, Some(left))
    }
}

impl<T> ExactSizeIterator for Iter<'_, T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_share_until_written_and_then_differ_only_where_written() {
        let mut a: CowVec<u32> = (0..200).collect();
        let b = a.clone();
        *a.get_mut(130) = 7;
        a.push(200);
        assert_eq!(*b.get(130), 130, "the copy keeps what it saw");
        assert_eq!(*a.get(130), 7);
        assert_eq!((a.len(), b.len()), (201, 200));
        // Chunks not written are the same allocation in both.
        assert!(Arc::ptr_eq(&a.chunks[0], &b.chunks[0]));
        assert!(!Arc::ptr_eq(&a.chunks[2], &b.chunks[2]));
        assert_eq!(a.iter().len(), 201);
        assert_eq!(a.iter().copied().filter(|v| *v == 7).count(), 2);
    }
}
