//! [`Claim`]: one worker at a time on a stem folder. Catalogue workers may be handed the same
//! input at once (a retried pod while the first still runs, the same command started twice,
//! two Ray actors given one song); without a claim both write the same files, and one fails
//! half-way through the other's stems. A worker claims a folder before it looks at it, by
//! creating `.stemflow-claim` in it (atomically: only one creation can succeed), and removes the
//! claim when it is done with the folder, however it ends. A worker that finds the folder
//! claimed comes back to it later, or waits, and says so.
//!
//! A killed worker cannot remove its claim, so a claim is **stale**, and is taken over, when
//! its worker is known to be gone (same machine, and no such process or another process with
//! that id), or when its worker has not touched it for [`STALE_AFTER`] (any machine: a claimer
//! refreshes its claim's modification time every [`HEARTBEAT`]). Taking over is itself
//! exclusive (`.stemflow-claim.takeover`), so two workers never both take a stale claim.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::options::{Failure, SeparateOptions};
use crate::decode::io_reason;

/// The claim's file name in a stem folder.
pub const CLAIM_FILE: &str = ".stemflow-claim";
/// The file that makes taking over a stale claim exclusive.
const TAKEOVER_FILE: &str = ".stemflow-claim.takeover";
/// How often a worker refreshes its claims.
pub const HEARTBEAT: Duration = Duration::from_secs(10);
/// A claim not refreshed for this long belongs to a worker that is gone.
pub const STALE_AFTER: Duration = Duration::from_secs(60);

/// Who holds a claim, as its file says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Holder {
    /// The machine's host name.
    pub host: String,
    /// The process id on that machine.
    pub pid: u32,
    /// When the process started, as the system counts it (Linux: clock ticks since boot), to
    /// tell it from a later process with the same id; `None` where unknown.
    pub process_start: Option<u64>,
    /// When the claim was taken (seconds since 1970).
    pub since_unix_s: u64,
}

impl Holder {
    /// This process.
    fn this_process() -> Self {
        let pid = std::process::id();
        Self {
            host: host_name(),
            pid,
            process_start: process_start(pid),
            since_unix_s: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
        }
    }

    fn to_json(&self) -> String {
        serde_json::json!({
            "host": self.host,
            "pid": self.pid,
            "process_start": self.process_start,
            "since_unix_s": self.since_unix_s,
        })
        .to_string()
    }

    fn from_json(text: &str) -> Option<Self> {
        let value: serde_json::Value = serde_json::from_str(text).ok()?;
        Some(Self {
            host: value.get("host")?.as_str()?.to_owned(),
            pid: u32::try_from(value.get("pid")?.as_u64()?).ok()?,
            process_start: value
                .get("process_start")
                .and_then(serde_json::Value::as_u64),
            since_unix_s: value.get("since_unix_s")?.as_u64()?,
        })
    }

    /// "process 1234 on host-a, since 14:02:11 UTC".
    pub fn describe(&self) -> String {
        let seconds_of_day = self.since_unix_s % 86_400;
        format!(
            "process {} on {}, since {:02}:{:02}:{:02} UTC",
            self.pid,
            self.host,
            seconds_of_day / 3600,
            seconds_of_day / 60 % 60,
            seconds_of_day % 60
        )
    }

    /// Whether the holder is known to be gone: on this machine, with no process of its id
    /// and start, or (anywhere) silent for longer than [`STALE_AFTER`].
    fn is_gone(&self, last_touched: SystemTime) -> bool {
        silent_for(last_touched) > STALE_AFTER
            || (self.host == host_name() && !is_running(self.pid, self.process_start))
    }
}

/// What [`Claim::take`] found.
pub enum ClaimOutcome {
    /// The folder is this worker's until the claim is dropped.
    Taken(Claim),
    /// Another worker, alive, holds the folder (who, when its claim can be read).
    Held(Option<Holder>),
}

/// How long ago `touched` was.
fn silent_for(touched: SystemTime) -> Duration {
    SystemTime::now()
        .duration_since(touched)
        .unwrap_or_default()
}

/// This worker's claim on a stem folder: removed when dropped, with the folder when this claim
/// created it and it is still empty.
pub struct Claim {
    file: PathBuf,
    created_folder: Option<PathBuf>,
    holder: Holder,
    /// Dropping the sender stops the heartbeat thread.
    heartbeat: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Claim {
    /// Claims `folder` (created when missing) unless a live worker holds it; a stale claim is
    /// taken over. Not realtime-safe: file I/O.
    pub fn take(folder: &Path) -> std::io::Result<ClaimOutcome> {
        let existed = folder.is_dir();
        std::fs::create_dir_all(folder)?;
        let created_folder = (!existed).then(|| folder.to_path_buf());
        let file = folder.join(CLAIM_FILE);
        let holder = Holder::this_process();
        for _ in 0..4 {
            match OpenOptions::new().write(true).create_new(true).open(&file) {
                Ok(mut claim_file) => {
                    claim_file.write_all(holder.to_json().as_bytes())?;
                    claim_file.sync_all()?;
                    let heartbeat = start_heartbeat(file.clone());
                    return Ok(ClaimOutcome::Taken(Claim {
                        file,
                        created_folder,
                        holder,
                        heartbeat: Some(heartbeat),
                    }));
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    // Released meanwhile: try again.
                    let Some((other, touched)) = read_claim(&file) else {
                        continue;
                    };
                    let is_stale = match &other {
                        Some(holder) => holder.is_gone(touched),
                        // Unreadable: being written this instant, or damaged and then silent.
                        None => silent_for(touched) > STALE_AFTER,
                    };
                    if !is_stale {
                        return Ok(ClaimOutcome::Held(other));
                    }
                    if !take_over(folder, &file, other.as_ref())? {
                        // Another worker is taking it over: the folder is theirs.
                        return Ok(ClaimOutcome::Held(read_claim(&file).and_then(|(h, _)| h)));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(format!(
            "cannot claim {}: its claim changed hands four times in a row",
            folder.display()
        )))
    }

    /// Who this claim names (this process).
    #[cfg(test)]
    pub fn holder(&self) -> &Holder {
        &self.holder
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        if let Some((stop, thread)) = self.heartbeat.take() {
            drop(stop);
            let _ = thread.join();
        }
        // Only our own claim is removed (a worker that found it stale may have replaced it).
        if read_claim(&self.file).and_then(|(h, _)| h).as_ref() == Some(&self.holder) {
            let _ = std::fs::remove_file(&self.file);
        }
        if let Some(folder) = &self.created_folder {
            // Fails, harmlessly, when something is in it.
            let _ = std::fs::remove_dir(folder);
        }
    }
}

/// The claim in `file` and when it was last touched; the holder is `None` when the file cannot
/// be understood (being written, damaged). `None` when there is no claim.
fn read_claim(file: &Path) -> Option<(Option<Holder>, SystemTime)> {
    let touched = std::fs::metadata(file).ok()?.modified().ok()?;
    let text = std::fs::read_to_string(file).ok()?;
    Some((Holder::from_json(&text), touched))
}

/// Removes the stale claim `stale` (the holder read, `None`: unreadable) on `folder`, unless
/// another worker is taking it over or it changed. Returns whether it was removed.
fn take_over(folder: &Path, file: &Path, stale: Option<&Holder>) -> std::io::Result<bool> {
    let takeover = folder.join(TAKEOVER_FILE);
    let guard = match OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&takeover)
    {
        Ok(guard) => guard,
        Err(e) if e.kind() == ErrorKind::AlreadyExists => {
            // A worker killed in the middle of a takeover leaves this file behind.
            let is_abandoned = std::fs::metadata(&takeover)
                .and_then(|m| m.modified())
                .is_ok_and(|touched| silent_for(touched) > STALE_AFTER);
            if is_abandoned {
                let _ = std::fs::remove_file(&takeover);
            }
            return Ok(false);
        }
        Err(e) => return Err(e),
    };
    drop(guard);
    // Under the takeover file: the claim is only removed if it is still the stale one.
    let still_stale = read_claim(file).is_some_and(|(holder, touched)| {
        holder.as_ref() == stale
            && match &holder {
                Some(holder) => holder.is_gone(touched),
                None => silent_for(touched) > STALE_AFTER,
            }
    });
    let removed = still_stale && std::fs::remove_file(file).is_ok();
    let _ = std::fs::remove_file(&takeover);
    Ok(removed)
}

/// Refreshes `file`'s modification time every [`HEARTBEAT`] until the sender is dropped.
fn start_heartbeat(file: PathBuf) -> (mpsc::Sender<()>, std::thread::JoinHandle<()>) {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("stemflow-claim".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
                if let Ok(claim) = File::options().write(true).open(&file) {
                    let _ = claim.set_modified(SystemTime::now());
                }
            }
        })
        .expect("a thread for the claim's heartbeat");
    (stop, thread)
}

/// This machine's host name.
fn host_name() -> String {
    #[cfg(unix)]
    {
        let mut buffer = [0u8; 256];
        // SAFETY: the buffer is writable for its length; the name is NUL-terminated on success.
        let ok = unsafe { libc::gethostname(buffer.as_mut_ptr().cast(), buffer.len()) } == 0;
        if ok {
            let end = buffer.iter().position(|&b| b == 0).unwrap_or(buffer.len());
            return String::from_utf8_lossy(&buffer[..end]).into_owned();
        }
        "localhost".into()
    }
    #[cfg(not(unix))]
    {
        std::env::var("COMPUTERNAME").unwrap_or_else(|_| "localhost".into())
    }
}

/// When process `pid` started (Linux: `/proc/<pid>/stat` field 22, clock ticks since boot).
fn process_start(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) is in parentheses and may hold spaces.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19)?.parse().ok()
}

/// Whether process `pid` (started at `start`, when known) still runs on this machine. Where
/// that cannot be told, it is taken to run (the heartbeat decides).
fn is_running(pid: u32, start: Option<u64>) -> bool {
    if Path::new("/proc/self/stat").exists() {
        return match process_start(pid) {
            None => false,
            Some(now) => start.is_none_or(|start| start == now),
        };
    }
    #[cfg(unix)]
    {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        let result = unsafe { libc::kill(pid, 0) };
        result == 0 || std::io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
    }
    #[cfg(not(unix))]
    {
        let _ = (pid, start);
        true
    }
}

/// Claims `folder` for `input`'s job. When another worker holds it: `None`
/// when `may_defer` (the caller takes the job up later), otherwise waits for it, saying so once.
/// Returns the claim and the worker waited for, if any.
pub(super) fn claim_folder(
    folder: &Path,
    input: &Path,
    may_defer: bool,
) -> Result<Option<(Claim, Option<Holder>)>, Failure> {
    let mut waited_for: Option<Holder> = None;
    let mut has_said = false;
    loop {
        let outcome = Claim::take(folder).map_err(|e| {
            Failure::Input(format!(
                "cannot claim {}: {}",
                folder.display(),
                io_reason(&e)
            ))
        })?;
        let holder = match outcome {
            ClaimOutcome::Taken(claim) => return Ok(Some((claim, waited_for))),
            ClaimOutcome::Held(holder) => holder,
        };
        let who = holder.as_ref().map_or_else(
            || "another worker".to_owned(),
            |h| format!("another worker ({})", h.describe()),
        );
        if may_defer {
            crate::output::say_err!(
                "stemflow: {}: {} is being separated by {who}; back to it after the other inputs",
                input.display(),
                folder.display()
            );
            return Ok(None);
        }
        if !has_said {
            crate::output::say_err!(
                "stemflow: {}: waiting for {who}, which is separating it into {}",
                input.display(),
                folder.display()
            );
            has_said = true;
        }
        waited_for = holder.or(waited_for);
        if let Some(signal) = crate::interrupt::received() {
            return Err(Failure::Interrupted(signal));
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The stem files of `options` in `folder`, when every one is there and was written after
/// `other` claimed the folder: that worker separated it.
pub(super) fn stems_written_since(
    folder: &Path,
    options: &SeparateOptions,
    other: &Holder,
) -> Option<Vec<PathBuf>> {
    let since = std::time::UNIX_EPOCH + Duration::from_secs(other.since_unix_s);
    options
        .stems
        .iter()
        .map(|&stem| {
            let path = options.stem_path(folder, stem);
            let modified = std::fs::metadata(&path).ok()?.modified().ok()?;
            (modified >= since).then_some(path)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir =
            std::env::temp_dir().join(format!("stemflow-claim-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        dir
    }

    #[test]
    fn a_claim_excludes_a_second_one_and_goes_with_its_folder() {
        let folder = scratch("exclusive");
        let ClaimOutcome::Taken(claim) = Claim::take(&folder).unwrap() else {
            panic!("the first claim was refused");
        };
        // Same process: alive, so the second worker is told who holds it.
        match Claim::take(&folder).unwrap() {
            ClaimOutcome::Held(holder) => assert_eq!(holder.as_ref(), Some(claim.holder())),
            ClaimOutcome::Taken(_) => panic!("two claims on one folder"),
        }
        drop(claim);
        assert!(
            !folder.exists(),
            "the folder the claim created is removed when empty"
        );
        let ClaimOutcome::Taken(claim) = Claim::take(&folder).unwrap() else {
            panic!("a released claim could not be taken again");
        };
        std::fs::write(folder.join("vocals.wav"), b"stem").unwrap();
        drop(claim);
        assert!(!folder.join(CLAIM_FILE).exists());
        assert!(
            folder.join("vocals.wav").exists(),
            "a folder with results stays"
        );
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn a_claim_of_a_process_that_is_gone_or_silent_is_taken_over() {
        let folder = scratch("stale");
        std::fs::create_dir_all(&folder).unwrap();
        // A process id no process has (above Linux's pid_max).
        let dead = Holder {
            host: host_name(),
            pid: 4_194_304 + 17,
            process_start: Some(1),
            since_unix_s: 1,
        };
        std::fs::write(folder.join(CLAIM_FILE), dead.to_json()).unwrap();
        let ClaimOutcome::Taken(claim) = Claim::take(&folder).unwrap() else {
            panic!("the claim of a dead process was not taken over");
        };
        drop(claim);

        // Another machine's worker, silent for longer than STALE_AFTER.
        let silent = Holder {
            host: "a-machine-that-is-not-this-one".into(),
            pid: 1,
            process_start: None,
            since_unix_s: 1,
        };
        std::fs::create_dir_all(&folder).unwrap();
        let file = folder.join(CLAIM_FILE);
        std::fs::write(&file, silent.to_json()).unwrap();
        File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(SystemTime::now() - STALE_AFTER - Duration::from_secs(5))
            .unwrap();
        assert!(matches!(
            Claim::take(&folder).unwrap(),
            ClaimOutcome::Taken(_)
        ));

        // The same worker, still touching its claim: held.
        std::fs::create_dir_all(&folder).unwrap();
        std::fs::write(&file, silent.to_json()).unwrap();
        match Claim::take(&folder).unwrap() {
            ClaimOutcome::Held(holder) => assert_eq!(holder, Some(silent)),
            ClaimOutcome::Taken(_) => panic!("a live remote claim was taken over"),
        }
        std::fs::remove_dir_all(&folder).unwrap();
    }

    #[test]
    fn this_process_is_running_and_its_claim_says_when_it_started() {
        let me = Holder::this_process();
        assert!(is_running(me.pid, me.process_start));
        if Path::new("/proc/self/stat").exists() {
            assert!(me.process_start.is_some());
            assert!(
                !is_running(me.pid, me.process_start.map(|s| s + 1)),
                "another start"
            );
        }
        assert_eq!(Holder::from_json(&me.to_json()), Some(me));
    }
}
