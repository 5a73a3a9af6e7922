//! [`Claim`]: one worker at a time on something two may start at once — a stem folder being
//! separated (`stemflow separate` on a catalogue), a model being fetched into a models folder
//! (`stemflow models get`, the plugin's editor, two plugin instances in one DAW). Without a claim
//! both write the same files, and one fails half-way through the other's. A worker claims by
//! creating the claim file (atomically: only one creation can succeed), and removes it when it
//! is done, however it ends. A worker that finds the file claimed waits, or comes back later,
//! and says so.
//!
//! A killed worker cannot remove its claim, so a claim is **stale**, and is taken over, when its
//! worker is known to be gone (same machine, and no such process or another process with that
//! id), or when its worker has not touched it for [`STALE_AFTER`] (any machine: a claimer
//! refreshes its claim's modification time every [`HEARTBEAT`], on a thread joined when the
//! claim is dropped). Taking over is itself exclusive (`CLAIM.takeover`), so two workers never
//! both take a stale claim. Not realtime-safe, any of it: file I/O.

use std::fs::{File, OpenOptions};
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// This process, claiming now.
    pub fn this_process() -> Self {
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

    /// Whether the holder is this process (another thread of it: a second plugin instance in
    /// the same host).
    pub fn is_this_process(&self) -> bool {
        self.pid == std::process::id() && self.host == host_name()
    }

    /// The claim file's text.
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "host": self.host,
            "pid": self.pid,
            "process_start": self.process_start,
            "since_unix_s": self.since_unix_s,
        })
        .to_string()
    }

    /// A claim file's holder; `None` when the text is not one (being written, damaged).
    pub fn from_json(text: &str) -> Option<Self> {
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
    /// The claim is this worker's until it is dropped.
    Taken(Claim),
    /// Another worker, alive, holds it (who, when its claim can be read).
    Held(Option<Holder>),
}

/// How long ago `touched` was.
fn silent_for(touched: SystemTime) -> Duration {
    SystemTime::now()
        .duration_since(touched)
        .unwrap_or_default()
}

/// This worker's claim: its file is removed when the claim is dropped (only while it still
/// names this claim's holder), and the heartbeat thread joined.
pub struct Claim {
    file: PathBuf,
    holder: Holder,
    /// Dropping the sender stops the heartbeat thread.
    heartbeat: Option<(mpsc::Sender<()>, std::thread::JoinHandle<()>)>,
}

impl Claim {
    /// Claims `file` (its folder must exist) unless a live worker holds it; a stale claim is
    /// taken over. Fails when the file cannot be created (the folder is missing or read-only)
    /// or the claim changed hands four times in a row. Not realtime-safe: file I/O, and a
    /// thread for the heartbeat.
    pub fn take(file: &Path) -> std::io::Result<ClaimOutcome> {
        let holder = Holder::this_process();
        for _ in 0..4 {
            match OpenOptions::new().write(true).create_new(true).open(file) {
                Ok(mut claim_file) => {
                    let written = claim_file
                        .write_all(holder.to_json().as_bytes())
                        .and_then(|()| claim_file.sync_all())
                        .and_then(|()| start_heartbeat(file.to_path_buf()));
                    return match written {
                        Ok(heartbeat) => Ok(ClaimOutcome::Taken(Claim {
                            file: file.to_path_buf(),
                            holder,
                            heartbeat: Some(heartbeat),
                        })),
                        Err(error) => {
                            let _ = std::fs::remove_file(file);
                            Err(error)
                        }
                    };
                }
                Err(e) if e.kind() == ErrorKind::AlreadyExists => {
                    // Released meanwhile: try again.
                    let Some((other, touched)) = read_claim(file) else {
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
                    if !take_over(file, other.as_ref())? {
                        // Another worker is taking it over: the claim is theirs.
                        return Ok(ClaimOutcome::Held(read_claim(file).and_then(|(h, _)| h)));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Err(std::io::Error::other(format!(
            "cannot claim {}: it changed hands four times in a row",
            file.display()
        )))
    }

    /// Who this claim names (this process).
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
    }
}

/// The claim in `file` and when it was last touched; the holder is `None` when the file cannot
/// be understood (being written, damaged). `None` when there is no claim.
fn read_claim(file: &Path) -> Option<(Option<Holder>, SystemTime)> {
    let touched = std::fs::metadata(file).ok()?.modified().ok()?;
    let text = std::fs::read_to_string(file).ok()?;
    Some((Holder::from_json(&text), touched))
}

/// `CLAIM.takeover`, beside the claim `file`.
fn takeover_file(file: &Path) -> PathBuf {
    let mut name = file.file_name().unwrap_or_default().to_os_string();
    name.push(".takeover");
    file.with_file_name(name)
}

/// Removes the stale claim `stale` (the holder read, `None`: unreadable) in `file`, unless
/// another worker is taking it over or it changed. Returns whether it was removed.
fn take_over(file: &Path, stale: Option<&Holder>) -> std::io::Result<bool> {
    let takeover = takeover_file(file);
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
fn start_heartbeat(
    file: PathBuf,
) -> std::io::Result<(mpsc::Sender<()>, std::thread::JoinHandle<()>)> {
    let (stop, stopped) = mpsc::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("stemflow-claim".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
                if let Ok(claim) = File::options().write(true).open(&file) {
                    let _ = claim.set_modified(SystemTime::now());
                }
            }
        })?;
    Ok((stop, thread))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        stemflow_kit::testing::scratch_dir(&format!("claim-{name}"))
    }

    #[test]
    fn a_claim_excludes_a_second_one_until_it_is_dropped() {
        let dir = scratch("exclusive");
        let file = dir.join("model.lock");
        let ClaimOutcome::Taken(claim) = Claim::take(&file).unwrap() else {
            panic!("the first claim was refused");
        };
        // Same process: alive, so the second worker is told who holds it.
        match Claim::take(&file).unwrap() {
            ClaimOutcome::Held(holder) => {
                let holder = holder.expect("the holder is named");
                assert_eq!(&holder, claim.holder());
                assert!(holder.is_this_process());
            }
            ClaimOutcome::Taken(_) => panic!("two claims on one file"),
        }
        drop(claim);
        assert!(!file.exists(), "a dropped claim removes its file");
        assert!(matches!(
            Claim::take(&file).unwrap(),
            ClaimOutcome::Taken(_)
        ));
        assert!(
            Claim::take(&dir.join("missing/model.lock")).is_err(),
            "a claim in a folder that does not exist is an error"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_claim_of_a_process_that_is_gone_or_silent_is_taken_over() {
        let dir = scratch("stale");
        let file = dir.join(".stemflow-claim");
        // A process id no process has (above Linux's pid_max).
        let dead = Holder {
            host: host_name(),
            pid: 4_194_304 + 17,
            process_start: Some(1),
            since_unix_s: 1,
        };
        std::fs::write(&file, dead.to_json()).unwrap();
        let ClaimOutcome::Taken(claim) = Claim::take(&file).unwrap() else {
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
        std::fs::write(&file, silent.to_json()).unwrap();
        File::options()
            .write(true)
            .open(&file)
            .unwrap()
            .set_modified(SystemTime::now() - STALE_AFTER - Duration::from_secs(5))
            .unwrap();
        assert!(matches!(
            Claim::take(&file).unwrap(),
            ClaimOutcome::Taken(_)
        ));

        // The same worker, still touching its claim: held.
        std::fs::write(&file, silent.to_json()).unwrap();
        match Claim::take(&file).unwrap() {
            ClaimOutcome::Held(holder) => assert_eq!(holder, Some(silent)),
            ClaimOutcome::Taken(_) => panic!("a live remote claim was taken over"),
        }
        std::fs::remove_dir_all(&dir).unwrap();
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
