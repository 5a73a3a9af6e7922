//! Peak memory of this process (Linux: `VmHWM` from `/proc/self/status`).

/// The peak resident set size of this process in bytes since it started or since the last
/// [`reset_peak_rss`]; `None` where the system does not say (outside Linux).
pub fn peak_rss_bytes() -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kib: u64 = line
        .trim_start_matches("VmHWM:")
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()?;
    Some(kib * 1024)
}

/// Resets the peak to the current resident set size (Linux 4.0+: writes `5` to
/// `/proc/self/clear_refs`). Returns whether it worked; if not, peaks cover the whole process.
pub fn reset_peak_rss() -> bool {
    std::fs::write("/proc/self/clear_refs", "5").is_ok()
}

/// "123 MB", or "n/a".
pub fn describe_bytes(bytes: Option<u64>) -> String {
    match bytes {
        Some(bytes) => format!("{:.0} MB", bytes as f64 / 1e6),
        None => "n/a".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn peak_grows_with_a_large_allocation_and_resets() {
        let before = peak_rss_bytes().expect("Linux reports VmHWM");
        let block = vec![1u8; 64 << 20];
        std::hint::black_box(&block);
        let during = peak_rss_bytes().unwrap();
        assert!(during >= before + (60 << 20), "{before} → {during}");
        drop(block);
        if reset_peak_rss() {
            assert!(peak_rss_bytes().unwrap() < during);
        }
    }
}
