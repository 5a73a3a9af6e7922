//! Helpers for safely constructing [`Buffer`]s from a plugin host's audio buffers.

use std::num::NonZeroU32;
use std::ptr::NonNull;

use nice_plug_core::audio_setup::AudioIOLayout;
use nice_plug_core::buffer::Buffer;

/// Buffers created using [`create_buffers`]. At some point the main `Plugin::process()` should
/// probably also take an argument like this instead of main+aux buffers if we also want to provide
/// access to overflowing input channels for e.g. stereo to mono plugins.
pub struct Buffers<'a, 'buffer: 'a> {
    pub main_buffer: &'a mut Buffer<'buffer>,

    // We can't use `AuxiliaryBuffers` here directly because we need different lifetimes for `'a`
    // and `'buffer` while `AuxiliaryBuffers` uses the same lifetime for both.
    pub aux_inputs: &'a mut [Buffer<'buffer>],
    pub aux_outputs: &'a mut [Buffer<'buffer>],
}

/// A helper for safely creating and initializing [`Buffer`]s based on the host's input and output
/// buffers.
///
/// Hosts may hand out output channel pointers that alias input channel pointers (in-place
/// processing, but also arbitrary cross-channel mappings), or that alias each other (e.g. Ardour
/// points every unconnected output channel at one shared scratch buffer). To make sure the plugin
/// always sees the host's true input, every input channel is first copied into storage owned by
/// this object before anything is written to any output buffer. Every output channel that the host
/// did not provide, or whose pointer was already handed out for another output channel, is backed
/// by private scratch storage instead, so no two slices passed to the plugin overlap.
pub struct BufferManager {
    // These are the storage backing the fields in `BufferSource`. The wrapper needs to set these
    // values to match the channel pointers provided by the host. If audio buffers are not provided
    // for a bus, then they should be set to `None`.
    main_input_channel_pointers: Option<ChannelPointers>,
    main_output_channel_pointers: Option<ChannelPointers>,
    aux_input_channel_pointers: Vec<Option<ChannelPointers>>,
    aux_output_channel_pointers: Vec<Option<ChannelPointers>>,

    /// The backing buffers that will be filled during `create_buffers`. This `'static` lifetime
    /// will be shortened when returning a reference to these buffers in `create_buffers` to match
    /// the function's lifetime.
    main_buffer: Buffer<'static>,
    /// A snapshot of the host's main input channels, taken before any output is written to.
    main_input_storage: Vec<Vec<f32>>,
    /// Backs main output channels the host did not provide or that alias another output channel.
    main_output_scratch: Vec<Vec<f32>>,

    aux_input_buffers: Vec<Buffer<'static>>,
    /// Stores the data to back `aux_input_buffers`. We need to copy the host's auxiliary input
    /// buffers to our own first because the `Buffer` API is designed around mutable buffers, and
    /// the host may reuse its input buffers between plugins.
    aux_input_storage: Vec<Vec<Vec<f32>>>,

    aux_output_buffers: Vec<Buffer<'static>>,
    /// Backs aux output channels the host did not provide or that alias another output channel.
    aux_output_scratch: Vec<Vec<Vec<f32>>>,

    /// The host output channel pointers already handed out during the current `create_buffers()`
    /// call. Preallocated to hold every output channel.
    claimed_output_pointers: Vec<*mut f32>,
}

// SAFETY: The raw pointers in the `ChannelPointers` fields/vectors are only used as scratch storage
//         inside of the `create_buffers()` function.
unsafe impl Send for BufferManager {}
unsafe impl Sync for BufferManager {}

/// Host data that the plugin's [`Buffer`]s should be created from. Leave these fields as `None`
/// values
#[derive(Debug)]
pub struct BufferSource<'a> {
    pub main_input_channel_pointers: &'a mut Option<ChannelPointers>,
    pub main_output_channel_pointers: &'a mut Option<ChannelPointers>,
    pub aux_input_channel_pointers: &'a mut [Option<ChannelPointers>],
    pub aux_output_channel_pointers: &'a mut [Option<ChannelPointers>],
}

/// Pointers to raw multichannel audio data for this port.
#[derive(Debug, Clone, Copy)]
pub struct ChannelPointers {
    /// A raw pointer to an array of f32 arrays, containing one array for each channel. `ptrs` must
    /// contain (at least) `num_channel` `*const f32`s, and each of those inner arrays must contain
    /// (at least) `num_samples` `f32` values.
    pub ptrs: NonNull<*mut f32>,
    /// The number of audio channels used for this port.
    pub num_channels: usize,
}

impl ChannelPointers {
    /// The host's pointer for channel `channel_idx`, or `None` if the host provided fewer channels
    /// or a null pointer for this channel.
    ///
    /// # Safety
    ///
    /// `ptrs` must point to at least `num_channels` channel pointers.
    unsafe fn channel(&self, channel_idx: usize) -> Option<*mut f32> {
        if channel_idx < self.num_channels {
            let ptr = unsafe { *self.ptrs.as_ptr().add(channel_idx) };
            (!ptr.is_null()).then_some(ptr)
        } else {
            None
        }
    }
}

/// Copy one host channel (or silence if the host did not provide it) into our own storage.
///
/// # Safety
///
/// See [`BufferManager::create_buffers()`].
unsafe fn snapshot_channel(
    host: Option<ChannelPointers>,
    channel_idx: usize,
    sample_offset: usize,
    num_samples: usize,
    storage: &mut Vec<f32>,
) {
    // This only allocates if the host exceeds the maximum buffer size it announced
    storage.resize(num_samples, 0.0);
    match host.and_then(|host| unsafe { host.channel(channel_idx) }) {
        Some(ptr) => storage.copy_from_slice(unsafe {
            std::slice::from_raw_parts(ptr.add(sample_offset), num_samples)
        }),
        None => storage.fill(0.0),
    }
}

/// Pick the memory that backs output channel `channel_idx`: the host's buffer if it provided one
/// that no other output slice uses yet, or our own scratch storage otherwise.
///
/// # Safety
///
/// See [`BufferManager::create_buffers()`].
unsafe fn claim_output_channel(
    host: Option<ChannelPointers>,
    channel_idx: usize,
    sample_offset: usize,
    num_samples: usize,
    scratch: &mut Vec<f32>,
    claimed: &mut Vec<*mut f32>,
) -> &'static mut [f32] {
    if let Some(ptr) = host.and_then(|host| unsafe { host.channel(channel_idx) })
        && !claimed.contains(&ptr)
    {
        claimed.push(ptr);
        return unsafe { std::slice::from_raw_parts_mut(ptr.add(sample_offset), num_samples) };
    }

    // This only allocates if the host exceeds the maximum buffer size it announced
    scratch.resize(num_samples, 0.0);
    // SAFETY: The scratch storage is not accessed directly while the returned slice is alive
    unsafe { &mut *(scratch.as_mut_slice() as *mut [f32]) }
}

impl BufferManager {
    /// Initialize managed buffers for a specific audio IO layout. The actual buffers can be set up
    /// using channel pointer data using [`create_buffers()`][Self::create_buffers()].
    pub fn for_audio_io_layout(max_buffer_size: usize, audio_io_layout: AudioIOLayout) -> Self {
        crate::nice_debug_assert!(
            audio_io_layout
                .main_input_channels
                .map(NonZeroU32::get)
                .unwrap_or(0)
                <= audio_io_layout
                    .main_output_channels
                    .map(NonZeroU32::get)
                    .unwrap_or(0),
            "Stereo-to-mono and other many-to-few audio channel configurations are currently not \
             supported"
        );

        let num_main_input_channels = audio_io_layout
            .main_input_channels
            .map(NonZeroU32::get)
            .unwrap_or(0) as usize;
        let num_main_output_channels = audio_io_layout
            .main_output_channels
            .map(NonZeroU32::get)
            .unwrap_or(0) as usize;

        // The buffers are preallocated so that `create_buffers()` can be called without having to
        // allocate
        let mut main_buffer = Buffer::default();
        unsafe {
            main_buffer.set_slices(0, |output_slices| {
                output_slices.resize_with(num_main_output_channels, || &mut []);
            })
        };

        let mut aux_input_buffers = Vec::with_capacity(audio_io_layout.aux_input_ports.len());
        let mut aux_input_storage = Vec::with_capacity(audio_io_layout.aux_input_ports.len());
        for num_channels in audio_io_layout.aux_input_ports {
            let mut buffer = Buffer::default();
            unsafe {
                buffer.set_slices(0, |slices| {
                    slices.resize_with(num_channels.get() as usize, || &mut []);
                })
            };

            aux_input_buffers.push(buffer);
            aux_input_storage.push(vec![
                vec![0.0; max_buffer_size];
                num_channels.get() as usize
            ]);
        }

        let mut aux_output_buffers = Vec::with_capacity(audio_io_layout.aux_output_ports.len());
        let mut aux_output_scratch = Vec::with_capacity(audio_io_layout.aux_output_ports.len());
        for num_channels in audio_io_layout.aux_output_ports {
            let mut buffer = Buffer::default();
            unsafe {
                buffer.set_slices(0, |slices| {
                    slices.resize_with(num_channels.get() as usize, || &mut []);
                })
            };

            aux_output_buffers.push(buffer);
            aux_output_scratch.push(vec![
                vec![0.0; max_buffer_size];
                num_channels.get() as usize
            ]);
        }

        let num_output_channels = num_main_output_channels
            + audio_io_layout
                .aux_output_ports
                .iter()
                .map(|num_channels| num_channels.get() as usize)
                .sum::<usize>();

        Self {
            main_input_channel_pointers: None,
            main_output_channel_pointers: None,
            aux_input_channel_pointers: vec![None; audio_io_layout.aux_input_ports.len()],
            aux_output_channel_pointers: vec![None; audio_io_layout.aux_output_ports.len()],

            main_buffer,
            main_input_storage: vec![vec![0.0; max_buffer_size]; num_main_input_channels],
            main_output_scratch: vec![vec![0.0; max_buffer_size]; num_main_output_channels],

            aux_input_buffers,
            aux_input_storage,

            aux_output_buffers,
            aux_output_scratch,

            claimed_output_pointers: Vec::with_capacity(num_output_channels),
        }
    }

    /// Initialize the buffers using the host provided buffer pointers and return a reference to the
    /// created buffers that can be passed to `Plugin::process()`. This accounts for in-place main
    /// IO, aliasing host buffers, missing channel pointers, null pointers, and mismatching channel
    /// counts. The main buffer contains the host's main input (silence for channels without a
    /// matching input channel), and all aux outputs are filled with zeroes.
    ///
    /// `sample_offset` and `num_samples` can be used to slice a set of host channel pointers for
    /// sample accurate automation. Output channels the host did not provide (or that alias another
    /// output channel) are backed by scratch storage, so every slice has `num_samples` samples.
    ///
    /// # Safety
    ///
    /// Any provided `ChannelPointers` must point to memory regions that remain valid to read from
    /// or write to for the lifetime of the returned [`Buffers`].
    pub unsafe fn create_buffers<'a, 'buffer: 'a>(
        &'a mut self,
        sample_offset: usize,
        num_samples: usize,
        set_buffer_sources: impl FnOnce(&mut BufferSource),
    ) -> Buffers<'a, 'buffer> {
        // Make sure the caller can't forget to unset previously set values
        self.main_input_channel_pointers = None;
        self.main_output_channel_pointers = None;
        self.aux_input_channel_pointers.fill(None);
        self.aux_output_channel_pointers.fill(None);
        set_buffer_sources(&mut BufferSource {
            main_input_channel_pointers: &mut self.main_input_channel_pointers,
            main_output_channel_pointers: &mut self.main_output_channel_pointers,
            aux_input_channel_pointers: &mut self.aux_input_channel_pointers,
            aux_output_channel_pointers: &mut self.aux_output_channel_pointers,
        });

        // Step 1: snapshot every host input before anything is written to any host output buffer,
        // since those may alias the inputs
        for (channel_idx, storage) in self.main_input_storage.iter_mut().enumerate() {
            unsafe {
                snapshot_channel(
                    self.main_input_channel_pointers,
                    channel_idx,
                    sample_offset,
                    num_samples,
                    storage,
                )
            };
        }
        for (input_channel_pointers, (input_storage, input_buffer)) in
            self.aux_input_channel_pointers.iter().zip(
                self.aux_input_storage
                    .iter_mut()
                    .zip(self.aux_input_buffers.iter_mut()),
            )
        {
            for (channel_idx, storage) in input_storage.iter_mut().enumerate() {
                unsafe {
                    snapshot_channel(
                        *input_channel_pointers,
                        channel_idx,
                        sample_offset,
                        num_samples,
                        storage,
                    )
                };
            }

            unsafe {
                input_buffer.set_slices(num_samples, |input_slices| {
                    // Since we initialized both `input_buffer` and `input_storage` this invariant
                    // should never fail unless we made an error ourselves
                    debug_assert_eq!(input_slices.len(), input_storage.len());

                    for (channel_slice, channel_storage) in
                        input_slices.iter_mut().zip(input_storage.iter_mut())
                    {
                        // SAFETY: `channel_storage` is no longer used accessed directly after this
                        *channel_slice = &mut *(channel_storage.as_mut_slice() as *mut [f32]);
                    }
                });
            }
        }

        // Step 2: point every output channel at memory no other output slice uses. Main outputs
        // are claimed first so an aux output that aliases a main output can't overwrite it.
        self.claimed_output_pointers.clear();
        let claimed = &mut self.claimed_output_pointers;
        let main_output_channel_pointers = self.main_output_channel_pointers;
        let main_output_scratch = &mut self.main_output_scratch;
        unsafe {
            self.main_buffer.set_slices(num_samples, |output_slices| {
                for (channel_idx, (output_slice, scratch)) in output_slices
                    .iter_mut()
                    .zip(main_output_scratch.iter_mut())
                    .enumerate()
                {
                    *output_slice = claim_output_channel(
                        main_output_channel_pointers,
                        channel_idx,
                        sample_offset,
                        num_samples,
                        scratch,
                        claimed,
                    );
                }
            });
        }
        for ((output_channel_pointers, output_buffer), scratch) in self
            .aux_output_channel_pointers
            .iter()
            .zip(self.aux_output_buffers.iter_mut())
            .zip(self.aux_output_scratch.iter_mut())
        {
            unsafe {
                output_buffer.set_slices(num_samples, |output_slices| {
                    for (channel_idx, (output_slice, scratch)) in
                        output_slices.iter_mut().zip(scratch.iter_mut()).enumerate()
                    {
                        *output_slice = claim_output_channel(
                            *output_channel_pointers,
                            channel_idx,
                            sample_offset,
                            num_samples,
                            scratch,
                            claimed,
                        );

                        // The host may not zero out the buffers, and assume the plugin always
                        // write something there
                        output_slice.fill(0.0);
                    }
                });
            }
        }

        // Step 3: since nice-plug processes audio in-place, the main input snapshot is copied to
        // the main output buffers. Channels without a matching input channel are silent.
        for (channel_idx, output_slice) in self.main_buffer.as_slice().iter_mut().enumerate() {
            match self.main_input_storage.get(channel_idx) {
                Some(input) => output_slice.copy_from_slice(input),
                None => output_slice.fill(0.0),
            }
        }

        // SAFETY: The 'static lifetimes on the objects are needed so we can store the buffers.
        //         Their actual lifetimes are `'a`, so we need to shrink them here. The contents are
        //         valid for as long as the returned object is borrowed.
        unsafe {
            std::mem::transmute::<Buffers<'a, 'static>, Buffers<'a, 'buffer>>(Buffers {
                main_buffer: &mut self.main_buffer,
                aux_inputs: &mut self.aux_input_buffers,
                aux_outputs: &mut self.aux_output_buffers,
            })
        }
    }
}

#[cfg(any(miri, test))]
mod miri {
    use nice_plug_core::audio_setup::{PortNames, new_nonzero_u32};

    use super::*;

    const BUFFER_SIZE: usize = 512;
    const NUM_MAIN_INPUT_CHANNELS: usize = 1;
    const NUM_MAIN_OUTPUT_CHANNELS: usize = 2;

    const NUM_AUX_CHANNELS: usize = 2;
    const NUM_AUX_PORTS: usize = 2;

    const AUDIO_IO_LAYOUT: AudioIOLayout = AudioIOLayout {
        main_input_channels: Some(new_nonzero_u32(NUM_MAIN_INPUT_CHANNELS as u32)),
        main_output_channels: Some(new_nonzero_u32(NUM_MAIN_OUTPUT_CHANNELS as u32)),
        aux_input_ports: &[new_nonzero_u32(NUM_AUX_CHANNELS as u32); NUM_AUX_PORTS],
        aux_output_ports: &[new_nonzero_u32(NUM_AUX_CHANNELS as u32); NUM_AUX_PORTS],
        names: PortNames::const_default(),
    };

    #[test]
    fn buffer_io() {
        // This works very similarly to the standalone CPAL and dummy backends
        let mut main_io_storage = vec![vec![0.0f32; BUFFER_SIZE]; NUM_MAIN_OUTPUT_CHANNELS];
        let mut aux_input_storage =
            vec![vec![vec![0.0f32; BUFFER_SIZE]; NUM_AUX_CHANNELS]; NUM_AUX_PORTS];
        let mut aux_output_storage =
            vec![vec![vec![0.0f32; BUFFER_SIZE]; NUM_AUX_CHANNELS]; NUM_AUX_PORTS];

        let mut main_io_channel_pointers: Vec<*mut f32> = main_io_storage
            .iter_mut()
            .map(|channel_slice| channel_slice.as_mut_ptr())
            .collect();
        let mut aux_input_channel_pointers: Vec<Vec<*mut f32>> = aux_input_storage
            .iter_mut()
            .map(|aux_input_storage| {
                aux_input_storage
                    .iter_mut()
                    .map(|channel_slice| channel_slice.as_mut_ptr())
                    .collect()
            })
            .collect();
        let mut aux_output_channel_pointers: Vec<Vec<*mut f32>> = aux_output_storage
            .iter_mut()
            .map(|aux_output_storage| {
                aux_output_storage
                    .iter_mut()
                    .map(|channel_slice| channel_slice.as_mut_ptr())
                    .collect()
            })
            .collect();

        // The actual buffer management here works the same as in the JACK backend. See that
        // implementation for more information.
        let mut buffer_manager = BufferManager::for_audio_io_layout(BUFFER_SIZE, AUDIO_IO_LAYOUT);
        let buffers = unsafe {
            buffer_manager.create_buffers(0, BUFFER_SIZE, |buffer_sources| {
                *buffer_sources.main_output_channel_pointers = Some(ChannelPointers {
                    ptrs: NonNull::new(main_io_channel_pointers.as_mut_ptr()).unwrap(),
                    num_channels: main_io_channel_pointers.len(),
                });
                *buffer_sources.main_input_channel_pointers = Some(ChannelPointers {
                    ptrs: NonNull::new(main_io_channel_pointers.as_mut_ptr()).unwrap(),
                    num_channels: NUM_MAIN_INPUT_CHANNELS.min(main_io_channel_pointers.len()),
                });

                for (input_source_channel_pointers, input_channel_pointers) in buffer_sources
                    .aux_input_channel_pointers
                    .iter_mut()
                    .zip(aux_input_channel_pointers.iter_mut())
                {
                    *input_source_channel_pointers = Some(ChannelPointers {
                        ptrs: NonNull::new(input_channel_pointers.as_mut_ptr()).unwrap(),
                        num_channels: input_channel_pointers.len(),
                    });
                }

                for (output_source_channel_pointers, output_channel_pointers) in buffer_sources
                    .aux_output_channel_pointers
                    .iter_mut()
                    .zip(aux_output_channel_pointers.iter_mut())
                {
                    *output_source_channel_pointers = Some(ChannelPointers {
                        ptrs: NonNull::new(output_channel_pointers.as_mut_ptr()).unwrap(),
                        num_channels: output_channel_pointers.len(),
                    });
                }
            })
        };

        for channel_samples in buffers
            .main_buffer
            .iter_samples()
            .chain(
                buffers
                    .aux_inputs
                    .iter_mut()
                    .flat_map(|buffer| buffer.iter_samples()),
            )
            .chain(
                buffers
                    .aux_outputs
                    .iter_mut()
                    .flat_map(|buffer| buffer.iter_samples()),
            )
        {
            for sample in channel_samples {
                *sample += 1.0;
            }
        }

        // These checks are fine due to stacked borrows even without explicitly dropping `buffers`.
        // If we were to access `buffers` again after this miri would trigger an error.
        for channel in main_io_storage
            .iter()
            .chain(aux_output_storage.iter().flat_map(|storage| storage.iter()))
        {
            for sample in channel {
                assert!(*sample == 1.0);
            }
        }

        for channel in aux_input_storage.iter().flat_map(|storage| storage.iter()) {
            for sample in channel {
                assert!(*sample == 0.0);
            }
        }
    }
}

#[cfg(test)]
mod aliasing {
    use nice_plug_core::audio_setup::{PortNames, new_nonzero_u32};

    use super::*;

    const N: usize = 64;

    const LAYOUT: AudioIOLayout = AudioIOLayout {
        main_input_channels: Some(new_nonzero_u32(2)),
        main_output_channels: Some(new_nonzero_u32(2)),
        aux_input_ports: &[],
        aux_output_ports: &[new_nonzero_u32(2); 2],
        names: PortNames::const_default(),
    };

    fn pointers(ptrs: &mut [*mut f32]) -> Option<ChannelPointers> {
        Some(ChannelPointers {
            ptrs: NonNull::new(ptrs.as_mut_ptr()).unwrap(),
            num_channels: ptrs.len(),
        })
    }

    /// Runs `create_buffers()` on the given host pointers and returns what the plugin sees on
    /// its main buffer, and whether every slice has `N` samples.
    fn main_seen_by_plugin(
        main_in: &mut [*mut f32],
        main_out: &mut [*mut f32],
        aux_out: &mut [Option<Vec<*mut f32>>],
    ) -> (Vec<Vec<f32>>, bool) {
        let mut manager = BufferManager::for_audio_io_layout(N, LAYOUT);
        let buffers = unsafe {
            manager.create_buffers(0, N, |sources| {
                *sources.main_input_channel_pointers = pointers(main_in);
                *sources.main_output_channel_pointers = pointers(main_out);
                for (source, aux) in sources
                    .aux_output_channel_pointers
                    .iter_mut()
                    .zip(aux_out.iter_mut())
                {
                    *source = aux.as_mut().and_then(|aux| pointers(aux));
                }
            })
        };
        let all_full = buffers
            .main_buffer
            .as_slice_immutable()
            .iter()
            .chain(
                buffers
                    .aux_outputs
                    .iter()
                    .flat_map(|b| b.as_slice_immutable().iter()),
            )
            .all(|s| s.len() == N);
        let main = buffers
            .main_buffer
            .as_slice_immutable()
            .iter()
            .map(|s| s.to_vec())
            .collect();
        (main, all_full)
    }

    #[test]
    fn in_place_with_aux_output_aliasing_main() {
        let mut left = vec![1.0f32; N];
        let mut right = vec![2.0f32; N];
        let mut io = [left.as_mut_ptr(), right.as_mut_ptr()];
        let mut io_out = io;
        let mut other = [vec![0.0f32; N], vec![0.0f32; N]];
        let other: Vec<*mut f32> = other.iter_mut().map(|c| c.as_mut_ptr()).collect();
        // Aux output 0 is mapped onto the track's (= main input) buffers
        let mut aux = [Some(io.to_vec()), Some(other)];
        let (main, all_full) = main_seen_by_plugin(&mut io, &mut io_out, &mut aux);
        assert!(main[0].iter().all(|&x| x == 1.0), "{:?}", &main[0][..4]);
        assert!(main[1].iter().all(|&x| x == 2.0));
        assert!(all_full);
    }

    #[test]
    fn swapped_out_of_place_channels() {
        let mut a = vec![1.0f32; N];
        let mut b = vec![2.0f32; N];
        let mut ins = [a.as_mut_ptr(), b.as_mut_ptr()];
        let mut outs = [b.as_mut_ptr(), a.as_mut_ptr()];
        let mut other = [
            vec![0.0f32; N],
            vec![0.0f32; N],
            vec![0.0f32; N],
            vec![0.0f32; N],
        ];
        let other: Vec<*mut f32> = other.iter_mut().map(|c| c.as_mut_ptr()).collect();
        let mut aux = [Some(other[..2].to_vec()), Some(other[2..].to_vec())];
        let (main, _) = main_seen_by_plugin(&mut ins, &mut outs, &mut aux);
        assert!(main[0].iter().all(|&x| x == 1.0));
        assert!(main[1].iter().all(|&x| x == 2.0));
    }

    #[test]
    fn outputs_sharing_one_scratch_buffer() {
        let mut a = vec![1.0f32; N];
        let mut b = vec![2.0f32; N];
        let mut scratch = vec![9.0f32; N];
        let mut ins = [a.as_mut_ptr(), b.as_mut_ptr()];
        let s = scratch.as_mut_ptr();
        let mut outs = [s, s];
        let mut aux = [Some(vec![s, s]), Some(vec![s, s])];
        let (main, all_full) = main_seen_by_plugin(&mut ins, &mut outs, &mut aux);
        assert!(main[0].iter().all(|&x| x == 1.0));
        assert!(main[1].iter().all(|&x| x == 2.0));
        assert!(all_full);
    }

    #[test]
    fn missing_aux_outputs_are_backed_by_scratch() {
        let mut a = vec![1.0f32; N];
        let mut b = vec![2.0f32; N];
        let mut io = [a.as_mut_ptr(), b.as_mut_ptr()];
        let mut io_out = io;
        let mut aux = [None, None];
        let (main, all_full) = main_seen_by_plugin(&mut io, &mut io_out, &mut aux);
        assert!(all_full);
        assert!(main[1].iter().all(|&x| x == 2.0));
    }
}
