//! Swapping the running stream while the host plays: the editor builds a stream for a newly
//! chosen model and hands it to the audio thread through a lock-free mailbox; the audio thread
//! fades the old stream out, installs the new one, reports its latency, fades the new stems in
//! once they arrive, and hands the old stream back to be freed off the audio thread.
//!
//! No host restart is needed, so this also works in hosts that ignore `request_restart` (VST3
//! hosts treat it as a latency change and never reactivate the plugin).

use rtrb::{Consumer, Producer, RingBuffer};
use stemflow_engine::stream::StemStreamHandle;

/// Streams that may wait in the mailbox at once. The sender refuses more, so the audio thread
/// always has room to hand an old stream back.
const MAILBOX_SLOTS: usize = 2;

/// How long the old stream fades out before a swap and the new one fades in, in milliseconds.
pub const SWAP_FADE_MS: f32 = 10.0;

/// The GUI/main-thread end: sends new streams, collects old ones. Not realtime-safe.
pub struct StreamSwapSender {
    outgoing: Producer<Box<StemStreamHandle>>,
    returned: Consumer<Box<StemStreamHandle>>,
    /// Sent and not yet returned.
    in_flight: usize,
}

/// The audio-thread end: installs a waiting stream with a fade. Realtime-safe.
pub struct StreamSwapHandle {
    incoming: Consumer<Box<StemStreamHandle>>,
    returned: Producer<Box<StemStreamHandle>>,
    fade_frames: usize,
    /// Frames left of the fade-out before the waiting stream is installed.
    fade_out_left: usize,
    /// Frames since the last swap; the new stream's stems fade in after its latency.
    frames_since_swap: usize,
    /// The latency of the stream installed by the last swap (`usize::MAX` before any swap: no
    /// fade-in).
    swapped_latency: usize,
}

/// A connected sender and handle for one activation at `sample_rate_hz`.
pub fn stream_swap_channel(sample_rate_hz: f32) -> (StreamSwapSender, StreamSwapHandle) {
    let (outgoing, incoming) = RingBuffer::new(MAILBOX_SLOTS);
    let (returned_producer, returned_consumer) = RingBuffer::new(MAILBOX_SLOTS);
    let fade_frames = ((SWAP_FADE_MS / 1000.0) * sample_rate_hz).ceil().max(1.0) as usize;
    (
        StreamSwapSender {
            outgoing,
            returned: returned_consumer,
            in_flight: 0,
        },
        StreamSwapHandle {
            incoming,
            returned: returned_producer,
            fade_frames,
            fade_out_left: fade_frames,
            frames_since_swap: 0,
            swapped_latency: usize::MAX,
        },
    )
}

impl StreamSwapSender {
    /// Sends a stream to be installed, or gives it back when the mailbox is full (the audio
    /// thread has not caught up with earlier swaps). Not realtime-safe.
    pub fn send(&mut self, stream: Box<StemStreamHandle>) -> Result<(), Box<StemStreamHandle>> {
        self.collect_returned();
        if self.in_flight >= MAILBOX_SLOTS {
            return Err(stream);
        }
        self.outgoing
            .push(stream)
            .map_err(|rtrb::PushError::Full(stream)| stream)?;
        self.in_flight += 1;
        Ok(())
    }

    /// Takes back the streams the audio thread has replaced, oldest first, for the caller to
    /// drop. Not realtime-safe (the caller frees them).
    pub fn take_returned(&mut self) -> Vec<Box<StemStreamHandle>> {
        let mut returned = Vec::new();
        while let Ok(stream) = self.returned.pop() {
            self.in_flight = self.in_flight.saturating_sub(1);
            returned.push(stream);
        }
        returned
    }

    /// Takes a stream that was sent but never installed (the plugin stopped processing), newest
    /// last. Only for the owner of the audio side while it does not process (`activate`).
    pub fn take_unsent(&mut self, handle: &mut StreamSwapHandle) -> Option<Box<StemStreamHandle>> {
        let mut newest = None;
        while let Ok(stream) = handle.incoming.pop() {
            self.in_flight = self.in_flight.saturating_sub(1);
            if let Some(older) = newest.replace(stream) {
                drop(older);
            }
        }
        newest
    }

    fn collect_returned(&mut self) {
        for stream in self.take_returned() {
            drop(stream);
        }
    }
}

impl StreamSwapHandle {
    /// Call once per block before processing `current`. While a stream waits it fades the
    /// output out over [`SWAP_FADE_MS`]; at the first block after the fade it installs the new
    /// stream in `current`, hands the old one back and returns the new latency (report it to the
    /// host). Realtime-safe: pops and pushes preallocated ring slots, moves a box pointer.
    pub fn begin_block(&mut self, current: &mut Box<StemStreamHandle>) -> Option<usize> {
        if self.incoming.is_empty() || self.fade_out_left > 0 {
            return None;
        }
        let Ok(mut new_stream) = self.incoming.pop() else {
            return None;
        };
        std::mem::swap(current, &mut new_stream);
        // The sender never has more than MAILBOX_SLOTS in flight, so there is room.
        if let Err(rtrb::PushError::Full(old)) = self.returned.push(new_stream) {
            // Unreachable by construction; keep the audio thread free of the drop anyway.
            std::mem::forget(old);
        }
        self.fade_out_left = self.fade_frames;
        self.frames_since_swap = 0;
        self.swapped_latency = current.latency_samples();
        Some(self.swapped_latency)
    }

    /// The gain of the next output frame: fading out while a swap waits, silent and then fading
    /// in after one, 1 otherwise. Realtime-safe.
    #[inline]
    pub fn next_gain(&mut self) -> f32 {
        if !self.incoming.is_empty() {
            self.fade_out_left = self.fade_out_left.saturating_sub(1);
            return self.fade_out_left as f32 / self.fade_frames as f32;
        }
        if self.swapped_latency == usize::MAX {
            return 1.0;
        }
        let since = self.frames_since_swap;
        self.frames_since_swap = self.frames_since_swap.saturating_add(1);
        match since.checked_sub(self.swapped_latency) {
            None => 0.0,
            Some(into_fade) if into_fade < self.fade_frames => {
                (into_fade + 1) as f32 / self.fade_frames as f32
            }
            Some(_) => {
                self.swapped_latency = usize::MAX;
                1.0
            }
        }
    }

    /// Whether the output is fading around a swap (call [`StreamSwapHandle::next_gain`] per
    /// frame then). Realtime-safe.
    pub fn is_fading(&self) -> bool {
        self.is_swap_pending() || self.swapped_latency != usize::MAX
    }

    /// Whether a stream waits to be installed. Realtime-safe.
    pub fn is_swap_pending(&self) -> bool {
        !self.incoming.is_empty()
    }
}
