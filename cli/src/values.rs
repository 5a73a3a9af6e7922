//! Parsers for argument values clap cannot check by type alone.

/// A finite, positive number of seconds: `nan`, `inf`, `0` and negative values are usage errors.
pub fn seconds(text: &str) -> Result<f32, String> {
    let value: f32 = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a number of seconds"))?;
    if value.is_finite() && value > 0.0 {
        Ok(value)
    } else {
        Err(format!(
            "'{text}' is not a positive, finite number of seconds"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_positive_finite_seconds_pass() {
        assert_eq!(seconds("2.5"), Ok(2.5));
        for bad in ["nan", "NaN", "inf", "-1", "0", "many", ""] {
            assert!(seconds(bad).is_err(), "{bad}");
        }
    }
}
