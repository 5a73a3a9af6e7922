//! Streaming overlap-add over fixed model chunks, as the reference implementations stitch
//! whole files — computed chunk by chunk as audio arrives, so a stream and an offline render
//! give the same numbers.
//!
//! Coordinates: the reference code pads the start of the file (`lead` frames: zeros for
//! MDX-Net, a reflection for RoFormer, nothing for Demucs) and cuts chunks of `chunk_frames`
//! every `step_frames` from the padded signal `p`. Output frame `u` of the padded signal is
//! `Σ_k w_k[u − k·step] · y_k[u − k·step] / Σ_k w_k[u − k·step]` over the chunks `k` covering
//! `u`, and the separated stems of input frame `t` are output frame `t + lead`.

use crate::dsp::gcd;

/// What the reference code puts before the first input frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lead {
    /// `n` zeros (MDX-Net's `trim`).
    Zeros(usize),
    /// The first `n` frames mirrored without the edge frame (`torch` reflect padding, RoFormer's
    /// `border`); needs `n + 1` input frames before the first chunk can run.
    Reflect(usize),
}

impl Lead {
    /// Frames of padding.
    pub fn frames(self) -> usize {
        match self {
            Lead::Zeros(n) | Lead::Reflect(n) => n,
        }
    }
}

/// The fixed geometry of a chunked model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkLayout {
    /// Frames per model chunk.
    pub chunk_frames: usize,
    /// Frames between chunk starts.
    pub step_frames: usize,
    /// Padding before the first frame.
    pub lead: Lead,
    /// Frames at the start of each chunk whose window is zero: a chunk counts only from there
    /// (0 in the reference schedules; a short look-ahead uses only a chunk's end, see
    /// [`super::look_ahead_schedule`]).
    pub window_start_frames: usize,
}

impl ChunkLayout {
    /// Chunks of `chunk_frames` every `step_frames`, `lead` before the first frame, each counted
    /// from its first frame (the reference schedules).
    pub fn new(chunk_frames: usize, step_frames: usize, lead: Lead) -> Self {
        Self {
            chunk_frames,
            step_frames,
            lead,
            window_start_frames: 0,
        }
    }

    /// Frames per streaming hop: the largest that divides both the chunk and the step, so chunks
    /// complete on hop boundaries.
    pub fn hop_frames(&self) -> usize {
        gcd(self.chunk_frames, self.step_frames)
    }

    /// Padded frames available once `input_frames` have arrived.
    fn padded_available(&self, input_frames: usize) -> usize {
        match self.lead {
            Lead::Zeros(n) => input_frames + n,
            Lead::Reflect(n) if input_frames > n => input_frames + n,
            // The mirrored prefix is not known yet: nothing before it is usable.
            Lead::Reflect(_) => 0,
        }
    }

    /// Chunks that can run once `input_frames` have arrived.
    fn chunks_ready(&self, input_frames: usize) -> usize {
        let available = self.padded_available(input_frames);
        if available < self.chunk_frames {
            0
        } else {
            (available - self.chunk_frames) / self.step_frames + 1
        }
    }

    /// The delay between an input frame and its separated output when the stream emits one
    /// hop per hop of input: the smallest delay for which every emitted frame is final
    /// (no later chunk overlaps it).
    pub fn latency_frames(&self) -> usize {
        let hop = self.hop_frames();
        let lead = self.lead.frames();
        // After the start the schedule repeats every step; simulate well past the start.
        let horizon = 2 * (lead + self.chunk_frames + 2 * self.step_frames) + 2 * hop;
        let mut latency = 0;
        let mut input = hop;
        while input <= horizon {
            // Output frames [input − hop, input) carry input frames up to input − 1 − latency,
            // i.e. padded frames up to input − 1 − latency + lead, which must be below the start
            // of the first chunk not yet computed.
            let final_end = self.chunks_ready(input) * self.step_frames + self.window_start_frames;
            let needed = (input + lead).saturating_sub(final_end);
            latency = latency.max(needed.min(input));
            input += hop;
        }
        latency
    }
}

/// The overlap-add state of one stream: the padded input, the weighted sums of the chunks'
/// outputs and their weights. Buffers are sized once; nothing allocates after `new`.
pub struct OverlapAdd {
    layout: ChunkLayout,
    hop_frames: usize,
    latency_frames: usize,
    /// How far the input may run ahead of what is still needed before it is shifted back:
    /// shifting it every hop would move megabytes per hop (a Spleeter segment), so it is done
    /// once per `compact_slack_frames`.
    compact_slack_frames: usize,
    /// Padded input, planar stereo, holding padded frames `[input_base, input_base + input_len)`.
    input: [Vec<f32>; 2],
    input_base: usize,
    input_len: usize,
    /// Input frames received.
    input_frames: usize,
    /// Whether the reflect prefix has been written.
    has_prefix: bool,
    /// Weighted output sums `[output][channel]` and weight sums, circular: padded frame `u`
    /// lives at `u % sum_capacity`, for the `sum_capacity` frames up to `written_end`. float32,
    /// as the reference pipelines accumulate (demucs' `apply_model`, audio-separator's and
    /// MSST's `demix`): a chunk overlaps at most a few others, and half the memory of float64.
    sums: Vec<[Vec<f32>; 2]>,
    weights: Vec<f32>,
    sum_capacity: usize,
    /// End of the newest chunk accumulated (padded frames): frames from here on are fresh, and
    /// their slots are cleared before a chunk first adds to them.
    written_end: usize,
    /// Next chunk to compute.
    next_chunk: usize,
    /// Input frames emitted as output so far (the output position, in input frames).
    output_frames: usize,
}

impl OverlapAdd {
    /// Allocates the buffers for `layout` with `num_outputs` stereo outputs per chunk.
    /// Not realtime-safe.
    pub fn new(layout: ChunkLayout, num_outputs: usize) -> Self {
        let hop_frames = layout.hop_frames();
        let latency_frames = layout.latency_frames();
        // The input starts where `compact` keeps from: the next chunk's start, which trails
        // the newest padded input by less than a chunk once the ready chunks ran, or the next
        // output, which trails it by the latency. `compact` leaves at most
        // `compact_slack_frames` more before it, and a hop arrives before the next compaction;
        // until a reflected lead is known nothing is dropped, which the lead covers.
        let compact_slack_frames = (layout.step_frames / 4).max(hop_frames);
        let input_capacity = layout.chunk_frames.max(latency_frames)
            + layout.lead.frames()
            + hop_frames
            + compact_slack_frames;
        // A frame is read (emitted) while the newest chunk ends at most the latency and a hop
        // past it: the chunk ends at the newest padded input, the frames emitted after that
        // input's hop start `latency + hop` before it. A chunk must not wrap onto itself.
        let sum_capacity = (latency_frames + hop_frames).max(layout.chunk_frames);
        Self {
            layout,
            hop_frames,
            latency_frames,
            compact_slack_frames,
            input: [vec![0.0; input_capacity], vec![0.0; input_capacity]],
            input_base: 0,
            input_len: 0,
            input_frames: 0,
            has_prefix: false,
            sums: (0..num_outputs)
                .map(|_| [vec![0.0; sum_capacity], vec![0.0; sum_capacity]])
                .collect(),
            weights: vec![0.0; sum_capacity],
            sum_capacity,
            written_end: 0,
            next_chunk: 0,
            output_frames: 0,
        }
        .reset_in_place()
    }

    fn reset_in_place(mut self) -> Self {
        self.reset();
        self
    }

    /// Forgets everything. Realtime-safe.
    pub fn reset(&mut self) {
        for channel in &mut self.input {
            channel.fill(0.0);
        }
        for output in &mut self.sums {
            for channel in output.iter_mut() {
                channel.fill(0.0);
            }
        }
        self.weights.fill(0.0);
        self.input_base = 0;
        self.written_end = 0;
        self.input_frames = 0;
        self.next_chunk = 0;
        self.output_frames = 0;
        match self.layout.lead {
            Lead::Zeros(n) => {
                self.input_len = n;
                self.has_prefix = true;
            }
            Lead::Reflect(n) => {
                self.input_len = n;
                self.has_prefix = n == 0;
            }
        }
    }

    /// Frames per hop.
    pub fn hop_frames(&self) -> usize {
        self.hop_frames
    }

    /// Delay from input to output, in frames.
    pub fn latency_frames(&self) -> usize {
        self.latency_frames
    }

    /// Appends one hop of input (`left`, `right`: `hop_frames` each). Realtime-safe.
    pub fn push_hop(&mut self, left: &[f32], right: &[f32]) {
        let n = left.len();
        let offset = self.input_len;
        self.input[0][offset..offset + n].copy_from_slice(left);
        self.input[1][offset..offset + n].copy_from_slice(right);
        self.input_len += n;
        self.input_frames += n;
        if let Lead::Reflect(lead) = self.layout.lead {
            if !self.has_prefix && self.input_frames > lead {
                // p[u] = x[lead − u] = p[2·lead − u] for u < lead (`input_base` is still 0).
                for channel in &mut self.input {
                    for u in 0..lead {
                        channel[u] = channel[2 * lead - u];
                    }
                }
                self.has_prefix = true;
            }
        }
    }

    /// The next chunk that can run: its index, its input as planar stereo slices of
    /// `chunk_frames`, and the sums its outputs go into; `None` until enough input has arrived.
    /// Realtime-safe.
    pub fn ready_chunk(&mut self) -> Option<ReadyChunk<'_>> {
        if !self.has_prefix {
            return None;
        }
        let chunk = self.layout.chunk_frames;
        let start = self.next_chunk * self.layout.step_frames;
        let end = start + chunk;
        if end > self.input_base + self.input_len {
            return None;
        }
        // Slots the chunk reaches for the first time still hold frames `sum_capacity` older.
        if end > self.written_end {
            let fresh_from = self.written_end.max(end.saturating_sub(self.sum_capacity));
            for (from, to) in slot_ranges(self.sum_capacity, fresh_from, end) {
                for sums in &mut self.sums {
                    for sum in sums.iter_mut() {
                        sum[from..to].fill(0.0);
                    }
                }
                self.weights[from..to].fill(0.0);
            }
            self.written_end = end;
        }
        let from = start - self.input_base;
        Some(ReadyChunk {
            index: self.next_chunk,
            input: [
                &self.input[0][from..from + chunk],
                &self.input[1][from..from + chunk],
            ],
            sums: ChunkSums {
                sums: &mut self.sums,
                weights: &mut self.weights,
                chunk_start: start,
                chunk_frames: chunk,
                window_start_frames: self.layout.window_start_frames,
                next_chunk: &mut self.next_chunk,
            },
        })
    }

    /// Emits one hop of output: for each of the hop's frames, the stitched outputs (`None` before
    /// the stream's start, when the frame is silence) and the input frame they belong to.
    /// Call after every [`OverlapAdd::push_hop`] once all ready chunks are accumulated.
    /// `emit(frame_in_hop, outputs_and_mix)` gets, per frame, a closure-free view: the value of
    /// output `o`, channel `c` via `value(o, c)` and the matching input via `mix(c)`.
    /// Realtime-safe.
    pub fn emit_hop(&mut self, mut emit: impl FnMut(usize, Option<FrameView<'_>>)) {
        let lead = self.layout.lead.frames();
        let end = self.input_frames;
        debug_assert!(self.next_chunk >= self.layout.chunks_ready(end).min(self.next_chunk));
        for i in 0..self.hop_frames {
            let output_frame = end - self.hop_frames + i;
            if output_frame < self.latency_frames {
                emit(i, None);
                continue;
            }
            let padded = output_frame - self.latency_frames + lead;
            debug_assert!(
                padded
                    < self.next_chunk * self.layout.step_frames + self.layout.window_start_frames
            );
            debug_assert!(self.written_end <= padded + self.sum_capacity);
            emit(
                i,
                Some(FrameView {
                    overlap_add: self,
                    sum_index: padded % self.sum_capacity,
                    input_index: padded - self.input_base,
                }),
            );
        }
        self.output_frames = end;
        self.compact();
    }

    /// Drops the input no future chunk or output needs, keeping it bounded: once at least
    /// `compact_slack_frames` can go (the buffer has that much room to spare), so it moves once
    /// per slack, not once per hop. (The sums are circular and never move.) Realtime-safe.
    fn compact(&mut self) {
        let lead = self.layout.lead.frames();
        let next_output_padded = (self.output_frames + lead).saturating_sub(self.latency_frames);
        let next_chunk_start = self.next_chunk * self.layout.step_frames;
        let keep_from = next_output_padded.min(next_chunk_start);
        if keep_from < self.input_base + self.compact_slack_frames || !self.has_prefix {
            return;
        }
        let drop = keep_from - self.input_base;
        for channel in &mut self.input {
            channel.copy_within(drop..self.input_len, 0);
        }
        self.input_len -= drop;
        self.input_base = keep_from;
    }
}

/// A chunk ready to run, from [`OverlapAdd::ready_chunk`].
pub struct ReadyChunk<'a> {
    /// Its index in the stream (0: the first chunk).
    pub index: usize,
    /// Its input, planar stereo.
    pub input: [&'a [f32]; 2],
    /// Where its outputs go.
    pub sums: ChunkSums<'a>,
}

/// The weighted sums one chunk's outputs are added to.
pub struct ChunkSums<'a> {
    sums: &'a mut [[Vec<f32>; 2]],
    weights: &'a mut [f32],
    chunk_start: usize,
    chunk_frames: usize,
    window_start_frames: usize,
    next_chunk: &'a mut usize,
}

impl ChunkSums<'_> {
    /// Adds the chunk's outputs, `outputs[(output · 2 + channel) · chunk_frames + frame]`,
    /// weighted by `window`. Realtime-safe.
    pub fn add(&mut self, outputs: &[f32], window: &[f32]) {
        let chunk = self.chunk_frames;
        // The window is zero before `window_start_frames`: those frames add nothing.
        let mut offset = self.window_start_frames;
        let capacity = self.weights.len();
        for (from, to) in slot_ranges(
            capacity,
            self.chunk_start + offset,
            self.chunk_start + chunk,
        ) {
            let len = to - from;
            let window = &window[offset..offset + len];
            for (output, sums) in self.sums.iter_mut().enumerate() {
                for (channel, sum) in sums.iter_mut().enumerate() {
                    let source = &outputs[(output * 2 + channel) * chunk + offset..][..len];
                    for ((acc, &y), &w) in sum[from..to].iter_mut().zip(source).zip(window) {
                        *acc += w * y;
                    }
                }
            }
            offset += len;
        }
    }

    /// Adds the chunk's weights — whether its outputs were added or not: a chunk the model could
    /// not separate counts as silence — and moves on to the next chunk. Realtime-safe.
    pub fn finish(self, window: &[f32]) {
        let skip = self.window_start_frames;
        let capacity = self.weights.len();
        let mut offset = skip;
        for (from, to) in slot_ranges(
            capacity,
            self.chunk_start + skip,
            self.chunk_start + self.chunk_frames,
        ) {
            for (acc, &w) in self.weights[from..to].iter_mut().zip(&window[offset..]) {
                *acc += w;
            }
            offset += to - from;
        }
        *self.next_chunk += 1;
    }
}

/// The slot ranges of padded frames `[start, end)` (at most `capacity` of them) in circular
/// sums of `capacity` slots: one range, or two where they wrap.
fn slot_ranges(capacity: usize, start: usize, end: usize) -> impl Iterator<Item = (usize, usize)> {
    debug_assert!(end - start <= capacity);
    let from = start % capacity;
    let first_end = (from + (end - start)).min(capacity);
    let wrapped = end - start - (first_end - from);
    std::iter::once((from, first_end)).chain((wrapped > 0).then_some((0, wrapped)))
}

/// One stitched output frame.
pub struct FrameView<'a> {
    overlap_add: &'a OverlapAdd,
    sum_index: usize,
    input_index: usize,
}

impl FrameView<'_> {
    /// Output `output`, `channel`: the weighted average of the chunks covering the frame.
    pub fn value(&self, output: usize, channel: usize) -> f64 {
        let weight = f64::from(self.overlap_add.weights[self.sum_index]);
        let sum = f64::from(self.overlap_add.sums[output][channel][self.sum_index]);
        // The reference implementations guard the division the same way (max/clamp/nan_to_num).
        if weight > 1e-10 {
            sum / weight
        } else {
            0.0
        }
    }

    /// The input frame the output belongs to.
    pub fn mix(&self, channel: usize) -> f32 {
        self.overlap_add.input[channel][self.input_index]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Whole-signal overlap-add, written the way the reference code does it.
    fn reference(
        x: &[f32],
        layout: ChunkLayout,
        window: &[f64],
        f: impl Fn(f32, usize) -> f32,
    ) -> Vec<f64> {
        let lead = layout.lead.frames();
        let mut p: Vec<f32> = match layout.lead {
            Lead::Zeros(n) => vec![0.0; n],
            Lead::Reflect(n) => (0..n).map(|u| x[n - u]).collect(),
        };
        p.extend_from_slice(x);
        p.extend(std::iter::repeat_n(0.0, layout.chunk_frames));
        let mut sum = vec![0.0; p.len()];
        let mut weight = vec![0.0; p.len()];
        let mut start = 0;
        while start + layout.chunk_frames <= p.len() {
            for j in 0..layout.chunk_frames {
                sum[start + j] += window[j] * f(p[start + j], j) as f64;
                weight[start + j] += window[j];
            }
            start += layout.step_frames;
        }
        (0..x.len())
            .map(|t| sum[t + lead] / weight[t + lead])
            .collect()
    }

    fn run(layout: ChunkLayout, window: &[f64]) {
        let f = |v: f32, j: usize| v * (1.0 + j as f32 / 100.0);
        let n = 20 * layout.chunk_frames;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 31 % 97) as f32 / 97.0) - 0.5)
            .collect();
        let expected = reference(&x, layout, window, f);
        let mut ola = OverlapAdd::new(layout, 1);
        let window32: Vec<f32> = window.iter().map(|&w| w as f32).collect();
        let hop = ola.hop_frames();
        let latency = ola.latency_frames();
        let mut got = vec![0.0f64; n + latency + hop];
        let mut mixes = vec![0.0f32; n + latency + hop];
        let mut outputs = vec![0.0f32; 2 * layout.chunk_frames];
        let mut position = 0;
        let mut padded_x = x.clone();
        padded_x.extend(std::iter::repeat_n(0.0, latency + hop));
        while position + hop <= padded_x.len() {
            let block = &padded_x[position..position + hop];
            ola.push_hop(block, block);
            while let Some(mut chunk) = ola.ready_chunk() {
                let [left, _] = chunk.input;
                for c in 0..2 {
                    for j in 0..layout.chunk_frames {
                        outputs[c * layout.chunk_frames + j] = f(left[j], j);
                    }
                }
                chunk.sums.add(&outputs, &window32);
                chunk.sums.finish(&window32);
            }
            ola.emit_hop(|i, view| {
                if let Some(view) = view {
                    got[position + i] = view.value(0, 0);
                    mixes[position + i] = view.mix(0);
                }
            });
            position += hop;
        }
        for t in 0..n - 2 * layout.chunk_frames {
            let out = got[t + latency];
            // float32 sums against a float64 reference.
            assert!(
                (out - expected[t]).abs() < 1e-6 * (1.0 + expected[t].abs()),
                "t {t}: {out} vs {}",
                expected[t]
            );
            assert_eq!(mixes[t + latency], x[t]);
        }
        for t in 0..latency {
            assert_eq!(got[t], 0.0);
        }
    }

    #[test]
    fn streaming_matches_whole_signal_stitching_for_each_lead() {
        let hann: Vec<f64> = (0..48)
            .map(|i| 0.5 - 0.5 * (2.0 * std::f64::consts::PI * i as f64 / 47.0).cos())
            .collect();
        run(ChunkLayout::new(48, 36, Lead::Zeros(5)), &hann);
        let ones = vec![1.0; 40];
        run(ChunkLayout::new(40, 10, Lead::Reflect(30)), &ones);
        let triangle: Vec<f64> = (0..40).map(|i| (1 + i.min(39 - i)) as f64).collect();
        run(ChunkLayout::new(40, 30, Lead::Zeros(0)), &triangle);
    }

    #[test]
    fn every_small_layout_streams_within_its_buffers_and_matches_the_reference() {
        // The buffers are sized from the layout (`OverlapAdd::new`); a layout they did not
        // hold would index past them here.
        for chunk in 4..=20 {
            for step in 1..=chunk {
                for window_start in [0, chunk / 2] {
                    if step > chunk - window_start {
                        continue; // frames no chunk's window covers
                    }
                    let window: Vec<f64> = (0..chunk)
                        .map(|j| {
                            if j < window_start {
                                0.0
                            } else {
                                1.0 + (j % 3) as f64
                            }
                        })
                        .collect();
                    for lead in [
                        Lead::Zeros(0),
                        Lead::Zeros(chunk / 2),
                        Lead::Zeros(chunk + 3),
                        Lead::Reflect(1),
                        Lead::Reflect(chunk - 1),
                    ] {
                        if lead.frames() < window_start {
                            continue; // the first chunk's zeroed start covers input frames
                        }
                        let layout = ChunkLayout {
                            chunk_frames: chunk,
                            step_frames: step,
                            lead,
                            window_start_frames: window_start,
                        };
                        run(layout, &window);
                    }
                }
            }
        }
    }

    #[test]
    fn latency_is_the_chunk_minus_a_hop_without_lead() {
        let layout = ChunkLayout::new(343_980, 257_985, Lead::Zeros(0));
        assert_eq!(layout.hop_frames(), 85_995);
        assert_eq!(layout.latency_frames(), 343_980 - 85_995);
    }
}
