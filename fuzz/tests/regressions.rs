//! Every target's seeds and every input a fuzzer found that once failed (`regressions/<target>/`,
//! named after the bug), replayed without instrumentation in every test run: a parser that
//! panics, or a successful parse whose checks fail, fails here.

use stemflow_fuzz::{regressions, seeds, Target};

fn replay(target: Target, inputs: &[(String, Vec<u8>)]) {
    for (name, bytes) in inputs {
        let outcome = std::panic::catch_unwind(|| target.run(bytes));
        assert!(outcome.is_ok(), "{} failed on {name}", target.name());
    }
}

#[test]
fn every_target_has_seeds_and_survives_them() {
    for target in Target::ALL {
        let inputs = seeds(target);
        assert!(!inputs.is_empty(), "{} has no seeds", target.name());
        replay(target, &inputs);
    }
}

#[test]
fn inputs_fuzzers_found_stay_fixed() {
    for target in Target::ALL {
        replay(target, &regressions(target));
    }
}

#[test]
fn target_names_round_trip() {
    for target in Target::ALL {
        assert_eq!(Target::from_name(target.name()), Some(target));
    }
    assert_eq!(Target::from_name("nothing"), None);
}

#[test]
fn the_audio_seeds_hold_wav_headers_that_decode() {
    // libFuzzer reaches a header field (a sample rate, a size) from a seed that has it.
    let wavs: Vec<(String, Vec<u8>)> = seeds(Target::Audio)
        .into_iter()
        .filter(|(name, _)| name.ends_with(".wav"))
        .collect();
    assert!(wavs.len() >= 8, "{} WAV seeds", wavs.len());
    let folder =
        std::env::temp_dir().join(format!("stemflow-fuzz-wav-seeds-{}", std::process::id()));
    std::fs::create_dir_all(&folder).unwrap();
    for (name, bytes) in &wavs {
        assert_eq!(bytes[0], 0, "{name} does not select the WAV container");
        let path = folder.join(name);
        std::fs::write(&path, &bytes[1..]).unwrap();
        let mut decoder =
            stemflow_audio::AudioDecoder::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        let mut num_frames = 0;
        while let Some([left, _]) = decoder
            .next_block()
            .unwrap_or_else(|e| panic!("{name}: {e}"))
        {
            num_frames += left.len();
        }
        assert_eq!(num_frames, 64, "{name}");
    }
    std::fs::remove_dir_all(&folder).unwrap();
}
