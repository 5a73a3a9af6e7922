//! How far fetching a model has come ([`Progress`]: stage, bytes, speed, time left) and the
//! [`Reporter`] that measures it over all of a model's files.

use std::time::{Duration, Instant};

/// Least time between two progress reports while bytes arrive.
const PROGRESS_INTERVAL: Duration = Duration::from_millis(100);

/// The span the download speed is measured over.
const SPEED_WINDOW: Duration = Duration::from_millis(500);

/// What is being done.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// Bytes are arriving.
    Downloading,
    /// A file's checksum is being computed.
    Checking,
    /// Checkpoints are being converted into an ONNX model.
    Converting,
    /// The model is being written into the models folder.
    Installing,
}

/// How far a [`install_catalogue_model`] has come.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// What is being done.
    pub stage: Stage,
    /// Bytes of the model's files that are here (downloaded, resumed or cached).
    pub done_bytes: u64,
    /// All of its files' bytes, when known.
    pub total_bytes: Option<u64>,
    /// The download speed over the last half second or so (bytes that arrived in this run
    /// only), once measured.
    pub bytes_per_s: Option<f64>,
}

impl Progress {
    /// The part done, 0 to 1, when the total is known. Realtime-safe.
    pub fn fraction(&self) -> Option<f64> {
        self.total_bytes
            .filter(|&t| t > 0)
            .map(|t| (self.done_bytes as f64 / t as f64).min(1.0))
    }

    /// Seconds left at the current speed, when both are known. Realtime-safe.
    pub fn eta_s(&self) -> Option<f64> {
        let left = self.total_bytes?.saturating_sub(self.done_bytes);
        self.bytes_per_s
            .filter(|&speed| speed > 0.0)
            .map(|speed| left as f64 / speed)
    }
}

/// Turns `sink` calls into [`Progress`] over all of a model's files, with the speed measured
/// over bytes that arrive in this run.
pub(crate) struct Reporter<'a> {
    sink: &'a mut dyn FnMut(&Progress),
    stage: Stage,
    /// All files' bytes, from the catalogue or (one file of unknown size) from the server.
    total_bytes: Option<u64>,
    is_total_known: bool,
    /// Bytes of the files already here.
    finished_bytes: u64,
    /// Bytes of the file arriving.
    file_bytes: u64,
    /// Bytes that arrived in this run.
    pub(crate) downloaded_bytes: u64,
    /// Start of the speed window: when, and `downloaded_bytes` then.
    window: Option<(Instant, u64)>,
    bytes_per_s: Option<f64>,
    last_sent: Option<Instant>,
}

impl<'a> Reporter<'a> {
    pub(crate) fn new(total_bytes: Option<u64>, sink: &'a mut dyn FnMut(&Progress)) -> Self {
        Self {
            sink,
            stage: Stage::Checking,
            total_bytes,
            is_total_known: total_bytes.is_some(),
            finished_bytes: 0,
            file_bytes: 0,
            downloaded_bytes: 0,
            window: None,
            bytes_per_s: None,
            last_sent: None,
        }
    }

    /// A file starts with `resumed` bytes already in its part.
    pub(crate) fn begin_file(&mut self, resumed: u64) {
        self.file_bytes = resumed;
    }

    /// `done` bytes of the file arriving are here (`total`: its size, from the server).
    pub(crate) fn file_progress(&mut self, done: u64, total: Option<u64>) {
        if !self.is_total_known {
            self.total_bytes = total.map(|t| t + self.finished_bytes);
        }
        // A restart (a server that ignores ranges) goes back to 0 and brings nothing new yet.
        self.downloaded_bytes += done.saturating_sub(self.file_bytes);
        self.file_bytes = done;
        let now = Instant::now();
        match self.window {
            None => self.window = Some((now, self.downloaded_bytes)),
            Some((start, bytes)) => {
                let span = now.duration_since(start);
                if span >= SPEED_WINDOW {
                    let speed = (self.downloaded_bytes - bytes) as f64 / span.as_secs_f64();
                    self.bytes_per_s = Some(match self.bytes_per_s {
                        Some(previous) => 0.5 * previous + 0.5 * speed,
                        None => speed,
                    });
                    self.window = Some((now, self.downloaded_bytes));
                }
            }
        }
        let is_due = self
            .last_sent
            .is_none_or(|sent| now.duration_since(sent) >= PROGRESS_INTERVAL);
        if is_due || total == Some(done) {
            self.send();
        }
    }

    /// A file of `size` bytes is here, checked.
    pub(crate) fn file_done(&mut self, size: u64) {
        self.finished_bytes += size;
        self.file_bytes = 0;
        self.send();
    }

    pub(crate) fn stage(&mut self, stage: Stage) {
        self.stage = stage;
        self.send();
    }

    fn send(&mut self) {
        self.last_sent = Some(Instant::now());
        let progress = Progress {
            stage: self.stage,
            done_bytes: self.finished_bytes + self.file_bytes,
            total_bytes: self.total_bytes,
            bytes_per_s: self.bytes_per_s,
        };
        (self.sink)(&progress);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn progress_gives_its_fraction_and_time_left() {
        let progress = Progress {
            stage: Stage::Downloading,
            done_bytes: 25,
            total_bytes: Some(100),
            bytes_per_s: Some(15.0),
        };
        assert_eq!(progress.fraction(), Some(0.25));
        assert_eq!(progress.eta_s(), Some(5.0));
        let unknown = Progress {
            total_bytes: None,
            ..progress
        };
        assert_eq!(unknown.fraction(), None);
        assert_eq!(unknown.eta_s(), None);
    }
}
