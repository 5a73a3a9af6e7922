//! [`ReadBudget`]: one memory budget for everything a read of one checkpoint file allocates
//! beyond the file's own bytes (the pickle machine, the value tree, inflated zip entries,
//! gathered views), so that a small crafted file cannot make Stemflow allocate gigabytes.
//!
//! Each part of a read is bounded on its own (stack depth, memo entries, a tensor inside its
//! storage), but sharing lets a small file ask for a lot: a memoised string referenced many
//! times is copied each time it lands in the value tree, each strided view of one storage
//! gathers its own copy, a deflated storage or pickle inflates up to ~1,000 times its size, and
//! a list costs an item of 32 bytes per 1-byte opcode. Every one of these is charged here
//! before it is allocated, and the read fails (a [`ConvertError`](crate::error::ConvertError)
//! saying what needed how much) once the total would pass the budget.
//!
//! The budget follows from the file's size: a checkpoint torch wrote stores its tensors
//! uncompressed in the file, so its storages are read in place, and what a read allocates is
//! its pickle's values plus, at most, one gathered copy of the tensors the pickle declares as
//! strided views, both smaller than the file. [`BUDGET_FLOOR_BYTES`] plus
//! [`BUDGET_BYTES_PER_FILE_BYTE`] times the file's size leaves room for a file whose entries
//! were deflated by another zip tool (float weights deflate by about 10%).

use std::cell::Cell;

/// Bytes every read may allocate, whatever the file's size (a small checkpoint's pickle,
/// values and views need far less).
pub const BUDGET_FLOOR_BYTES: u64 = 64 << 20;
/// Bytes a read may allocate per byte of the file, on top of [`BUDGET_FLOOR_BYTES`].
pub const BUDGET_BYTES_PER_FILE_BYTE: u64 = 4;

/// The memory one read of one file may allocate, and what it has charged so far.
///
/// Shared by reference between the pickle machine, the value tree and the storage reader of
/// one read (a legacy checkpoint's five pickles charge the same budget). Not thread-safe (a
/// read runs on one thread).
#[derive(Debug)]
pub struct ReadBudget {
    /// Most bytes the read may charge.
    limit_bytes: u64,
    /// Size of the file being read, for the refusal.
    file_len_bytes: u64,
    /// Bytes charged so far.
    used_bytes: Cell<u64>,
}

impl ReadBudget {
    /// The budget for reading a file of `file_len_bytes` bytes: [`BUDGET_FLOOR_BYTES`] +
    /// [`BUDGET_BYTES_PER_FILE_BYTE`] × `file_len_bytes`. Realtime-safe.
    pub fn for_file(file_len_bytes: usize) -> Self {
        let file_len_bytes = file_len_bytes as u64;
        Self::with_limit(
            BUDGET_FLOOR_BYTES
                .saturating_add(file_len_bytes.saturating_mul(BUDGET_BYTES_PER_FILE_BYTE)),
            file_len_bytes,
        )
    }

    /// A budget of exactly `limit_bytes` for a file of `file_len_bytes` (tests). Realtime-safe.
    pub fn with_limit(limit_bytes: u64, file_len_bytes: u64) -> Self {
        Self {
            limit_bytes,
            file_len_bytes,
            used_bytes: Cell::new(0),
        }
    }

    /// Charges `bytes` for `what` (e.g. "a gathered view of tensor 3"), or refuses, saying
    /// how much the read would need and what it is allowed. Nothing is charged on a refusal.
    /// Not realtime-safe: the refusal allocates its message.
    pub fn charge(&self, bytes: u64, what: &str) -> Result<(), String> {
        let used = self.used_bytes.get();
        match used.checked_add(bytes) {
            Some(total) if total <= self.limit_bytes => {
                self.used_bytes.set(total);
                Ok(())
            }
            _ => Err(format!(
                "reading this file would allocate more than the {} allowed for a file of {} \
                 ({} already, and {what} needs {} more): a checkpoint torch saved never needs \
                 that much, so this file is damaged or crafted to exhaust memory",
                mib(self.limit_bytes),
                mib(self.file_len_bytes),
                mib(used),
                mib(bytes)
            )),
        }
    }

    /// Charges `count` things of `size_bytes` each (saturating). Not realtime-safe: see
    /// [`charge`](Self::charge).
    pub fn charge_each(&self, count: usize, size_bytes: usize, what: &str) -> Result<(), String> {
        self.charge((count as u64).saturating_mul(size_bytes as u64), what)
    }

    /// Bytes charged so far. Realtime-safe.
    pub fn used_bytes(&self) -> u64 {
        self.used_bytes.get()
    }

    /// Bytes that may still be charged. Realtime-safe.
    pub fn remaining_bytes(&self) -> u64 {
        self.limit_bytes - self.used_bytes.get()
    }

    /// The limit. Realtime-safe.
    pub fn limit_bytes(&self) -> u64 {
        self.limit_bytes
    }
}

/// `bytes` in MiB with one decimal (or in bytes below 1 MiB), for messages.
fn mib(bytes: u64) -> String {
    if bytes < 1 << 20 {
        format!("{bytes} bytes")
    } else {
        format!("{:.1} MiB", bytes as f64 / f64::from(1u32 << 20))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_add_up_to_the_limit_and_no_further() {
        let budget = ReadBudget::with_limit(100, 10);
        budget.charge(60, "a").unwrap();
        budget.charge_each(4, 10, "b").unwrap();
        assert_eq!(budget.remaining_bytes(), 0);
        let error = budget.charge(1, "one more byte").unwrap_err();
        assert!(
            error.contains("one more byte needs 1 bytes more"),
            "{error}"
        );
        assert!(
            error.contains("100 bytes allowed for a file of 10 bytes"),
            "{error}"
        );
        // A refusal charges nothing; an overflowing charge is refused, not wrapped.
        assert_eq!(budget.used_bytes(), 100);
        let budget = ReadBudget::with_limit(u64::MAX, 0);
        budget.charge(u64::MAX - 1, "a").unwrap();
        assert!(budget.charge(2, "b").is_err());
        assert!(budget.charge_each(usize::MAX, usize::MAX, "c").is_err());
    }

    #[test]
    fn the_limit_follows_the_file_size() {
        let small = ReadBudget::for_file(0);
        assert_eq!(small.limit_bytes(), BUDGET_FLOOR_BYTES);
        let one_mib = ReadBudget::for_file(1 << 20);
        assert_eq!(one_mib.limit_bytes(), BUDGET_FLOOR_BYTES + (4 << 20));
        let error = one_mib.charge(1 << 30, "a deflated storage").unwrap_err();
        assert!(
            error.contains("68.0 MiB allowed for a file of 1.0 MiB"),
            "{error}"
        );
        assert!(
            error.contains("a deflated storage needs 1024.0 MiB more"),
            "{error}"
        );
    }
}
