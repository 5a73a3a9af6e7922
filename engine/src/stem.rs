//! The stems Stemflow produces.

/// Number of stems every separator delivers (missing ones are silent, `Other` is the residual).
pub const NUM_STEMS: usize = 6;

/// Number of stems a separator computes itself; the last stem, [`Stem::Other`], is always the
/// residual `input − (vocals + drums + bass + guitar + piano)`, computed by the stream's audio
/// side from its delayed input ([`crate::stream`]), so the stems sum to the input exactly.
pub const NUM_SEPARATED_STEMS: usize = NUM_STEMS - 1;

/// One stem of the separation. The discriminant is the engine's order ([`Stem::ALL`]: the
/// separated stems, then the residual `Other`); ports, strips and files use
/// [`Stem::OUTPUT_ORDER`], where `Other` stays fourth so a four-stem set-up never needs the
/// guitar and piano outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stem {
    /// Singing and speech.
    Vocals,
    /// Drum kit and percussion.
    Drums,
    /// Bass instruments.
    Bass,
    /// Guitars, from six-stem models only (see [`ExtraStems`]).
    Guitar,
    /// Piano, from six-stem models only (see [`ExtraStems`]).
    Piano,
    /// Everything else: the exact residual of the other stems.
    Other,
}

impl Stem {
    /// All stems in engine order: the separated stems, then `Other`.
    pub const ALL: [Stem; NUM_STEMS] = [
        Stem::Vocals,
        Stem::Drums,
        Stem::Bass,
        Stem::Guitar,
        Stem::Piano,
        Stem::Other,
    ];

    /// All stems in the order users see them: output ports, editor strips, files.
    pub const OUTPUT_ORDER: [Stem; NUM_STEMS] = [
        Stem::Vocals,
        Stem::Drums,
        Stem::Bass,
        Stem::Other,
        Stem::Guitar,
        Stem::Piano,
    ];

    /// The four stems every separator delivers, in output order.
    pub const FOUR: [Stem; 4] = [Stem::Vocals, Stem::Drums, Stem::Bass, Stem::Other];

    /// The stems only six-stem models deliver.
    pub const EXTRA: [Stem; 2] = [Stem::Guitar, Stem::Piano];

    /// Position of the stem in [`Stem::ALL`] and in stem frames.
    pub const fn index(self) -> usize {
        self as usize
    }

    /// Position of the stem in [`Stem::OUTPUT_ORDER`]: its aux output port.
    pub const fn output_index(self) -> usize {
        match self {
            Stem::Vocals => 0,
            Stem::Drums => 1,
            Stem::Bass => 2,
            Stem::Other => 3,
            Stem::Guitar => 4,
            Stem::Piano => 5,
        }
    }

    /// Whether only six-stem models deliver this stem (guitar, piano).
    pub const fn is_extra(self) -> bool {
        matches!(self, Stem::Guitar | Stem::Piano)
    }

    /// Display name, as used for the plugin's output ports ("Vocals", …).
    pub const fn display_name(self) -> &'static str {
        match self {
            Stem::Vocals => "Vocals",
            Stem::Drums => "Drums",
            Stem::Bass => "Bass",
            Stem::Guitar => "Guitar",
            Stem::Piano => "Piano",
            Stem::Other => "Other",
        }
    }

    /// Lower-case name, as used for file names and parameter ids ("vocals", …).
    pub const fn file_name(self) -> &'static str {
        match self {
            Stem::Vocals => "vocals",
            Stem::Drums => "drums",
            Stem::Bass => "bass",
            Stem::Guitar => "guitar",
            Stem::Piano => "piano",
            Stem::Other => "other",
        }
    }

    /// The stem called `name` (its [`Stem::file_name`], any case).
    pub fn from_name(name: &str) -> Option<Stem> {
        Stem::ALL
            .into_iter()
            .find(|stem| stem.file_name().eq_ignore_ascii_case(name))
    }
}

/// Where a six-stem model's guitar and piano go. Four-stem models and the built-in separator
/// have none, so for them both choices sound the same.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExtraStems {
    /// Guitar and piano stay in `Other` (the guitar and piano stems are silent): the four usual
    /// stems sum to the input.
    #[default]
    IntoOther,
    /// Guitar and piano on their own stems, `Other` is what is left.
    Separate,
}

impl ExtraStems {
    /// Moves guitar and piano into `Other` for frames `range` when `self` says so, and
    /// silences them. Realtime-safe.
    pub fn apply(self, stems: &mut [[Vec<f32>; 2]; NUM_STEMS], range: std::ops::Range<usize>) {
        if self == ExtraStems::Separate {
            return;
        }
        let [.., guitar, piano, other] = stems;
        for channel in 0..2 {
            let other = &mut other[channel][range.clone()];
            let guitar = &mut guitar[channel][range.clone()];
            let piano = &mut piano[channel][range.clone()];
            for ((o, g), p) in other
                .iter_mut()
                .zip(guitar.iter_mut())
                .zip(piano.iter_mut())
            {
                *o += *g + *p;
                *g = 0.0;
                *p = 0.0;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_order_is_a_permutation_with_other_fourth() {
        for (position, stem) in Stem::OUTPUT_ORDER.into_iter().enumerate() {
            assert_eq!(stem.output_index(), position);
        }
        assert_eq!(Stem::Other.output_index(), 3);
        assert_eq!(
            Stem::Other.index(),
            NUM_STEMS - 1,
            "Other is the residual, last"
        );
        assert_eq!(Stem::from_name("PIANO"), Some(Stem::Piano));
        assert_eq!(Stem::from_name("keys"), None);
    }

    #[test]
    fn into_other_moves_guitar_and_piano_into_other_and_keeps_the_sum() {
        let mut stems: [[Vec<f32>; 2]; NUM_STEMS] =
            std::array::from_fn(|s| [vec![s as f32 + 1.0; 4], vec![-(s as f32) - 1.0; 4]]);
        let sum_before: f32 = (0..NUM_STEMS).map(|s| stems[s][0][1]).sum();
        ExtraStems::Separate.apply(&mut stems, 0..4);
        assert_eq!(stems[Stem::Guitar.index()][0][1], 4.0);
        ExtraStems::IntoOther.apply(&mut stems, 1..3);
        let sum_after: f32 = (0..NUM_STEMS).map(|s| stems[s][0][1]).sum();
        assert_eq!(sum_after, sum_before);
        assert_eq!(stems[Stem::Guitar.index()][0][1], 0.0);
        assert_eq!(stems[Stem::Piano.index()][1][2], 0.0);
        assert_eq!(stems[Stem::Other.index()][0][1], 6.0 + 4.0 + 5.0);
        // Frames outside the range are untouched.
        assert_eq!(stems[Stem::Guitar.index()][0][0], 4.0);
        assert_eq!(stems[Stem::Other.index()][1][3], -6.0);
    }
}
