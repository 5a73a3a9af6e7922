//! The two plugins in the bundles, which differ only in their ports: *Stemflow* (a stereo main
//! output plus one stereo output per stem, or mono; hosts route each stem output to its own
//! track) and *Stemflow Single Bus* (one 10-channel output: mix, vocals, drums, bass, other),
//! for hosts that cannot reach a plugin's auxiliary outputs — a VST3 plugin's bus count is fixed
//! by its first layout, and some hosts list main buses only.

use std::num::NonZeroU32;

use nice_plug::prelude::*;
use stemflow_engine::{Stem, NUM_STEMS};

/// Names of the stem outputs, in port order ([`Stem::OUTPUT_ORDER`]).
const STEM_PORT_NAMES: [&str; NUM_STEMS] = {
    let mut names = [""; NUM_STEMS];
    let mut i = 0;
    while i < NUM_STEMS {
        names[i] = Stem::OUTPUT_ORDER[i].display_name();
        i += 1;
    }
    names
};

/// Channels of the single-bus layout: the mix followed by the four usual stems, each stereo
/// (guitar and piano always stay in Other there).
pub const TEN_CHANNEL_OUTPUT_CHANNELS: u32 = 2 + 2 * Stem::FOUR.len() as u32;

/// The layout `name` with one output per stem after the main output, each of `stem_ports`'s
/// channel counts (all the same), and the input and main output as wide.
const fn per_stem_layout(
    name: &'static str,
    stem_ports: &'static [NonZeroU32; NUM_STEMS],
) -> AudioIOLayout {
    AudioIOLayout {
        main_input_channels: Some(stem_ports[0]),
        main_output_channels: Some(stem_ports[0]),
        aux_input_ports: &[],
        aux_output_ports: stem_ports,
        names: PortNames {
            layout: Some(name),
            main_input: Some("Input"),
            main_output: Some("Mix"),
            aux_inputs: &[],
            aux_outputs: &STEM_PORT_NAMES,
        },
    }
}

/// Stereo in; one stereo output per stem after the stereo main output.
const STEREO_LAYOUT: AudioIOLayout = per_stem_layout("Stereo", &[new_nonzero_u32(2); NUM_STEMS]);

/// Mono in; one mono output per stem after the mono main output.
const MONO_LAYOUT: AudioIOLayout = per_stem_layout("Mono", &[new_nonzero_u32(1); NUM_STEMS]);

/// Stereo in; one 10-channel output.
const TEN_CHANNEL_LAYOUT: AudioIOLayout = AudioIOLayout {
    main_input_channels: NonZeroU32::new(2),
    main_output_channels: NonZeroU32::new(TEN_CHANNEL_OUTPUT_CHANNELS),
    aux_input_ports: &[],
    aux_output_ports: &[],
    names: PortNames {
        layout: Some("Stereo in, 10 channels out (mix, vocals, drums, bass, other)"),
        main_input: Some("Input"),
        main_output: Some("Mix and stems"),
        aux_inputs: &[],
        aux_outputs: &[],
    },
};

/// The ports of one plugin in the bundle, and the names and ids that go with them: what differs
/// between *Stemflow* and *Stemflow Single Bus*.
pub trait PortSet: Send + 'static {
    /// The plugin's name in hosts.
    const NAME: &'static str;
    /// Its CLAP id.
    const CLAP_ID: &'static str;
    /// Its CLAP description.
    const DESCRIPTION: &'static str;
    /// Its VST3 class id.
    const VST3_CLASS_ID: [u8; 16];
    /// Its port layouts, the first being the default (and, in VST3, fixing the bus count).
    const AUDIO_IO_LAYOUTS: &'static [AudioIOLayout];
}

/// *Stemflow*: a main mix output and one output per stem (plus mono and, for CLAP hosts that
/// switch port configurations, the 10-channel layout).
pub struct MultiOutput;

impl PortSet for MultiOutput {
    const NAME: &'static str = "Stemflow";
    const CLAP_ID: &'static str = "audio.stemflow.stemflow";
    const DESCRIPTION: &'static str = "Splits a track into vocals, drums, bass and other stems";
    const VST3_CLASS_ID: [u8; 16] = *b"StemflowSplitter";
    const AUDIO_IO_LAYOUTS: &'static [AudioIOLayout] =
        &[STEREO_LAYOUT, MONO_LAYOUT, TEN_CHANNEL_LAYOUT];
}

/// *Stemflow Single Bus*: one 10-channel output (mix, vocals, drums, bass, other).
pub struct SingleBus;

impl PortSet for SingleBus {
    const NAME: &'static str = "Stemflow Single Bus";
    const CLAP_ID: &'static str = "audio.stemflow.stemflow-single-bus";
    const DESCRIPTION: &'static str =
        "Splits a track into stems on one 10-channel output: mix, vocals, drums, bass, other";
    const VST3_CLASS_ID: [u8; 16] = *b"StemflowOneBus10";
    const AUDIO_IO_LAYOUTS: &'static [AudioIOLayout] = &[TEN_CHANNEL_LAYOUT];
}
