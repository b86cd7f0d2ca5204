//! `resource.Quantity` as Kubernetes' Go code parses it and writes it back to JSON.
//!
//! The JSON form is not the text the user wrote but a canonical rendering of the parsed
//! number: `0.5` becomes `500m`, `1.5Gi` becomes `1536Mi`. A few inputs that the parser
//! already considers canonical are echoed verbatim, quirks included (`+1`, `05`, `1e0`).

use super::bignum::BigUint;

/// Why a quantity string was rejected (the three errors of the Go parser).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum QuantityError {
    #[error(
        "quantities must match the regular expression '^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'"
    )]
    Format,
    #[error("unable to parse numeric part of quantity")]
    Numeric,
    #[error("unable to parse quantity's suffix")]
    Suffix,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Format {
    DecimalExponent,
    BinarySI,
    DecimalSI,
}

/// Largest value a binary-SI quantity keeps (Go's int64 maximum).
const MAX_BINARY: u64 = i64::MAX as u64;

/// Quantities are stored to nano precision; finer fractions round up.
const NANO_DIGITS: i32 = 9;

/// A parsed quantity: `±magnitude × 10^exp10`.
#[derive(Debug)]
struct Quantity {
    negative: bool,
    magnitude: BigUint,
    exp10: i32,
    format: Format,
    /// Input echoed unchanged on output.
    verbatim: Option<String>,
    /// Parsed by the int64 fast path, whose rendering differs from the exact one only
    /// when the exponent wraps around.
    int64: bool,
}

/// The JSON string content Go writes for a quantity given as `text` (a JSON string's
/// content, or the text of a JSON number).
pub fn canonical(text: &str) -> Result<String, QuantityError> {
    Ok(parse(text.trim())?.render())
}

/// `text` rounded up (away from zero) to milli precision and written as Go writes the
/// result: what the API server's defaults do to resource quantities.
pub fn round_up_to_milli(text: &str) -> Result<String, QuantityError> {
    let mut q = parse(text.trim())?;
    if q.exp10 < -3 {
        if q.magnitude
            .div_pow10(u64::from((-3 - q.exp10).unsigned_abs()))
        {
            q.magnitude.add_small(1);
        }
        q.exp10 = -3;
        q.verbatim = None;
    }
    Ok(q.render())
}

/// A key equal for equal values whatever their spelling (`1`, `1000m` and `1e3m` alike),
/// as Kubernetes' semantic equality compares quantities.
pub fn value_key(text: &str) -> Result<String, QuantityError> {
    let q = parse(text.trim())?;
    if q.magnitude.is_zero() {
        return Ok("0".to_owned());
    }
    let mut magnitude = q.magnitude;
    let exponent = i64::from(q.exp10) + i64::from(magnitude.remove_factors(10));
    let sign = if q.negative { "-" } else { "" };
    Ok(format!("{sign}{magnitude}e{exponent}"))
}

/// The lexical parts of a quantity string.
struct Parts<'a> {
    positive: bool,
    /// Integer digits without leading zeros, `"0"` when there are none.
    int_digits: &'a str,
    frac_digits: &'a str,
    suffix: &'a str,
    /// Whether the numeric part holds at least one digit.
    has_digit: bool,
}

fn split(text: &str) -> Result<Parts<'_>, QuantityError> {
    let b = text.as_bytes();
    let end = b.len();
    let mut pos = 0;
    let mut positive = true;
    match b.first() {
        Some(b'-') => {
            positive = false;
            pos = 1;
        }
        Some(b'+') => pos = 1,
        _ => {}
    }
    while pos < end && b[pos] == b'0' {
        pos += 1;
    }
    if pos >= end {
        return Ok(Parts {
            positive,
            int_digits: "0",
            frac_digits: "",
            suffix: "",
            has_digit: true,
        });
    }
    let int_start = pos;
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    let int_digits = match &text[int_start..pos] {
        "" => "0",
        digits => digits,
    };
    let mut frac_digits = "";
    if pos < end && b[pos] == b'.' {
        pos += 1;
        let frac_start = pos;
        while pos < end && b[pos].is_ascii_digit() {
            pos += 1;
        }
        frac_digits = &text[frac_start..pos];
    }
    let suffix_start = pos;
    let has_digit = text[..suffix_start].bytes().any(|c| c.is_ascii_digit());
    while pos < end && b"eEinumkKMGTP".contains(&b[pos]) {
        pos += 1;
    }
    if pos < end && (b[pos] == b'-' || b[pos] == b'+') {
        pos += 1;
    }
    while pos < end && b[pos].is_ascii_digit() {
        pos += 1;
    }
    if pos < end {
        return Err(QuantityError::Format);
    }
    Ok(Parts {
        positive,
        int_digits,
        frac_digits,
        suffix: &text[suffix_start..],
        has_digit,
    })
}

/// Base, exponent and format of a suffix.
fn interpret(suffix: &str) -> Option<(u32, i32, Format)> {
    let decimal = |exp| Some((10, exp, Format::DecimalSI));
    let binary = |exp| Some((2, exp, Format::BinarySI));
    match suffix {
        "" => decimal(0),
        "n" => decimal(-9),
        "u" => decimal(-6),
        "m" => decimal(-3),
        "k" => decimal(3),
        "M" => decimal(6),
        "G" => decimal(9),
        "T" => decimal(12),
        "P" => decimal(15),
        "E" => decimal(18),
        "Ki" => binary(10),
        "Mi" => binary(20),
        "Gi" => binary(30),
        "Ti" => binary(40),
        "Pi" => binary(50),
        "Ei" => binary(60),
        _ if suffix.len() > 1 && (suffix.starts_with('e') || suffix.starts_with('E')) => {
            // Go parses 64 bits and truncates to int32.
            let exp = suffix[1..].parse::<i64>().ok()?;
            Some((10, exp as i32, Format::DecimalExponent))
        }
        _ => None,
    }
}

fn parse(text: &str) -> Result<Quantity, QuantityError> {
    if text.is_empty() {
        return Err(QuantityError::Format);
    }
    if text == "0" {
        return Ok(Quantity {
            negative: false,
            magnitude: BigUint::zero(),
            exp10: 0,
            format: Format::DecimalSI,
            verbatim: Some(text.to_owned()),
            int64: true,
        });
    }
    let parts = split(text)?;
    let (base, exponent, format) = interpret(parts.suffix).ok_or(QuantityError::Suffix)?;
    if let Some(q) = parse_int64(text, &parts, exponent, format) {
        return Ok(q);
    }
    parse_exact(&parts, base, exponent, format)
}

/// The int64 fast path of the Go parser; `None` when the number does not fit it.
fn parse_int64(text: &str, p: &Parts<'_>, exponent: i32, format: Format) -> Option<Quantity> {
    let digits = (p.int_digits.len() + p.frac_digits.len()) as i64;
    let (precision, scale, multiplier) = match format {
        Format::DecimalExponent | Format::DecimalSI => (18 - digits, exponent, 1i64),
        Format::BinarySI if exponent >= 0 && p.frac_digits.is_empty() => {
            let precision = 15 - p.int_digits.len() as i64 - i64::from(exponent) * 3 / 10 - 1;
            (precision, 0, 1i64.checked_shl(exponent as u32)?)
        }
        Format::BinarySI => return None,
    };
    if precision < 0 {
        return None;
    }
    let scale = scale.wrapping_sub(p.frac_digits.len() as i32);
    if scale < -NANO_DIGITS {
        return None;
    }
    let shifted = format!("{}{}", p.int_digits, p.frac_digits);
    let value: i64 = shifted.parse().ok()?;
    let magnitude = value.checked_mul(multiplier)?;
    let keep_text = match format {
        Format::BinarySI => exponent % 10 == 0 && value & 0x07 != 0,
        _ => scale % 3 == 0 && !shifted.ends_with("000") && !shifted.starts_with('0'),
    };
    Some(Quantity {
        negative: !p.positive,
        magnitude: BigUint::from_u64(magnitude as u64),
        exp10: scale,
        format,
        verbatim: keep_text.then(|| text.to_owned()),
        int64: true,
    })
}

/// The arbitrary-precision path: round up to nano precision, clamp binary values.
fn parse_exact(
    p: &Parts<'_>,
    base: u32,
    exponent: i32,
    mut format: Format,
) -> Result<Quantity, QuantityError> {
    if !p.has_digit {
        return Err(QuantityError::Numeric);
    }
    let mut magnitude = BigUint::from_decimal(&format!("{}{}", p.int_digits, p.frac_digits));
    // Digits after the decimal point (the scale of Go's inf.Dec).
    let mut frac_scale = p.frac_digits.len() as i32;
    if base == 10 {
        frac_scale = frac_scale.wrapping_sub(exponent);
    } else {
        let mut remaining = exponent.max(0) as u32;
        while remaining > 0 {
            let step = remaining.min(16);
            magnitude.mul_small(1 << step);
            remaining -= step;
        }
    }
    if !magnitude.is_zero() {
        if frac_scale > NANO_DIGITS {
            let dropped = i64::from(frac_scale) - i64::from(NANO_DIGITS);
            if magnitude.div_pow10(dropped as u64) {
                magnitude.add_small(1);
            }
            frac_scale = NANO_DIGITS;
        } else if frac_scale >= 0 {
            // Go rescales to exactly nine decimals; only binary values compare against
            // that scale below, and huge decimal exponents must stay symbolic.
            for _ in frac_scale..NANO_DIGITS {
                magnitude.mul_small(10);
            }
            frac_scale = NANO_DIGITS;
        }
    }
    if format == Format::BinarySI {
        let mut limit = BigUint::from_u64(MAX_BINARY);
        let mut one = BigUint::from_u64(1);
        for _ in 0..frac_scale.max(0) {
            limit.mul_small(10);
            one.mul_small(10);
        }
        if magnitude > limit {
            magnitude = BigUint::from_u64(MAX_BINARY);
            frac_scale = 0;
        } else if magnitude < one && !magnitude.is_zero() {
            format = Format::DecimalSI;
        }
    }
    Ok(Quantity {
        negative: !p.positive,
        magnitude,
        exp10: frac_scale.wrapping_neg(),
        format,
        verbatim: None,
        int64: false,
    })
}

impl Quantity {
    fn render(self) -> String {
        if let Some(text) = self.verbatim {
            return text;
        }
        if self.magnitude.is_zero() {
            return "0".to_owned();
        }
        let sign = if self.negative { "-" } else { "" };
        if self.format == Format::BinarySI
            && let Some(whole) = self.whole_at_least_1024()
        {
            let mut amount = whole;
            let times = amount.remove_factors(1024);
            let suffix = match times {
                1 => "Ki",
                2 => "Mi",
                3 => "Gi",
                4 => "Ti",
                5 => "Pi",
                6 => "Ei",
                _ => "",
            };
            return format!("{sign}{amount}{suffix}");
        }
        let (amount, exponent) = self.decimal_mantissa();
        let suffix = if self.format == Format::DecimalExponent {
            if exponent == 0 {
                String::new()
            } else {
                format!("e{exponent}")
            }
        } else {
            decimal_suffix(exponent).to_owned()
        };
        format!("{sign}{amount}{suffix}")
    }

    /// Mantissa and exponent of the decimal rendering: no trailing zeros, then scaled up
    /// until the exponent is a multiple of three.
    fn decimal_mantissa(&self) -> (BigUint, i32) {
        let mut amount = self.magnitude.clone();
        let mut exponent = self.exp10.wrapping_add(amount.remove_factors(10) as i32);
        if self.int64 {
            // Go adjusts an int64 mantissa in a single step (which differs from the loop
            // below only when the exponent wraps) and redoes the work exactly on overflow.
            let step = match exponent % 3 {
                1 | -2 => 1,
                2 | -1 => 2,
                _ => 0,
            };
            let mut scaled = amount.clone();
            for _ in 0..step {
                scaled.mul_small(10);
            }
            if scaled <= BigUint::from_u64(i64::MAX as u64) {
                return (scaled, exponent.wrapping_sub(step));
            }
            amount = self.magnitude.clone();
            exponent = self.exp10.wrapping_add(amount.remove_factors(10) as i32);
        }
        while exponent % 3 != 0 {
            amount.mul_small(10);
            exponent = exponent.wrapping_sub(1);
        }
        (amount, exponent)
    }

    /// The magnitude as a whole number when it is one and at least 1024 (binary SI
    /// quantities below 1024 or with a fraction are written in decimal SI).
    fn whole_at_least_1024(&self) -> Option<BigUint> {
        let mut whole = self.magnitude.clone();
        if self.exp10 < 0 {
            if whole.div_pow10(u64::from(self.exp10.unsigned_abs())) {
                return None;
            }
        } else {
            for _ in 0..self.exp10 {
                whole.mul_small(10);
            }
        }
        (whole >= BigUint::from_u64(1024)).then_some(whole)
    }
}

/// Decimal SI suffix for a power of ten; Go writes no suffix for powers it has no name
/// for (so `1000E` comes out as `1`).
fn decimal_suffix(exponent: i32) -> &'static str {
    match exponent {
        -9 => "n",
        -6 => "u",
        -3 => "m",
        3 => "k",
        6 => "M",
        9 => "G",
        12 => "T",
        15 => "P",
        18 => "E",
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(s: &str) -> String {
        canonical(s).unwrap()
    }

    #[test]
    fn documented_examples() {
        assert_eq!(c("0.5"), "500m");
        assert_eq!(c("1.5"), "1500m");
        assert_eq!(c("1000m"), "1");
        assert_eq!(c("1024Mi"), "1Gi");
        assert_eq!(c("1.5Gi"), "1536Mi");
        assert_eq!(c("1G"), "1G");
        assert_eq!(c("100M"), "100M");
        assert_eq!(c("128974848"), "128974848");
        assert_eq!(c("2e9"), "2e9");
    }

    #[test]
    fn decimal_forms() {
        assert_eq!(c("0"), "0");
        assert_eq!(c("000"), "0");
        assert_eq!(c("-0"), "0");
        assert_eq!(c("0.0"), "0");
        assert_eq!(c("1000"), "1k");
        assert_eq!(c("1500000"), "1500k");
        assert_eq!(c("0.1"), "100m");
        assert_eq!(c("100m"), "100m");
        assert_eq!(c("0.0001"), "100u");
        assert_eq!(c("1.0"), "1");
        assert_eq!(c("-1.5"), "-1500m");
        assert_eq!(c("12.5k"), "12500");
        assert_eq!(c(" 2 "), "2");
        assert_eq!(c("1000E"), "1");
        assert_eq!(c("10e2147483647"), "10e2147483647");
    }

    #[test]
    fn verbatim_echo() {
        assert_eq!(c("+1"), "+1");
        assert_eq!(c("05"), "05");
        assert_eq!(c("1e0"), "1e0");
        assert_eq!(c("1E3"), "1E3");
        assert_eq!(c("-1Ki"), "-1Ki");
        assert_eq!(c("500Mi"), "500Mi");
    }

    #[test]
    fn binary_forms() {
        assert_eq!(c("1Ki"), "1Ki");
        assert_eq!(c("8Ki"), "8Ki");
        assert_eq!(c("1024Ki"), "1Mi");
        assert_eq!(c("0.5Ki"), "512");
        assert_eq!(c("1.5Ki"), "1536");
        assert_eq!(c("0.5Mi"), "512Ki");
        assert_eq!(c("2048Ei"), "9223372036854775807");
    }

    #[test]
    fn exponent_forms() {
        assert_eq!(c("1e3"), "1e3");
        assert_eq!(c("100e1"), "1e3");
        assert_eq!(c("1e-12"), "1e-9");
        assert_eq!(c("15e-1"), "1500e-3");
    }

    #[test]
    fn rounding_to_nano() {
        assert_eq!(c("0.5n"), "1n");
        assert_eq!(c("1.0000000001"), "1000000001n");
        assert_eq!(c("0.0000000001"), "1n");
        assert_eq!(c("-0.0000000001"), "-1n");
        assert_eq!(c("1234567890123456789012"), "1234567890123456789012");
        assert_eq!(c("1234567890123456789000"), "1234567890123456789k");
    }

    #[test]
    fn rejects_malformed() {
        assert_eq!(canonical(""), Err(QuantityError::Format));
        assert_eq!(canonical("1.5.5"), Err(QuantityError::Format));
        assert_eq!(canonical("abc"), Err(QuantityError::Format));
        assert_eq!(canonical("1Qi"), Err(QuantityError::Format));
        assert_eq!(canonical("1mi"), Err(QuantityError::Suffix));
        assert_eq!(canonical("1e"), Err(QuantityError::Suffix));
        assert_eq!(canonical(".e-12"), Err(QuantityError::Numeric));
    }
}
