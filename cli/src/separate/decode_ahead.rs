//! [`DecodeAhead`]: an input decoded on its own thread, a bounded distance ahead of the
//! separation, so decoding overlaps inference and the next input of a catalogue is opened and
//! decoding while the current one finishes.

use std::path::{Path, PathBuf};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use crate::decode::{AudioDecoder, SourceInfo};

/// Blocks decoded ahead at most (symphonia's packets are 576–8192 frames: at most about 6 s of
/// 44.1 kHz audio, 4 MiB, in flight).
const MAX_BLOCKS_AHEAD: usize = 32;

/// What the decoding thread sends.
enum Message {
    /// The file is open.
    Opened(SourceInfo),
    /// The next block: left, and right (`None` for mono, where right is left).
    Block(Vec<f32>, Option<Vec<f32>>),
    /// The end of the audio, with what the decoder noticed on the way.
    End {
        damaged_at_s: Vec<f64>,
        skipped_frames: u64,
    },
    /// Opening or decoding failed (a sentence for the user); nothing follows.
    Failed(String),
}

/// An input whose decoding has started on its own thread; [`PendingDecode::open`] waits until
/// the file is open.
pub(super) struct PendingDecode {
    path: PathBuf,
    receiver: Receiver<Message>,
    thread: Option<JoinHandle<()>>,
}

impl PendingDecode {
    /// Starts decoding `path` on a new thread. Not realtime-safe: spawns a thread.
    pub fn start(path: &Path) -> Self {
        let (sender, receiver) = sync_channel(MAX_BLOCKS_AHEAD);
        let owned = path.to_path_buf();
        let thread = std::thread::Builder::new()
            .name(DECODE_THREAD_NAME.into())
            .spawn(move || report_a_panic(&sender, || decode(&owned, &sender)))
            .ok();
        Self {
            path: path.to_path_buf(),
            receiver,
            thread,
        }
    }

    /// The file this decodes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Waits until the file is open: its decoder, or why it cannot be decoded.
    pub fn open(mut self) -> Result<DecodeAhead, String> {
        if self.thread.is_none() {
            return Err("cannot start a decoding thread".into());
        }
        match self.receiver.recv() {
            Ok(Message::Opened(info)) => Ok(DecodeAhead {
                info,
                receiver: std::mem::replace(&mut self.receiver, sync_channel(0).1),
                thread: self.thread.take(),
                left: Vec::new(),
                right: None,
                frames_decoded: 0,
                damaged_at_s: Vec::new(),
                skipped_frames: 0,
                has_ended: false,
            }),
            Ok(Message::Failed(reason)) => Err(reason),
            Ok(_) | Err(_) => Err("the decoding thread stopped unexpectedly".into()),
        }
    }
}

impl Drop for PendingDecode {
    fn drop(&mut self) {
        join(&mut self.thread, &mut self.receiver);
    }
}

/// The decoding thread's name; the CLI's panic hook prints nothing for it (its panics become
/// the input's error, see [`report_a_panic`]).
pub(crate) const DECODE_THREAD_NAME: &str = "stemflow-decode";

/// Runs `work` (the decoding thread's [`decode`]) and sends a panic in it, a bug of a decoder
/// on a damaged file, as the input's failure: one sentence, no backtrace, and the run goes on
/// to the next input.
fn report_a_panic(sender: &SyncSender<Message>, work: impl FnOnce()) {
    if let Err(payload) = std::panic::catch_unwind(std::panic::AssertUnwindSafe(work)) {
        let what = payload
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown".into());
        let _ = sender.send(Message::Failed(format!(
            "the decoder failed on this file, which is probably damaged (internal error: {what}; please report it)"
        )));
    }
}

/// The decoding thread: opens `path` and sends its blocks until the end, an error, or until
/// nobody listens any more.
fn decode(path: &Path, sender: &SyncSender<Message>) {
    let mut decoder = match AudioDecoder::open(path) {
        Ok(decoder) => decoder,
        Err(reason) => {
            let _ = sender.send(Message::Failed(reason));
            return;
        }
    };
    if sender
        .send(Message::Opened(decoder.info().clone()))
        .is_err()
    {
        return;
    }
    let is_mono = decoder.info().num_channels == 1;
    loop {
        let message = match decoder.next_block() {
            Ok(Some([left, right])) => {
                Message::Block(left.to_vec(), (!is_mono).then(|| right.to_vec()))
            }
            Ok(None) => {
                let _ = sender.send(Message::End {
                    damaged_at_s: decoder.damaged_at_s().to_vec(),
                    skipped_frames: decoder.skipped_frames(),
                });
                return;
            }
            Err(reason) => Message::Failed(reason),
        };
        let has_failed = matches!(message, Message::Failed(_));
        if sender.send(message).is_err() || has_failed {
            return;
        }
    }
}

/// Stops listening to a decoding thread and waits for it to end (it ends at its next block,
/// and removes a spooled pipe's temporary copy on the way).
fn join(thread: &mut Option<JoinHandle<()>>, receiver: &mut Receiver<Message>) {
    // Dropping the receiver makes the thread's next send fail.
    let (_, closed) = sync_channel(0);
    drop(std::mem::replace(receiver, closed));
    if let Some(thread) = thread.take() {
        let _ = thread.join();
    }
}

/// An open input being decoded ahead, handing out blocks as [`AudioDecoder`] does.
pub(super) struct DecodeAhead {
    info: SourceInfo,
    receiver: Receiver<Message>,
    thread: Option<JoinHandle<()>>,
    /// The current block.
    left: Vec<f32>,
    right: Option<Vec<f32>>,
    frames_decoded: u64,
    damaged_at_s: Vec<f64>,
    skipped_frames: u64,
    has_ended: bool,
}

impl DecodeAhead {
    /// What the file holds.
    pub fn info(&self) -> &SourceInfo {
        &self.info
    }

    /// Frames handed out so far.
    pub fn frames_decoded(&self) -> u64 {
        self.frames_decoded
    }

    /// Where damaged packets were replaced by silence (seconds into the audio); complete at
    /// the end.
    pub fn damaged_at_s(&self) -> &[f64] {
        &self.damaged_at_s
    }

    /// Frames a lossy stream's reader skipped without saying where; known at the end.
    pub fn skipped_frames(&self) -> u64 {
        self.skipped_frames
    }

    /// The next block as `[left, right]` (mono: the same slice twice), `None` at the end of
    /// the file, or the decoder's error. Waits for the decoding thread when it is behind.
    pub fn next_block(&mut self) -> Result<Option<[&[f32]; 2]>, String> {
        if self.has_ended {
            return Ok(None);
        }
        match self.receiver.recv() {
            Ok(Message::Block(left, right)) => {
                self.frames_decoded += left.len() as u64;
                self.left = left;
                self.right = right;
                let right = self.right.as_deref().unwrap_or(&self.left);
                Ok(Some([&self.left, right]))
            }
            Ok(Message::End {
                damaged_at_s,
                skipped_frames,
            }) => {
                self.has_ended = true;
                self.damaged_at_s = damaged_at_s;
                self.skipped_frames = skipped_frames;
                Ok(None)
            }
            Ok(Message::Failed(reason)) => {
                self.has_ended = true;
                Err(reason)
            }
            Ok(Message::Opened(_)) | Err(_) => {
                self.has_ended = true;
                Err("the decoding thread stopped unexpectedly".into())
            }
        }
    }
}

impl Drop for DecodeAhead {
    fn drop(&mut self) {
        join(&mut self.thread, &mut self.receiver);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use stemflow_kit::testing::{scratch_dir, write_wav};

    /// Writes a stereo 16-bit WAV of `num_frames` frames (left ramps, right is its negative).
    fn write_ramp_wav(path: &Path, num_frames: usize) {
        let left: Vec<f32> = (0..num_frames)
            .map(|i| (i % 20_000) as f32 / 32_768.0)
            .collect();
        let right = left.iter().map(|x| -x).collect();
        write_wav(path, 44_100, &[left, right], 16, false);
    }

    /// Every block of a file, through `AudioDecoder` directly and through `DecodeAhead`.
    #[test]
    fn hands_out_exactly_what_the_decoder_does() {
        let folder = scratch_dir("ahead-ramp");
        let path = folder.join("ramp.wav");
        // Far more blocks than the channel holds, so the thread waits on the way.
        write_ramp_wav(&path, 1_000_003);
        let mut direct = AudioDecoder::open(&path).unwrap();
        let mut expected = [Vec::new(), Vec::new()];
        while let Some([left, right]) = direct.next_block().unwrap() {
            expected[0].extend_from_slice(left);
            expected[1].extend_from_slice(right);
        }
        let mut ahead = PendingDecode::start(&path).open().unwrap();
        assert_eq!(ahead.info().sample_rate_hz, 44_100);
        let mut got = [Vec::new(), Vec::new()];
        while let Some([left, right]) = ahead.next_block().unwrap() {
            got[0].extend_from_slice(left);
            got[1].extend_from_slice(right);
        }
        assert_eq!(ahead.frames_decoded(), 1_000_003);
        assert_eq!(got, expected);
        assert!(ahead.next_block().unwrap().is_none());
    }

    #[test]
    fn an_unreadable_file_fails_on_open_with_the_decoders_reason() {
        let folder = scratch_dir("ahead-empty");
        let path = folder.join("empty.wav");
        std::fs::write(&path, b"").unwrap();
        let reason = PendingDecode::start(&path).open().err().unwrap();
        assert_eq!(reason, AudioDecoder::open(&path).err().unwrap());
    }

    #[test]
    fn a_panic_while_decoding_is_the_inputs_error() {
        let (sender, receiver) = sync_channel(MAX_BLOCKS_AHEAD);
        report_a_panic(&sender, || {
            panic!("TimeBase cannot have 0 numerator or denominator");
        });
        match receiver.try_recv() {
            Ok(Message::Failed(reason)) => {
                assert!(reason.contains("probably damaged"), "{reason}");
                assert!(reason.contains("TimeBase cannot have 0"), "{reason}");
            }
            _ => panic!("no failure was sent"),
        }
        // Work that ends normally sends nothing of its own.
        report_a_panic(&sender, || {});
        assert!(receiver.try_recv().is_err());
    }

    #[test]
    fn dropping_a_decode_half_way_stops_its_thread() {
        let folder = scratch_dir("ahead-long");
        let path = folder.join("long.wav");
        write_ramp_wav(&path, 2_000_000);
        let mut ahead = PendingDecode::start(&path).open().unwrap();
        assert!(ahead.next_block().unwrap().is_some());
        // Joins the thread, which is blocked on a full channel: must not hang.
        drop(ahead);
        // A pending decode nobody opened is stopped as well.
        drop(PendingDecode::start(&path));
    }
}
