//! The reliability battery: bad input, bad models, faults and signals, each with its outcome —
//! exit status, message, and what is (and is not) left on disk.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use common::*;
use stemflow_kit::testing::XorShift64;

/// A stereo float WAV of `seconds` of music at 44.1 kHz.
fn song(dir: &Path, name: &str, seconds: f32) -> (PathBuf, Vec<Vec<f32>>) {
    let path = dir.join(name);
    let frames = (seconds * 44_100.0) as usize;
    let channels = vec![music(frames, 44_100, 0), music(frames, 44_100, 1)];
    write_wav(&path, 44_100, &channels, 32, true);
    (path, channels)
}

/// Every file below `dir` whose name marks it unfinished.
fn partial_files(dir: &Path) -> Vec<PathBuf> {
    walk(dir)
        .into_iter()
        .filter(|p| p.to_string_lossy().contains("partial"))
        .collect()
}

fn with_runtime(args: &[&str]) -> std::process::Output {
    stemflow(args, Some(&real_runtime()))
}

// --- models that fail while running -------------------------------------------------------------

#[test]
fn a_model_that_fails_while_running_fails_the_input_and_writes_nothing() {
    let dir = scratch_dir("failing-models");
    let (input, _) = song(&dir, "song.wav", 1.0);
    let fixtures = fixtures_dir();
    for (model, reason) in [
        ("faulty_nan.onnx", "faulty_nan.onnx failed: its output held"),
        (
            "faulty_short.onnx",
            "faulty_short.onnx failed: the model returned 16384 values where its signature declares 32768",
        ),
    ] {
        let out = dir.join(format!("out-{model}"));
        let model_path = fixtures.join(model);
        let args = ["--model", path_str(&model_path)];
        let output = with_runtime(&separate_args(&input, &out, &args));
        let stderr = assert_clean_failure(&output, model);
        assert!(stderr.contains(reason), "{model}: {stderr}");
        assert!(!out.exists(), "{model}: {:?} was left behind", walk(&out));
    }
}

#[test]
fn an_absurd_sidecar_value_is_named_by_models_and_refused_by_separate() {
    let dir = scratch_dir("absurd-sidecar");
    std::fs::copy(
        fixtures_dir().join("mdx_vocals_test.onnx"),
        dir.join("absurd.onnx"),
    )
    .unwrap();
    std::fs::write(
        dir.join("absurd.json"),
        r#"{"mdx_n_fft_scale_set": 2048, "mdx_dim_f_set": 1024, "mdx_dim_t_set": 6, "compensate": -1e308}"#,
    )
    .unwrap();
    let listing = with_runtime(&["models", "--models-dir", path_str(&dir)]);
    let stdout = text(&listing.stdout);
    assert!(listing.status.success(), "{}", text(&listing.stderr));
    assert!(
        stdout.contains("absurd")
            && stdout.contains("UNUSABLE")
            && stdout.contains("compensate -1e308 is absurd"),
        "{stdout}"
    );
    let (input, _) = song(&dir, "song.wav", 0.5);
    let out = dir.join("out");
    let output = with_runtime(&separate_args(
        &input,
        &out,
        &["--model", path_str(&dir.join("absurd.onnx"))],
    ));
    let stderr = assert_clean_failure(&output, "absurd sidecar");
    assert!(stderr.contains("compensate"), "{stderr}");
    assert!(!out.exists());
}

#[test]
fn model_configuration_mistakes_get_the_right_message() {
    let dir = scratch_dir("model-messages");
    let fixtures = fixtures_dir();
    let (input, _) = song(&dir, "song.wav", 0.5);
    let separate_with = |model: &Path| {
        with_runtime(&separate_args(
            &input,
            &dir.join("out"),
            &["--model", path_str(model)],
        ))
    };
    // A RoFormer config that is not YAML: the file and the place, not "put a config there".
    let roformer = dir.join("roformer.onnx");
    std::fs::copy(fixtures.join("roformer_test.onnx"), &roformer).unwrap();
    std::fs::write(
        dir.join("roformer.yaml"),
        "audio:\n  chunk_size: [broken\n  sample_rate 44100\n",
    )
    .unwrap();
    let stderr = assert_clean_failure(&separate_with(&roformer), "malformed yaml");
    assert!(
        stderr.contains("sidecar roformer.yaml:")
            && stderr.contains("line 4")
            && !stderr.contains("put the MSST config next to it"),
        "{stderr}"
    );
    // A config that is YAML but holds the wrong kind of value: the key is named.
    std::fs::write(
        dir.join("roformer.yaml"),
        "audio:\n  chunk_size: broken\n  sample_rate: 44100\n",
    )
    .unwrap();
    let stderr = assert_clean_failure(&separate_with(&roformer), "wrong value in yaml");
    assert!(
        stderr.contains("sidecar roformer.yaml: audio.chunk_size must be a whole number"),
        "{stderr}"
    );
    // A config without its stems' names says so.
    std::fs::write(
        dir.join("roformer.yaml"),
        "training:\n  instrumentz: [vocals, other]\n",
    )
    .unwrap();
    let stderr = assert_clean_failure(&separate_with(&roformer), "yaml without stems");
    assert!(
        stderr.contains("sidecar roformer.yaml names no stems")
            && stderr.contains("training.instruments"),
        "{stderr}"
    );
    // hop_length 0 is named as such, not as an n_fft mismatch.
    std::fs::write(dir.join("roformer.yaml"), "audio:\n  hop_length: 0\n").unwrap();
    let stderr = assert_clean_failure(&separate_with(&roformer), "hop 0");
    assert!(
        stderr.contains("hop_length 0") && !stderr.contains("n_fft"),
        "{stderr}"
    );
    // A folder given as a model.
    let stderr = assert_clean_failure(&separate_with(&dir), "folder as model");
    assert!(stderr.contains("is a folder, not a model file"), "{stderr}");
    // A models folder that does not exist.
    let output = run(&["models", "--models-dir", "/nonexistent/stemflow-models"]);
    let stderr = assert_clean_failure(&output, "missing models dir");
    assert!(
        stderr.contains("/nonexistent/stemflow-models: no such folder"),
        "{stderr}"
    );
}

// --- inputs and outputs ----------------------------------------------------------------------------

#[test]
fn an_input_is_never_overwritten_by_its_own_stems() {
    let dir = scratch_dir("overwrite");
    std::fs::create_dir_all(dir.join("vocals")).unwrap();
    let (input, _) = song(&dir.join("vocals"), "vocals.wav", 0.5);
    let before = std::fs::read(&input).unwrap();
    let output = run(&["separate", path_str(&input), "-o", path_str(&dir)]);
    let stderr = assert_clean_failure(&output, "overwrite");
    assert!(stderr.contains("would overwrite the input"), "{stderr}");
    assert_eq!(
        std::fs::read(&input).unwrap(),
        before,
        "the input was changed"
    );
    // The same file under another name (a hard link) is the same input.
    let link = dir.join("vocals/link.wav");
    std::fs::hard_link(&input, &link).unwrap();
    let output = run(&["separate", path_str(&link), "-o", path_str(&dir.join("x"))]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let output = run(&[
        "separate",
        path_str(&input),
        path_str(&link),
        "-o",
        path_str(&dir),
    ]);
    assert_eq!(output.status.code(), Some(1));
    assert_eq!(
        std::fs::read(&input).unwrap(),
        before,
        "the input was changed"
    );
}

/// Starts `stemflow` with `args` and `envs`, returning its output and its process id.
fn run_with_pid(args: &[&str], envs: &[(&str, &str)]) -> (std::process::Output, u32) {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stemflow"));
    command
        .args(args)
        .env_remove("STEMFLOW_ORT_LIB")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (key, value) in envs {
        command.env(key, value);
    }
    let child = command.spawn().expect("stemflow runs");
    let pid = child.id();
    (child.wait_with_output().expect("stemflow ends"), pid)
}

/// Temporary pipe copies a run with process id `pid` left behind.
fn spooled_copies(pid: u32) -> Vec<PathBuf> {
    walk(&std::env::temp_dir())
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| {
                n.to_string_lossy()
                    .starts_with(&format!("stemflow-pipe-{pid}-"))
            })
        })
        .collect()
}

/// A FIFO in `dir` fed by a thread with `bytes`, then, when `is_endless`, with tone frames for
/// as long as anyone reads.
fn fifo_with(
    dir: &Path,
    name: &str,
    bytes: Vec<u8>,
    is_endless: bool,
) -> (PathBuf, std::thread::JoinHandle<()>) {
    let fifo = dir.join(name);
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let path = fifo.clone();
    let writer = std::thread::spawn(move || {
        use std::io::Write;
        let Ok(mut pipe) = std::fs::OpenOptions::new().write(true).open(&path) else {
            return;
        };
        if pipe.write_all(&bytes).is_err() || !is_endless {
            return;
        }
        let frames: Vec<u8> = (0..44_100)
            .flat_map(|i| {
                let x = ((i as f32 * 0.05).sin() * 0.25).to_le_bytes();
                [x, x].concat()
            })
            .collect();
        // Ends when the reader goes away (a broken pipe).
        while pipe.write_all(&frames).is_ok() {}
    });
    (fifo, writer)
}

/// The header of a 32-bit float stereo WAV at 44.1 kHz whose data never ends (as a live
/// encoder streams it: the sizes are the largest possible).
fn endless_wav_header() -> Vec<u8> {
    let mut header = Vec::new();
    header.extend_from_slice(b"RIFF");
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header.extend_from_slice(b"WAVEfmt ");
    header.extend_from_slice(&16u32.to_le_bytes());
    header.extend_from_slice(&3u16.to_le_bytes());
    header.extend_from_slice(&2u16.to_le_bytes());
    header.extend_from_slice(&44_100u32.to_le_bytes());
    header.extend_from_slice(&(44_100u32 * 8).to_le_bytes());
    header.extend_from_slice(&8u16.to_le_bytes());
    header.extend_from_slice(&32u16.to_le_bytes());
    header.extend_from_slice(b"data");
    header.extend_from_slice(&u32::MAX.to_le_bytes());
    header
}

/// Megabytes free on the disk holding `dir`, as `df` reports it.
fn free_mb(dir: &Path) -> u64 {
    let output = Command::new("df")
        .args(["-Pk"])
        .arg(dir)
        .output()
        .expect("df runs");
    let text = text(&output.stdout);
    let line = text.lines().nth(1).expect("df prints the disk");
    let kb: u64 = line
        .split_whitespace()
        .nth(3)
        .and_then(|v| v.parse().ok())
        .expect("available kB");
    kb / 1024
}

#[test]
fn a_pipe_is_decoded_as_it_arrives_and_gives_the_files_stems() {
    let dir = scratch_dir("pipe");
    let (input, channels) = song(&dir, "song.wav", 1.0);
    let (fifo, writer) = fifo_with(&dir, "fifo.wav", std::fs::read(&input).unwrap(), false);
    let out = dir.join("out");
    let (output, pid) = run_with_pid(
        &["separate", path_str(&fifo), "-o", path_str(&out), "-q"],
        &[],
    );
    writer.join().unwrap();
    assert!(output.status.success(), "{}", text(&output.stderr));
    let (_, vocals) = read_wav(&out.join("fifo/vocals.wav"));
    assert_eq!(vocals[0].len(), channels[0].len());
    let from_file = dir.join("from-file");
    assert!(run(&[
        "separate",
        path_str(&input),
        "-o",
        path_str(&from_file),
        "-q"
    ])
    .status
    .success());
    for stem in ["vocals", "drums", "bass", "other"] {
        assert_eq!(
            std::fs::read(out.join(format!("fifo/{stem}.wav"))).unwrap(),
            std::fs::read(from_file.join(format!("song/{stem}.wav"))).unwrap(),
            "{stem}: the pipe's stems differ from the file's"
        );
    }
    assert_eq!(
        spooled_copies(pid),
        Vec::<PathBuf>::new(),
        "a WAV pipe is not copied"
    );
}

#[test]
fn a_wav_written_to_a_pipe_by_ffmpeg_gives_the_whole_songs_stems() {
    // `ffmpeg -i song.flac -f wav - > song.wav`: the RIFF and data sizes are 0xFFFFFFFF.
    let dir = scratch_dir("ffmpeg-pipe-wav");
    let (input, channels) = song(&dir, "song.wav", 1.0);
    let mut bytes = std::fs::read(&input).unwrap();
    let data_at = bytes.windows(4).position(|w| w == b"data").unwrap();
    bytes[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
    bytes[data_at + 4..data_at + 8].copy_from_slice(&u32::MAX.to_le_bytes());
    let saved = dir.join("saved.wav");
    std::fs::write(&saved, &bytes).unwrap();
    let (fifo, writer) = fifo_with(&dir, "piped.wav", bytes.clone(), false);
    let out = dir.join("out");
    for input in [&saved, &fifo] {
        let output = run(&["separate", path_str(input), "-o", path_str(&out), "-q"]);
        assert!(output.status.success(), "{}", text(&output.stderr));
    }
    writer.join().unwrap();
    for name in ["saved", "piped"] {
        let (_, vocals) = read_wav(&out.join(format!("{name}/vocals.wav")));
        assert_eq!(vocals[0].len(), channels[0].len(), "{name}");
    }
    // A 0 Hz header is the input's error, even with backtraces asked for.
    bytes[24..28].copy_from_slice(&0u32.to_le_bytes());
    let zero_hz = dir.join("zero-hz.wav");
    std::fs::write(&zero_hz, &bytes).unwrap();
    let (output, _) = run_with_pid(
        &["separate", path_str(&zero_hz), "-o", path_str(&out)],
        &[("RUST_BACKTRACE", "1")],
    );
    let stderr = assert_clean_failure(&output, "a 0 Hz WAV");
    assert!(stderr.contains("sample rate is 0 Hz"), "{stderr}");
    assert!(!stderr.contains("decoding thread stopped"), "{stderr}");
}

#[test]
fn an_endless_pipe_of_zeros_is_refused_without_copying_it() {
    let dir = scratch_dir("dev-zero");
    let out = dir.join("out");
    let started = std::time::Instant::now();
    let (output, pid) = run_with_pid(&["separate", "/dev/zero", "-o", path_str(&out)], &[]);
    let stderr = assert_clean_failure(&output, "/dev/zero");
    assert!(stderr.contains("not a supported audio file"), "{stderr}");
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(spooled_copies(pid), Vec::<PathBuf>::new());
    assert!(!out.exists(), "{:?}", walk(&out));
}

#[test]
fn an_endless_audio_stream_stops_before_the_disk_is_full() {
    let dir = scratch_dir("endless");
    let out = dir.join("out");
    // Leave all but about 40 MB free: the run must stop after writing about that much.
    let reserve_mb = free_mb(&dir).saturating_sub(40).to_string();
    let (fifo, writer) = fifo_with(&dir, "live.wav", endless_wav_header(), true);
    let (output, _) = run_with_pid(
        &["separate", path_str(&fifo), "-o", path_str(&out)],
        &[("STEMFLOW_MIN_FREE_DISK_MB", &reserve_mb)],
    );
    writer.join().unwrap();
    let stderr = assert_clean_failure(&output, "an endless stream");
    assert!(
        stderr.contains("stopped after") && stderr.contains("STEMFLOW_MIN_FREE_DISK_MB"),
        "{stderr}"
    );
    assert!(!out.exists(), "{:?} was left behind", walk(&out));

    // A disk already below the reserve refuses at once.
    let (output, _) = run_with_pid(
        &["separate", "/dev/null", "-o", path_str(&out)],
        &[("STEMFLOW_MIN_FREE_DISK_MB", "999999999")],
    );
    assert_clean_failure(&output, "no room");
    let (song_path, _) = song(&dir, "song.wav", 0.5);
    let (output, _) = run_with_pid(
        &["separate", path_str(&song_path), "-o", path_str(&out)],
        &[("STEMFLOW_MIN_FREE_DISK_MB", "999999999")],
    );
    let stderr = assert_clean_failure(&output, "no room");
    assert!(
        stderr.contains("MB free, less than the 999999999 MB"),
        "{stderr}"
    );
    assert!(!out.exists(), "{:?} was left behind", walk(&out));
}

#[test]
fn a_stem_whose_name_a_folder_holds_fails_the_input_before_separating_and_leaves_nothing() {
    let dir = scratch_dir("stem-folder");
    let (input, _) = song(&dir, "song.wav", 1.0);
    let out = dir.join("out");
    std::fs::create_dir_all(out.join("song/drums.wav")).unwrap();
    let output = run(&["separate", path_str(&input), "-o", path_str(&out)]);
    let stderr = assert_clean_failure(&output, "a folder named drums.wav");
    assert!(
        stderr.contains("drums.wav: a folder has that name"),
        "{stderr}"
    );
    assert_eq!(partial_files(&out), Vec::<PathBuf>::new());
    let mut left: Vec<PathBuf> = walk(&out);
    left.sort();
    assert_eq!(
        left,
        vec![out.join("song"), out.join("song/drums.wav")],
        "only what was there"
    );
}

#[test]
fn damaged_packets_become_silence_and_the_rest_is_decoded() {
    let dir = scratch_dir("damaged");
    let (wav, channels) = song(&dir, "long.wav", 10.0);
    // A 10-second FLAC made by stemflow itself, and an MP3 by ffmpeg when it is there.
    let flac_out = dir.join("flac");
    let output = run(&separate_args(
        &wav,
        &flac_out,
        &[
            "--format",
            "flac",
            "--bit-depth",
            "16",
            "--stems",
            "other",
            "-q",
        ],
    ));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut damaged = vec![flac_out.join("long/other.flac")];
    let mp3 = dir.join("long.mp3");
    let has_ffmpeg = Command::new("ffmpeg")
        .args(["-loglevel", "error", "-y", "-i"])
        .arg(&wav)
        .args(["-b:a", "192k"])
        .arg(&mp3)
        .status()
        .is_ok_and(|s| s.success());
    if has_ffmpeg {
        damaged.push(mp3);
    } else {
        // The committed MP3 fixture is short, but damage in its middle is still damage.
        damaged.push(fixture("mp3-stereo-44k.mp3"));
    }
    for original in damaged {
        let mut bytes = std::fs::read(&original).unwrap();
        let middle = bytes.len() / 2;
        let mut rng = XorShift64::new(0x1234_5678);
        for byte in &mut bytes[middle..middle + 4096] {
            *byte = rng.next_u64() as u8;
        }
        let path = dir.join(format!(
            "damaged.{}",
            original.extension().unwrap().to_string_lossy()
        ));
        std::fs::write(&path, &bytes).unwrap();
        let out = dir.join(format!(
            "out-{}",
            path.extension().unwrap().to_string_lossy()
        ));
        let output = run(&["separate", path_str(&path), "-o", path_str(&out), "-q"]);
        let stderr = text(&output.stderr);
        assert!(output.status.success(), "{}: {stderr}", path.display());
        // Where the reader reports the damage, it becomes silence in place; where an MP3
        // reader skips it silently, the shortfall is padded at the end and said.
        assert!(
            stderr.contains("damaged audio replaced by silence at")
                || stderr.contains("of damaged audio were skipped by the decoder"),
            "{}: {stderr}",
            path.display()
        );
        let (_, stem) = read_wav(&out.join("damaged/vocals.wav"));
        if original != fixture("mp3-stereo-44k.mp3") {
            assert_eq!(
                stem[0].len(),
                channels[0].len(),
                "the stems must keep the file's length"
            );
        }
    }
}

#[test]
fn truncated_containers_and_non_finite_samples_are_named() {
    let dir = scratch_dir("truncated-m4a");
    let bytes = std::fs::read(fixture("aac-stereo-44k.m4a")).unwrap();
    let truncated = dir.join("cut.m4a");
    std::fs::write(&truncated, &bytes[..bytes.len() / 3]).unwrap();
    let output = run(&separate_args(&truncated, &dir.join("out"), &[]));
    let stderr = assert_clean_failure(&output, "truncated m4a");
    assert!(stderr.contains("truncated or damaged M4A/MP4"), "{stderr}");

    let mut channels = vec![music(20_000, 44_100, 0), music(20_000, 44_100, 1)];
    channels[0][100] = f32::NAN;
    channels[1][200] = f32::INFINITY;
    channels[1][300] = f32::NEG_INFINITY;
    let poisoned = dir.join("poisoned.wav");
    write_wav(&poisoned, 44_100, &channels, 32, true);
    let output = run(&separate_args(&poisoned, &dir.join("out"), &["-q"]));
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(
        stderr.contains("3 samples were NaN or infinite and were treated as silence"),
        "{stderr}"
    );
}

#[test]
fn every_sample_format_channel_count_and_rate_is_handled() {
    let dir = scratch_dir("formats");
    for (bits, is_float) in [
        (8, false),
        (16, false),
        (24, false),
        (32, false),
        (32, true),
    ] {
        let path = dir.join(format!("b{bits}{}.wav", if is_float { "f" } else { "" }));
        write_wav(
            &path,
            44_100,
            &[music(8_000, 44_100, 0), music(8_000, 44_100, 1)],
            bits,
            is_float,
        );
        let output = run(&separate_args(&path, &dir.join("out"), &["-q"]));
        assert!(
            output.status.success(),
            "{bits} bits: {}",
            text(&output.stderr)
        );
    }
    for rate in [8_000, 22_050, 96_000, 192_000, 384_000] {
        let path = dir.join(format!("r{rate}.wav"));
        write_wav(&path, rate, &[music(rate as usize / 4, rate, 0)], 16, false);
        let output = run(&separate_args(&path, &dir.join("out"), &["-q"]));
        assert!(
            output.status.success(),
            "{rate} Hz: {}",
            text(&output.stderr)
        );
        let (spec, stem) = read_wav(&dir.join(format!("out/r{rate}/other.wav")));
        assert_eq!((spec.sample_rate, stem[0].len()), (rate, rate as usize / 4));
    }
    for channels in 3..=6 {
        let path = dir.join(format!("c{channels}.wav"));
        let data: Vec<Vec<f32>> = (0..channels).map(|c| music(4_000, 44_100, c)).collect();
        write_wav(&path, 44_100, &data, 16, false);
        let output = run(&separate_args(&path, &dir.join("out"), &[]));
        let stderr = assert_clean_failure(&output, "channels");
        assert!(
            stderr.contains(&format!(
                "{channels} channels; Stemflow separates mono or stereo"
            )),
            "{stderr}"
        );
    }
}

#[test]
fn unicode_paths_work() {
    let dir = scratch_dir("unicode").join("dossier été 🎵");
    std::fs::create_dir_all(&dir).unwrap();
    let (input, _) = song(&dir, "ñandú — «canción».wav", 0.5);
    let out = dir.join("sortie ü");
    let output = run(&["separate", path_str(&input), "-o", path_str(&out), "-q"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(out.join("ñandú — «canción»/vocals.wav").is_file());
}

// --- signals -----------------------------------------------------------------------------------

/// Starts `stemflow separate` on `inputs` into `out`, waits until the first input's stems are
/// finished (`wait_for`), then sends `signal` (`None`: SIGKILL). Returns the exit code.
fn interrupt_run(
    inputs: &[&Path],
    out: &Path,
    wait_for: &Path,
    signal: Option<&str>,
) -> Option<i32> {
    let mut command = Command::new(env!("CARGO_BIN_EXE_stemflow"));
    command
        .arg("separate")
        .args(inputs)
        .arg("-o")
        .arg(out)
        .arg("-q");
    command
        .env_remove("STEMFLOW_ORT_LIB")
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = command.spawn().unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(120);
    while !wait_for.is_file() {
        assert!(
            std::time::Instant::now() < deadline,
            "the first input never finished"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    match signal {
        Some(signal) => {
            let status = Command::new("kill")
                .args([signal, &child.id().to_string()])
                .status()
                .unwrap();
            assert!(status.success());
        }
        None => child.kill().unwrap(),
    }
    child.wait().unwrap().code()
}

#[test]
fn signals_stop_the_run_leave_finished_stems_and_remove_the_rest() {
    let dir = scratch_dir("signals");
    let (short, _) = song(&dir, "first.wav", 0.5);
    let (long, _) = song(&dir, "second.wav", 240.0);
    for (signal, code) in [
        (Some("-INT"), Some(130)),
        (Some("-TERM"), Some(143)),
        (None, None),
    ] {
        let out = dir.join(format!("out{}", signal.unwrap_or("-KILL")));
        let first_done = out.join("first/other.wav");
        let exit = interrupt_run(&[&short, &long], &out, &first_done, signal);
        assert_eq!(exit, code, "{signal:?}");
        // The finished input's stems are whole files.
        for stem in STEM_NAMES {
            let (_, channels) = read_wav(&out.join(format!("first/{stem}.wav")));
            assert_eq!(channels[0].len(), 22_050, "{signal:?} {stem}");
        }
        if signal.is_some() {
            // Nothing unfinished stays: no partial files, no folder for the second input.
            assert!(
                partial_files(&out).is_empty(),
                "{signal:?}: {:?}",
                partial_files(&out)
            );
            assert!(!out.join("second").exists(), "{signal:?}: {:?}", walk(&out));
        }
    }
}

// --- standard output -------------------------------------------------------------------------------

#[test]
fn standard_output_closing_or_failing_never_panics() {
    let dir = scratch_dir("stdout");
    let (input, _) = song(&dir, "song.wav", 1.0);
    // A reader that goes away at once: `stemflow … | head -0`.
    let closed = |args: &[&str]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_stemflow"))
            .args(args)
            .env_remove("STEMFLOW_ORT_LIB")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        drop(child.stdout.take());
        child.wait_with_output().unwrap()
    };
    let output = closed(&["models"]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    let out = dir.join("out-closed");
    let output = closed(&["separate", path_str(&input), "-o", path_str(&out)]);
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(out.join("song/vocals.wav").is_file());
    // A full device.
    let full = || {
        std::fs::OpenOptions::new()
            .write(true)
            .open("/dev/full")
            .unwrap()
    };
    let output = Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .arg("models")
        .env_remove("STEMFLOW_ORT_LIB")
        .stdout(full())
        .output()
        .unwrap();
    let stderr = assert_clean_failure(&output, "models > /dev/full");
    assert!(
        stderr.contains("cannot write to standard output"),
        "{stderr}"
    );
    let out = dir.join("out-full");
    let output = Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args(["separate", path_str(&input), "-o", path_str(&out)])
        .env_remove("STEMFLOW_ORT_LIB")
        .stdout(full())
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("warning: cannot write to standard output"));
    assert!(out.join("song/vocals.wav").is_file());
}

#[test]
fn absurd_numbers_are_usage_errors_or_capped() {
    for args in [
        &["bench", "--seconds", "nan"][..],
        &["bench", "--seconds", "inf"][..],
        &["demo", "--duration-s", "nan"][..],
        &["demo", "--duration-s=-3"][..],
    ] {
        assert_usage_error(args, "positive, finite number of seconds");
    }
    let output = Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .arg("devices")
        .env("STEMFLOW_INTRA_THREADS", "1000")
        .env_remove("STEMFLOW_ORT_LIB")
        .output()
        .unwrap();
    assert!(output.status.success());
    let cores = std::thread::available_parallelism().unwrap().get();
    assert!(
        text(&output.stderr).contains(&format!(
            "STEMFLOW_INTRA_THREADS=1000 is more than the {cores} cores here; using {cores}"
        )),
        "{}",
        text(&output.stderr)
    );
}

// --- a full disk -----------------------------------------------------------------------------------

#[test]
fn a_full_disk_fails_the_input_and_leaves_nothing_half_written() {
    let dir = scratch_dir("full-disk");
    let (input, _) = song(&dir, "song.wav", 3.0);
    // WAV is written on the separating thread, FLAC on one encoder thread per stem: both
    // report the failed write and remove what they began.
    for format in ["wav", "flac"] {
        // A small tmpfs where mounting is allowed (root); else a file-size limit (the same
        // failed write, with EFBIG instead of ENOSPC).
        let mount = dir.join(format!("small-{format}"));
        std::fs::create_dir_all(&mount).unwrap();
        let is_mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k", "tmpfs"])
            .arg(&mount)
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        let out = mount.join("out");
        let args = [
            "separate",
            path_str(&input),
            "-o",
            path_str(&out),
            "--format",
            format,
        ];
        // The free-space reserve is off: this is about a write that fails anyway (another
        // program filled the disk, a quota), not the check that avoids filling it.
        let output = if is_mounted {
            eprintln!("full disk ({format}): a 256 KiB tmpfs");
            Command::new(env!("CARGO_BIN_EXE_stemflow"))
                .args(args)
                .env_remove("STEMFLOW_ORT_LIB")
                .env("STEMFLOW_MIN_FREE_DISK_MB", "0")
                .output()
                .unwrap()
        } else {
            eprintln!("full disk ({format}): no tmpfs here (not root?), a 256 KiB file-size limit instead");
            Command::new("prlimit")
                .arg("--fsize=262144")
                .arg(env!("CARGO_BIN_EXE_stemflow"))
                .args(args)
                .env_remove("STEMFLOW_ORT_LIB")
                .env("STEMFLOW_MIN_FREE_DISK_MB", "0")
                .output()
                .unwrap()
        };
        let leftovers = walk(&out);
        if is_mounted {
            let _ = Command::new("umount").arg(&mount).status();
        }
        let stderr = assert_clean_failure(&output, "full disk");
        assert!(
            stderr.contains("No space left on device") || stderr.contains("File too large"),
            "{format}: {stderr}"
        );
        assert!(
            leftovers.iter().all(|p| !p.is_file()),
            "{format}: half-written files were left: {leftovers:?}"
        );
    }
}
