//! One way to print a measured quantity: scaled to the unit that keeps it readable.
//!
//! A CPU row at `0.0000008386 TFLOP/s` and a GPU row at `3355 TFLOP/s` both read at a glance once
//! each picks its own prefix: `838.6 kFLOP/s`, `3.355 PFLOP/s`. Every console figure goes through
//! [`scaled`], so the tools agree on digits and prefixes. (Machine-readable outputs, the CSV and
//! the JSON, keep raw numbers in fixed units.)

/// What a value measures, in base units.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// A duration in seconds: shown in ns, µs, ms or s.
    Seconds,
    /// Bytes per second: shown in B/s, kB/s, MB/s, GB/s, TB/s or PB/s (decimal prefixes, as
    /// bandwidth is specified).
    BytesPerSecond,
    /// FLOPs per second: shown in FLOP/s up to PFLOP/s.
    FlopsPerSecond,
}

/// `value` (in the base unit of `unit`) with four significant digits (at most three decimals) and
/// the prefix that puts it in `1 ..< 1000` (the largest prefix for larger values, the smallest for
/// smaller ones);
/// zero, negative or non-finite values are printed plainly in the base unit.
///
/// ```
/// use tileops_bench::units::{scaled, Unit};
/// assert_eq!(scaled(0.000_002_5, Unit::Seconds), "2.500 µs");
/// assert_eq!(scaled(0.1192e-3, Unit::Seconds), "119.2 µs");
/// assert_eq!(scaled(2.684e12, Unit::BytesPerSecond), "2.684 TB/s");
/// assert_eq!(scaled(838_600.0, Unit::FlopsPerSecond), "838.6 kFLOP/s");
/// ```
pub fn scaled(value: f64, unit: Unit) -> String {
    let (base, ladder): (&str, &[(f64, &str)]) = match unit {
        Unit::Seconds => ("s", &[(1e-9, "ns"), (1e-6, "µs"), (1e-3, "ms"), (1.0, "s")]),
        Unit::BytesPerSecond => (
            "B/s",
            &[
                (1.0, "B/s"),
                (1e3, "kB/s"),
                (1e6, "MB/s"),
                (1e9, "GB/s"),
                (1e12, "TB/s"),
                (1e15, "PB/s"),
            ],
        ),
        Unit::FlopsPerSecond => (
            "FLOP/s",
            &[
                (1.0, "FLOP/s"),
                (1e3, "kFLOP/s"),
                (1e6, "MFLOP/s"),
                (1e9, "GFLOP/s"),
                (1e12, "TFLOP/s"),
                (1e15, "PFLOP/s"),
            ],
        ),
    };
    if !(value.is_finite() && value > 0.0) {
        return format!("{value} {base}");
    }
    // The largest step not above the value; the smallest when the value is below them all.
    let (factor, name) = ladder
        .iter()
        .rev()
        .find(|(factor, _)| value >= *factor)
        .unwrap_or(&ladder[0]);
    let mut shown = value / factor;
    // Four significant digits; rounding may carry into the next prefix (999.96 µs is 1.000 ms).
    let digits = |v: f64| (3 - v.log10().floor() as i32).clamp(0, 3) as usize;
    let mut places = digits(shown);
    let rounded: f64 = format!("{shown:.places$}").parse().unwrap_or(shown);
    if rounded >= 1000.0
        && let Some((next, next_name)) = ladder.iter().find(|(f, _)| f > factor)
    {
        shown = value / next;
        places = digits(shown);
        return format!("{shown:.places$} {next_name}");
    }
    format!("{shown:.places$} {name}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_pick_ns_us_ms_or_s() {
        assert_eq!(scaled(3.2e-9, Unit::Seconds), "3.200 ns");
        assert_eq!(scaled(0.5e-9, Unit::Seconds), "0.500 ns");
        assert_eq!(scaled(12.34e-6, Unit::Seconds), "12.34 µs");
        assert_eq!(scaled(0.2e-3, Unit::Seconds), "200.0 µs");
        assert_eq!(scaled(2.0e-3, Unit::Seconds), "2.000 ms");
        assert_eq!(scaled(999.96e-6, Unit::Seconds), "1.000 ms");
        assert_eq!(scaled(42.0, Unit::Seconds), "42.00 s");
        assert_eq!(scaled(4200.0, Unit::Seconds), "4200 s");
    }

    #[test]
    fn rates_pick_their_prefix() {
        assert_eq!(scaled(4.0e9, Unit::BytesPerSecond), "4.000 GB/s");
        assert_eq!(scaled(4.8e12, Unit::BytesPerSecond), "4.800 TB/s");
        assert_eq!(scaled(999.99e9, Unit::BytesPerSecond), "1.000 TB/s");
        assert_eq!(scaled(3.355e12, Unit::FlopsPerSecond), "3.355 TFLOP/s");
        assert_eq!(scaled(838.6e6, Unit::FlopsPerSecond), "838.6 MFLOP/s");
        assert_eq!(scaled(0.25, Unit::FlopsPerSecond), "0.250 FLOP/s");
        assert_eq!(scaled(2.0e18, Unit::FlopsPerSecond), "2000 PFLOP/s");
    }

    #[test]
    fn degenerate_values_stay_plain() {
        assert_eq!(scaled(0.0, Unit::Seconds), "0 s");
        assert_eq!(scaled(f64::NAN, Unit::BytesPerSecond), "NaN B/s");
        assert_eq!(scaled(-1.0, Unit::FlopsPerSecond), "-1 FLOP/s");
    }
}
