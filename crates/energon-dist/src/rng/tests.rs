//! Tests of the random streams: torch's sampling rules on hand-worked draws, and save/restore.

use proptest::prelude::*;

use super::*;
use crate::mt19937::STATE_WORDS;

fn rng(seed: u32) -> WorkerRng {
    WorkerRng::new(Seed(seed))
}

/// Inverts MT19937's output tempering.
fn untemper(y: u32) -> u32 {
    let y = y ^ (y >> 18);
    let y = y ^ ((y << 15) & 0xefc6_0000);
    let mut shifted7 = y;
    for _ in 0..5 {
        shifted7 = y ^ ((shifted7 << 7) & 0x9d2c_5680);
    }
    let mut shifted11 = shifted7;
    for _ in 0..3 {
        shifted11 = shifted7 ^ (shifted11 >> 11);
    }
    shifted11
}

/// A seeded stream whose next raw output is `raw`.
fn rng_with_next(raw: u32) -> WorkerRng {
    let mut mt = Mt19937::new(7);
    mt.next_u32();
    let (words, index) = mt.state();
    let mut words = *words;
    words[index] = untemper(raw);
    WorkerRng { seed: Seed(7), mt: Mt19937::from_state(words, index) }
}

#[test]
fn untemper_inverts_tempering() {
    for raw in [0, 1, 0x0080_0000, 0xdead_beef, u32::MAX] {
        assert_eq!(rng_with_next(raw).next_u32(), raw);
    }
}

#[test]
fn stream_is_std_mt19937_and_lazily_seeded() {
    let mut r = rng(5489);
    assert!(!r.is_seeded());
    assert_eq!(r.next_u32(), 3_499_211_612);
    assert!(r.is_seeded());
    assert_eq!(r.next_u32(), 581_869_302);
}

#[test]
fn randbelow_small_is_one_draw_modulo() {
    let mut r = rng(5489);
    // 3499211612 % 10, then 581869302 % 7.
    assert_eq!(r.randbelow(10), Ok(2));
    assert_eq!(r.randbelow(7), Ok(581_869_302 % 7));
    // n == 1 still consumes a draw: the next one is the stream's third output.
    let mut r = rng(5489);
    assert_eq!(r.randbelow(1), Ok(0));
    assert_eq!(r.next_u32(), 581_869_302);
    assert_eq!(r.randbelow(0), Err(Error::EmptyRange));
    assert_eq!(r.next_u32(), 3_890_346_734, "randbelow(0) must not draw");
}

#[test]
fn randbelow_switches_to_64_bits_at_2_pow_28() {
    // torch 2.15 `torch.randint(0, n, ())` twice on `manual_seed(1)`.
    let cases: [(u64, [u64; 2]); 4] = [
        ((1 << 28) - 1, [180_483_115, 256_344_314]),
        (1 << 28, [256_344_299, 247_206_984]),
        ((1 << 32) - 1, [1_779_004_689, 2_804_106_197]),
        (1 << 32, [4_282_876_139, 4_005_303_368]),
    ];
    for (n, expected) in cases {
        let mut r = rng(1);
        assert_eq!([r.randbelow(n).unwrap(), r.randbelow(n).unwrap()], expected, "n = {n}");
    }
    // The high half comes from the first draw.
    let mut a = rng(5489);
    let mut b = rng(5489);
    let wide = a.randbelow(1 << 40).unwrap();
    assert_eq!(wide, ((3_499_211_612u64 << 32) | 581_869_302) % (1 << 40));
    assert_eq!(b.next_u64(), (3_499_211_612u64 << 32) | 581_869_302);
}

#[test]
fn randperm_hand_worked() {
    // Seed 5489: z0 = 3499211612 % 4 = 0, z1 = 581869302 % 3 = 0, z2 = 3890346734 % 2 = 0.
    assert_eq!(rng(5489).randperm(4), [0, 1, 2, 3]);
    // z0 = 3499211612 % 5 = 2 -> swap 0,2; z1 = 581869302 % 4 = 2 -> swap 1,3;
    // z2 = 3890346734 % 3 = 2 -> swap 2,4; z3 = 3586334585 % 2 = 1 -> swap 3,4.
    assert_eq!(rng(5489).randperm(5), [2, 3, 4, 0, 1]);
    assert_eq!(rng(5489).shuffle(&["a", "b", "c", "d", "e"]), ["c", "d", "e", "a", "b"]);
}

#[test]
fn randperm_of_zero_or_one_draws_nothing() {
    let mut r = rng(5489);
    assert_eq!(r.randperm(0), Vec::<usize>::new());
    assert_eq!(r.randperm(1), [0]);
    assert!(!r.is_seeded());
    assert_eq!(r.shuffle::<u8>(&[]), Vec::<u8>::new());
    assert_eq!(r.next_u32(), 3_499_211_612);
}

#[test]
fn rand_pop_keeps_order_of_the_rest() {
    let mut r = rng(5489);
    let mut items = vec![10, 11, 12, 13, 14];
    // 3499211612 % 5 = 2.
    assert_eq!(r.rand_pop(&mut items), Ok(12));
    assert_eq!(items, [10, 11, 13, 14]);
    let mut empty: Vec<u8> = Vec::new();
    assert_eq!(r.rand_pop(&mut empty), Err(Error::EmptyRange));
}

#[test]
fn rand_f32_uses_the_low_24_bits() {
    assert_eq!(rng_with_next(0x0080_0000).rand_f32(), 0.5);
    assert_eq!(rng_with_next(0xff80_0000).rand_f32(), 0.5);
    assert_eq!(rng_with_next(0x00ff_ffff).rand_f32(), 1.0 - 2f32.powi(-24));
    assert_eq!(rng_with_next(0).rand_f32(), 0.0);
}

/// `choice_idx` on a stream whose next raw output is `raw`; every expectation was also checked
/// against the reference (tests/golden).
fn choice(raw: u32, weights: &[f32]) -> usize {
    rng_with_next(raw).choice_idx(weights).unwrap()
}

#[test]
fn choice_idx_ties_go_right() {
    // u = 0.5, cdf [1, 2], v = 1.0 == cdf[0]: the first cumulative sum *greater* than v.
    assert_eq!(choice(0x0080_0000, &[1.0, 1.0]), 1);
    assert_eq!(choice(0x007f_ffff, &[1.0, 1.0]), 0);
    assert_eq!(choice(0x00ff_ffff, &[1.0, 1.0]), 1);
    // u = 1/4 of [0.25, 0.25, 0.5]: v = 0.25 == cdf[0].
    assert_eq!(choice(0x0040_0000, &[0.25, 0.25, 0.5]), 1);
}

#[test]
fn choice_idx_never_picks_a_zero_weight() {
    // v == 0 with a leading zero weight.
    assert_eq!(choice(0, &[0.0, 1.0]), 1);
    assert_eq!(choice(0xff00_0000, &[0.0, 0.0, 1.0]), 2);
    // v equal to the sum before a run of zero weights.
    assert_eq!(choice(0x0080_0000, &[1.0, 0.0, 1.0]), 2);
    assert_eq!(choice(0x0080_0000, &[1.0, 0.0, 0.0, 1.0, 0.0]), 3);
}

#[test]
fn choice_idx_rounds_in_f32() {
    // cdf [1, 1 + 2^-23]; v = f32((1 - 2^-23) * (1 + 2^-23)) rounds up to exactly 1.0.
    assert_eq!(choice(0x00ff_fffe, &[1.0, 2f32.powi(-23)]), 1);
    // The cumulative sums are accumulated in f64: with an f32 accumulator, 1e8 + 1 + ... would
    // stay 1e8. Stored as f32, cdf = [1e8 x5, 1e8+8 x4]; v rounds to 1e8, so index 5.
    let mut weights = vec![1.0f32; 9];
    weights[0] = 1e8;
    assert_eq!(choice(0x00ff_ffff, &weights), 5);
}

#[test]
fn choice_idx_single_weight_does_not_draw() {
    let mut r = rng(5489);
    assert_eq!(r.choice_idx(&[0.0]), Ok(0));
    assert_eq!(r.choice_idx(&[3.5]), Ok(0));
    assert!(!r.is_seeded());
}

#[test]
fn choice_idx_rejects_bad_weights_without_drawing() {
    let mut r = rng(5489);
    assert_eq!(r.choice_idx(&[]), Err(Error::EmptyWeights));
    assert_eq!(r.choice_idx(&[0.0, 0.0]), Err(Error::AllWeightsZero { len: 2 }));
    assert_eq!(r.choice_idx(&[1.0, -1.0]), Err(Error::InvalidWeight { index: 1, weight: -1.0 }));
    assert!(matches!(r.choice_idx(&[f32::NAN, 1.0]), Err(Error::InvalidWeight { index: 0, .. })));
    assert!(matches!(
        r.choice_idx(&[1.0, f32::INFINITY]),
        Err(Error::InvalidWeight { index: 1, .. })
    ));
    assert!(!r.is_seeded());
}

#[test]
fn long_randperm_variant_hand_worked() {
    // Used from 2^32 / 20 elements on; z_i = next_u64() % (i + 1) from the outputs of seed 5489:
    // z = 0, 1, 2, 1, 1 gives [0], [0,1], [0,1,2], [0,3,2,1], [0,4,2,1,3].
    assert_eq!(rng(5489).randperm_inside_out(5), [0, 4, 2, 1, 3]);
    assert_eq!(rng(5489).randperm_inside_out(0), Vec::<usize>::new());
}

#[test]
fn unused_stream_round_trips_lazily() {
    let r = rng(42);
    let state = r.state();
    assert!(!state.is_seeded());
    let json = serde_json::to_string(&state).unwrap();
    assert_eq!(json, r#"{"seed":42,"mt":null}"#);
    let back: RngState = serde_json::from_str(&json).unwrap();
    let mut resumed = WorkerRng::from_state(back);
    assert!(!resumed.is_seeded());
    assert_eq!(resumed.next_u32(), Mt19937::new(42).next_u32());
}

#[test]
fn malformed_states_are_rejected() {
    let mut r = rng(42);
    r.next_u32();
    let mut value = serde_json::to_value(r.state()).unwrap();
    value["mt"]["index"] = serde_json::json!(625);
    let err = serde_json::from_value::<RngState>(value.clone()).unwrap_err();
    assert!(err.to_string().contains("index past 624"), "{err}");
    value["mt"]["index"] = serde_json::json!(3);
    value["mt"]["words"].as_array_mut().unwrap().pop();
    let err = serde_json::from_value::<RngState>(value.clone()).unwrap_err();
    assert!(err.to_string().contains("exactly 624 words"), "{err}");
    value["mt"]["words"] = serde_json::json!(vec![0u32; STATE_WORDS]);
    assert!(serde_json::from_value::<RngState>(value).is_err());
}

/// One operation of a random-stream workload.
#[derive(Debug, Clone)]
enum Op {
    Below(u64),
    Perm(usize),
    Choice(Vec<f32>),
    Pop(usize),
    Raw,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (1u64..2000).prop_map(Op::Below),
        ((1u64 << 28)..u64::MAX).prop_map(Op::Below),
        (0usize..50).prop_map(Op::Perm),
        prop::collection::vec(prop_oneof![Just(0.0f32), 0.0f32..100.0], 2..10)
            .prop_filter("some weight", |w| w.iter().any(|&x| x > 0.0))
            .prop_map(Op::Choice),
        (1usize..30).prop_map(Op::Pop),
        Just(Op::Raw),
    ]
}

fn apply(r: &mut WorkerRng, op: &Op) -> Vec<u64> {
    match op {
        Op::Below(n) => vec![r.randbelow(*n).unwrap()],
        Op::Perm(n) => r.randperm(*n).into_iter().map(|x| x as u64).collect(),
        Op::Choice(w) => vec![r.choice_idx(w).unwrap() as u64],
        Op::Pop(n) => vec![r.rand_pop(&mut (0..*n as u64).collect()).unwrap()],
        Op::Raw => vec![u64::from(r.next_u32())],
    }
}

proptest! {
    /// Saving mid-stream (through JSON) and resuming continues exactly like the original.
    #[test]
    fn save_restore_continues_identically(
        seed: u32,
        before in prop::collection::vec(op(), 0..20),
        after in prop::collection::vec(op(), 1..20),
    ) {
        let mut original = rng(seed);
        for op in &before {
            apply(&mut original, op);
        }
        let json = serde_json::to_string(&original.state()).unwrap();
        let mut resumed = WorkerRng::from_state(serde_json::from_str(&json).unwrap());
        prop_assert_eq!(&resumed, &original);
        for op in &after {
            prop_assert_eq!(apply(&mut resumed, op), apply(&mut original, op));
        }
    }

    /// `randperm` is a permutation, and `randbelow` stays in range.
    #[test]
    fn draws_are_in_range(seed: u32, n in 0usize..300, bound in 1u64..) {
        let mut r = rng(seed);
        let mut perm = r.randperm(n);
        perm.sort_unstable();
        prop_assert_eq!(perm, (0..n).collect::<Vec<_>>());
        prop_assert!(r.randbelow(bound).unwrap() < bound);
    }

    /// `choice_idx` returns an index of a positive weight.
    #[test]
    fn choice_picks_positive_weights(
        seed: u32,
        weights in prop::collection::vec(prop_oneof![Just(0.0f32), 0.0f32..1e6], 2..20),
    ) {
        let mut r = rng(seed);
        for _ in 0..20 {
            match r.choice_idx(&weights) {
                Ok(i) => prop_assert!(weights[i] > 0.0),
                Err(e) => prop_assert_eq!(e, Error::AllWeightsZero { len: weights.len() }),
            }
        }
    }
}
