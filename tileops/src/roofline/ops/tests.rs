use super::*;
use proptest::prelude::*;

fn i(x: i128) -> Value {
    Value::Int(x)
}
fn f(x: f64) -> Value {
    Value::Float(x)
}
fn b(x: bool) -> Value {
    Value::Bool(x)
}
fn s(x: &str) -> Value {
    Value::Str(x.to_owned())
}
fn tup(items: Vec<Value>) -> Value {
    Value::Tuple(items)
}
fn list(items: Vec<Value>) -> Value {
    Value::List(items)
}
fn set(items: Vec<Value>) -> Value {
    make_set(items).unwrap()
}
fn range(start: i128, stop: i128, step: i128) -> Value {
    Value::Range { start, stop, step }
}
fn ints(xs: &[i128]) -> Vec<Value> {
    xs.iter().map(|&x| Value::Int(x)).collect()
}

type BinOp = fn(&Value, &Value) -> EvalResult;

/// Asserts structural equality, and for floats the exact bits (so `-0.0` and `0.0` differ).
fn assert_value(got: &Value, expected: &Value, context: &str) {
    match (got, expected) {
        (Value::Float(x), Value::Float(y)) => {
            assert!(
                x.to_bits() == y.to_bits() || (x.is_nan() && y.is_nan()),
                "{context}: got {x:?}, expected {y:?}"
            );
        }
        _ => assert_eq!(got, expected, "{context}"),
    }
}

fn check_ok(name: &str, op: BinOp, cases: &[(Value, Value, Value)]) {
    for (a, b, expected) in cases {
        let got = op(a, b).unwrap_or_else(|e| panic!("{a} {name} {b}: {e}"));
        assert_value(&got, expected, &format!("{a} {name} {b}"));
    }
}

fn check_err(name: &str, op: BinOp, cases: &[(Value, Value, &str)]) {
    for (a, b, expected) in cases {
        match op(a, b) {
            Ok(v) => panic!("{a} {name} {b}: expected error {expected}, got {v}"),
            Err(e) => assert_eq!(e.message, *expected, "{a} {name} {b}"),
        }
    }
}

const OVERFLOW: &str = "OverflowError: integer overflow (tileops integers are 128-bit)";

#[test]
fn add_follows_python() {
    check_ok(
        "+",
        add,
        &[
            (i(1), i(2), i(3)),
            (b(true), b(true), i(2)),
            (b(true), i(1), i(2)),
            (i(1), f(0.5), f(1.5)),
            (f(0.1), f(0.2), f(0.30000000000000004)),
            (b(true), f(0.5), f(1.5)),
            (s("ab"), s("c"), s("abc")),
            (tup(ints(&[1])), tup(ints(&[2, 3])), tup(ints(&[1, 2, 3]))),
            (list(ints(&[1])), list(vec![]), list(ints(&[1]))),
            (i(i128::MAX - 1), i(1), i(i128::MAX)),
        ],
    );
    check_err(
        "+",
        add,
        &[
            (i(i128::MAX), i(1), OVERFLOW),
            (i(i128::MIN), i(-1), OVERFLOW),
            (
                i(1),
                s("a"),
                "TypeError: unsupported operand type(s) for +: 'int' and 'str'",
            ),
            (
                s("a"),
                i(1),
                "TypeError: can only concatenate str (not \"int\") to str",
            ),
            (
                list(vec![]),
                tup(vec![]),
                "TypeError: can only concatenate list (not \"tuple\") to list",
            ),
            (
                tup(vec![]),
                list(vec![]),
                "TypeError: can only concatenate tuple (not \"list\") to tuple",
            ),
            (
                Value::None,
                i(1),
                "TypeError: unsupported operand type(s) for +: 'NoneType' and 'int'",
            ),
            (
                set(vec![]),
                set(vec![]),
                "TypeError: unsupported operand type(s) for +: 'set' and 'set'",
            ),
        ],
    );
}

#[test]
fn sub_follows_python() {
    check_ok(
        "-",
        sub,
        &[
            (i(1), i(3), i(-2)),
            (b(false), b(true), i(-1)),
            (f(1.5), i(1), f(0.5)),
            (set(ints(&[1, 2, 3])), set(vec![f(2.0)]), set(ints(&[1, 3]))),
        ],
    );
    check_err(
        "-",
        sub,
        &[
            (i(i128::MIN), i(1), OVERFLOW),
            (
                s("a"),
                s("a"),
                "TypeError: unsupported operand type(s) for -: 'str' and 'str'",
            ),
        ],
    );
}

#[test]
fn mul_follows_python() {
    check_ok(
        "*",
        mul,
        &[
            (i(6), i(7), i(42)),
            (b(true), i(5), i(5)),
            (i(2), f(0.25), f(0.5)),
            (s("ab"), i(3), s("ababab")),
            (i(2), s("x"), s("xx")),
            (s("ab"), i(-1), s("")),
            (tup(ints(&[1, 2])), i(2), tup(ints(&[1, 2, 1, 2]))),
            (list(ints(&[0])), i(3), list(ints(&[0, 0, 0]))),
            (list(ints(&[0])), b(true), list(ints(&[0]))),
            (b(false), tup(ints(&[1])), tup(vec![])),
            (i(1 << 62), i(1 << 64), i(1 << 126)),
        ],
    );
    check_err(
        "*",
        mul,
        &[
            (i(1 << 64), i(1 << 64), OVERFLOW),
            (i(i128::MIN), i(-1), OVERFLOW),
            (
                list(vec![]),
                f(2.0),
                "TypeError: can't multiply sequence by non-int of type 'float'",
            ),
            (
                f(2.0),
                s("a"),
                "TypeError: can't multiply sequence by non-int of type 'float'",
            ),
            (
                s("a"),
                s("a"),
                "TypeError: can't multiply sequence by non-int of type 'str'",
            ),
            (
                Value::None,
                i(2),
                "TypeError: unsupported operand type(s) for *: 'NoneType' and 'int'",
            ),
        ],
    );
    assert!(
        mul(&list(ints(&[1, 2])), &i(1 << 40))
            .unwrap_err()
            .message
            .starts_with("MemoryError")
    );
    assert!(
        mul(&s("ab"), &i(i128::MAX))
            .unwrap_err()
            .message
            .starts_with("MemoryError")
    );
}

#[test]
fn truediv_follows_python() {
    let big = 1i128 << 100;
    check_ok(
        "/",
        truediv,
        &[
            (i(1), i(2), f(0.5)),
            (i(6), i(3), f(2.0)),
            (i(-7), i(2), f(-3.5)),
            (b(true), b(true), f(1.0)),
            (i(1), f(4.0), f(0.25)),
            (f(1.0), i(3), f(1.0 / 3.0)),
            (i(big), i(1), f(2f64.powi(100))),
            (i(big), i(3), f(4.2255020007607644e29)),
            (i(1), i(big), f(7.888609052210118e-31)),
            // 2**53 + 1 is not a double; Python rounds the exact quotient once.
            (i((1 << 53) + 1), i(1), f(9007199254740992.0)),
            (i(i128::MAX), i(i128::MIN), f(-1.0)),
            (i(i128::MIN), i(3), f(-5.671372782015641e37)),
            (i(10i128.pow(30)), i(7), f(1.4285714285714285e29)),
            (i((1 << 54) + 3), i(2), f(9007199254740994.0)),
        ],
    );
    check_err(
        "/",
        truediv,
        &[
            (i(1), i(0), "ZeroDivisionError: division by zero"),
            (i(1), b(false), "ZeroDivisionError: division by zero"),
            (f(1.0), f(0.0), "ZeroDivisionError: float division by zero"),
            (i(1), f(-0.0), "ZeroDivisionError: float division by zero"),
            (
                s("a"),
                i(1),
                "TypeError: unsupported operand type(s) for /: 'str' and 'int'",
            ),
        ],
    );
}

#[test]
fn floordiv_follows_python() {
    check_ok(
        "//",
        floordiv,
        &[
            (i(7), i(2), i(3)),
            (i(-7), i(2), i(-4)),
            (i(7), i(-2), i(-4)),
            (i(-7), i(-2), i(3)),
            (i(6), i(3), i(2)),
            (i(0), i(-3), i(0)),
            (b(true), b(true), i(1)),
            (f(-7.0), i(2), f(-4.0)),
            (f(7.5), f(2.0), f(3.0)),
            (f(7.5), f(-2.0), f(-4.0)),
            (f(-0.5), f(1.0), f(-1.0)),
            (f(0.0), f(-1.0), f(-0.0)),
            (f(1.0), f(0.1), f(9.0)),
            (f(f64::INFINITY), f(1.0), f(f64::NAN)),
            (f(1.0), f(f64::INFINITY), f(0.0)),
            (f(-1.0), f(f64::INFINITY), f(-1.0)),
            (i(i128::MIN), i(1), i(i128::MIN)),
            (i(i128::MIN), i(2), i(i128::MIN / 2)),
        ],
    );
    check_err(
        "//",
        floordiv,
        &[
            (
                i(1),
                i(0),
                "ZeroDivisionError: integer division or modulo by zero",
            ),
            (
                f(1.0),
                i(0),
                "ZeroDivisionError: float floor division by zero",
            ),
            (i(i128::MIN), i(-1), OVERFLOW),
            (
                s("a"),
                i(1),
                "TypeError: unsupported operand type(s) for //: 'str' and 'int'",
            ),
        ],
    );
}

#[test]
fn modulo_follows_python() {
    check_ok(
        "%",
        modulo,
        &[
            (i(7), i(3), i(1)),
            (i(-1), i(3), i(2)),
            (i(1), i(-3), i(-2)),
            (i(-7), i(-3), i(-1)),
            (i(6), i(3), i(0)),
            (b(true), i(2), i(1)),
            (f(7.5), f(-2.0), f(-0.5)),
            (f(-7.5), f(2.0), f(0.5)),
            (f(7.5), i(2), f(1.5)),
            (f(6.0), f(-3.0), f(-0.0)),
            (f(-6.0), f(3.0), f(0.0)),
            (f(1.0), f(0.1), f(0.09999999999999995)),
            (f(-1.0), f(f64::INFINITY), f(f64::INFINITY)),
            (i(i128::MIN), i(-1), i(0)),
            (i(i128::MIN), i(i128::MAX), i(i128::MAX - 1)),
        ],
    );
    check_err(
        "%",
        modulo,
        &[
            (i(1), i(0), "ZeroDivisionError: integer modulo by zero"),
            (
                b(true),
                b(false),
                "ZeroDivisionError: integer modulo by zero",
            ),
            (f(1.0), f(0.0), "ZeroDivisionError: float modulo by zero"),
            (
                Value::None,
                i(1),
                "TypeError: unsupported operand type(s) for %: 'NoneType' and 'int'",
            ),
        ],
    );
    assert!(
        modulo(&s("%d"), &i(1))
            .unwrap_err()
            .message
            .starts_with("TypeError: printf-style")
    );
}

#[test]
fn pow_follows_python() {
    check_ok(
        "**",
        pow,
        &[
            (i(2), i(10), i(1024)),
            (i(2), i(0), i(1)),
            (i(0), i(0), i(1)),
            (i(0), i(5), i(0)),
            (i(-1), i(1 << 100), i(1)),
            (i(-1), i((1 << 100) + 1), i(-1)),
            (i(1), i(i128::MAX), i(1)),
            (i(-3), i(3), i(-27)),
            (i(2), i(126), i(1 << 126)),
            (b(true), i(5), i(1)),
            (i(2), b(true), i(2)),
            (i(2), i(-1), f(0.5)),
            (i(-2), i(-1), f(-0.5)),
            (i(4), f(0.5), f(2.0)),
            (f(2.0), i(3), f(8.0)),
            (f(-8.0), f(3.0), f(-512.0)),
            (f(-2.0), i(2), f(4.0)),
            (f(0.0), f(0.0), f(1.0)),
            (f(f64::NAN), i(0), f(1.0)),
            (f(1.0), f(f64::NAN), f(1.0)),
            (f(f64::NAN), i(1), f(f64::NAN)),
            (f(0.5), f(f64::INFINITY), f(0.0)),
            (f(2.0), f(f64::NEG_INFINITY), f(0.0)),
            (f(-1.0), f(f64::INFINITY), f(1.0)),
            (f(f64::NEG_INFINITY), i(3), f(f64::NEG_INFINITY)),
            (f(f64::NEG_INFINITY), i(-3), f(-0.0)),
            (f(f64::INFINITY), f(0.5), f(f64::INFINITY)),
            (f(-0.0), i(3), f(-0.0)),
            (f(-0.0), f(2.0), f(0.0)),
            (f(-1.0), f(1e300), f(1.0)),
            (f(2.0), f(-2000.0), f(0.0)),
        ],
    );
    check_err(
        "**",
        pow,
        &[
            (i(2), i(127), OVERFLOW),
            (i(2), i(1 << 40), OVERFLOW),
            (
                i(0),
                i(-1),
                "ZeroDivisionError: 0.0 cannot be raised to a negative power",
            ),
            (
                f(0.0),
                f(-0.5),
                "ZeroDivisionError: 0.0 cannot be raised to a negative power",
            ),
            (
                f(10.0),
                i(400),
                "OverflowError: (34, 'Numerical result out of range')",
            ),
            (
                s("a"),
                i(2),
                "TypeError: unsupported operand type(s) for ** or pow(): 'str' and 'int'",
            ),
        ],
    );
    let err = pow(&f(-8.0), &f(1.0 / 3.0)).unwrap_err();
    assert!(
        err.message.starts_with("ValueError: a negative number"),
        "{err}"
    );
    assert!(pow(&i(-8), &f(0.5)).is_err());
}

#[test]
fn unary_operators() {
    type UnOp = fn(&Value) -> EvalResult;
    let cases: &[(UnOp, Value, Value)] = &[
        (neg, i(3), i(-3)),
        (neg, b(true), i(-1)),
        (neg, f(0.0), f(-0.0)),
        (neg, i(i128::MAX), i(-i128::MAX)),
        (pos, b(true), i(1)),
        (pos, f(-1.5), f(-1.5)),
        (not, i(0), b(true)),
        (not, s("x"), b(false)),
        (not, Value::None, b(true)),
    ];
    for (op, a, expected) in cases {
        assert_value(&op(a).unwrap(), expected, &a.to_string());
    }
    assert_eq!(neg(&i(i128::MIN)).unwrap_err().message, OVERFLOW);
    assert_eq!(
        neg(&s("a")).unwrap_err().message,
        "TypeError: bad operand type for unary -: 'str'"
    );
    assert_eq!(
        pos(&Value::None).unwrap_err().message,
        "TypeError: bad operand type for unary +: 'NoneType'"
    );
}

#[test]
fn truthiness() {
    let cases = [
        (Value::None, false),
        (b(false), false),
        (b(true), true),
        (i(0), false),
        (i(-1), true),
        (f(0.0), false),
        (f(-0.0), false),
        (f(f64::NAN), true),
        (s(""), false),
        (s("0"), true),
        (tup(vec![]), false),
        (tup(vec![i(0)]), true),
        (list(vec![]), false),
        (set(vec![]), false),
        (set(vec![i(0)]), true),
        (range(0, 0, 1), false),
        (range(5, 0, -1), true),
        (Value::Type(crate::roofline::PyType::Int), true),
    ];
    for (v, expected) in cases {
        assert_eq!(truthy(&v), Ok(expected), "{v}");
    }
}

fn cmp(op: CmpOp, a: &Value, b: &Value) -> bool {
    compare(op, a, b).unwrap_or_else(|e| panic!("{a} {} {b}: {e}", op.symbol()))
}

#[test]
fn equality_follows_python() {
    let equal = [
        (i(1), f(1.0)),
        (b(true), i(1)),
        (b(true), f(1.0)),
        (b(false), f(-0.0)),
        (Value::None, Value::None),
        (s("a"), s("a")),
        (tup(ints(&[1, 2])), tup(vec![f(1.0), i(2)])),
        (list(vec![]), list(vec![])),
        (set(ints(&[1, 2])), set(ints(&[2, 1]))),
        (range(0, 0, 1), range(5, 2, 1)),
        (range(0, 3, 2), range(0, 4, 2)),
        (range(1, 2, 5), range(1, 3, 7)),
        (
            Value::Type(crate::roofline::PyType::Int),
            Value::Type(crate::roofline::PyType::Int),
        ),
        (i(1 << 60), f(2f64.powi(60))),
    ];
    for (a, b) in &equal {
        assert!(cmp(CmpOp::Eq, a, b), "{a} == {b}");
        assert!(cmp(CmpOp::Eq, b, a), "{b} == {a}");
        assert!(!cmp(CmpOp::Ne, a, b), "{a} != {b}");
    }
    let different = [
        (i(1), s("1")),
        (tup(ints(&[1])), list(ints(&[1]))),
        (f(f64::NAN), f(f64::NAN)),
        (i((1 << 53) + 1), f(2f64.powi(53))),
        (i(i128::MAX), f(2f64.powi(127))),
        (Value::None, i(0)),
        (tup(ints(&[1, 2])), tup(ints(&[1]))),
        (range(0, 3, 1), tup(ints(&[0, 1, 2]))),
        (set(ints(&[1])), list(ints(&[1]))),
        (s("a"), Value::Type(crate::roofline::PyType::Str)),
    ];
    for (a, b) in &different {
        assert!(!cmp(CmpOp::Eq, a, b), "{a} == {b}");
        assert!(cmp(CmpOp::Ne, a, b), "{a} != {b}");
    }
}

#[test]
fn ordering_follows_python() {
    use CmpOp::*;
    let cases = [
        (Lt, i(1), i(2), true),
        (Lt, i(2), f(2.5), true),
        (Ge, f(2.0), i(2), true),
        (Gt, b(true), b(false), true),
        (Le, b(true), f(1.0), true),
        (Gt, i((1 << 53) + 1), f(2f64.powi(53)), true),
        (Lt, i(i128::MAX), f(2f64.powi(127)), true),
        (Gt, i(i128::MIN), f(f64::NEG_INFINITY), true),
        (Lt, i(i128::MIN), f(-(2f64.powi(127))), false),
        (Le, i(i128::MIN), f(-(2f64.powi(127))), true),
        (Lt, f(f64::NAN), i(1), false),
        (Ge, f(f64::NAN), f(f64::NAN), false),
        (Lt, s("abc"), s("abd"), true),
        (Lt, s("ab"), s("abc"), true),
        (Gt, s("b"), s("abc"), true),
        (Lt, s("Z"), s("a"), true),
        (Lt, s("é"), s("z"), false),
        (Lt, tup(ints(&[1, 2])), tup(ints(&[1, 3])), true),
        (Lt, tup(ints(&[1, 2])), tup(ints(&[1, 2, 0])), true),
        (Ge, tup(ints(&[1, 2])), tup(vec![f(1.0), i(2)]), true),
        (Gt, tup(ints(&[2])), tup(vec![i(1), s("x")]), true),
        (Le, list(vec![]), list(vec![]), true),
        (Lt, list(ints(&[3])), list(ints(&[2, 9])), false),
        (Lt, set(ints(&[1])), set(ints(&[1, 2])), true),
        (Lt, set(ints(&[1, 2])), set(ints(&[1, 2])), false),
        (Le, set(ints(&[1, 2])), set(ints(&[1, 2])), true),
        (Gt, set(ints(&[1, 2])), set(ints(&[3])), false),
        (Ge, set(ints(&[1, 2, 3])), set(ints(&[3])), true),
    ];
    for (op, a, b, expected) in cases {
        assert_eq!(cmp(op, &a, &b), expected, "{a} {} {b}", op.symbol());
    }
    let errors = [
        (
            Lt,
            i(1),
            s("a"),
            "TypeError: '<' not supported between instances of 'int' and 'str'",
        ),
        (
            Ge,
            Value::None,
            Value::None,
            "TypeError: '>=' not supported between instances of 'NoneType' and 'NoneType'",
        ),
        (
            Lt,
            list(vec![]),
            tup(vec![]),
            "TypeError: '<' not supported between instances of 'list' and 'tuple'",
        ),
        (
            Gt,
            tup(ints(&[1])),
            tup(vec![s("a")]),
            "TypeError: '>' not supported between instances of 'int' and 'str'",
        ),
        (
            Lt,
            range(0, 1, 1),
            range(0, 2, 1),
            "TypeError: '<' not supported between instances of 'range' and 'range'",
        ),
    ];
    for (op, a, b, expected) in errors {
        assert_eq!(compare(op, &a, &b).unwrap_err().message, expected);
    }
}

#[test]
fn membership_follows_python() {
    use CmpOp::*;
    let cases = [
        (i(2), tup(ints(&[1, 2])), true),
        (f(2.0), list(ints(&[1, 2])), true),
        (b(true), set(ints(&[1])), true),
        (i(3), set(ints(&[1])), false),
        (tup(ints(&[1])), set(vec![tup(ints(&[1]))]), true),
        (i(4), range(0, 10, 2), true),
        (i(5), range(0, 10, 2), false),
        (i(10), range(0, 10, 2), false),
        (i(-2), range(0, 10, 2), false),
        (i(7), range(10, 0, -3), true),
        (i(10), range(10, 0, -3), true),
        (i(0), range(10, 0, -3), false),
        (f(4.0), range(0, 10, 2), true),
        (f(4.5), range(0, 10, 2), false),
        (s("4"), range(0, 10, 2), false),
        (b(true), range(0, 2, 1), true),
        (i(i128::MAX - 1), range(i128::MIN, i128::MAX, 1), true),
        (s("an"), s("tanh"), true),
        (s(""), s("x"), true),
        (s("x"), s("tanh"), false),
        (list(ints(&[1])), list(vec![list(ints(&[1]))]), true),
        (set(ints(&[1])), set(ints(&[1, 2])), false),
        (set(vec![]), set(vec![]), false),
    ];
    for (item, container, expected) in cases {
        assert_eq!(
            cmp(In, &item, &container),
            expected,
            "{item} in {container}"
        );
        assert_eq!(
            cmp(NotIn, &item, &container),
            !expected,
            "{item} not in {container}"
        );
    }
    let errors = [
        (
            i(1),
            i(2),
            "TypeError: argument of type 'int' is not iterable",
        ),
        (
            i(1),
            s("1"),
            "TypeError: 'in <string>' requires string as left operand, not int",
        ),
        (
            list(vec![]),
            set(vec![]),
            "TypeError: unhashable type: 'list'",
        ),
        (
            tup(vec![set(vec![])]),
            set(vec![]),
            "TypeError: unhashable type: 'set'",
        ),
    ];
    for (item, container, expected) in errors {
        assert_eq!(
            compare(In, &item, &container).unwrap_err().message,
            expected
        );
    }
}

#[test]
fn identity_follows_python() {
    use CmpOp::*;
    let cases = [
        (Value::None, Value::None, true),
        (b(true), b(true), true),
        (b(true), i(1), false),
        (i(5), i(5), true),
        (i(5), f(5.0), false),
        (Value::None, b(false), false),
        (s("a"), s("a"), false),
        (tup(vec![]), tup(vec![]), false),
        (
            Value::Type(crate::roofline::PyType::Int),
            Value::Type(crate::roofline::PyType::Int),
            true,
        ),
    ];
    for (a, b, expected) in cases {
        assert_eq!(cmp(Is, &a, &b), expected, "{a} is {b}");
        assert_eq!(cmp(IsNot, &a, &b), !expected, "{a} is not {b}");
    }
}

#[test]
fn subscript_follows_python() {
    let t = tup(ints(&[10, 20, 30]));
    let cases = [
        (t.clone(), i(0), i(10)),
        (t.clone(), i(-1), i(30)),
        (t.clone(), i(-3), i(10)),
        (t.clone(), b(true), i(20)),
        (list(ints(&[1, 2])), i(1), i(2)),
        (s("tanh"), i(-1), s("h")),
        (s("日本"), i(1), s("本")),
        (range(0, 10, 3), i(1), i(3)),
        (range(0, 10, 3), i(-1), i(9)),
        (range(10, 0, -3), i(3), i(1)),
        (range(i128::MIN, i128::MAX, 1), i(-1), i(i128::MAX - 1)),
    ];
    for (v, index, expected) in cases {
        assert_eq!(subscript(&v, &index), Ok(expected), "{v}[{index}]");
    }
    let errors = [
        (t.clone(), i(3), "IndexError: tuple index out of range"),
        (t.clone(), i(-4), "IndexError: tuple index out of range"),
        (
            t.clone(),
            i(-(1 << 63)),
            "IndexError: tuple index out of range",
        ),
        (
            t.clone(),
            i(i128::MIN),
            "IndexError: cannot fit 'int' into an index-sized integer",
        ),
        (
            s("ab"),
            i(1 << 63),
            "IndexError: cannot fit 'int' into an index-sized integer",
        ),
        (
            Value::Type(crate::roofline::PyType::Int),
            i(0),
            "TypeError: type 'int' is not subscriptable",
        ),
        (list(vec![]), i(0), "IndexError: list index out of range"),
        (s(""), i(0), "IndexError: string index out of range"),
        (
            range(0, 3, 1),
            i(3),
            "IndexError: range object index out of range",
        ),
        (
            range(0, 3, 1),
            i(-4),
            "IndexError: range object index out of range",
        ),
        (
            t.clone(),
            f(1.0),
            "TypeError: tuple indices must be integers or slices, not float",
        ),
        (
            list(vec![]),
            s("a"),
            "TypeError: list indices must be integers or slices, not str",
        ),
        (
            s("a"),
            Value::None,
            "TypeError: string indices must be integers, not 'NoneType'",
        ),
        (
            range(0, 3, 1),
            f(0.0),
            "TypeError: range indices must be integers or slices, not float",
        ),
        (
            set(ints(&[1])),
            i(0),
            "TypeError: 'set' object is not subscriptable",
        ),
        (i(5), i(0), "TypeError: 'int' object is not subscriptable"),
    ];
    for (v, index, expected) in errors {
        assert_eq!(
            subscript(&v, &index).unwrap_err().message,
            expected,
            "{v}[{index}]"
        );
    }
}

fn sl(v: &Value, lower: Option<Value>, upper: Option<Value>, step: Option<Value>) -> EvalResult {
    slice(v, lower.as_ref(), upper.as_ref(), step.as_ref())
}

#[test]
fn slice_follows_python() {
    let t = tup(ints(&[0, 1, 2, 3, 4]));
    let l = list(ints(&[0, 1, 2, 3, 4]));
    let cases = [
        (t.clone(), None, Some(i(-1)), None, tup(ints(&[0, 1, 2, 3]))),
        (t.clone(), Some(i(1)), Some(i(3)), None, tup(ints(&[1, 2]))),
        (t.clone(), Some(i(-2)), None, None, tup(ints(&[3, 4]))),
        (t.clone(), None, None, Some(i(2)), tup(ints(&[0, 2, 4]))),
        (
            t.clone(),
            None,
            None,
            Some(i(-1)),
            tup(ints(&[4, 3, 2, 1, 0])),
        ),
        (
            t.clone(),
            Some(i(3)),
            Some(i(0)),
            Some(i(-1)),
            tup(ints(&[3, 2, 1])),
        ),
        (t.clone(), Some(i(-100)), Some(i(100)), None, t.clone()),
        (
            t.clone(),
            Some(i(100)),
            None,
            Some(i(-2)),
            tup(ints(&[4, 2, 0])),
        ),
        (t.clone(), Some(i(3)), Some(i(1)), None, tup(vec![])),
        (
            t.clone(),
            Some(Value::None),
            Some(Value::None),
            Some(Value::None),
            t.clone(),
        ),
        (
            t.clone(),
            Some(b(true)),
            None,
            None,
            tup(ints(&[1, 2, 3, 4])),
        ),
        (t.clone(), None, None, Some(i(i128::MIN)), tup(ints(&[4]))),
        (
            t.clone(),
            Some(i(i128::MIN)),
            Some(i(i128::MAX)),
            Some(i(i128::MAX)),
            tup(ints(&[0])),
        ),
        (l.clone(), Some(i(1)), None, Some(i(3)), list(ints(&[1, 4]))),
        (
            l.clone(),
            None,
            Some(i(-6)),
            Some(i(-1)),
            list(ints(&[4, 3, 2, 1, 0])),
        ),
        (s("tanh"), Some(i(1)), Some(i(-1)), None, s("an")),
        (s("tanh"), None, None, Some(i(-1)), s("hnat")),
        (
            range(0, 10, 1),
            Some(i(2)),
            Some(i(8)),
            Some(i(3)),
            range(2, 8, 3),
        ),
        (range(0, 10, 1), None, None, Some(i(-1)), range(9, -1, -1)),
        (range(0, 10, 2), Some(i(1)), None, None, range(2, 10, 2)),
        (
            range(0, 10, 2),
            Some(i(-2)),
            Some(i(-100)),
            Some(i(-2)),
            range(6, -2, -4),
        ),
        (range(5, 0, -1), Some(i(10)), None, None, range(0, 0, -1)),
        (
            range(0, 10, 1),
            Some(i(2)),
            Some(i(7)),
            Some(i(3)),
            range(2, 7, 3),
        ),
    ];
    for (v, lower, upper, step, expected) in cases {
        let context = format!("{v}[{lower:?}:{upper:?}:{step:?}]");
        let got = sl(&v, lower, upper, step).unwrap_or_else(|e| panic!("{context}: {e}"));
        // Ranges compare by their items, as Python's `==` does.
        assert_eq!(got.to_string(), expected.to_string(), "{context}");
        assert!(
            py_eq(&got, &expected),
            "{context}: got {got}, expected {expected}"
        );
        assert_eq!(
            iterate(&got).unwrap().len(),
            iterate(&expected).unwrap().len(),
            "{context}"
        );
    }
    let errors = [
        (
            t.clone(),
            None,
            None,
            Some(i(0)),
            "ValueError: slice step cannot be zero",
        ),
        (
            t.clone(),
            Some(f(1.0)),
            None,
            None,
            "TypeError: slice indices must be integers or None or have an __index__ method",
        ),
        (
            set(vec![]),
            None,
            None,
            None,
            "TypeError: 'set' object is not subscriptable",
        ),
        (
            i(1),
            None,
            None,
            None,
            "TypeError: 'int' object is not subscriptable",
        ),
    ];
    for (v, lower, upper, step, expected) in errors {
        assert_eq!(sl(&v, lower, upper, step).unwrap_err().message, expected);
    }
}

#[test]
fn range_slices_iterate_like_python() {
    // list(range(3, 20, 4)[::-2]) == [19, 11, 3]
    let r = sl(&range(3, 20, 4), None, None, Some(i(-2))).unwrap();
    assert_eq!(iterate(&r).unwrap(), ints(&[19, 11, 3]));
    // list(range(10)[-3:]) == [7, 8, 9]
    let r = sl(&range(0, 10, 1), Some(i(-3)), None, None).unwrap();
    assert_eq!(iterate(&r).unwrap(), ints(&[7, 8, 9]));
    assert_eq!(r.to_string(), "range(7, 10)");
}

#[test]
fn iterate_follows_python() {
    let cases = [
        (tup(ints(&[1, 2])), ints(&[1, 2])),
        (list(vec![s("a")]), vec![s("a")]),
        (set(ints(&[3, 1, 2])), ints(&[1, 2, 3])),
        (range(0, 5, 2), ints(&[0, 2, 4])),
        (range(3, 0, -1), ints(&[3, 2, 1])),
        (range(0, -3, 1), vec![]),
        (s("ab"), vec![s("a"), s("b")]),
    ];
    for (v, expected) in cases {
        assert_eq!(iterate(&v), Ok(expected), "{v}");
    }
    assert_eq!(
        iterate(&i(3)).unwrap_err().message,
        "TypeError: 'int' object is not iterable"
    );
    assert_eq!(
        iterate(&Value::None).unwrap_err().message,
        "TypeError: 'NoneType' object is not iterable"
    );
    assert!(
        iterate(&range(0, 1 << 40, 1))
            .unwrap_err()
            .message
            .starts_with("MemoryError")
    );
    assert!(
        iterate(&range(0, 1, 0))
            .unwrap_err()
            .message
            .starts_with("ValueError")
    );
}

#[test]
fn unpack_follows_python() {
    assert_eq!(unpack(tup(ints(&[1, 2])), 2), Ok(ints(&[1, 2])));
    assert_eq!(unpack(s("ab"), 2), Ok(vec![s("a"), s("b")]));
    assert_eq!(unpack(range(0, 2, 1), 2), Ok(ints(&[0, 1])));
    assert_eq!(
        unpack(tup(ints(&[1, 2, 3])), 2).unwrap_err().message,
        "ValueError: too many values to unpack (expected 2)"
    );
    assert_eq!(
        unpack(list(ints(&[1])), 2).unwrap_err().message,
        "ValueError: not enough values to unpack (expected 2, got 1)"
    );
    assert_eq!(
        unpack(i(1), 2).unwrap_err().message,
        "TypeError: cannot unpack non-iterable int object"
    );
}

#[test]
fn sets_dedup_by_python_equality_and_sort_numbers() {
    let cases = [
        (vec![i(1), f(1.0), b(true)], "{1}"),
        (vec![b(true), i(1)], "{True}"),
        (ints(&[3, 1, 2, 1]), "{1, 2, 3}"),
        (vec![i(2), f(0.5), b(false)], "{False, 0.5, 2}"),
        (vec![s("b"), i(1), s("a"), s("b")], "{1, 'a', 'b'}"),
        (
            vec![s("b"), Value::None, tup(vec![]), s("a")],
            "{None, 'a', 'b', ()}",
        ),
        (
            vec![f(f64::NAN), s("a"), f(f64::NAN), i(-3)],
            "{-3, 'a', nan, nan}",
        ),
        (vec![tup(ints(&[1])), tup(vec![f(1.0)])], "{(1,)}"),
        (vec![f(f64::NAN), i(1)], "{1, nan}"),
        (vec![], "set()"),
    ];
    for (items, expected) in cases {
        assert_eq!(make_set(items).unwrap().to_string(), expected);
    }
    assert_eq!(
        make_set(vec![list(vec![])]).unwrap_err().message,
        "TypeError: unhashable type: 'list'"
    );
    assert_eq!(
        make_set(vec![tup(vec![set(vec![])])]).unwrap_err().message,
        "TypeError: unhashable type: 'set'"
    );
}

#[test]
fn params_convert_fields() {
    assert_eq!(param(&3_usize), i(3));
    assert_eq!(param(&Some(1.5_f64)), f(1.5));
    assert_eq!(param(&None::<bool>), Value::None);
    assert_eq!(param(&vec![1_i32, 2]), list(ints(&[1, 2])));
    assert_eq!(param(&String::from("mean")), s("mean"));
    assert_eq!(param(&i(7)), i(7));
}

#[test]
fn counts_follow_the_contract() {
    let ok = [
        (i(0), 0),
        (i(42), 42),
        (i(i128::from(u64::MAX)), u64::MAX),
        (b(true), 1),
        (b(false), 0),
        (f(2.9), 2),
        (f(-0.0), 0),
        (f(1e19), 10_000_000_000_000_000_000),
        (f(18_446_744_073_709_549_568.0), 18_446_744_073_709_549_568),
    ];
    for (v, expected) in ok {
        assert_eq!(to_count(&v), Ok(expected), "{v}");
    }
    let bad = [
        (i(-3), "-3 (int), which is negative"),
        (
            i(i128::from(u64::MAX) + 1),
            "18446744073709551616 (int), which does not fit",
        ),
        (f(-0.5), "-0.5 (float), which is negative"),
        (f(f64::NAN), "nan (float), which is not finite"),
        (f(f64::INFINITY), "inf (float), which is not finite"),
        (
            f(2f64.powi(64)),
            "1.8446744073709552e+19 (float), which does not fit",
        ),
        (s("3"), "'3' (str)"),
        (Value::None, "None (NoneType)"),
        (tup(ints(&[1])), "(1,) (tuple)"),
    ];
    for (v, fragment) in bad {
        let err = to_count(&v).unwrap_err();
        assert!(
            err.message.starts_with("ValueError: expected a count"),
            "{err}"
        );
        assert!(err.message.contains(fragment), "{err} lacks {fragment}");
    }
}

#[test]
fn correctly_rounded_int_division_matches_float_when_exact() {
    for (a, b) in [(1_i128, 3_i128), (-5, 7), (123_456_789, 1000), (1 << 52, 3)] {
        assert_eq!(int_truediv(a, b), Ok(f(a as f64 / b as f64)));
    }
    // Exercises the slow path against the fast one on operands that fit in 53 bits after
    // scaling by a power of two (exact scaling keeps the quotient's rounding identical).
    for (a, b) in [(1_i128, 3_i128), (-5, 7), (2, 3), (1, 10)] {
        let scaled = int_truediv(a << 70, b << 70);
        assert_eq!(scaled, Ok(f(a as f64 / b as f64)), "{a}/{b}");
    }
}

fn small_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::None),
        any::<bool>().prop_map(Value::Bool),
        (-5_i128..6).prop_map(Value::Int),
        prop_oneof![Just(i128::MIN), Just(i128::MAX), Just(-1_i128)].prop_map(Value::Int),
        prop_oneof![
            Just(0.0),
            Just(-0.0),
            Just(2.5),
            Just(-1.5),
            Just(f64::NAN),
            Just(f64::INFINITY),
            Just(1e308)
        ]
        .prop_map(Value::Float),
        "[a-c]{0,2}".prop_map(Value::Str),
        (-3_i128..4, -3_i128..4, -2_i128..3).prop_map(|(start, stop, step)| Value::Range {
            start,
            stop,
            step
        }),
        Just(Value::Type(crate::roofline::PyType::Int)),
    ];
    leaf.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::Tuple),
            prop::collection::vec(inner.clone(), 0..3).prop_map(Value::List),
            prop::collection::vec(inner, 0..3).prop_map(Value::Set),
        ]
    })
}

proptest! {
    #[test]
    fn int_floordiv_and_modulo_satisfy_the_division_identity(
        a in prop_oneof![-1000_i128..1000, any::<i64>().prop_map(i128::from)],
        d in prop_oneof![-50_i128..50, any::<i64>().prop_map(i128::from)],
    ) {
        let (q, r) = (floordiv(&i(a), &i(d)), modulo(&i(a), &i(d)));
        if d == 0 {
            prop_assert!(q.is_err() && r.is_err());
        } else {
            let (Ok(Value::Int(q)), Ok(Value::Int(r))) = (q, r) else {
                return Err(TestCaseError::fail("non-int result"));
            };
            prop_assert_eq!(a, q * d + r);
            // The remainder takes the divisor's sign and is smaller than it.
            prop_assert!(r == 0 || (r < 0) == (d < 0));
            prop_assert!(r.abs() < d.abs());
        }
    }

    #[test]
    fn float_floordiv_and_modulo_agree_with_each_other(
        a in -1000_i32..1000, d in -50_i32..50, half in any::<bool>(),
    ) {
        prop_assume!(d != 0);
        let x = f64::from(a) + if half { 0.5 } else { 0.0 };
        let y = f64::from(d);
        let (Ok(Value::Float(q)), Ok(Value::Float(r))) = (floordiv(&f(x), &f(y)), modulo(&f(x), &f(y))) else {
            return Err(TestCaseError::fail("non-float result"));
        };
        prop_assert_eq!(x, q * y + r);
        prop_assert!(r == 0.0 || (r < 0.0) == (y < 0.0));
    }

    #[test]
    fn no_operation_panics(a in small_value(), b in small_value(), n in 0_usize..4) {
        for op in [add, sub, mul, truediv, floordiv, modulo, pow, subscript] {
            let _ = op(&a, &b);
        }
        for op in [CmpOp::Lt, CmpOp::Le, CmpOp::Gt, CmpOp::Ge, CmpOp::Eq, CmpOp::Ne,
                   CmpOp::In, CmpOp::NotIn, CmpOp::Is, CmpOp::IsNot] {
            let _ = compare(op, &a, &b);
        }
        let _ = (neg(&a), pos(&a), not(&a), truthy(&a), iterate(&a), to_count(&a));
        let _ = slice(&a, Some(&b), None, Some(&b));
        let _ = slice(&a, None, Some(&b), None);
        let _ = unpack(a.clone(), n);
        let _ = make_set(vec![a.clone(), b.clone()]);
        let _ = a.to_string();
        for (_, helper) in crate::roofline::helpers::ALL {
            let _ = helper(&[]);
            let _ = helper(std::slice::from_ref(&a));
            let _ = helper(&[a.clone(), b.clone()]);
            let _ = helper(&[a.clone(), b.clone(), a.clone()]);
        }
    }
}

#[test]
fn the_64_bit_fast_paths_agree_with_128_bit_arithmetic() {
    // The 128-bit reference: what floordiv_int, mod_int and slice counts computed before
    // operands that fit in 64 bits took the hardware path.
    fn floordiv_ref(x: i128, y: i128) -> Option<i128> {
        let q = x.checked_div(y)?;
        let r = x.checked_rem(y).unwrap_or(0);
        if r != 0 && ((r < 0) != (y < 0)) {
            q.checked_sub(1)
        } else {
            Some(q)
        }
    }
    fn mod_ref(x: i128, y: i128) -> Option<i128> {
        let r = x.checked_rem(y).unwrap_or(0);
        if r != 0 && ((r < 0) != (y < 0)) {
            r.checked_add(y)
        } else {
            Some(r)
        }
    }
    let edges = [
        i128::MIN,
        i128::MIN + 1,
        i128::from(i64::MIN) - 1,
        i128::from(i64::MIN),
        i128::from(i64::MIN) + 1,
        -7,
        -2,
        -1,
        1,
        2,
        7,
        i128::from(i64::MAX) - 1,
        i128::from(i64::MAX),
        i128::from(i64::MAX) + 1,
        i128::MAX,
    ];
    // Small dividends around each divisor: the no-division path of `%` (`-1 % 3`).
    let small = (-9..=9).chain([-3, 3]);
    for x in edges.iter().copied().chain([0]).chain(small.clone()) {
        for y in edges
            .iter()
            .copied()
            .chain(small.clone())
            .filter(|y| *y != 0)
        {
            assert_eq!(floordiv_int(x, y).ok(), floordiv_ref(x, y), "{x} // {y}");
            assert_eq!(mod_int(x, y).ok(), mod_ref(x, y), "{x} % {y}");
            assert_eq!(
                super::super::typed::int_mul(x, y).ok(),
                x.checked_mul(y),
                "{x} * {y}"
            );
        }
    }
    for len in [0, 1, 5] {
        for lower in [None, Some(-7), Some(-1), Some(0), Some(2), Some(9)] {
            for upper in [None, Some(-7), Some(-1), Some(0), Some(3), Some(9)] {
                let got = slice_indices(lower, upper, 1, len).count;
                // A positive step's bounds do not depend on its size.
                let wide = slice_indices(lower, upper, 2, len);
                let (start, stop) = (wide.start, wide.stop);
                let step: i128 = std::hint::black_box(1);
                let want = if start < stop {
                    (stop - start - 1) / step + 1
                } else {
                    0
                };
                assert_eq!(got, want, "[{lower:?}:{upper:?}] of {len}");
            }
        }
    }
}
