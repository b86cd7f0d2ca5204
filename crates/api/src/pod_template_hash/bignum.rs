//! Minimal unsigned big integer for quantity canonicalisation.
//!
//! Quantities with more than 18 significant digits, more than 9 decimal places or a
//! fractional binary suffix leave the int64 range, so the canonical form needs exact
//! arithmetic. Only multiplication and division by small factors are needed.

use std::cmp::Ordering;
use std::fmt;

const LIMB: u64 = 1_000_000_000;
const LIMB_DIGITS: usize = 9;

/// Little-endian limbs in base 10^9, no leading zero limbs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BigUint {
    limbs: Vec<u32>,
}

impl BigUint {
    pub fn zero() -> Self {
        BigUint { limbs: Vec::new() }
    }

    pub fn from_u64(mut v: u64) -> Self {
        let mut limbs = Vec::new();
        while v > 0 {
            limbs.push((v % LIMB) as u32);
            v /= LIMB;
        }
        BigUint { limbs }
    }

    /// Parses ASCII decimal digits; the caller guarantees only `0-9` occur.
    pub fn from_decimal(digits: &str) -> Self {
        let digits = digits.trim_start_matches('0').as_bytes();
        let mut limbs = Vec::with_capacity(digits.len() / LIMB_DIGITS + 1);
        let mut end = digits.len();
        while end > 0 {
            let start = end.saturating_sub(LIMB_DIGITS);
            let limb = digits[start..end]
                .iter()
                .fold(0u32, |acc, d| acc * 10 + u32::from(d - b'0'));
            limbs.push(limb);
            end = start;
        }
        BigUint { limbs }
    }

    pub fn is_zero(&self) -> bool {
        self.limbs.is_empty()
    }

    /// Number of decimal digits (0 for zero).
    pub fn decimal_len(&self) -> usize {
        match self.limbs.last() {
            None => 0,
            Some(top) => (self.limbs.len() - 1) * LIMB_DIGITS + top.to_string().len(),
        }
    }

    pub fn mul_small(&mut self, factor: u32) {
        let mut carry = 0u64;
        for limb in &mut self.limbs {
            let v = u64::from(*limb) * u64::from(factor) + carry;
            *limb = (v % LIMB) as u32;
            carry = v / LIMB;
        }
        while carry > 0 {
            self.limbs.push((carry % LIMB) as u32);
            carry /= LIMB;
        }
        self.trim();
    }

    pub fn add_small(&mut self, addend: u32) {
        let mut carry = u64::from(addend);
        for limb in &mut self.limbs {
            if carry == 0 {
                break;
            }
            let v = u64::from(*limb) + carry;
            *limb = (v % LIMB) as u32;
            carry = v / LIMB;
        }
        if carry > 0 {
            self.limbs.push(carry as u32);
        }
    }

    /// Divides in place and returns the remainder.
    pub fn div_rem_small(&mut self, divisor: u32) -> u32 {
        let mut rem = 0u64;
        for limb in self.limbs.iter_mut().rev() {
            let v = rem * LIMB + u64::from(*limb);
            *limb = (v / u64::from(divisor)) as u32;
            rem = v % u64::from(divisor);
        }
        self.trim();
        rem as u32
    }

    /// Whether `divisor` divides the value exactly, without changing it.
    pub fn divisible_by(&self, divisor: u32) -> bool {
        let mut copy = self.clone();
        copy.div_rem_small(divisor) == 0
    }

    /// Divides by `10^n`, returning whether anything non-zero was discarded.
    pub fn div_pow10(&mut self, mut n: u64) -> bool {
        if n > self.decimal_len() as u64 {
            let inexact = !self.is_zero();
            *self = BigUint::zero();
            return inexact;
        }
        let mut inexact = false;
        while n > 0 {
            let step = n.min(9) as u32;
            inexact |= self.div_rem_small(10u32.pow(step)) != 0;
            n -= u64::from(step);
        }
        inexact
    }

    /// Counts and removes trailing factors of `factor` (a zero value stays zero, count 0).
    pub fn remove_factors(&mut self, factor: u32) -> u32 {
        let mut times = 0u32;
        while !self.is_zero() && self.divisible_by(factor) {
            self.div_rem_small(factor);
            times += 1;
        }
        times
    }

    fn trim(&mut self) {
        while self.limbs.last() == Some(&0) {
            self.limbs.pop();
        }
    }
}

impl Ord for BigUint {
    fn cmp(&self, other: &Self) -> Ordering {
        self.limbs
            .len()
            .cmp(&other.limbs.len())
            .then_with(|| self.limbs.iter().rev().cmp(other.limbs.iter().rev()))
    }
}

impl PartialOrd for BigUint {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl fmt::Display for BigUint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let Some((top, rest)) = self.limbs.split_last() else {
            return f.write_str("0");
        };
        write!(f, "{top}")?;
        for limb in rest.iter().rev() {
            write!(f, "{limb:09}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimal_round_trip() {
        for s in [
            "0",
            "7",
            "999999999",
            "1000000000",
            "123456789012345678901234567890",
        ] {
            assert_eq!(BigUint::from_decimal(s).to_string(), s);
        }
        assert_eq!(BigUint::from_decimal("000120").to_string(), "120");
        assert_eq!(
            BigUint::from_u64(u64::MAX).to_string(),
            u64::MAX.to_string()
        );
    }

    #[test]
    fn arithmetic() {
        let mut n = BigUint::from_decimal("999999999999999999");
        n.mul_small(1024);
        assert_eq!(n.to_string(), "1023999999999999998976");
        assert_eq!(n.div_rem_small(1024), 0);
        assert_eq!(n.to_string(), "999999999999999999");
        n.add_small(1);
        assert_eq!(n.to_string(), "1000000000000000000");
        assert_eq!(n.remove_factors(10), 18);
        assert_eq!(n.to_string(), "1");
        let mut m = BigUint::from_decimal("123456789");
        assert!(m.div_pow10(3));
        assert_eq!(m.to_string(), "123456");
        assert!(!BigUint::from_decimal("5000").clone().div_pow10(3));
        let mut tiny = BigUint::from_decimal("5");
        assert!(tiny.div_pow10(40));
        assert!(tiny.is_zero());
        assert_eq!(BigUint::from_decimal("1000000000").decimal_len(), 10);
        assert!(BigUint::from_decimal("1000000000") > BigUint::from_decimal("999999999"));
    }
}
