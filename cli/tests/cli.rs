//! The `stemflow` binary as a user runs it: runtime problems, device fallback, exit codes.

mod common;

use std::path::Path;

use common::*;

#[test]
fn a_missing_library_is_explained_and_the_builtin_separator_still_works() {
    let dir = scratch_dir("missing");
    let missing = dir.join("nope/libonnxruntime.so");
    let output = stemflow(&["devices"], Some(missing.to_str().unwrap()));
    assert!(output.status.success());
    let stdout = text(&output.stdout);
    assert!(stdout.contains("ONNX Runtime was not found"), "{stdout}");
    assert!(stdout.contains(missing.to_str().unwrap()), "{stdout}");
    assert!(stdout.contains("cargo xtask fetch-runtime"), "{stdout}");

    let input = dir.join("song.wav");
    write_test_wav(&input);
    let output = stemflow(
        &[
            "separate",
            input.to_str().unwrap(),
            "-o",
            dir.to_str().unwrap(),
            "--quiet",
        ],
        Some(missing.to_str().unwrap()),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(dir.join("song/vocals.wav").is_file());
}

#[test]
fn a_garbage_file_posing_as_the_library_is_explained() {
    let dir = scratch_dir("garbage");
    let garbage = dir.join("libonnxruntime.so.1.31.0");
    std::fs::write(&garbage, b"not a library").unwrap();
    let output = stemflow(&["devices", "--json"], Some(garbage.to_str().unwrap()));
    assert!(output.status.success());
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["runtime"]["loaded"], false);
    let error = json["runtime"]["error"].as_str().unwrap();
    assert!(error.contains("could not be loaded"), "{error}");
    assert!(error.contains(garbage.to_str().unwrap()), "{error}");
    assert_eq!(json["auto"], "cpu");
}

#[test]
fn devices_lists_cpu_and_auto() {
    let output = stemflow(&["devices", "--json"], Some(&real_runtime()));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(json["runtime"]["loaded"], true, "{json}");
    let devices = json["devices"].as_array().unwrap();
    assert!(devices
        .iter()
        .any(|d| d["id"] == "cpu" && d["status"]["state"] == "usable"));
    assert!(json["auto"].is_string());
}

#[test]
fn an_optimised_graph_cache_that_cannot_be_used_is_a_warning_not_a_failure() {
    let dir = scratch_dir("cache-warning");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    // The user data folder, where the cache goes, is a file.
    let data_dir = dir.join("data");
    std::fs::write(&data_dir, b"not a folder").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args(["separate", "--quiet", "--model", &model(), "-o"])
        .arg(dir.join("out"))
        .arg(&input)
        .env("STEMFLOW_ORT_LIB", real_runtime())
        .env("STEMFLOW_DATA_DIR", &data_dir)
        .env_remove("STEMFLOW_GRAPH_CACHE")
        .env_remove("STEMFLOW_LOG")
        .output()
        .unwrap();
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(dir.join("out/song/vocals.wav").is_file());
    // The engine's warning reaches the user, once, and nothing else it logs does by default.
    assert_eq!(
        stderr
            .matches("stemflow: warning: the optimised-graph cache was not used")
            .count(),
        1,
        "{stderr}"
    );
    assert!(!stderr.contains("stemflow: info:"), "{stderr}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn an_unusable_device_falls_back_to_cpu_with_a_warning_unless_strict() {
    let runtime = real_runtime();
    let devices = stemflow(&["devices", "--json"], Some(&runtime));
    let json: serde_json::Value = serde_json::from_slice(&devices.stdout).unwrap();
    let is_cuda_usable = json["devices"]
        .as_array()
        .unwrap()
        .iter()
        .any(|d| d["id"] == "cuda:0" && d["status"]["state"] == "usable");

    let dir = scratch_dir("fallback");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    let model = model();
    let args = [
        "separate",
        input.to_str().unwrap(),
        "-o",
        dir.to_str().unwrap(),
        "--model",
        &model,
        "--device",
        "cuda:0",
    ];
    let output = stemflow(&args, Some(&runtime));
    let stderr = text(&output.stderr);
    assert!(output.status.success(), "{stderr}");
    assert!(dir.join("song/drums.wav").is_file());
    if is_cuda_usable {
        assert!(!stderr.contains("warning"), "{stderr}");
    } else {
        assert!(stderr.contains("warning: cuda:0 failed"), "{stderr}");
        assert!(text(&output.stdout).contains("on cpu"));
        let mut strict = args.to_vec();
        strict.push("--strict-device");
        let output = stemflow(&strict, Some(&runtime));
        assert_eq!(output.status.code(), Some(1));
        assert!(
            text(&output.stderr).contains("--strict-device"),
            "{}",
            text(&output.stderr)
        );
    }
}

#[test]
fn an_unknown_device_is_an_error_before_any_input_is_read() {
    let dir = scratch_dir("unknown-device");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    let out = dir.join("out");
    let output = stemflow(
        &[
            "separate",
            input.to_str().unwrap(),
            "-o",
            out.to_str().unwrap(),
            "--device",
            "tpu:0",
        ],
        None,
    );
    assert_eq!(output.status.code(), Some(1));
    let stderr = text(&output.stderr);
    assert!(
        stderr.starts_with("stemflow: error: unknown device 'tpu:0'"),
        "{stderr}"
    );
    assert!(!out.exists());
}

// --- separate: formats, lengths, layouts ---------------------------------------------------------

#[test]
fn stereo_float_wav_stems_have_the_input_length_rate_and_format_and_sum_to_it() {
    let dir = scratch_dir("stereo-float");
    let input_path = dir.join("song.wav");
    let input = vec![music(30_000, 48_000, 0), music(30_000, 48_000, 1)];
    write_wav(&input_path, 48_000, &input, 32, true);
    let out = dir.join("out");
    let output = run(&["separate", path_str(&input_path), "-o", path_str(&out)]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stems = read_stems(&out, "song");
    for (spec, channels) in &stems {
        assert_eq!(
            (spec.sample_rate, spec.channels, spec.bits_per_sample),
            (48_000, 2, 32)
        );
        assert_eq!(spec.sample_format, hound::SampleFormat::Float);
        assert_eq!(channels[0].len(), 30_000);
    }
    assert_stems_sum_to(&stems, &input, 1e-5);
    // The separation does something: vocals are neither silent nor the whole input.
    let vocals_energy: f32 = stems[0].1[0].iter().map(|x| x * x).sum();
    let input_energy: f32 = input[0].iter().map(|x| x * x).sum();
    assert!(vocals_energy > 1e-4 * input_energy && vocals_energy < 0.999 * input_energy);
}

#[test]
fn mono_sixteen_bit_input_gives_mono_sixteen_bit_stems_that_sum_to_it() {
    let dir = scratch_dir("mono");
    let input_path = dir.join("voice.wav");
    let input = vec![music(20_000, 22_050, 0)];
    write_wav(&input_path, 22_050, &input, 16, false);
    let quantized: Vec<Vec<f32>> = read_wav(&input_path).1;
    let out = dir.join("out");
    let output = run(&separate_args(&input_path, &out, &["-q"]));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let stems = read_stems(&out, "voice");
    for (spec, channels) in &stems {
        assert_eq!(
            (spec.sample_rate, spec.channels, spec.bits_per_sample),
            (22_050, 1, 16)
        );
        assert_eq!(channels[0].len(), 20_000);
    }
    // Four stems each rounded to 16 bits: at most 4 × ½ LSB apart.
    assert_stems_sum_to(&stems, &quantized, 2.0 / 32_768.0 + 1e-7);
}

#[test]
fn every_supported_format_is_decoded_and_separated() {
    // (fixture, expected frames, rate, channels, default bits): fixtures made with sox and ffmpeg
    // from the same 1 s stereo 44.1 kHz mix (see tests/fixtures/README.md).
    let cases = [
        ("pcm-mono-22k.aiff", 11_025..=11_025, 22_050, 1, 16),
        ("flac-stereo-48k-24bit.flac", 9_600..=9_600, 48_000, 2, 24),
        ("mp3-stereo-44k.mp3", 44_100..=44_100, 44_100, 2, 32),
        ("vorbis-stereo-44k.ogg", 44_100..=44_100, 44_100, 2, 32),
        // The MP4 edit list's priming (1024 frames from ffmpeg's AAC encoder) is skipped.
        ("aac-stereo-44k.m4a", 44_100..=44_100, 44_100, 2, 32),
    ];
    let dir = scratch_dir("formats");
    let out = dir.join("out");
    let inputs: Vec<String> = cases
        .iter()
        .map(|c| fixture(c.0).display().to_string())
        .collect();
    let mut args = vec!["separate", "-o", path_str(&out)];
    args.extend(inputs.iter().map(String::as_str));
    let output = run(&args);
    assert!(output.status.success(), "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("5 of 5 files separated"),
        "{}",
        text(&output.stdout)
    );
    for (name, frames, rate, channels, bits) in cases {
        let stem_name = name.rsplit_once('.').unwrap().0;
        let stems = read_stems(&out, stem_name);
        let length = stems[0].1[0].len();
        assert!(
            frames.contains(&length),
            "{name}: {length} frames, expected {frames:?}"
        );
        for (spec, samples) in &stems {
            assert_eq!(
                (spec.sample_rate, spec.channels, spec.bits_per_sample),
                (rate, channels, bits),
                "{name}"
            );
            assert_eq!(samples[0].len(), length, "{name}");
        }
        // Real audio went through: the mix of the stems is not silent.
        let energy: f32 = (0..length)
            .map(|t| stems.iter().map(|(_, s)| s[0][t]).sum::<f32>().powi(2))
            .sum();
        assert!(energy > 1.0, "{name}: the stems are silent");
    }

    // The lossy files are aligned with each other (encoder delay and priming removed): the mix
    // of their stems correlates best at lag 0 with the sample-exact Ogg/Vorbis decode.
    let mix = |name: &str| -> Vec<f32> {
        let stems = read_stems(&out, name);
        (0..stems[0].1[0].len())
            .map(|t| stems.iter().map(|(_, s)| s[0][t]).sum())
            .collect()
    };
    let reference = mix("vorbis-stereo-44k");
    for name in ["aac-stereo-44k", "mp3-stereo-44k"] {
        let other = mix(name);
        let correlation = |lag: isize| -> f64 {
            (4_000..40_000)
                .map(|t: isize| reference[t as usize] as f64 * other[(t + lag) as usize] as f64)
                .sum()
        };
        let best = (-2_500..=2_500isize)
            .max_by(|&a, &b| correlation(a).total_cmp(&correlation(b)))
            .unwrap();
        assert_eq!(
            best, 0,
            "{name} is shifted by {best} frames against the Vorbis decode"
        );
    }
}

/// Decodes a FLAC file with symphonia, verifying its MD5: `(rate, channels, bits, samples per
/// channel as full-scale floats, whether the MD5 matched)`.
fn decode_flac(path: &Path) -> (u32, usize, u32, Vec<Vec<f32>>, Option<bool>) {
    use symphonia::core::audio::SampleBuffer;
    use symphonia::core::codecs::DecoderOptions;
    use symphonia::core::formats::FormatOptions;
    use symphonia::core::io::MediaSourceStream;
    use symphonia::core::probe::Hint;
    let file = std::fs::File::open(path).unwrap();
    let stream = MediaSourceStream::new(Box::new(file), Default::default());
    let mut hint = Hint::new();
    hint.with_extension("flac");
    let mut format = symphonia::default::get_probe()
        .format(
            &hint,
            stream,
            &FormatOptions::default(),
            &Default::default(),
        )
        .unwrap()
        .format;
    let params = format.default_track().unwrap().codec_params.clone();
    let mut decoder = symphonia::default::get_codecs()
        .make(&params, &DecoderOptions { verify: true })
        .unwrap();
    let channels = params.channels.unwrap().count();
    let mut samples = vec![Vec::new(); channels];
    while let Ok(packet) = format.next_packet() {
        let decoded = decoder.decode(&packet).unwrap();
        let mut buffer = SampleBuffer::<f32>::new(decoded.capacity() as u64, *decoded.spec());
        buffer.copy_planar_ref(decoded);
        let frames = buffer.samples().len() / channels;
        for (c, channel) in samples.iter_mut().enumerate() {
            channel.extend_from_slice(&buffer.samples()[c * frames..(c + 1) * frames]);
        }
    }
    assert_eq!(
        params.n_frames,
        Some(samples[0].len() as u64),
        "STREAMINFO total samples"
    );
    let verify_ok = decoder.finalize().verify_ok;
    (
        params.sample_rate.unwrap(),
        channels,
        params.bits_per_sample.unwrap(),
        samples,
        verify_ok,
    )
}

#[test]
fn flac_stems_are_the_wav_stems_losslessly() {
    let dir = scratch_dir("flac");
    let input_path = dir.join("song.wav");
    let input = vec![music(50_000, 44_100, 0), music(50_000, 44_100, 1)];
    write_wav(&input_path, 44_100, &input, 24, false);
    let out = dir.join("out");
    for format in ["wav", "flac"] {
        let output = run(&separate_args(
            &input_path,
            &out,
            &["--format", format, "-q"],
        ));
        assert!(
            output.status.success(),
            "{format}: {}",
            text(&output.stderr)
        );
    }
    for stem in STEM_NAMES {
        let (spec, wav) = read_wav(&out.join(format!("song/{stem}.wav")));
        assert_eq!(spec.bits_per_sample, 24, "24-bit input gives 24-bit stems");
        let (rate, channels, bits, flac, verify_ok) =
            decode_flac(&out.join(format!("song/{stem}.flac")));
        assert_eq!((rate, channels, bits), (44_100, 2, 24));
        assert_eq!(verify_ok, Some(true), "{stem}.flac MD5");
        assert_eq!(
            flac, wav,
            "{stem}.flac decodes to the same samples as {stem}.wav"
        );
    }
}

#[test]
fn stems_option_writes_only_the_chosen_stems_and_bit_depth_is_honoured() {
    let dir = scratch_dir("stems");
    let input_path = dir.join("song.wav");
    write_test_wav(&input_path);
    let out = dir.join("out");
    let output = run(&separate_args(
        &input_path,
        &out,
        &["--stems", "drums,vocals", "--bit-depth", "16", "-q"],
    ));
    assert!(output.status.success(), "{}", text(&output.stderr));
    let mut names: Vec<String> = std::fs::read_dir(out.join("song"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(names, ["drums.wav", "vocals.wav"]);
    let (spec, _) = read_wav(&out.join("song/drums.wav"));
    assert_eq!(
        (spec.bits_per_sample, spec.sample_format),
        (16, hound::SampleFormat::Int)
    );
}

// --- separate: failures ------------------------------------------------------------------------

#[test]
fn unreadable_empty_truncated_and_unsupported_inputs_fail_with_a_clear_reason() {
    let dir = scratch_dir("bad-inputs");
    let good = dir.join("good.wav");
    write_wav(
        &good,
        44_100,
        &[music(30_000, 44_100, 0), music(30_000, 44_100, 1)],
        16,
        false,
    );

    let empty = dir.join("empty.wav");
    std::fs::write(&empty, b"").unwrap();
    let truncated = dir.join("truncated.wav");
    let bytes = std::fs::read(&good).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() * 2 / 3]).unwrap();
    let text_file = dir.join("notes.mp3");
    std::fs::write(
        &text_file,
        "These are not the droids you are looking for.\n".repeat(50),
    )
    .unwrap();
    let surround = dir.join("surround.wav");
    write_wav(
        &surround,
        48_000,
        &vec![music(1_000, 48_000, 0); 6],
        16,
        false,
    );
    let header_only = dir.join("silent.wav");
    write_wav(&header_only, 44_100, &[vec![], vec![]], 16, false);
    let low_rate = dir.join("phone.wav");
    write_wav(&low_rate, 500, &[music(500, 500, 0)], 16, false);
    let missing = dir.join("missing.flac");

    let cases: [(&Path, &str); 8] = [
        (&missing, "no such file"),
        (&dir, "is a folder"),
        (&empty, "the file is empty"),
        (
            &truncated,
            "the file is truncated: its header announces 30000 frames",
        ),
        (&text_file, "not a supported audio file"),
        (
            &surround,
            "6 channels; Stemflow separates mono or stereo files",
        ),
        (&header_only, "the file contains no audio"),
        (&low_rate, "unsupported sample rate 500 Hz"),
    ];
    for (path, reason) in cases {
        let out = dir.join("out");
        let output = run(&["separate", path_str(path), "-o", path_str(&out)]);
        let stderr = assert_clean_failure(&output, reason);
        let expected = format!("stemflow: error: {}: {reason}", path.display());
        assert!(
            stderr.contains(&expected),
            "expected «{expected}» in:\n{stderr}"
        );
        // Nothing half-written is left behind, not even an empty stem folder.
        let leftovers = walk(&out);
        assert!(leftovers.is_empty(), "{reason}: left {leftovers:?}");
    }
}

#[test]
fn one_bad_input_is_reported_and_the_others_are_still_separated() {
    let dir = scratch_dir("several");
    let first = dir.join("first.wav");
    let second = dir.join("second.wav");
    write_test_wav(&first);
    write_test_wav(&second);
    let bad = dir.join("bad.ogg");
    std::fs::write(&bad, b"OggS but not really").unwrap();
    let out = dir.join("out");
    let output = run(&[
        "separate",
        path_str(&first),
        path_str(&bad),
        path_str(&second),
        "-o",
        path_str(&out),
    ]);
    let stderr = assert_clean_failure(&output, "several inputs");
    assert!(
        stderr.contains(&format!("stemflow: error: {}:", bad.display())),
        "{stderr}"
    );
    assert_eq!(stderr.matches("stemflow: error:").count(), 1, "{stderr}");
    assert!(text(&output.stdout).contains("2 of 3 files separated, 1 failed"));
    for name in ["first", "second"] {
        for stem in STEM_NAMES {
            assert!(
                out.join(name).join(format!("{stem}.wav")).is_file(),
                "{name}/{stem}.wav"
            );
        }
    }
    assert!(!out.join("bad").exists());
}

#[test]
fn inputs_with_the_same_name_do_not_overwrite_each_other() {
    let dir = scratch_dir("same-name");
    std::fs::create_dir_all(dir.join("a")).unwrap();
    std::fs::create_dir_all(dir.join("b")).unwrap();
    write_test_wav(&dir.join("a/song.wav"));
    write_test_wav(&dir.join("b/song.wav"));
    let out = dir.join("out");
    let output = run(&[
        "separate",
        path_str(&dir.join("a/song.wav")),
        path_str(&dir.join("b/song.wav")),
        "-o",
        path_str(&out),
        "-q",
    ]);
    let stderr = assert_clean_failure(&output, "same name");
    assert!(stderr.contains("would overwrite those of"), "{stderr}");
    assert!(out.join("song/vocals.wav").is_file());
}

#[test]
fn an_unwritable_output_folder_is_an_error() {
    let dir = scratch_dir("unwritable");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    let file = dir.join("not-a-folder");
    std::fs::write(&file, b"x").unwrap();
    let out = file.join("stems");
    let output = run(&["separate", path_str(&input), "-o", path_str(&out)]);
    let stderr = assert_clean_failure(&output, "unwritable");
    assert!(
        stderr.contains(&format!(
            "stemflow: error: cannot create the output folder {}",
            out.display()
        )),
        "{stderr}"
    );
}

#[test]
fn unknown_models_are_errors() {
    let dir = scratch_dir("models");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    let out = dir.join("out");
    for (model, reason) in [
        ("htdemucs_ft", "unknown model `htdemucs_ft`"),
        ("models/nope.onnx", "models/nope.onnx: model file not found"),
    ] {
        let output = run(&separate_args(&input, &out, &["--model", model]));
        let stderr = assert_clean_failure(&output, model);
        assert!(stderr.contains(reason), "{stderr}");
    }
    // A file that is not a model fails when it is loaded, before any stem is written.
    let garbage = dir.join("garbage.onnx");
    std::fs::write(&garbage, b"not a model").unwrap();
    let output = run(&separate_args(
        &input,
        &out,
        &["--model", path_str(&garbage)],
    ));
    assert_clean_failure(&output, "garbage model");
    assert!(walk(&out).iter().all(|p| !p.is_file()));
    // `--separator builtin` still works.
    let output = run(&separate_args(
        &input,
        &out,
        &["--separator", "builtin", "-q"],
    ));
    assert!(output.status.success(), "{}", text(&output.stderr));
}

#[test]
fn usage_errors_exit_with_2() {
    let dir = scratch_dir("usage");
    let input = dir.join("song.wav");
    write_test_wav(&input);
    for (args, needle) in [
        (vec!["separate"], "required"),
        (
            vec!["separate", path_str(&input), "--stems", "banjo"],
            "invalid value 'banjo'",
        ),
        (
            vec![
                "separate",
                path_str(&input),
                "--stems",
                "guitar",
                "--guitar-piano",
                "other",
            ],
            "keeps guitar and piano in other.wav",
        ),
        (
            vec!["separate", path_str(&input), "--format", "mp3"],
            "invalid value 'mp3'",
        ),
        (
            vec!["separate", path_str(&input), "--bit-depth", "8"],
            "invalid value '8'",
        ),
        (
            vec![
                "separate",
                path_str(&input),
                "--format",
                "flac",
                "--bit-depth",
                "32f",
            ],
            "FLAC has no float samples",
        ),
        (vec!["bench", "--seconds", "many"], "invalid value 'many'"),
        (vec!["frobnicate"], "unrecognized subcommand"),
    ] {
        assert_usage_error(&args, needle);
    }
}

// --- progress, help ------------------------------------------------------------------------------

#[test]
fn progress_is_plain_lines_on_a_pipe_and_nothing_when_quiet() {
    let dir = scratch_dir("progress");
    let input = dir.join("song.wav");
    write_wav(
        &input,
        44_100,
        &[music(88_200, 44_100, 0), music(88_200, 44_100, 1)],
        16,
        false,
    );
    let out = dir.join("out");
    let output = run(&["separate", path_str(&input), "-o", path_str(&out)]);
    assert!(output.status.success());
    let stderr = text(&output.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("song.wav: "))
        .collect();
    assert!(lines.len() >= 2, "{stderr}");
    let last = lines.last().unwrap();
    assert!(
        last.contains("100%") && last.contains("2.0 s of audio") && last.contains("RTF"),
        "{last}"
    );
    assert!(lines[0].contains("ETA"), "{}", lines[0]);
    assert!(
        !stderr.contains('\r') && !stderr.contains('\u{1b}'),
        "no terminal codes on a pipe"
    );
    let stdout = text(&output.stdout);
    assert!(
        stdout.contains("Separating") && stdout.contains("real time"),
        "{stdout}"
    );

    let output = run(&separate_args(&input, &out, &["--quiet"]));
    assert!(output.status.success());
    assert!(output.stdout.is_empty() && output.stderr.is_empty());
}

#[test]
fn every_subcommand_has_help_with_examples() {
    for command in ["separate", "devices", "bench", "demo"] {
        let output = run(&[command, "--help"]);
        assert!(output.status.success(), "{command}");
        let help = text(&output.stdout);
        assert!(help.contains("Examples:"), "{command} --help:\n{help}");
        assert!(
            help.contains(&format!("stemflow {command}")),
            "{command} --help:\n{help}"
        );
    }
}

// --- bench ---------------------------------------------------------------------------------------

#[test]
fn bench_reports_chunk_times_speed_overhead_and_memory() {
    let output = run(&["bench", "--seconds", "2", "--json"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows = json["rows"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{json}");
    let row = &rows[0];
    assert_eq!(
        (row["model"].as_str(), row["device"].as_str()),
        (Some("builtin"), Some("cpu"))
    );
    // A DSP separator: every hop is timed.
    assert_eq!(row["timed_hops"], row["hops"], "{row}");
    let ms = &row["run_ms"];
    let (min, median, max) = (
        ms["min"].as_f64().unwrap(),
        ms["median"].as_f64().unwrap(),
        ms["max"].as_f64().unwrap(),
    );
    assert!(0.0 < min && min <= median && median <= max, "{ms}");
    let rtf = row["real_time_factor"].as_f64().unwrap();
    let total = row["total_s"].as_f64().unwrap();
    assert!((rtf - total / 2.0).abs() < 1e-3 * rtf.max(1.0), "{row}");
    let overhead = row["overhead"].as_f64().unwrap();
    assert!(
        (overhead - total / row["inference_s"].as_f64().unwrap()).abs() < 1e-6 * overhead,
        "{row}"
    );
    if cfg!(target_os = "linux") {
        assert!(row["peak_rss_bytes"].as_u64().unwrap() > 1 << 20, "{row}");
    }

    let output = run(&["bench", "--duration-s", "1"]);
    assert!(output.status.success(), "{}", text(&output.stderr));
    let table = text(&output.stdout);
    assert!(
        table.contains("MEDIAN ms") && table.contains("OVERHEAD") && table.contains("PEAK RSS"),
        "{table}"
    );
    assert!(
        table
            .lines()
            .any(|l| l.starts_with("builtin") && l.contains("cpu")),
        "{table}"
    );
}

#[test]
fn bench_times_the_hops_that_run_the_model_not_the_stitching_between() {
    // MDX-Net streams in hops shorter than its chunk: most hops only stitch the last run's
    // output, and their fraction of a millisecond is not what a model run costs.
    let model = fixtures_dir().join("mdx_inst_test.onnx");
    let output = stemflow(
        &[
            "bench",
            "--seconds",
            "4",
            "--json",
            "--model",
            path_str(&model),
            "--device",
            "cpu",
        ],
        Some(&real_runtime()),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let row = &json["rows"][0];
    let (hops, timed) = (
        row["hops"].as_u64().unwrap(),
        row["timed_hops"].as_u64().unwrap(),
    );
    assert!(0 < timed && timed < hops, "{row}");
    let ms = &row["run_ms"];
    assert!(
        0.0 < ms["min"].as_f64().unwrap()
            && ms["min"].as_f64().unwrap() <= ms["median"].as_f64().unwrap(),
        "{row}"
    );
    // The runs' times are part of the whole pure inference time.
    assert!(
        ms["min"].as_f64().unwrap() * timed as f64 <= row["inference_s"].as_f64().unwrap() * 1e3,
        "{row}"
    );
}

#[test]
fn bench_puts_every_model_and_device_side_by_side() {
    let model = model();
    let output = stemflow(
        &[
            "bench",
            "--seconds",
            "1",
            "--json",
            "--model",
            &format!("builtin,{model}"),
            "--device",
            "cpu,cuda:0",
        ],
        Some(&real_runtime()),
    );
    assert!(output.status.success(), "{}", text(&output.stderr));
    let json: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let rows: Vec<(String, String)> = json["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["model"].as_str().unwrap().to_owned(),
                r["requested_device"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            ("builtin".to_owned(), "cpu".to_owned()),
            ("waveform_gain".to_owned(), "cpu".to_owned()),
            ("waveform_gain".to_owned(), "cuda:0".to_owned()),
        ]
    );
    assert!(json["notes"][0]
        .as_str()
        .unwrap()
        .contains("builtin × cuda:0: skipped"));
    // The built-in's second of audio takes milliseconds: its times are the median of warm
    // rounds, and each round times every hop once.
    let builtin = &json["rows"][0];
    assert_eq!(builtin["rounds"], 5, "{builtin}");
    assert_eq!(builtin["timed_hops"], builtin["hops"], "{builtin}");
}

#[test]
fn models_lists_the_folder_with_families_and_refuses_broken_files() {
    let fixtures = std::env::var_os("STEMFLOW_FIXTURES_DIR")
        .map(std::path::PathBuf::from)
        .expect("STEMFLOW_FIXTURES_DIR is not set: run the tests with `cargo xtask test`");
    let dir = scratch_dir("model-listing");
    std::fs::copy(
        fixtures.join("roformer_test.onnx"),
        dir.join("roformer_test.onnx"),
    )
    .unwrap();
    std::fs::copy(
        fixtures.join("roformer_test.yaml"),
        dir.join("roformer_test.yaml"),
    )
    .unwrap();
    std::fs::write(dir.join("broken.onnx"), b"\x08\x07 not a model").unwrap();
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args(["models", "--json", "--models-dir"])
        .arg(&dir)
        .output()
        .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let listed: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    let models = listed["models"].as_array().unwrap();
    assert_eq!(models.len(), 2, "{listed}");
    let roformer = models
        .iter()
        .find(|m| m["name"] == "roformer_test")
        .unwrap();
    assert_eq!(roformer["family"], "RoFormer");
    assert_eq!(roformer["stems"], serde_json::json!(["vocals", "other"]));
    assert_eq!(roformer["delivers"], serde_json::json!(["vocals", "other"]));
    assert_eq!(roformer["error"], serde_json::Value::Null);
    assert_eq!(roformer["sha256"].as_str().unwrap().len(), 64);
    let broken = models.iter().find(|m| m["name"] == "broken").unwrap();
    assert!(
        broken["error"]
            .as_str()
            .unwrap()
            .contains("not an ONNX model"),
        "{broken}"
    );

    // A listed name works with --model.
    let input = dir.join("in.wav");
    write_test_wav(&input);
    let separated = std::process::Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args([
            "separate",
            "--quiet",
            "--device",
            "cpu",
            "--model",
            "roformer_test",
            "--models-dir",
        ])
        .arg(&dir)
        .arg("-o")
        .arg(dir.join("out"))
        .arg(&input)
        .output()
        .unwrap();
    assert!(
        separated.status.success(),
        "{}",
        String::from_utf8_lossy(&separated.stderr)
    );
    // A two-stem model writes its two stems: no silent drums.wav and bass.wav.
    let mut written: Vec<String> = std::fs::read_dir(dir.join("out/in"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    assert_eq!(written, ["other.wav", "vocals.wav"]);
    // Asked for a stem it does not have, it says what it has, and writes nothing.
    let missing = std::process::Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args(["separate", "--quiet", "--device", "cpu"])
        .args(["--model", "roformer_test", "--stems", "vocals,drums"])
        .arg("--models-dir")
        .arg(&dir)
        .arg("-o")
        .arg(dir.join("out2"))
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(missing.status.code(), Some(1));
    let said = String::from_utf8_lossy(&missing.stderr);
    assert!(
        said.contains("has no drums stem: it separates vocals, and other holds the rest"),
        "{said}"
    );
    assert!(!dir.join("out2").exists(), "{said}");
    let unknown = std::process::Command::new(env!("CARGO_BIN_EXE_stemflow"))
        .args([
            "separate",
            "--quiet",
            "--model",
            "no-such-model",
            "--models-dir",
        ])
        .arg(&dir)
        .arg(&input)
        .output()
        .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&unknown.stderr).contains("no-such-model.onnx"));
    std::fs::remove_dir_all(&dir).unwrap();
}

// --- model families ------------------------------------------------------------------------------

/// Raw planar little-endian f32 fixture data as `[channel][frame]`.
fn read_fixture_f32(path: &Path, frames: usize) -> Vec<Vec<f32>> {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let values: Vec<f32> = bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    assert_eq!(values.len(), 2 * frames, "{}", path.display());
    vec![values[..frames].to_vec(), values[frames..].to_vec()]
}

/// `stemflow separate` of fixture `case` (`--guitar-piano own`, 32-bit float) with `extra`
/// arguments; every stem within `max_error` of the fixture's (`model_stems` over `stems` where
/// it has them, with `--other model`) over its first `compared` frames, and the stems the
/// model has not are not written.
fn check_family_case(
    fixtures: &Path,
    dir: &Path,
    case: &serde_json::Value,
    extra: &[&str],
    compared: usize,
) {
    const MAX_ABS_ERROR: f32 = 1e-5;
    let name = case["name"].as_str().unwrap();
    let frames = case["frames"].as_u64().unwrap() as usize;
    let input = read_fixture_f32(&fixtures.join(case["input"].as_str().unwrap()), frames);
    let wav = dir.join(format!("{name}.wav"));
    write_wav(&wav, 44_100, &input, 32, true);
    let model = fixtures.join(case["model"].as_str().unwrap());
    let out = dir.join(format!("out{}", extra.join("")));
    let mut args = vec![
        "separate",
        "--quiet",
        "--device",
        "cpu",
        "--model",
        path_str(&model),
        "--guitar-piano",
        "own",
        "--bit-depth",
        "32f",
        "-o",
        path_str(&out),
        path_str(&wav),
    ];
    args.extend_from_slice(extra);
    let output = stemflow(&args, Some(&real_runtime()));
    assert!(output.status.success(), "{name}: {}", text(&output.stderr));
    let is_model_other = extra.contains(&"model");
    for stem in ["vocals", "drums", "bass", "other", "guitar", "piano"] {
        let file = match case["model_stems"][stem].as_str() {
            Some(file) if is_model_other => Some(file),
            _ => case["stems"][stem].as_str(),
        };
        let expected = match file {
            Some(file) => read_fixture_f32(&fixtures.join(file), frames),
            None => vec![vec![0.0; frames]; 2],
        };
        // A stem the model does not have (the reference is silence) is not written.
        let path = out.join(name).join(format!("{stem}.wav"));
        let is_silent = expected.iter().flatten().all(|&x| x == 0.0);
        assert_eq!(!path.exists(), is_silent, "{name} {stem}");
        if is_silent {
            continue;
        }
        let (spec, got) = read_wav(&path);
        assert_eq!(
            (spec.channels, spec.sample_rate),
            (2, 44_100),
            "{name} {stem}"
        );
        for channel in 0..2 {
            assert_eq!(got[channel].len(), frames, "{name} {stem}: length");
            let worst = got[channel][..compared]
                .iter()
                .zip(&expected[channel][..compared])
                .map(|(g, e)| (g - e).abs())
                .fold(0.0f32, f32::max);
            println!("{name} {stem} ch{channel} {extra:?}: max abs error {worst:.2e} over {compared} frames");
            assert!(
                worst <= MAX_ABS_ERROR,
                "{name} {stem} ch{channel} {extra:?}: error {worst}"
            );
        }
    }
}

/// `stemflow separate` gives every family's reference stems from the first frame to the last;
/// `--other model` the model's own other (and MDX-Net's primary unscaled); `--mode stream`
/// the plugin's stems, which equal the reference's away from the file's end.
#[test]
fn separate_matches_the_numpy_reference_of_every_model_family() {
    let fixtures = fixtures_dir();
    let index: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(fixtures.join("fixtures.json")).unwrap())
            .unwrap();
    let dir = scratch_dir("family-parity");
    let cases = index["cases"].as_array().unwrap();
    assert!(cases.len() >= 9, "{index}");
    for case in cases {
        let frames = case["frames"].as_u64().unwrap() as usize;
        check_family_case(&fixtures, &dir, case, &[], frames);
        let name = case["name"].as_str().unwrap();
        if name == "mdx_vocals" || name == "htdemucs6" {
            check_family_case(&fixtures, &dir, case, &["--other", "model"], frames);
            let valid = case["valid_frames"].as_u64().unwrap() as usize;
            check_family_case(&fixtures, &dir, case, &["--mode", "stream"], valid);
        }
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `--mode` and `--other` combinations that mean nothing are usage errors that say why.
#[test]
fn a_look_ahead_is_the_streams_and_the_models_other_the_whole_files() {
    let dir = scratch_dir("mode-usage");
    let wav = dir.join("in.wav");
    write_test_wav(&wav);
    for (args, expected) in [
        (
            &["--mode", "file", "--look-ahead", "1s"][..],
            "--look-ahead applies to --mode stream",
        ),
        (
            &["--mode", "stream", "--other", "model"][..],
            "--other model needs --mode file",
        ),
        (
            &["--look-ahead", "500ms", "--other", "model"][..],
            "--other model needs --mode file",
        ),
    ] {
        let mut all = vec!["separate", path_str(&wav), "-o", path_str(&dir)];
        all.extend_from_slice(args);
        assert_usage_error(&all, expected);
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

// --- quantize ------------------------------------------------------------------------------------

#[test]
fn quantize_writes_int8_and_float16_models_with_their_parameters_that_list_and_separate_like_the_float_one(
) {
    let fixtures = fixtures_dir();
    let dir = scratch_dir("quantize");
    std::fs::copy(
        fixtures.join("mdx_inst_test.onnx"),
        dir.join("mdx_inst_test.onnx"),
    )
    .unwrap();
    std::fs::copy(
        fixtures.join("mdx_inst_test.json"),
        dir.join("mdx_inst_test.json"),
    )
    .unwrap();
    let runtime = real_runtime();
    let quantize = |extra: &[&str]| {
        let mut args = vec!["quantize", "mdx_inst_test", "--models-dir", path_str(&dir)];
        args.extend_from_slice(extra);
        stemflow(&args, Some(&runtime))
    };

    // By default only MatMul layers are quantized; this model has none: said, nothing written.
    let stderr = assert_clean_failure(&quantize(&[]), "nothing to quantize");
    assert!(stderr.contains("1 Conv (add --ops matmul,conv"), "{stderr}");
    let int8 = dir.join("mdx_inst_test.int8.onnx");
    assert!(!int8.exists());

    let done = quantize(&["--ops", "matmul,conv"]);
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert!(
        text(&done.stdout).contains("1 Conv in int8"),
        "{}",
        text(&done.stdout)
    );
    // Its sidecar came along (MDX-Net parameters), byte for byte.
    assert_eq!(
        std::fs::read(dir.join("mdx_inst_test.int8.json")).unwrap(),
        std::fs::read(dir.join("mdx_inst_test.json")).unwrap()
    );
    let written = std::fs::read(&int8).unwrap();

    // Never overwritten; the built-in separator has nothing to quantize.
    let stderr = assert_clean_failure(&quantize(&["--ops", "conv"]), "existing output");
    assert!(stderr.contains("already exists"), "{stderr}");
    assert_eq!(std::fs::read(&int8).unwrap(), written);
    let stderr = assert_clean_failure(
        &stemflow(&["quantize", "builtin"], Some(&runtime)),
        "builtin",
    );
    assert!(stderr.contains("not an ONNX model file"), "{stderr}");

    // The float16 version, for GPUs: int8's options do not apply to it.
    let refused = quantize(&["--fp16", "--ops", "conv"]);
    let stderr = text(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "usage error: {stderr}");
    assert!(stderr.contains("cannot be used with"), "{stderr}");
    let done = quantize(&["--fp16"]);
    assert!(done.status.success(), "{}", text(&done.stderr));
    assert!(
        text(&done.stdout).contains("nodes in float16"),
        "{}",
        text(&done.stdout)
    );
    assert_eq!(
        std::fs::read(dir.join("mdx_inst_test.fp16.json")).unwrap(),
        std::fs::read(dir.join("mdx_inst_test.json")).unwrap()
    );

    // Listed like any model, with the float model's family and stems.
    let listed = stemflow(
        &["models", "--json", "--models-dir", path_str(&dir)],
        Some(&runtime),
    );
    let listed: serde_json::Value = serde_json::from_slice(&listed.stdout).unwrap();
    let models: Vec<_> = listed["models"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["path"].as_str().unwrap().starts_with(path_str(&dir)))
        .collect();
    assert_eq!(models.len(), 3, "{listed}");
    for model in &models[1..] {
        assert_eq!(models[0]["family"], model["family"], "{listed}");
        assert_eq!(models[0]["stems"], model["stems"], "{listed}");
    }
    assert!(models.iter().all(|m| m["error"].is_null()), "{listed}");

    // It separates, close to the float model.
    let input = dir.join("in.wav");
    write_test_wav(&input);
    let mut outputs = Vec::new();
    for name in ["mdx_inst_test", "mdx_inst_test.int8", "mdx_inst_test.fp16"] {
        let out = dir.join(name);
        let separated = stemflow(
            &[
                "separate",
                "--quiet",
                "--device",
                "cpu",
                "--models-dir",
                path_str(&dir),
                "--model",
                name,
                "-o",
                path_str(&out),
                path_str(&input),
            ],
            Some(&runtime),
        );
        assert!(separated.status.success(), "{}", text(&separated.stderr));
        // A float16 model on the CPU says it is slower there; the others say nothing.
        let stderr = text(&separated.stderr);
        assert_eq!(
            stderr.contains("is a float16 model, made for GPUs"),
            name.ends_with(".fp16"),
            "{name}: {stderr}"
        );
        // A two-stem model (instrumental, and vocals as the rest): its two stems.
        outputs.push(read_named_stems(&out, "in", &["vocals", "other"]));
    }
    // Every stem's samples, one after another.
    let flat = |stems: &[(hound::WavSpec, Vec<Vec<f32>>)]| -> Vec<f32> {
        stems
            .iter()
            .flat_map(|(_, c)| c.iter().flatten().copied())
            .collect()
    };
    let float = flat(&outputs[0]);
    for (variant, stems, min_db) in [("int8", &outputs[1], 25.0), ("fp16", &outputs[2], 45.0)] {
        let closeness_db = stemflow_kit::metrics::sdr_db_of_samples(&float, &flat(stems));
        assert!(
            closeness_db.is_finite(),
            "the {variant} model gave the float model's output exactly"
        );
        assert!(
            closeness_db > min_db,
            "{variant} stems {closeness_db:.1} dB from float"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
