use super::super::helpers;
use super::super::ops::{CmpOp, compare, py_eq};
use super::*;
use proptest::prelude::*;
use std::time::{Duration, Instant};

fn range(n: i128) -> Value {
    Value::Range {
        start: 0,
        stop: n,
        step: 1,
    }
}

/// `[elt(i, j) for i in range(a) for j in range(b)]` the way generated code runs it.
fn nested(a: i128, b: i128, into: Collect, elt: impl Fn(&Value, &Value) -> Value) -> EvalResult {
    let _budget = Budget::enter();
    let mut acc = into;
    for i in iter(&range(a))? {
        step()?;
        for j in iter(&range(b))? {
            step()?;
            acc.push(elt(&i, &j))?;
        }
    }
    acc.finish()
}

#[test]
fn comprehension_results_respect_the_length_limit() {
    // The case: 9,000,000 items.
    let started = Instant::now();
    let err = nested(3000, 3000, Collect::list(), |_, _| Value::Int(0)).unwrap_err();
    println!(
        "[0 for i in range(3000) for j in range(3000)]: {:?}",
        started.elapsed()
    );
    assert_eq!(
        err.message,
        "MemoryError: a comprehension of more than 4194304 items exceeds the tileops formula \
         limit of 4194304"
    );
    // 4M x 4M: the same error, long before any allocation could fail.
    let started = Instant::now();
    let err = nested(1 << 22, 1 << 22, Collect::list(), |_, _| Value::Int(0)).unwrap_err();
    assert!(
        err.message
            .starts_with("MemoryError: a comprehension of more than")
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    println!(
        "[0 for i in range(4M) for j in range(4M)]: {:?}",
        started.elapsed()
    );
    // Exactly at the limit is fine.
    let ok = nested(1 << 11, 1 << 11, Collect::tuple(), |_, _| Value::None).unwrap();
    assert_eq!(helpers::len(&[ok]), Ok(Value::Int(1 << 22)));
    // A set counts distinct items: 9,000,000 pushes of 3,000 values.
    let set = nested(3000, 3000, Collect::set(), |i, _| i.clone()).unwrap();
    assert_eq!(helpers::len(&[set]), Ok(Value::Int(3000)));
    let err = nested(3000, 3000, Collect::set(), |i, j| {
        Value::Tuple(vec![i.clone(), j.clone()])
    })
    .unwrap_err();
    assert!(err.message.starts_with("MemoryError:"), "{err}");
}

#[test]
fn the_work_budget_bounds_time_and_nested_items() {
    // Nothing is kept, but 4M x 4M steps would take hours: the budget stops it.
    let started = Instant::now();
    let err = (|| -> EvalResult {
        let _budget = Budget::enter();
        let mut acc = Collect::list();
        for _i in iter(&range(1 << 22))? {
            step()?;
            for _j in iter(&range(1 << 22))? {
                step()?;
            }
        }
        acc.push(Value::None)?;
        acc.finish()
    })()
    .unwrap_err();
    assert_eq!(
        err.message,
        "MemoryError: the formula does more than 33554432 units of work (items iterated, \
         built or scanned), the tileops formula limit"
    );
    assert!(started.elapsed() < Duration::from_secs(30));
    println!("4M x 4M loop steps, nothing kept: {:?}", started.elapsed());
    // Few items, each huge: they count with everything they hold.
    let big = Value::Tuple(vec![Value::Int(0); 1 << 20]);
    let err = nested(1 << 10, 1, Collect::list(), |_, _| big.clone()).unwrap_err();
    assert!(err.message.contains("units of work"), "{err}");
    // Long strings count by size too.
    let long = Value::Str("x".repeat(1 << 22));
    let err = nested(1 << 10, 1, Collect::list(), |_, _| long.clone()).unwrap_err();
    assert!(err.message.contains("units of work"), "{err}");
}

#[test]
fn budgets_are_per_evaluation_and_nest() {
    assert_eq!(WORK_LEFT.with(Cell::get), usize::MAX);
    {
        let _outer = Budget::enter();
        charge(10).unwrap();
        {
            let _inner = Budget::enter();
            assert_eq!(WORK_LEFT.with(Cell::get), MAX_WORK - 10);
            charge(5).unwrap();
        }
        assert_eq!(WORK_LEFT.with(Cell::get), MAX_WORK - 15);
        assert!(charge(MAX_WORK).is_err());
        assert_eq!(WORK_LEFT.with(Cell::get), 0);
    }
    // Outside any budget nothing is counted, and a new budget starts full.
    assert_eq!(WORK_LEFT.with(Cell::get), usize::MAX);
    charge(usize::MAX - 1).unwrap();
    let _again = Budget::enter();
    assert_eq!(WORK_LEFT.with(Cell::get), MAX_WORK);
}

#[test]
fn iteration_streams_in_python_order() {
    let cases = [
        (
            Value::Str("hé".into()),
            vec![Value::Str("h".into()), Value::Str("é".into())],
        ),
        (
            Value::Range {
                start: 5,
                stop: -5,
                step: -3,
            },
            vec![Value::Int(5), Value::Int(2), Value::Int(-1), Value::Int(-4)],
        ),
        (
            Value::List(vec![Value::None, Value::Bool(true)]),
            vec![Value::None, Value::Bool(true)],
        ),
    ];
    for (v, expected) in cases {
        assert_eq!(iter(&v).unwrap().collect::<Vec<_>>(), expected, "{v}");
        assert_eq!(
            helpers::list(std::slice::from_ref(&v)),
            Ok(Value::List(expected))
        );
    }
    let huge = Value::Range {
        start: i128::MIN,
        stop: i128::MAX,
        step: 1,
    };
    let mut it = iter(&huge).unwrap();
    assert_eq!(it.next(), Some(Value::Int(i128::MIN)));
    assert_eq!(
        it.nth(usize::MAX),
        Some(Value::Int(i128::MIN + 1 + usize::MAX as i128))
    );
    assert_eq!(
        iter(&Value::None).unwrap_err().message,
        "TypeError: 'NoneType' object is not iterable"
    );
}

#[test]
fn helpers_stream_like_their_list_versions() {
    let items = [
        Value::Int(3),
        Value::Float(0.1),
        Value::Bool(true),
        Value::Float(0.2),
        Value::Int(-7),
    ];
    let list = Value::List(items.to_vec());
    for (into, helper) in [
        (
            Collect::product as fn() -> Collect,
            helpers::product as helpers::Helper,
        ),
        (Collect::sum, helpers::sum),
        (Collect::min, helpers::min),
        (Collect::max, helpers::max),
        (Collect::set, helpers::set),
        (Collect::tuple, helpers::tuple),
        (Collect::list, helpers::list),
    ] {
        let mut acc = into();
        for item in &items {
            acc.push(item.clone()).unwrap();
        }
        assert_eq!(acc.finish(), helper(std::slice::from_ref(&list)));
    }
    let mut acc = Collect::set();
    assert_eq!(
        acc.push(Value::List(vec![])).unwrap_err().message,
        "TypeError: unhashable type: 'list'"
    );
    let mut acc = Collect::min();
    acc.push(Value::Int(1)).unwrap();
    assert_eq!(
        acc.push(Value::Str("a".into())).unwrap_err().message,
        "TypeError: '<' not supported between instances of 'str' and 'int'"
    );
}

/// `set(range(4194304))`, its `len`, and a lookup per item: the timing case. Timed
/// in release by `cargo test --release`; in a debug build the bound is looser.
#[test]
fn sets_are_not_quadratic() {
    let limit = if cfg!(debug_assertions) {
        Duration::from_secs(60)
    } else {
        Duration::from_secs(1)
    };
    let started = Instant::now();
    let _budget = Budget::enter();
    let set = helpers::set(&[range(1 << 22)]).unwrap();
    assert_eq!(
        helpers::len(std::slice::from_ref(&set)),
        Ok(Value::Int(1 << 22))
    );
    let built = started.elapsed();
    assert!(built < limit, "set(range(4194304)) took {built:?}");
    drop(_budget);
    let started = Instant::now();
    let mut found = 0;
    for i in (0..1 << 22).step_by(4) {
        if compare(CmpOp::In, &Value::Int(i), &set).unwrap() {
            found += 1;
        }
    }
    assert!(!compare(CmpOp::In, &Value::Int(-1), &set).unwrap());
    assert_eq!(found, 1 << 20);
    let looked_up = started.elapsed();
    assert!(looked_up < limit, "2^20 lookups took {looked_up:?}");
    println!("set(range(4194304)) and len: {built:?}; 2^20 `in` lookups: {looked_up:?}");
}

fn hashable() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        (-4_i128..4).prop_map(Value::Int),
        prop::sample::select(&[0.0, -0.0, 0.5, 1.0, 2.0, f64::NAN, f64::INFINITY][..])
            .prop_map(Value::Float),
        any::<bool>().prop_map(Value::Bool),
        Just(Value::None),
        prop::sample::select(&["", "a", "b", "é"][..]).prop_map(|s| Value::Str(s.into())),
        (
            -2_i128..3,
            -2_i128..3,
            prop::sample::select(&[-2_i128, -1, 1, 3][..])
        )
            .prop_map(|(start, stop, step)| Value::Range { start, stop, step }),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop::collection::vec(inner, 0..3).prop_map(Value::Tuple)
    })
}

proptest! {
    /// The sorted set agrees with Python's definition, checked the slow way: every item
    /// kept is the first of its equals, none of the kept are equal, and `in` is a linear
    /// scan with `==`.
    #[test]
    fn sets_agree_with_linear_python_equality(
        items in prop::collection::vec(hashable(), 0..12),
        probes in prop::collection::vec(hashable(), 0..6),
    ) {
        let Value::Set(set) = make_set(items.clone()).unwrap() else { unreachable!() };
        let mut expected: Vec<&Value> = Vec::new();
        for item in &items {
            if !expected.iter().any(|x| py_eq(x, item)) {
                expected.push(item);
            }
        }
        prop_assert_eq!(set.len(), expected.len());
        for x in &expected {
            // The kept item is the first one seen: the same representation (`1`, not `1.0`).
            let repr = format!("{x:?}");
            let kept = set.iter().any(|y| format!("{y:?}") == repr);
            prop_assert!(kept, "{} not kept", repr);
        }
        let set_value = Value::Set(set.clone());
        for probe in probes.iter().chain(&items) {
            let linear = set.iter().any(|x| py_eq(x, probe));
            prop_assert_eq!(compare(CmpOp::In, probe, &set_value).unwrap(), linear, "{}", probe);
        }
        // Set order is a fixed point.
        // (Compared by representation: a NaN is not `==` to itself.)
        let again = make_set(set.clone()).unwrap();
        prop_assert_eq!(format!("{again:?}"), format!("{set_value:?}"));
    }

    /// `sum` streamed item by item is `sum` of the list, bit for bit.
    #[test]
    fn streamed_sum_is_sum(items in prop::collection::vec(prop_oneof![
        (-5_i128..5).prop_map(Value::Int),
        Just(Value::Int(i128::from(i64::MAX))),
        prop::sample::select(&[0.1, 1e16, -1e16, 0.5, f64::INFINITY][..]).prop_map(Value::Float),
        any::<bool>().prop_map(Value::Bool),
    ], 0..10)) {
        let mut acc = Collect::sum();
        let mut streamed = Ok(());
        for item in &items {
            streamed = streamed.and_then(|()| acc.push(item.clone()));
        }
        let expected = helpers::sum(&[Value::List(items.clone())]);
        match (streamed.map(|()| acc.finish()), expected) {
            (Ok(Ok(Value::Float(a))), Ok(Value::Float(b))) => {
                prop_assert!(a.to_bits() == b.to_bits() || (a.is_nan() && b.is_nan()));
            }
            (got, expected) => prop_assert_eq!(got.and_then(|r| r), expected),
        }
    }
}

/// A kept invariant part charges its work on every use: the budget runs out at the same step,
/// with the same error, as when the part is rebuilt at each step.
#[test]
fn an_invariant_part_spends_the_budget_as_rebuilding_it_does() {
    // A part whose evaluation charges a tenth of the budget, in two pieces.
    let part = || -> EvalResult {
        charge(MAX_WORK / 20)?;
        charge(MAX_WORK / 20)?;
        Ok(Value::Int(7))
    };
    let run = |keep: bool| -> (usize, EvalResult<()>) {
        let _budget = Budget::enter();
        let mut kept = Invariant::new();
        let mut steps = 0;
        let result = (|| {
            for _ in 0..100 {
                step()?;
                let value = if keep {
                    kept.get(part)?.clone()
                } else {
                    part()?
                };
                assert_eq!(value, Value::Int(7));
                steps += 1;
            }
            Ok(())
        })();
        (steps, result)
    };
    let (rebuilt, rebuilt_err) = run(false);
    let (kept, kept_err) = run(true);
    assert_eq!(
        rebuilt, 10,
        "ten steps fit the budget, the eleventh does not"
    );
    assert_eq!(kept, rebuilt);
    assert_eq!(kept_err, rebuilt_err);
    assert!(kept_err.is_err());
    // Outside a budget nothing is counted, and the part is built once.
    let mut kept = Invariant::new();
    for _ in 0..3 {
        assert_eq!(kept.get(part), Ok(&Value::Int(7)));
    }
}
