//! Checks every hosted render must pass: finite output, and stems that add up to the mix.

use crate::compare::{assert_close, assert_ports_bit_identical, delayed, sum};
use crate::{Rendered, ALL_STEMS};

/// Sum of stems vs the delayed input: −100 dBFS.
pub const RECONSTRUCTION_TOLERANCE: f32 = 1e-5;
/// Two renders or two sums of the same samples that may round differently.
pub const ROUNDING_TOLERANCE: f32 = 1e-6;

/// Channel `channel` of the sum of the six stem ports (default configuration; guitar and piano
/// are silent with the built-in separator, and counted all the same).
pub fn stem_sum(rendered: &Rendered, channel: usize) -> Vec<f32> {
    assert_eq!(
        rendered.outputs.len(),
        1 + ALL_STEMS.len(),
        "main + stem ports"
    );
    let stems: Vec<&[f32]> = (1..=ALL_STEMS.len())
        .map(|p| rendered.port(p)[channel].as_slice())
        .collect();
    sum(&stems)
}

/// Two renders with the same latency and the same bits on every port (see
/// [`crate::compare::assert_bit_identical`]).
#[track_caller]
pub fn assert_same_render(what: &str, a: &Rendered, b: &Rendered) {
    assert_eq!(a.latency_samples, b.latency_samples, "{what}: latency");
    assert_ports_bit_identical(what, &a.outputs, &b.outputs);
}

/// Every output sample is finite (outputs start as NaN, so an unwritten sample fails too).
#[track_caller]
pub fn assert_all_finite(what: &str, rendered: &Rendered) {
    for (p, port) in rendered.outputs.iter().enumerate() {
        for (c, channel) in port.iter().enumerate() {
            if let Some(t) = channel.iter().position(|x| !x.is_finite()) {
                panic!(
                    "{what}: output port {p} channel {c} frame {t} is {}",
                    channel[t]
                );
            }
        }
    }
}

/// Main == Σ stems over every frame, and Σ stems == input delayed by the latency.
#[track_caller]
pub fn assert_reconstructs(what: &str, rendered: &Rendered, input: &[Vec<f32>]) {
    let n = rendered.num_frames();
    for (c, input_channel) in input.iter().enumerate() {
        let stems = stem_sum(rendered, c);
        let expected = delayed(input_channel, rendered.latency_samples, n);
        assert_close(
            &format!(
                "{what}: Σ stems ch {c} vs input delayed by {}",
                rendered.latency_samples
            ),
            &stems,
            &expected,
            0..n,
            RECONSTRUCTION_TOLERANCE,
        );
        assert_close(
            &format!("{what}: main ch {c} vs Σ stems"),
            &rendered.main()[c],
            &stems,
            0..n,
            ROUNDING_TOLERANCE,
        );
    }
}
