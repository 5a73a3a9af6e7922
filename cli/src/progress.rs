//! Progress of one separation: an `indicatif` bar on a terminal, plain lines otherwise, or
//! nothing with `--quiet`. All of it goes to stderr, so stdout stays clean for results.

use std::io::IsTerminal;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// How progress is shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProgressMode {
    /// A live bar with elapsed time, real-time factor and ETA (stderr is a terminal).
    Bar,
    /// A line every 10 % (or every 10 s when the length is unknown), for logs and pipes.
    Lines,
    /// Nothing.
    Quiet,
}

impl ProgressMode {
    /// The mode for this process: quiet when asked, a bar when stderr is a terminal.
    pub fn detect(is_quiet: bool) -> Self {
        if is_quiet {
            ProgressMode::Quiet
        } else if std::io::stderr().is_terminal() {
            ProgressMode::Bar
        } else {
            ProgressMode::Lines
        }
    }
}

/// Elapsed time, real-time factor and ETA after `done_s` seconds of audio.
struct Rates {
    elapsed: Duration,
    /// Processing time over audio time (below 1: faster than real time).
    real_time_factor: Option<f64>,
    eta: Option<Duration>,
}

/// Progress of one file.
pub struct Progress {
    mode: ProgressMode,
    bar: Option<ProgressBar>,
    label: String,
    start: Instant,
    sample_rate_hz: f64,
    total_frames: Option<u64>,
    /// Lines mode: the last tenth reported, and when.
    last_line_tenth: u64,
    last_line_at: Instant,
}

impl Progress {
    /// Starts showing progress of `label`, which has `total_frames` at `sample_rate_hz` when
    /// known.
    pub fn start(
        mode: ProgressMode,
        label: &str,
        total_frames: Option<u64>,
        sample_rate_hz: u32,
    ) -> Self {
        let bar = (mode == ProgressMode::Bar).then(|| {
            let bar = match total_frames {
                Some(total) => {
                    let bar = ProgressBar::with_draw_target(
                        Some(total),
                        ProgressDrawTarget::stderr_with_hz(8),
                    );
                    bar.set_style(
                        ProgressStyle::with_template("{prefix} [{bar:30}] {percent:>3}% {msg}")
                            .expect("valid template")
                            .progress_chars("=> "),
                    );
                    bar
                }
                None => {
                    let bar =
                        ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr_with_hz(8));
                    bar.set_style(
                        ProgressStyle::with_template("{prefix} {spinner} {msg}")
                            .expect("valid template"),
                    );
                    bar
                }
            };
            bar.set_prefix(label.to_owned());
            bar
        });
        let now = Instant::now();
        Self {
            mode,
            bar,
            label: label.to_owned(),
            start: now,
            sample_rate_hz: f64::from(sample_rate_hz.max(1)),
            total_frames,
            last_line_tenth: 0,
            last_line_at: now,
        }
    }

    fn rates(&self, frames_done: u64) -> Rates {
        let elapsed = self.start.elapsed();
        let done_s = frames_done as f64 / self.sample_rate_hz;
        let real_time_factor = (done_s > 0.0).then(|| elapsed.as_secs_f64() / done_s);
        let eta = match (self.total_frames, real_time_factor) {
            (Some(total), Some(rtf)) => {
                let left_s = total.saturating_sub(frames_done) as f64 / self.sample_rate_hz;
                Some(Duration::from_secs_f64(left_s * rtf))
            }
            _ => None,
        };
        Rates {
            elapsed,
            real_time_factor,
            eta,
        }
    }

    /// Reports that `frames_done` input frames are separated.
    pub fn update(&mut self, frames_done: u64) {
        match self.mode {
            ProgressMode::Quiet => {}
            ProgressMode::Bar => {
                let rates = self.rates(frames_done);
                if let Some(bar) = &self.bar {
                    bar.set_position(frames_done);
                    bar.set_message(describe(&rates, frames_done as f64 / self.sample_rate_hz));
                }
            }
            ProgressMode::Lines => {
                let tenth = match self.total_frames {
                    Some(total) if total > 0 => frames_done.min(total) * 10 / total,
                    _ => 0,
                };
                let is_due = match self.total_frames {
                    Some(_) => tenth > self.last_line_tenth,
                    None => self.last_line_at.elapsed() >= Duration::from_secs(10),
                };
                if is_due && tenth < 10 {
                    self.last_line_tenth = tenth;
                    self.last_line_at = Instant::now();
                    self.print_line(frames_done);
                }
            }
        }
    }

    fn print_line(&self, frames_done: u64) {
        let rates = self.rates(frames_done);
        let done_s = frames_done as f64 / self.sample_rate_hz;
        let percent = match self.total_frames {
            Some(total) if total > 0 => format!("{:>3}% ", frames_done.min(total) * 100 / total),
            _ => String::new(),
        };
        crate::output::say_err!("{}: {percent}{}", self.label, describe(&rates, done_s));
    }

    /// Ends the display after `frames_done` frames; returns the elapsed time.
    pub fn finish(mut self, frames_done: u64) -> Duration {
        match self.mode {
            ProgressMode::Quiet => {}
            ProgressMode::Bar => {
                if let Some(bar) = &self.bar {
                    bar.finish_and_clear();
                }
            }
            ProgressMode::Lines => {
                self.total_frames = Some(frames_done);
                self.print_line(frames_done);
            }
        }
        self.start.elapsed()
    }

    /// Abandons the display (an error follows).
    pub fn abandon(self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

/// "12.0 s of audio, elapsed 0:03, RTF 0.25 (4.0x real time), ETA 0:09".
fn describe(rates: &Rates, done_s: f64) -> String {
    let mut text = format!("{done_s:.1} s of audio, elapsed {}", clock(rates.elapsed));
    if let Some(rtf) = rates.real_time_factor {
        text.push_str(&format!(", RTF {rtf:.3} ({})", speed(rtf)));
    }
    if let Some(eta) = rates.eta {
        text.push_str(&format!(", ETA {}", clock(eta)));
    }
    text
}

/// A real-time factor in words: "4.0x real time", or for a model slower than real time (a
/// RoFormer on a CPU) "49x slower than real time" rather than "0.0x real time".
pub fn speed(real_time_factor: f64) -> String {
    if real_time_factor > 1.0 {
        format!("{real_time_factor:.0}x slower than real time")
    } else {
        format!("{:.1}x real time", 1.0 / real_time_factor.max(1e-9))
    }
}

/// `m:ss`, or `h:mm:ss` from an hour on.
pub fn clock(duration: Duration) -> String {
    let s = duration.as_secs();
    if s >= 3600 {
        format!("{}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
    } else {
        format!("{}:{:02}", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn speeds_read_well_on_both_sides_of_real_time() {
        assert_eq!(speed(0.25), "4.0x real time");
        assert_eq!(speed(1.0), "1.0x real time");
        assert_eq!(speed(48.985), "49x slower than real time");
    }

    #[test]
    fn clock_formats() {
        assert_eq!(clock(Duration::from_secs(0)), "0:00");
        assert_eq!(clock(Duration::from_secs(75)), "1:15");
        assert_eq!(clock(Duration::from_secs(3_725)), "1:02:05");
    }

    #[test]
    fn rates_give_rtf_and_eta() {
        let mut progress = Progress::start(ProgressMode::Quiet, "x", Some(1_000), 100);
        progress.start -= Duration::from_secs(2);
        let rates = progress.rates(400);
        // 4 s of audio in 2 s: RTF 0.5; 6 s left at that pace: 3 s.
        assert!((rates.real_time_factor.unwrap() - 0.5).abs() < 0.01);
        assert!((rates.eta.unwrap().as_secs_f64() - 3.0).abs() < 0.05);
        assert!(describe(&rates, 4.0).contains("RTF 0.50"));
    }
}
