//! Small sample-level helpers shared by the audio side and the worker.

/// Greatest common divisor (`gcd(a, 0) == a`), for hop and rate arithmetic.
pub fn gcd(mut a: usize, mut b: usize) -> usize {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Copies `source` into `dest` (as far as both reach), sanitized: NaN and ±Inf become silence
/// and subnormals zero.
/// Returns how many samples were not finite. Works on the samples' bits (exponent all zeros:
/// zero or subnormal; all ones: ±Inf or NaN) with one plain counter, which the compiler turns
/// into vector lanes itself. Realtime-safe.
pub fn sanitize_into(source: &[f32], dest: &mut [f32]) -> usize {
    const EXPONENT_BITS: u32 = 0x7f80_0000;
    let mut num_non_finite = 0u32;
    for (dest, source) in dest.iter_mut().zip(source) {
        let bits = source.to_bits();
        let exponent = bits & EXPONENT_BITS;
        let is_normal = exponent != 0 && exponent != EXPONENT_BITS;
        *dest = f32::from_bits(if is_normal { bits } else { 0 });
        num_non_finite += u32::from(exponent == EXPONENT_BITS);
    }
    num_non_finite as usize
}

/// Whether any sample is NaN or ±Inf: a cheap check (integer bit tests OR-ed together, no early
/// exit, so it vectorizes) for output that is almost always clean. Realtime-safe.
pub fn has_non_finite(samples: &[f32]) -> bool {
    let carries = samples
        .iter()
        .fold(0u32, |carries, &sample| carries | exponent_carry(sample));
    is_any_non_finite(carries)
}

/// The sample's exponent plus one, whose sign bit is set for NaN and ±Inf only (their exponent's
/// bits are all ones, and only then does adding one carry into the sign bit). OR these together
/// over samples and ask [`is_any_non_finite`]: a check without branches, which vectorizes and
/// fits inside another pass over the samples. Realtime-safe.
#[inline]
pub fn exponent_carry(sample: f32) -> u32 {
    const EXPONENT_BITS: u32 = 0x7f80_0000;
    const EXPONENT_ONE: u32 = 0x0080_0000;
    (sample.to_bits() & EXPONENT_BITS).wrapping_add(EXPONENT_ONE)
}

/// Whether [`exponent_carry`]s OR-ed together came from a NaN or ±Inf. Realtime-safe.
#[inline]
pub fn is_any_non_finite(carries: u32) -> bool {
    carries & 0x8000_0000 != 0
}

/// Flushes a subnormal value to zero, leaving everything else as it is.
///
/// Realtime-safe.
#[inline]
pub fn flush_subnormal(sample: f32) -> f32 {
    if sample.is_subnormal() {
        0.0
    } else {
        sample
    }
}

/// A periodic Hann window of `len` samples, raised to the power `exponent` (0.5 gives the
/// square-root Hann used for 50 % overlap analysis/synthesis pairs).
///
/// Not realtime-safe: allocates.
pub fn periodic_hann(len: usize, exponent: f64) -> Vec<f32> {
    (0..len)
        .map(|n| {
            let phase = 2.0 * std::f64::consts::PI * n as f64 / len as f64;
            (0.5 - 0.5 * phase.cos()).powf(exponent) as f32
        })
        .collect()
}

/// A raised-cosine ramp: 0 at or below `start`, 1 at or above `end`, smooth in between.
/// With `start > end` the ramp falls instead.
#[inline]
pub fn raised_cosine_step(x: f32, start: f32, end: f32) -> f32 {
    let t = ((x - start) / (end - start)).clamp(0.0, 1.0);
    // Outside the ramp without a cosine (the built-in separator's masks are mostly there); the
    // same values the cosine gives at 0 and π.
    if t == 0.0 {
        0.0
    } else if t == 1.0 {
        1.0
    } else {
        0.5 - 0.5 * (std::f32::consts::PI * t).cos()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sanitize_replaces_non_finite_and_subnormal() {
        let samples = [
            f32::NAN,
            f32::INFINITY,
            f32::NEG_INFINITY,
            1e-40,
            -0.5,
            0.25,
            0.0,
            -0.0,
        ];
        let expected = [0.0, 0.0, 0.0, 0.0, -0.5, 0.25, 0.0, 0.0];
        // Lengths that fill the vector lanes the compiler makes, leave a tail, or both.
        for repeat in [1, 2, 3] {
            let source: Vec<f32> = samples
                .repeat(repeat)
                .into_iter()
                .chain([f32::NAN])
                .collect();
            let mut dest = vec![1.0; source.len() + 1];
            assert_eq!(sanitize_into(&source, &mut dest), 3 * repeat + 1);
            let mut want = expected.repeat(repeat);
            want.extend([0.0, 1.0]);
            assert_eq!(dest, want);
            assert!(dest.iter().all(|x| x.to_bits() != (-0.0f32).to_bits()));
        }
    }

    #[test]
    fn non_finite_samples_are_found_in_every_lane_and_the_tail() {
        for len in [0, 1, 7, 8, 9, 64, 67] {
            let clean: Vec<f32> = (0..len).map(|i| i as f32 * 1e-3 - 0.01).collect();
            assert!(!has_non_finite(&clean), "{len}");
            let mut edge = clean.clone();
            edge.extend([f32::MAX, -f32::MAX, 1e-40, 0.0, -0.0, f32::MIN_POSITIVE]);
            assert!(!has_non_finite(&edge), "{len}: finite extremes");
            for position in 0..len {
                for bad in [f32::NAN, f32::INFINITY, f32::NEG_INFINITY, -f32::NAN] {
                    let mut samples = clean.clone();
                    samples[position] = bad;
                    assert!(has_non_finite(&samples), "{len}: {bad} at {position}");
                }
            }
        }
    }

    #[test]
    fn sqrt_hann_pairs_sum_to_one_at_half_overlap() {
        let len = 64;
        let window = periodic_hann(len, 0.5);
        for n in 0..len / 2 {
            let sum = window[n] * window[n] + window[n + len / 2] * window[n + len / 2];
            assert!((sum - 1.0).abs() < 1e-6, "n={n} sum={sum}");
        }
    }

    #[test]
    fn raised_cosine_step_is_monotonic_and_bounded() {
        assert_eq!(raised_cosine_step(100.0, 150.0, 250.0), 0.0);
        assert_eq!(raised_cosine_step(300.0, 150.0, 250.0), 1.0);
        assert!((raised_cosine_step(200.0, 150.0, 250.0) - 0.5).abs() < 1e-6);
        // Falling ramp.
        assert_eq!(raised_cosine_step(100.0, 250.0, 150.0), 1.0);
        assert_eq!(raised_cosine_step(300.0, 250.0, 150.0), 0.0);
    }
}

/// The floating-point control bits that flush subnormals: x86-64 MXCSR FTZ (bit 15) and DAZ
/// (bit 6); AArch64 FPCR FZ (bit 24).
#[cfg(target_arch = "x86_64")]
const FLUSH_BITS: u64 = (1 << 15) | (1 << 6);
#[cfg(target_arch = "aarch64")]
const FLUSH_BITS: u64 = 1 << 24;

/// The calling thread's floating-point control register. Realtime-safe.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn read_float_control() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut mxcsr: u32 = 0;
        // SAFETY: `stmxcsr` stores the 32-bit MXCSR register into the local variable whose
        // address is passed; it has no other effect.
        unsafe {
            std::arch::asm!("stmxcsr [{}]", in(reg) &mut mxcsr, options(nostack, preserves_flags));
        }
        u64::from(mxcsr)
    }
    #[cfg(target_arch = "aarch64")]
    {
        let fpcr: u64;
        // SAFETY: reading FPCR has no side effects.
        unsafe {
            std::arch::asm!("mrs {}, fpcr", out(reg) fpcr, options(nomem, nostack, preserves_flags));
        }
        fpcr
    }
}

/// Sets the calling thread's floating-point control register. Realtime-safe.
#[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
fn write_float_control(value: u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let mxcsr = value as u32;
        // SAFETY: `ldmxcsr` loads MXCSR from the local variable; the values written only differ
        // from the current ones in the rounding-neutral FTZ/DAZ bits (see `FLUSH_BITS`).
        unsafe {
            std::arch::asm!("ldmxcsr [{}]", in(reg) &mxcsr, options(nostack, readonly, preserves_flags));
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        // SAFETY: only the FZ bit differs from the current FPCR (see `FLUSH_BITS`).
        unsafe {
            std::arch::asm!("msr fpcr, {}", in(reg) value, options(nomem, nostack, preserves_flags));
        }
    }
}

/// Makes the calling thread flush subnormal floats to zero for good, so DSP and inference on
/// near-silent audio cost no more than on loud audio. For threads Stemflow owns (the worker);
/// the host's audio thread uses a [`DenormalGuard`] instead. Realtime-safe.
pub fn flush_denormals_on_this_thread() {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    write_float_control(read_float_control() | FLUSH_BITS);
}

/// Flushes subnormal floats to zero on the calling thread while it lives and restores the
/// previous mode when dropped: the host's thread is left as the host set it. Realtime-safe.
#[must_use = "the mode is restored when the guard is dropped"]
pub struct DenormalGuard {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    previous: u64,
}

impl DenormalGuard {
    /// Starts flushing subnormals on this thread. Realtime-safe.
    pub fn new() -> Self {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        {
            let previous = read_float_control();
            if previous & FLUSH_BITS != FLUSH_BITS {
                write_float_control(previous | FLUSH_BITS);
            }
            Self { previous }
        }
        #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
        Self {}
    }
}

impl Default for DenormalGuard {
    fn default() -> Self {
        Self::new()
    }
}

impl Drop for DenormalGuard {
    fn drop(&mut self) {
        #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
        if self.previous & FLUSH_BITS != FLUSH_BITS {
            write_float_control(self.previous);
        }
    }
}

#[cfg(test)]
mod denormal_tests {
    use super::*;

    /// A subnormal product that a flushing thread computes as zero.
    fn tiny_product() -> f32 {
        std::hint::black_box(1e-30f32) * std::hint::black_box(1e-10f32)
    }

    #[test]
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    fn the_guard_flushes_and_restores() {
        std::thread::spawn(|| {
            assert!(
                tiny_product().is_subnormal(),
                "threads start without flushing"
            );
            {
                let _guard = DenormalGuard::new();
                assert_eq!(tiny_product(), 0.0);
            }
            assert!(tiny_product().is_subnormal(), "the mode is restored");
            flush_denormals_on_this_thread();
            assert_eq!(tiny_product(), 0.0);
        })
        .join()
        .unwrap();
    }
}
