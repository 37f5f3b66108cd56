//! Python's numeric semantics that the reference's slicing arithmetic relies on.
//!
//! The reference computes sample splits with Python floats: `int(a / b)` (true division, then
//! truncation) and `round(x)` (round half to even). These helpers reproduce them exactly, so that
//! every cut lands on the same sample as in the reference.

/// Python's `round(x)` for a float: the nearest integer, ties to even (`round(2.5) == 2`).
///
/// ```
/// assert_eq!(energon_dist::pymath::round_half_even(2.5), 2.0);
/// assert_eq!(energon_dist::pymath::round_half_even(3.5), 4.0);
/// assert_eq!(energon_dist::pymath::round_half_even(-0.5), -0.0);
/// ```
pub fn round_half_even(x: f64) -> f64 {
    x.round_ties_even()
}

/// Python's `int(x)` for a float: truncation toward zero.
///
/// Returns `None` where Python raises (NaN, infinities) and for magnitudes beyond `i128`.
///
/// ```
/// assert_eq!(energon_dist::pymath::py_int(-1.9), Some(-1));
/// assert_eq!(energon_dist::pymath::py_int(60.999), Some(60));
/// assert_eq!(energon_dist::pymath::py_int(f64::NAN), None);
/// ```
pub fn py_int(x: f64) -> Option<i128> {
    // 2^127: the first magnitude that does not fit in an i128.
    const LIMIT: f64 = 170_141_183_460_469_231_731_687_303_715_884_105_728.0;
    if !x.is_finite() || x.abs() >= LIMIT {
        return None;
    }
    // Exact: `x` is finite and its integer part fits.
    Some(x.trunc() as i128)
}

/// Python's `a / b` for non-negative integers: the exact quotient, correctly rounded to a double.
///
/// For operands up to 2^53 this is plain IEEE division; above, converting the operands to
/// doubles first would round twice, which Python does not. Returns `None` for `b == 0` (Python
/// raises `ZeroDivisionError`).
///
/// ```
/// assert_eq!(energon_dist::pymath::true_div(200, 6), Some(200.0 / 6.0));
/// // 2^53 + 1 is a tie between two doubles and rounds to the even one.
/// assert_eq!(energon_dist::pymath::true_div((1 << 53) + 1, 1), Some(9007199254740992.0));
/// ```
pub fn true_div(a: u64, b: u64) -> Option<f64> {
    const EXACT: u64 = 1 << 53;
    if b == 0 {
        return None;
    }
    if a == 0 {
        return Some(0.0);
    }
    if a <= EXACT && b <= EXACT {
        // Both operands are exact doubles, and IEEE division rounds correctly.
        return Some(a as f64 / b as f64);
    }
    let (a, b) = (u128::from(a), u128::from(b));
    let bits = |x: u128| 128 - x.leading_zeros() as i32;
    // Scale so that the integer quotient has 55 or 56 significant bits: enough for 53 bits of
    // mantissa, a rounding bit and a guard bit; the remainder acts as the sticky bit.
    let shift = 55 + bits(b) - bits(a);
    let (num, den) = if shift >= 0 { (a << shift, b) } else { (a, b << -shift) };
    let quotient = num / den;
    let sticky = num % den != 0;
    let extra = bits(quotient) - 53;
    let mut mantissa = quotient >> extra;
    let rest = quotient & ((1 << extra) - 1);
    let half = 1 << (extra - 1);
    if rest > half || (rest == half && (sticky || mantissa & 1 == 1)) {
        mantissa += 1;
    }
    // The value is `mantissa * 2^(extra - shift)`, between 2^-64 and 2^64: a normal double, so
    // the power of two is exact and so is the product.
    let exponent = extra - shift;
    let pow2 = f64::from_bits(((1023 + i64::from(exponent)) as u64) << 52);
    Some(mantissa as f64 * pow2)
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn true_div_matches_python_above_2_pow_53() {
        // Values printed by CPython 3.11 (`repr(a / b)`).
        // The first eight differ from `a as f64 / b as f64` (double rounding).
        let cases: [(u64, u64, f64); 15] = [
            (10508965330920255989, 888599, 11826442895974.738),
            (7040984185562499801, 719831, 9781440623649.855),
            (9155128738586640367, 579716, 15792437570442.492),
            (6386054244833389625, 242082, 26379715323045.043),
            (17574817022551298708, 303859, 57838724614216.79),
            (405422329488706009, 15459593762783282362, 0.02622464313808175),
            (15872220819942828013, 2239033316728651184, 7.088872104472747),
            (6146150112742530058, 13318045323558677972, 0.46149040369087996),
            (9007199254740993, 1, 9007199254740992.0),
            (9007199254740995, 1, 9007199254740996.0),
            (18014398509481987, 1, 18014398509481988.0),
            (18446744073709551615, 3, 6.148914691236517e18),
            (18446744073709551615, 18446744073709551614, 1.0),
            (18014398509481985, 2, 9007199254740992.0),
            (18014398509481987, 2, 9007199254740994.0),
        ];
        for (a, b, expected) in cases {
            assert_eq!(true_div(a, b), Some(expected), "{a} / {b}");
        }
    }

    #[test]
    fn true_div_by_zero_is_none() {
        assert_eq!(true_div(5, 0), None);
        assert_eq!(true_div(0, 0), None);
        assert_eq!(true_div(0, 7), Some(0.0));
    }

    #[test]
    fn py_int_truncates_toward_zero() {
        assert_eq!(py_int(2.9999), Some(2));
        assert_eq!(py_int(-2.9999), Some(-2));
        assert_eq!(py_int(-0.5), Some(0));
        assert_eq!(py_int(f64::INFINITY), None);
        assert_eq!(py_int(1e300), None);
        assert_eq!(py_int(1e30), Some(1_000_000_000_000_000_019_884_624_838_656));
    }

    #[test]
    fn round_half_even_is_bankers() {
        for (x, r) in
            [(0.5, 0.0), (1.5, 2.0), (2.5, 2.0), (13.5, 14.0), (2.4999, 2.0), (2.5001, 3.0)]
        {
            assert_eq!(round_half_even(x), r, "{x}");
        }
    }

    /// The correctly rounded quotient is one of the two doubles around the exact quotient, and the
    /// nearer one: compare both neighbours exactly in integer arithmetic.
    fn is_correctly_rounded(a: u64, b: u64, q: f64) -> bool {
        let (mant, exp) = decompose(q);
        let lo = mant - 1;
        let hi = mant + 1;
        // |m * 2^exp - a / b|, scaled by b (and by 2^-exp where exp < 0) to stay in integers.
        let dist = |m: u128| -> u128 {
            if exp >= 0 {
                ((m << exp) * u128::from(b)).abs_diff(u128::from(a))
            } else {
                (m * u128::from(b)).abs_diff(u128::from(a) << (-exp))
            }
        };
        let d = dist(mant);
        d <= dist(lo) && d <= dist(hi)
    }

    fn decompose(q: f64) -> (u128, i32) {
        let bits = q.to_bits();
        let exp = ((bits >> 52) & 0x7ff) as i32 - 1075;
        let mant = u128::from((bits & ((1 << 52) - 1)) | (1 << 52));
        (mant, exp)
    }

    proptest! {
        #[test]
        fn true_div_equals_ieee_below_2_pow_53(a in 0u64..(1 << 53), b in 1u64..(1 << 53)) {
            prop_assert_eq!(true_div(a, b), Some(a as f64 / b as f64));
        }

        #[test]
        fn true_div_is_nearest_for_large_operands(a in (1u64 << 53).., b in 1u64..) {
            let q = true_div(a, b).unwrap();
            prop_assert!(is_correctly_rounded(a, b, q), "{} / {} -> {}", a, b, q);
        }

        #[test]
        fn true_div_is_nearest_for_large_divisors(a in 1u64.., b in (1u64 << 53)..) {
            let q = true_div(a, b).unwrap();
            prop_assert!(is_correctly_rounded(a, b, q), "{} / {} -> {}", a, b, q);
        }
    }
}
