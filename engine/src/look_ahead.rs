//! [`LookAhead`]: how far past the audio it separates a neural model may look, and so how much
//! latency a stream has. `Full` is the reference pipeline (a whole chunk of latency, seconds);
//! a shorter setting runs the model more often on windows that end shortly after the output
//! they produce (see `families/look_ahead_schedule.rs`).

/// The look-ahead a user chose, as a target latency.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum LookAhead {
    /// The reference pipeline: every chunk overlaps as its family's reference stitches whole
    /// files. The most latency, the least compute, the best quality.
    #[default]
    Full,
    /// A target latency in milliseconds (the reported latency stays at or under it where the
    /// model's chunk allows).
    Millis(u32),
}

/// The settings the plugin offers, longest first.
pub const LOOK_AHEAD_CHOICES: [LookAhead; 6] = [
    LookAhead::Full,
    LookAhead::Millis(4000),
    LookAhead::Millis(2000),
    LookAhead::Millis(1000),
    LookAhead::Millis(500),
    LookAhead::Millis(250),
];

/// The shortest target accepted: below it a model runs on nearly every block.
pub const MIN_LOOK_AHEAD_MS: u32 = 50;

impl LookAhead {
    /// Parses `full`, `500ms`, `0.5s`, `2 s` or a bare number of milliseconds.
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text.trim().to_ascii_lowercase();
        if text == "full" {
            return Ok(LookAhead::Full);
        }
        let (number, scale) = if let Some(ms) = text.strip_suffix("ms") {
            (ms, 1.0)
        } else if let Some(s) = text.strip_suffix('s') {
            (s, 1000.0)
        } else {
            (text.as_str(), 1.0)
        };
        let ms = number
            .trim()
            .parse::<f64>()
            .ok()
            .filter(|v| v.is_finite())
            .map(|v| v * scale)
            .ok_or_else(|| {
                format!("look-ahead '{text}' is not `full` or a time such as 500ms or 2s")
            })?;
        if !(f64::from(MIN_LOOK_AHEAD_MS)..=3_600_000.0).contains(&ms) {
            return Err(format!(
                "look-ahead {text} is out of range: {MIN_LOOK_AHEAD_MS} ms to an hour, or `full`"
            ));
        }
        Ok(LookAhead::Millis(ms.round() as u32))
    }

    /// "Full", "500 ms", "2 s".
    pub fn label(self) -> String {
        match self {
            LookAhead::Full => "Full".into(),
            LookAhead::Millis(ms) if ms >= 1000 && ms % 1000 == 0 => format!("{} s", ms / 1000),
            LookAhead::Millis(ms) if ms >= 1000 => format!("{:.1} s", f64::from(ms) / 1000.0),
            LookAhead::Millis(ms) => format!("{ms} ms"),
        }
    }

    /// The target latency in frames at `sample_rate_hz`; `None` for `Full`.
    pub fn target_frames(self, sample_rate_hz: u32) -> Option<usize> {
        match self {
            LookAhead::Full => None,
            LookAhead::Millis(ms) => {
                Some((u64::from(ms) * u64::from(sample_rate_hz) / 1000) as usize)
            }
        }
    }
}

impl std::fmt::Display for LookAhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.label())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_what_users_type_and_refuses_the_rest() {
        assert_eq!(LookAhead::parse("Full").unwrap(), LookAhead::Full);
        assert_eq!(LookAhead::parse("500ms").unwrap(), LookAhead::Millis(500));
        assert_eq!(LookAhead::parse("0.5s").unwrap(), LookAhead::Millis(500));
        assert_eq!(LookAhead::parse("2 s").unwrap(), LookAhead::Millis(2000));
        assert_eq!(LookAhead::parse("250").unwrap(), LookAhead::Millis(250));
        for bad in ["", "fast", "-1s", "10ms", "NaN", "1e9s"] {
            assert!(LookAhead::parse(bad).is_err(), "{bad}");
        }
        for choice in LOOK_AHEAD_CHOICES {
            assert_eq!(
                LookAhead::parse(&choice.label().replace(' ', "")).unwrap(),
                choice
            );
        }
        assert_eq!(LookAhead::Millis(1500).label(), "1.5 s");
        assert_eq!(LookAhead::Millis(500).target_frames(44_100), Some(22_050));
        assert_eq!(LookAhead::Full.target_frames(44_100), None);
    }
}
