//! The experiments' one source of randomness: a seed is a lab and a placement, the same on every
//! machine and every run. (splitmix64, written here rather than taken from `rand`: the labs of
//! the reports in docs/ were drawn with it, and a rerun must draw the same ones.)

/// A small deterministic generator (splitmix64), so that a seed is a lab and a placement.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// From a seed.
    pub fn new(seed: u64) -> Self {
        Self(seed ^ 0x005e_ed0f_2a6e)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in 0..n.
    pub fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// Shuffles in place.
    pub fn shuffle<T>(&mut self, items: &mut [T]) {
        for i in (1..items.len()).rev() {
            items.swap(i, self.below(i + 1));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_draws_the_same_every_time_and_shuffles_are_permutations() {
        let draw = |seed| {
            let mut rng = Rng::new(seed);
            let mut items = [1, 2, 3, 4, 5, 6];
            rng.shuffle(&mut items);
            (items, rng.below(1000))
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
        let (mut items, below) = draw(7);
        items.sort_unstable();
        assert_eq!(items, [1, 2, 3, 4, 5, 6]);
        assert!(below < 1000);
    }
}
