//! Crafted checkpoints of at most 1 MB (issue 45; `stemflow_convert::testing::crafted`) are
//! refused within the read's memory budget: this binary counts every byte its thread allocates
//! (a counting global allocator) and checks the peak against the budget. Real checkpoints, and
//! a real one deflated by another zip tool, still load. Never downloads.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::PathBuf;

use stemflow_convert::testing::crafted::{crafted_checkpoints, MAX_CRAFTED_BYTES};
use stemflow_convert::testing::{write_zip, ZipMethod};
use stemflow_convert::torch::{load_numpy_dict, load_torch_checkpoint, ReadBudget};
use stemflow_convert::zip::ZipArchive;

/// The system allocator, counting the bytes each thread holds and the most it held.
struct CountingAllocator;

thread_local! {
    /// Bytes this thread allocated and has not freed.
    static LIVE_BYTES: Cell<usize> = const { Cell::new(0) };
    /// Most `LIVE_BYTES` reached since [`reset_peak`].
    static PEAK_BYTES: Cell<usize> = const { Cell::new(0) };
}

fn count(grow: usize, shrink: usize) {
    // `try_with`: the thread's slots may be gone while it exits.
    let _ = LIVE_BYTES.try_with(|live| {
        let now = (live.get() + grow).saturating_sub(shrink);
        live.set(now);
        let _ = PEAK_BYTES.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

// SAFETY: every call forwards to `System` with the caller's arguments; the counting touches
// only this thread's cells, which neither allocate nor unwind.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        // SAFETY: the caller's contract for `alloc` is `System.alloc`'s.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        // SAFETY: as for `alloc`.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size());
        // SAFETY: `ptr` came from this allocator, that is from `System`, with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size, layout.size());
        // SAFETY: as for `dealloc`; `new_size` is the caller's.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static ALLOCATOR: CountingAllocator = CountingAllocator;

/// Starts a measurement: the peak becomes what the thread holds now.
fn reset_peak() -> usize {
    let live = LIVE_BYTES.with(Cell::get);
    PEAK_BYTES.with(|peak| peak.set(live));
    live
}

/// The most the thread held since [`reset_peak`], above what it held then.
fn peak_since(base: usize) -> usize {
    PEAK_BYTES.with(Cell::get).saturating_sub(base)
}

#[test]
fn crafted_checkpoints_are_refused_within_the_budget() {
    let crafted = crafted_checkpoints();
    let mut report = Vec::new();
    for file in &crafted {
        assert!(
            file.bytes.len() <= MAX_CRAFTED_BYTES,
            "{} is {} bytes",
            file.name,
            file.bytes.len()
        );
        let limit = ReadBudget::for_file(file.bytes.len()).limit_bytes() as usize;
        let base = reset_peak();
        let result = load_torch_checkpoint(&file.bytes).map(|checkpoint| checkpoint.tensors.len());
        let peak = peak_since(base);
        let message = match result {
            Ok(tensors) => panic!(
                "{} ({}) loaded, with {tensors} tensors",
                file.name, file.attack
            ),
            Err(error) => error.to_string(),
        };
        assert!(
            message.contains("would allocate more than"),
            "{} was refused for another reason: {message}",
            file.name
        );
        // The budget counts what is stored, not the slack of a growing Vec (up to as much
        // again) nor what the zip crate and the allocator keep: the peak stays below 1.5×.
        assert!(
            peak <= limit + limit / 2,
            "{}: {peak} bytes allocated, budget {limit}",
            file.name
        );
        report.push(format!(
            "{:>22}: {:>7} bytes, peak {:>5.1} MiB of a {:.1} MiB budget",
            file.name,
            file.bytes.len(),
            peak as f64 / f64::from(1 << 20),
            limit as f64 / f64::from(1 << 20)
        ));
    }
    println!("{}", report.join("\n"));
}

fn fixture(name: &str) -> Vec<u8> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/torch")
        .join(name);
    std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn a_real_checkpoint_deflated_by_another_zip_tool_still_loads() {
    let stored = fixture("demucs_like_zip.th");
    let archive = ZipArchive::parse(&stored).unwrap();
    let entries: Vec<(String, Vec<u8>)> = archive
        .entries()
        .iter()
        .map(|entry| {
            let data = archive.read(entry, u64::MAX).unwrap().into_owned();
            (entry.name.clone(), data)
        })
        .collect();
    let deflated = write_zip(
        &entries
            .iter()
            .map(|(name, data)| (name.as_str(), data.as_slice(), ZipMethod::Deflated))
            .collect::<Vec<_>>(),
    );
    let from_stored = load_torch_checkpoint(&stored).unwrap();
    let from_deflated = load_torch_checkpoint(&deflated).unwrap();
    assert_eq!(from_deflated.root, from_stored.root);
    assert_eq!(from_deflated.tensors.len(), from_stored.tensors.len());
    for (a, b) in from_deflated.tensors.iter().zip(&from_stored.tensors) {
        assert_eq!(
            (a.dtype, &a.shape, &a.data[..]),
            (b.dtype, &b.shape, &b.data[..])
        );
    }
}

#[test]
fn reading_a_real_checkpoint_allocates_little_beyond_the_file() {
    // Stored storages are borrowed: reading allocates the tree and the gathered views only.
    for name in ["demucs_like_zip.th", "demucs_like_legacy.th"] {
        let bytes = fixture(name);
        let budget = ReadBudget::for_file(bytes.len());
        let checkpoint =
            stemflow_convert::torch::load_torch_checkpoint_within(&bytes, &budget).unwrap();
        assert!(!checkpoint.tensors.is_empty());
        assert!(
            budget.used_bytes() < bytes.len() as u64 + (1 << 20),
            "{name}: {} bytes charged for a {}-byte file",
            budget.used_bytes(),
            bytes.len()
        );
    }
}

#[test]
fn a_numpy_dict_shares_the_same_bound() {
    // The crafted shared string as a Spleeter-style pickle (no zip, no torch).
    let crafted = crafted_checkpoints();
    let shared = crafted.iter().find(|c| c.name == "shared-string").unwrap();
    let archive = ZipArchive::parse(&shared.bytes).unwrap();
    let pickle = archive.read(&archive.entries()[0], u64::MAX).unwrap();
    let base = reset_peak();
    let error = load_numpy_dict(&pickle).unwrap_err().to_string();
    let peak = peak_since(base);
    // The numpy reader refuses anything but a dict before building values.
    assert!(error.contains("not a dict of numpy arrays"), "{error}");
    assert!(peak < 16 << 20, "{peak} bytes");
}
