//! `stemflow separate --model a+b --ensemble ALG` (every member a whole file, combined as MSST's
//! `ensemble.py` combines the members' files) and `stemflow models ensemble` (a route: the same
//! whole-file ensemble in `stemflow separate`, a stream in the plugin): how they relate, and
//! their mistakes.

mod common;

use common::{
    assert_stems_sum_to, assert_usage_error, music, path_str, read_stems, read_wav, run,
    scratch_dir, text, write_wav, STEM_NAMES,
};

/// Separates `input` with `model` (plus `extra` arguments) into `out`; its stems.
fn separate(input: &std::path::Path, out: &std::path::Path, extra: &[&str]) -> Vec<Vec<Vec<f32>>> {
    let mut args = vec![
        "separate",
        path_str(input),
        "-o",
        path_str(out),
        "--bit-depth",
        "32f",
        "-q",
    ];
    args.extend_from_slice(extra);
    let output = run(&args);
    assert!(
        output.status.success(),
        "{extra:?}: {}",
        text(&output.stderr)
    );
    read_stems(out, "song")
        .into_iter()
        .map(|(_, s)| s)
        .collect()
}

fn largest_difference(a: &[Vec<f32>], b: &[Vec<f32>], frames: std::ops::Range<usize>) -> f32 {
    a.iter()
        .zip(b)
        .flat_map(|(a, b)| a[frames.clone()].iter().zip(&b[frames.clone()]))
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

#[test]
fn an_ensemble_route_is_the_whole_file_ensemble_and_streams_it_but_its_last_frames() {
    let dir = scratch_dir("ensemble");
    let input = dir.join("song.wav");
    let frames = 100_000;
    let signal: Vec<Vec<f32>> = (0..2).map(|c| music(frames, 44_100, c)).collect();
    write_wav(&input, 44_100, &signal, 32, true);
    let models = dir.join("models");
    let output = run(&[
        "models",
        "ensemble",
        "twice",
        "--model",
        "builtin+builtin",
        "--ensemble",
        "max_spec",
        "--models-dir",
        path_str(&models),
    ]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let listed = run(&["models", "--models-dir", path_str(&models)]);
    assert!(
        text(&listed.stdout).contains("twice  Ensemble"),
        "{}",
        text(&listed.stdout)
    );

    let alone = separate(&input, &dir.join("alone"), &[]);
    let whole = separate(
        &input,
        &dir.join("whole"),
        &["--model", "builtin+builtin", "--ensemble", "max_spec"],
    );
    let route = separate(
        &input,
        &dir.join("route"),
        &["--model", "twice", "--models-dir", path_str(&models)],
    );
    let streamed_route = separate(
        &input,
        &dir.join("streamed"),
        &[
            "--model",
            "twice",
            "--models-dir",
            path_str(&models),
            "--mode",
            "stream",
        ],
    );
    let stems: Vec<_> = whole
        .iter()
        .map(|s| (read_wav(&dir.join("alone/song/vocals.wav")).0, s.clone()))
        .collect();
    assert_stems_sum_to(&stems, &signal, 1e-5);
    for (index, stem) in STEM_NAMES.iter().enumerate() {
        // The largest magnitude of two equal spectra is the spectrum: the inverse STFT gives
        // the stem back.
        let back = largest_difference(&whole[index], &alone[index], 0..frames);
        assert!(back < 1e-5, "{stem}: {back}");
        // The route file's ensemble is the same whole-file ensemble, to the last sample.
        let as_route = largest_difference(&route[index], &whole[index], 0..frames);
        assert!(as_route < 1e-6, "{stem}: {as_route}");
        // The plugin's stream equals the whole file but for the frames whose last STFT frames
        // reach past the end (2048 samples).
        let streamed = largest_difference(&streamed_route[index], &whole[index], 0..frames - 2048);
        assert!(streamed < 1e-6, "{stem}: {streamed}");
        let end = largest_difference(&streamed_route[index], &whole[index], frames - 2048..frames);
        println!("{stem}: the stream's last 2048 samples differ by up to {end:.1e}");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn ensemble_mistakes_are_usage_errors() {
    let dir = scratch_dir("ensemble-mistakes");
    let input = dir.join("song.wav");
    write_wav(
        &input,
        44_100,
        &[vec![0.1; 1000], vec![0.1; 1000]],
        16,
        false,
    );
    for (args, expected) in [
        (
            vec!["--model", "builtin", "--ensemble", "max_fft"],
            "--model builtin+OTHER",
        ),
        (
            vec![
                "--model",
                "builtin+builtin",
                "--ensemble",
                "max_fft",
                "--weights",
                "2,1",
            ],
            "takes no weights",
        ),
        (
            vec!["--model", "builtin+builtin", "--ensemble", "loudest"],
            "unknown --ensemble",
        ),
    ] {
        let mut all = vec!["separate", path_str(&input), "-o", path_str(&dir)];
        all.extend(args);
        assert_usage_error(&all, expected);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
