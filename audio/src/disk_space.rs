//! Free space on the disk a run writes to, so that `stemflow` stops before the disk is full (a
//! pipe that never ends, an input too long for the disk) instead of filling it for everything
//! else on the machine. A run leaves [`reserve_bytes`] free: `STEMFLOW_MIN_FREE_DISK_MB`, 256 MB
//! unless set.

use std::path::{Path, PathBuf};

/// The environment variable that sets the space a run leaves free, in megabytes.
pub const MIN_FREE_ENV: &str = "STEMFLOW_MIN_FREE_DISK_MB";
/// What a run leaves free unless [`MIN_FREE_ENV`] says otherwise.
const DEFAULT_MIN_FREE_MB: u64 = 256;
/// How much is written between two looks at the free space.
const CHECK_EVERY_BYTES: u64 = 16 << 20;

/// The space a run leaves free on the disks it writes to, in bytes.
pub fn reserve_bytes() -> u64 {
    let megabytes = std::env::var(MIN_FREE_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .unwrap_or(DEFAULT_MIN_FREE_MB);
    megabytes.saturating_mul(1 << 20)
}

/// Bytes free for this user on the disk holding `path` (an existing file or folder); `None`
/// where that cannot be told.
pub fn free_bytes(path: &Path) -> Option<u64> {
    #[cfg(unix)]
    {
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
        // SAFETY: `statvfs` fills the zeroed struct for a NUL-terminated path; nothing is kept.
        let stats = unsafe {
            let mut stats: libc::statvfs = std::mem::zeroed();
            if libc::statvfs(path.as_ptr(), &mut stats) != 0 {
                return None;
            }
            stats
        };
        #[allow(clippy::unnecessary_cast)]
        Some((stats.f_bavail as u64).saturating_mul(stats.f_frsize as u64))
    }
    #[cfg(windows)]
    {
        use std::os::windows::ffi::OsStrExt;
        let wide: Vec<u16> = path.as_os_str().encode_wide().chain([0]).collect();
        let mut available: u64 = 0;
        // SAFETY: a NUL-terminated wide path; the output pointer is a live local, the others
        // are allowed to be null.
        let ok = unsafe {
            windows_sys::Win32::Storage::FileSystem::GetDiskFreeSpaceExW(
                wide.as_ptr(),
                &mut available,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
            )
        };
        (ok != 0).then_some(available)
    }
    #[cfg(not(any(unix, windows)))]
    {
        let _ = path;
        None
    }
}

/// Watches the disk holding one folder while a run writes to it.
#[derive(Debug)]
pub struct DiskGuard {
    folder: PathBuf,
    reserve_bytes: u64,
    written_since_check: u64,
}

impl DiskGuard {
    /// A guard for writes into `folder` (which exists). Fails at once when the disk already has
    /// less than the reserve free.
    pub fn new(folder: &Path) -> Result<Self, String> {
        let guard = Self {
            folder: folder.to_path_buf(),
            reserve_bytes: reserve_bytes(),
            written_since_check: 0,
        };
        guard.check()?;
        Ok(guard)
    }

    /// Counts `bytes` written; now and then looks at the free space, failing when less than the
    /// reserve is left.
    pub fn wrote(&mut self, bytes: u64) -> Result<(), String> {
        self.written_since_check += bytes;
        if self.written_since_check >= CHECK_EVERY_BYTES {
            self.written_since_check = 0;
            self.check()?;
        }
        Ok(())
    }

    fn check(&self) -> Result<(), String> {
        match free_bytes(&self.folder) {
            Some(free) if free < self.reserve_bytes => Err(format!(
                "the disk holding {} has {} MB free, less than the {} MB Stemflow leaves free \
                 ({MIN_FREE_ENV})",
                self.folder.display(),
                free >> 20,
                self.reserve_bytes >> 20
            )),
            _ => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_temporary_folder_has_a_size() {
        let free = free_bytes(&std::env::temp_dir()).expect("statvfs of the temporary folder");
        assert!(free > 0);
        assert_eq!(free_bytes(Path::new("/no/such/folder/anywhere")), None);
    }

    #[test]
    fn a_guard_with_a_reserve_above_the_free_space_stops_at_its_first_look() {
        let dir = std::env::temp_dir();
        let free = free_bytes(&dir).unwrap();
        let mut guard = DiskGuard {
            folder: dir.clone(),
            reserve_bytes: free.saturating_add(1 << 40),
            written_since_check: 0,
        };
        assert_eq!(
            guard.wrote(CHECK_EVERY_BYTES - 1),
            Ok(()),
            "no look before 16 MB"
        );
        let error = guard.wrote(1).unwrap_err();
        assert!(error.contains(MIN_FREE_ENV), "{error}");
        guard.reserve_bytes = 0;
        assert_eq!(guard.wrote(CHECK_EVERY_BYTES), Ok(()));
    }
}
