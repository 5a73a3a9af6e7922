//! A small deterministic generator (xorshift64) for the fuzz tests of the readers.

/// xorshift64: the same sequence for the same seed, everywhere.
pub(crate) struct XorShift(pub(crate) u64);

impl XorShift {
    /// The next value.
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}
