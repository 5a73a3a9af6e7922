//! The fuzzer's random numbers: xoshiro256** seeded through SplitMix64, so a seed names the same
//! sequence of moves on every machine and in every build.

/// A small, fast, seedable generator (not for cryptography).
#[derive(Debug, Clone)]
pub struct Rng {
    state: [u64; 4],
}

impl Rng {
    /// The generator for `seed`.
    pub fn new(seed: u64) -> Self {
        let mut mix = seed;
        let mut next = || {
            mix = mix.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = mix;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        };
        Self {
            state: [next(), next(), next(), next()],
        }
    }

    /// An independent generator for a sub-task (another thread, another instance), drawn from
    /// this one, so adding draws to the sub-task does not shift this sequence.
    pub fn fork(&mut self) -> Self {
        Self::new(self.next_u64())
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        let s = &mut self.state;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `low..=high` (`low` if `high < low`).
    pub fn range_u64(&mut self, low: u64, high: u64) -> u64 {
        if high <= low {
            return low;
        }
        let span = high - low + 1;
        if span == 0 {
            return self.next_u64();
        }
        low + self.next_u64() % span
    }

    /// Uniform in `low..=high`.
    pub fn range_usize(&mut self, low: usize, high: usize) -> usize {
        self.range_u64(low as u64, high as u64) as usize
    }

    /// Uniform in `[low, high)`.
    pub fn range_f64(&mut self, low: f64, high: f64) -> f64 {
        low + (high - low) * self.unit()
    }

    /// One element of a non-empty slice.
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.range_usize(0, items.len() - 1)]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_names_one_sequence() {
        let a: Vec<u64> = (0..8)
            .map({
                let mut rng = Rng::new(42);
                move |_| rng.next_u64()
            })
            .collect();
        let b: Vec<u64> = (0..8)
            .map({
                let mut rng = Rng::new(42);
                move |_| rng.next_u64()
            })
            .collect();
        let c: Vec<u64> = (0..8)
            .map({
                let mut rng = Rng::new(43);
                move |_| rng.next_u64()
            })
            .collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn ranges_stay_inside_their_bounds() {
        let mut rng = Rng::new(7);
        for _ in 0..10_000 {
            let x = rng.range_usize(3, 9);
            assert!((3..=9).contains(&x));
            let u = rng.unit();
            assert!((0.0..1.0).contains(&u));
        }
        assert_eq!(rng.range_usize(5, 5), 5);
        assert_eq!(rng.range_usize(5, 2), 5);
    }
}
