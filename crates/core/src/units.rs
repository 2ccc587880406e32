//! Sizes and durations as people write them in study files.
//!
//! Sizes follow the convention of netperf and IOzone, where `K` means 1024:
//! `k`, `K`, `KB` and `KiB` are all 1024 bytes (likewise `M`, `G`). A plain
//! integer is a byte count.

/// Parses a byte size such as `4096`, `"64KiB"`, `"4k"` or `"1 MiB"`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '_' || c == '.'))
        .unwrap_or(t.len());
    let (num, suffix) = t.split_at(split);
    let num = num.replace('_', "");
    if num.is_empty() {
        return Err(format!("`{text}` is not a size: expected a number with an optional unit (B, KiB, MiB, GiB; k/K/KB also mean 1024)"));
    }
    let factor: u64 = match suffix.trim() {
        "" | "B" | "b" => 1,
        "k" | "K" | "KB" | "KiB" | "kB" | "kiB" => 1 << 10,
        "m" | "M" | "MB" | "MiB" => 1 << 20,
        "g" | "G" | "GB" | "GiB" => 1 << 30,
        "t" | "T" | "TB" | "TiB" => 1 << 40,
        other => {
            return Err(format!(
                "`{text}`: unknown size unit `{other}` (allowed: B, KiB, MiB, GiB, TiB; k/K/KB, M/MB, G/GB also mean powers of 1024)"
            ))
        }
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("`{text}` is not a size: `{num}` is not a number"))?;
    let bytes = value * factor as f64;
    if bytes.fract() != 0.0 {
        return Err(format!("`{text}` is not a whole number of bytes"));
    }
    // Parameter values are i64 (`Value::Int`): 2^63 and beyond would wrap
    // to a negative size.
    if bytes >= i64::MAX as f64 {
        return Err(format!("`{text}` is too large"));
    }
    Ok(bytes as u64)
}

/// Most sizes a doubling range may expand to: 1 KiB … 1 TiB is 31.
pub const MAX_RANGE_SIZES: usize = 64;

/// Parses a doubling range of sizes, `"1MiB..4GiB"` → 1 MiB, 2 MiB, …,
/// 4 GiB (IOzone's `-n`/`-g` and `-y`/`-q` with its default multiplier 2).
/// The upper end must be the lower end times a power of two.
pub fn parse_size_range(text: &str) -> Result<Vec<u64>, String> {
    let (lo, hi) = text.split_once("..").ok_or_else(|| {
        format!("`{text}` is not a range: expected `FROM..TO`, e.g. \"8KiB..1MiB\"")
    })?;
    let (lo, hi) = (parse_size(lo)?, parse_size(hi)?);
    if lo == 0 || hi < lo {
        return Err(format!(
            "`{text}`: expected 0 < FROM ≤ TO (the sizes double from FROM up to TO)"
        ));
    }
    let mut out = vec![lo];
    while *out.last().expect("non-empty") < hi {
        let next = out.last().expect("non-empty") * 2;
        if out.len() == MAX_RANGE_SIZES {
            return Err(format!("`{text}` has more than {MAX_RANGE_SIZES} sizes"));
        }
        out.push(next);
    }
    if *out.last().expect("non-empty") != hi {
        return Err(format!(
            "`{text}`: TO must be FROM times a power of two (the sizes double)"
        ));
    }
    Ok(out)
}

/// Parses a range of counts: `"1..64"` doubles from 1 up to 64 (1, 2, 4,
/// …, 64; the upper end need not be a power-of-two multiple and is always
/// included), `"4..32 step 4"` steps linearly (4, 8, …, 32).
pub fn parse_count_range(text: &str) -> Result<Vec<u64>, String> {
    let (range, step) = match text.split_once("step") {
        Some((r, s)) => (r.trim(), Some(s.trim())),
        None => (text.trim(), None),
    };
    let (lo, hi) = range.split_once("..").ok_or_else(|| {
        format!("`{text}` is not a range: expected \"FROM..TO\" or \"FROM..TO step N\"")
    })?;
    let num = |w: &str| {
        w.trim()
            .parse::<u64>()
            .map_err(|_| format!("`{}` in `{text}` is not a whole number", w.trim()))
    };
    let (lo, hi) = (num(lo)?, num(hi)?);
    if lo == 0 || hi < lo {
        return Err(format!("`{text}`: expected 0 < FROM ≤ TO"));
    }
    // Parameter values are i64 (`Value::Int`): a larger TO would wrap to
    // a negative count (issue 14, found by the fuzzer).
    if hi > i64::MAX as u64 {
        return Err(format!("`{text}`: TO must be at most {}", i64::MAX));
    }
    let mut out = vec![lo];
    loop {
        let last = *out.last().expect("non-empty");
        // Past u64 is past TO: the checked forms end the range there
        // instead of overflowing (issue 14, found by the fuzzer).
        let next = match step {
            Some(s) => {
                let s = num(s)?;
                if s == 0 {
                    return Err(format!("`{text}`: the step must be at least 1"));
                }
                last.checked_add(s)
            }
            None => last.checked_mul(2),
        };
        let Some(next) = next.filter(|&n| n <= hi) else {
            if last != hi && step.is_none() {
                out.push(hi);
            }
            break;
        };
        if out.len() == MAX_RANGE_SIZES {
            return Err(format!("`{text}` has more than {MAX_RANGE_SIZES} values"));
        }
        out.push(next);
    }
    Ok(out)
}

/// Formats a byte count compactly, exactly when possible (`65536` → `64KiB`).
pub fn format_size(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (factor, name) in UNITS {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{}{}", bytes / factor, name);
        }
    }
    bytes.to_string()
}

/// Formats seconds for progress lines and ETAs: `1h02m`, `3m05s`, `12s`.
pub fn format_duration(seconds: f64) -> String {
    let s = seconds.max(0.0).round() as u64;
    if s >= 3600 {
        format!("{}h{:02}m", s / 3600, (s % 3600) / 60)
    } else if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn count_ranges() {
        assert_eq!(
            parse_count_range("1..64").unwrap(),
            [1, 2, 4, 8, 16, 32, 64]
        );
        assert_eq!(
            parse_count_range("1..48").unwrap(),
            [1, 2, 4, 8, 16, 32, 48]
        );
        assert_eq!(parse_count_range("4..16 step 4").unwrap(), [4, 8, 12, 16]);
        assert_eq!(parse_count_range("3..3").unwrap(), [3]);
        assert!(parse_count_range("0..4").is_err());
        assert!(parse_count_range("8..4").is_err());
        assert!(parse_count_range("1..x").is_err());
        assert!(parse_count_range("1..9 step 0").is_err());
    }

    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("4k"), Ok(4096));
        assert_eq!(parse_size("4 KiB"), Ok(4096));
        assert_eq!(parse_size("1MiB"), Ok(1 << 20));
        assert_eq!(parse_size("1.5K"), Ok(1536));
        assert_eq!(parse_size("65_507"), Ok(65507));
        assert!(parse_size("4 parsecs")
            .unwrap_err()
            .contains("unknown size unit"));
        assert!(parse_size("KiB").is_err());
        assert!(parse_size("0.3B").is_err());
    }

    #[test]
    fn size_ranges() {
        assert_eq!(
            parse_size_range("8k..64k"),
            Ok(vec![8192, 16384, 32768, 65536])
        );
        assert_eq!(parse_size_range("1MiB..1MiB"), Ok(vec![1 << 20]));
        assert_eq!(parse_size_range("1m..4g").unwrap().len(), 13);
        assert!(parse_size_range("8k..60k")
            .unwrap_err()
            .contains("power of two"));
        assert!(parse_size_range("64k..8k").is_err());
        assert!(parse_size_range("0..8k").is_err());
    }

    /// Issue 14, found by the fuzzer (crates/fuzz): ranges reaching the
    /// end of u64 overflowed (a panic in debug builds), and values past
    /// i64::MAX became negative parameters.
    #[test]
    fn issue_14_ranges_at_the_integer_limits() {
        for text in [
            "1..18446744073709551615",
            "2..18446744073709551615 step 18446744073709551614",
            "1..9223372036854775808 step 9223372036854775807",
        ] {
            let e = parse_count_range(text).unwrap_err();
            assert!(e.contains("at most 9223372036854775807"), "{e}");
        }
        // Up to i64::MAX the range holds, its top included, no overflow.
        let top = i64::MAX as u64;
        assert_eq!(
            parse_count_range("1..9223372036854775807 step 9223372036854775806").unwrap(),
            [1, top]
        );
        assert_eq!(
            parse_count_range("4611686018427387904..9223372036854775807").unwrap(),
            [1 << 62, top]
        );
        assert!(parse_size("8388608TiB").unwrap_err().contains("too large"));
        assert!(parse_size("9223372036854775808").is_err());
        assert!(parse_size_range("1..8388608TiB").is_err());
    }

    #[test]
    fn formats() {
        assert_eq!(format_size(65536), "64KiB");
        assert_eq!(format_size(65507), "65507");
        assert_eq!(format_duration(3725.0), "1h02m");
        assert_eq!(format_duration(185.0), "3m05s");
    }
}

/// Formats a time as RFC 3339 UTC with millisecond precision
/// (`2026-11-21T08:23:05.123Z`), without a calendar dependency: the civil
/// date comes from Howard Hinnant's `civil_from_days` algorithm.
pub fn rfc3339(t: std::time::SystemTime) -> String {
    let d = t.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let secs = d.as_secs() as i64;
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        sod / 3600,
        (sod % 3600) / 60,
        sod % 60,
        d.subsec_millis()
    )
}

/// The current time as RFC 3339 UTC.
pub fn now_rfc3339() -> String {
    rfc3339(std::time::SystemTime::now())
}

#[cfg(test)]
mod time_tests {
    #[test]
    fn rfc3339_known_instants() {
        use std::time::{Duration, UNIX_EPOCH};
        assert_eq!(super::rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // 2026-11-21T08:23:05.5Z
        let t = UNIX_EPOCH + Duration::from_millis(1_795_249_385_500);
        assert_eq!(super::rfc3339(t), "2026-11-21T08:23:05.500Z");
        // A leap day.
        let t = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(super::rfc3339(t), "2000-02-29T00:00:00.000Z");
    }
}
