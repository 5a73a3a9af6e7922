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
