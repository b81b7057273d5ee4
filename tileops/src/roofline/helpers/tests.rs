use super::*;
use crate::roofline::PyType;

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
fn t(items: Vec<Value>) -> Value {
    Value::Tuple(items)
}
fn l(items: Vec<Value>) -> Value {
    Value::List(items)
}
fn ints(xs: &[i128]) -> Vec<Value> {
    xs.iter().map(|&x| Value::Int(x)).collect()
}
fn r(start: i128, stop: i128, step: i128) -> Value {
    Value::Range { start, stop, step }
}
fn ty(t: PyType) -> Value {
    Value::Type(t)
}

/// Runs `(args, expected)` cases; expected is `Ok(repr)` or `Err(message)`. Comparing reprs
/// checks the result's type too (`1` vs `1.0` vs `True`).
fn check(name: &str, helper: Helper, cases: Vec<(Vec<Value>, Result<&str, &str>)>) {
    for (args, expected) in cases {
        let shown: Vec<String> = args.iter().map(ToString::to_string).collect();
        let call = format!("{name}({})", shown.join(", "));
        match (helper(&args), expected) {
            (Ok(v), Ok(repr)) => assert_eq!(v.to_string(), repr, "{call}"),
            (Err(e), Err(message)) => assert_eq!(e.message, message, "{call}"),
            (got, want) => panic!("{call}: got {got:?}, expected {want:?}"),
        }
    }
}

#[test]
fn product_is_math_prod() {
    check(
        "product",
        product,
        vec![
            (vec![t(ints(&[2, 3, 4]))], Ok("24")),
            (vec![t(vec![])], Ok("1")),
            (vec![l(vec![i(2), f(0.5), i(3)])], Ok("3.0")),
            (vec![l(vec![b(true), b(true)])], Ok("1")),
            (vec![r(1, 6, 1)], Ok("120")),
            (vec![l(vec![s("a")])], Ok("'a'")),
            (vec![l(vec![l(ints(&[1])), i(2)])], Ok("[1, 1]")),
            (
                vec![l(vec![i(1 << 64), i(1 << 64)])],
                Err("OverflowError: integer overflow (tileops integers are 128-bit)"),
            ),
            (
                vec![],
                Err("TypeError: product() takes exactly 1 positional argument (0 given)"),
            ),
            (
                vec![t(vec![]), t(vec![])],
                Err("TypeError: product() takes exactly 1 positional argument (2 given)"),
            ),
            (vec![i(3)], Err("TypeError: 'int' object is not iterable")),
            (
                vec![l(vec![Value::None])],
                Err("TypeError: unsupported operand type(s) for *: 'int' and 'NoneType'"),
            ),
        ],
    );
}

#[test]
fn isinstance_treats_bool_as_int() {
    check(
        "isinstance",
        isinstance,
        vec![
            (vec![b(true), ty(PyType::Int)], Ok("True")),
            (vec![i(1), ty(PyType::Bool)], Ok("False")),
            (vec![i(1), ty(PyType::Float)], Ok("False")),
            (
                vec![f(1.0), t(vec![ty(PyType::Int), ty(PyType::Float)])],
                Ok("True"),
            ),
            (
                vec![
                    i(1),
                    t(vec![
                        ty(PyType::Float),
                        t(vec![ty(PyType::Str), ty(PyType::Int)]),
                    ]),
                ],
                Ok("True"),
            ),
            (vec![Value::None, ty(PyType::NoneType)], Ok("True")),
            (vec![t(vec![]), ty(PyType::Tuple)], Ok("True")),
            (vec![t(vec![]), ty(PyType::List)], Ok("False")),
            (vec![r(0, 1, 1), ty(PyType::Range)], Ok("True")),
            (vec![i(1), t(vec![ty(PyType::Int), i(5)])], Ok("True")),
            (vec![i(1), t(vec![])], Ok("False")),
            (
                vec![i(1), t(vec![ty(PyType::Float), i(5)])],
                Err("TypeError: isinstance() arg 2 must be a type, a tuple of types, or a union"),
            ),
            (
                vec![i(1), i(5)],
                Err("TypeError: isinstance() arg 2 must be a type, a tuple of types, or a union"),
            ),
            (
                vec![i(1)],
                Err("TypeError: isinstance expected 2 arguments, got 1"),
            ),
        ],
    );
}

#[test]
fn len_counts_items() {
    check(
        "len",
        len,
        vec![
            (vec![t(ints(&[1, 2]))], Ok("2")),
            (vec![l(vec![])], Ok("0")),
            (vec![Value::Set(ints(&[1, 2, 3]))], Ok("3")),
            (vec![s("日本")], Ok("2")),
            (vec![r(0, 10, 3)], Ok("4")),
            (vec![r(10, 0, 1)], Ok("0")),
            (
                vec![r(-(1 << 63), 1 << 63, 1)],
                Err("OverflowError: Python int too large to convert to C ssize_t"),
            ),
            (
                vec![i(5)],
                Err("TypeError: object of type 'int' has no len()"),
            ),
            (
                vec![],
                Err("TypeError: len() takes exactly one argument (0 given)"),
            ),
            (
                vec![i(1), i(2)],
                Err("TypeError: len() takes exactly one argument (2 given)"),
            ),
        ],
    );
}

#[test]
fn containers_from_iterables() {
    check(
        "set",
        set,
        vec![
            (vec![], Ok("set()")),
            (
                vec![l(vec![i(2), f(1.0), i(1), b(true), i(0)])],
                Ok("{0, 1.0, 2}"),
            ),
            (vec![s("aba")], Ok("{'a', 'b'}")),
            (
                vec![l(vec![l(vec![])])],
                Err("TypeError: unhashable type: 'list'"),
            ),
            (vec![i(1)], Err("TypeError: 'int' object is not iterable")),
            (
                vec![i(1), i(2)],
                Err("TypeError: set expected at most 1 argument, got 2"),
            ),
        ],
    );
    check(
        "tuple",
        tuple,
        vec![
            (vec![], Ok("()")),
            (vec![l(ints(&[1]))], Ok("(1,)")),
            (vec![r(0, 3, 1)], Ok("(0, 1, 2)")),
            (vec![Value::Set(ints(&[1, 2]))], Ok("(1, 2)")),
            (vec![i(1)], Err("TypeError: 'int' object is not iterable")),
            (
                vec![i(1), i(2)],
                Err("TypeError: tuple expected at most 1 argument, got 2"),
            ),
        ],
    );
    check(
        "list",
        list,
        vec![
            (vec![], Ok("[]")),
            (vec![t(ints(&[1, 2]))], Ok("[1, 2]")),
            (vec![s("ab")], Ok("['a', 'b']")),
            (
                vec![Value::None],
                Err("TypeError: 'NoneType' object is not iterable"),
            ),
            (
                vec![i(1), i(2)],
                Err("TypeError: list expected at most 1 argument, got 2"),
            ),
        ],
    );
}

#[test]
fn range_checks_arguments() {
    check(
        "range",
        range,
        vec![
            (vec![i(3)], Ok("range(0, 3)")),
            (vec![i(1), i(3)], Ok("range(1, 3)")),
            (vec![i(10), i(0), i(-2)], Ok("range(10, 0, -2)")),
            (vec![b(true)], Ok("range(0, 1)")),
            (
                vec![],
                Err("TypeError: range expected at least 1 argument, got 0"),
            ),
            (
                vec![i(1), i(2), i(3), i(4)],
                Err("TypeError: range expected at most 3 arguments, got 4"),
            ),
            (
                vec![i(1), i(2), i(0)],
                Err("ValueError: range() arg 3 must not be zero"),
            ),
            (
                vec![f(1.5)],
                Err("TypeError: 'float' object cannot be interpreted as an integer"),
            ),
        ],
    );
}

#[test]
fn int_converts_like_python() {
    let overflow = "OverflowError: integer overflow (tileops integers are 128-bit)";
    check(
        "int",
        int,
        vec![
            (vec![], Ok("0")),
            (vec![i(7)], Ok("7")),
            (vec![b(true)], Ok("1")),
            (vec![f(2.9)], Ok("2")),
            (vec![f(-2.9)], Ok("-2")),
            (vec![f(-0.5)], Ok("0")),
            (vec![f(1e20)], Ok("100000000000000000000")),
            (
                vec![f(-(2f64.powi(127)))],
                Ok("-170141183460469231731687303715884105728"),
            ),
            (vec![f(2f64.powi(127))], Err(overflow)),
            (
                vec![f(f64::INFINITY)],
                Err("OverflowError: cannot convert float infinity to integer"),
            ),
            (
                vec![f(f64::NAN)],
                Err("ValueError: cannot convert float NaN to integer"),
            ),
            (vec![s(" 42 ")], Ok("42")),
            (vec![s("-1_000")], Ok("-1000")),
            (vec![s("+007")], Ok("7")),
            (
                vec![s("170141183460469231731687303715884105727")],
                Ok("170141183460469231731687303715884105727"),
            ),
            (
                vec![s("-170141183460469231731687303715884105728")],
                Ok("-170141183460469231731687303715884105728"),
            ),
            (
                vec![s("170141183460469231731687303715884105728")],
                Err(overflow),
            ),
            (
                vec![s("abc")],
                Err("ValueError: invalid literal for int() with base 10: 'abc'"),
            ),
            (
                vec![s("1__0")],
                Err("ValueError: invalid literal for int() with base 10: '1__0'"),
            ),
            (
                vec![s("_1")],
                Err("ValueError: invalid literal for int() with base 10: '_1'"),
            ),
            (
                vec![s("1.5")],
                Err("ValueError: invalid literal for int() with base 10: '1.5'"),
            ),
            (
                vec![s("")],
                Err("ValueError: invalid literal for int() with base 10: ''"),
            ),
            (
                vec![s("-")],
                Err("ValueError: invalid literal for int() with base 10: '-'"),
            ),
            (vec![s("ff"), i(16)], Ok("255")),
            (vec![s("0x_1f"), i(16)], Ok("31")),
            (vec![s("0x1f"), i(0)], Ok("31")),
            (vec![s("0b101"), i(0)], Ok("5")),
            (vec![s("-0o17"), i(0)], Ok("-15")),
            (vec![s("00"), i(0)], Ok("0")),
            (vec![s("z"), i(36)], Ok("35")),
            (
                vec![s("010"), i(0)],
                Err("ValueError: invalid literal for int() with base 0: '010'"),
            ),
            (
                vec![s("0x1f"), i(10)],
                Err("ValueError: invalid literal for int() with base 10: '0x1f'"),
            ),
            (
                vec![s("z"), i(40)],
                Err("ValueError: int() base must be >= 2 and <= 36, or 0"),
            ),
            (
                vec![s("1"), i(1)],
                Err("ValueError: int() base must be >= 2 and <= 36, or 0"),
            ),
            (
                vec![i(5), i(10)],
                Err("TypeError: int() can't convert non-string with explicit base"),
            ),
            (
                vec![l(vec![])],
                Err(
                    "TypeError: int() argument must be a string, a bytes-like object or a real number, not 'list'",
                ),
            ),
            (
                vec![Value::None],
                Err(
                    "TypeError: int() argument must be a string, a bytes-like object or a real number, not 'NoneType'",
                ),
            ),
            (
                vec![i(1), i(2), i(3)],
                Err("TypeError: int() takes at most 2 arguments (3 given)"),
            ),
        ],
    );
}

#[test]
fn float_converts_like_python() {
    check(
        "float",
        float,
        vec![
            (vec![], Ok("0.0")),
            (vec![i(3)], Ok("3.0")),
            (vec![b(true)], Ok("1.0")),
            (vec![i((1 << 53) + 1)], Ok("9007199254740992.0")),
            (vec![f(0.5)], Ok("0.5")),
            (vec![s("inf")], Ok("inf")),
            (vec![s("-inf")], Ok("-inf")),
            (vec![s(" +Infinity ")], Ok("inf")),
            (vec![s("nan")], Ok("nan")),
            (vec![s("-NaN")], Ok("nan")),
            (vec![s("1.5")], Ok("1.5")),
            (vec![s(" 1_0.5 ")], Ok("10.5")),
            (vec![s("+1e5")], Ok("100000.0")),
            (vec![s("1.")], Ok("1.0")),
            (vec![s(".5e-2")], Ok("0.005")),
            (vec![s("-0")], Ok("-0.0")),
            (vec![s("1e400")], Ok("inf")),
            (
                vec![s("abc")],
                Err("ValueError: could not convert string to float: 'abc'"),
            ),
            (
                vec![s("1__0")],
                Err("ValueError: could not convert string to float: '1__0'"),
            ),
            (
                vec![s("_1")],
                Err("ValueError: could not convert string to float: '_1'"),
            ),
            (
                vec![s("1_")],
                Err("ValueError: could not convert string to float: '1_'"),
            ),
            (
                vec![s("1_.5")],
                Err("ValueError: could not convert string to float: '1_.5'"),
            ),
            (
                vec![s("--1")],
                Err("ValueError: could not convert string to float: '--1'"),
            ),
            (
                vec![s("")],
                Err("ValueError: could not convert string to float: ''"),
            ),
            (
                vec![s(".")],
                Err("ValueError: could not convert string to float: '.'"),
            ),
            (
                vec![s("infinite")],
                Err("ValueError: could not convert string to float: 'infinite'"),
            ),
            (
                vec![l(vec![])],
                Err("TypeError: float() argument must be a string or a real number, not 'list'"),
            ),
            (
                vec![i(1), i(2)],
                Err("TypeError: float expected at most 1 argument, got 2"),
            ),
        ],
    );
}

#[test]
fn bool_is_truthiness() {
    check(
        "bool",
        bool,
        vec![
            (vec![], Ok("False")),
            (vec![i(0)], Ok("False")),
            (vec![f(0.1)], Ok("True")),
            (vec![s("")], Ok("False")),
            (vec![t(vec![Value::None])], Ok("True")),
            (vec![Value::None], Ok("False")),
            (
                vec![i(1), i(2)],
                Err("TypeError: bool expected at most 1 argument, got 2"),
            ),
        ],
    );
}

#[test]
fn min_and_max_like_python() {
    check(
        "min",
        min,
        vec![
            (vec![t(ints(&[3, 1, 2]))], Ok("1")),
            (vec![i(3), i(1), i(2)], Ok("1")),
            (vec![l(vec![i(1), f(1.0)])], Ok("1")),
            (vec![l(vec![f(1.0), i(1)])], Ok("1.0")),
            (vec![l(vec![b(true), i(2)])], Ok("True")),
            (vec![s("bca")], Ok("'a'")),
            (vec![t(ints(&[1, 2])), t(ints(&[1, 1]))], Ok("(1, 1)")),
            (vec![r(5, 0, -1)], Ok("1")),
            (
                vec![l(vec![])],
                Err("ValueError: min() iterable argument is empty"),
            ),
            (
                vec![],
                Err("TypeError: min expected at least 1 argument, got 0"),
            ),
            (vec![i(1)], Err("TypeError: 'int' object is not iterable")),
            (
                vec![i(1), s("a")],
                Err("TypeError: '<' not supported between instances of 'str' and 'int'"),
            ),
        ],
    );
    check(
        "max",
        max,
        vec![
            (vec![t(ints(&[3, 1, 2]))], Ok("3")),
            (vec![f(2.5), i(2)], Ok("2.5")),
            (vec![l(vec![f(1.0), i(1)])], Ok("1.0")),
            (
                vec![l(vec![])],
                Err("ValueError: max() iterable argument is empty"),
            ),
            (
                vec![],
                Err("TypeError: max expected at least 1 argument, got 0"),
            ),
            (
                vec![i(1), s("a")],
                Err("TypeError: '>' not supported between instances of 'str' and 'int'"),
            ),
        ],
    );
}

#[test]
fn sum_follows_cpython() {
    check(
        "sum",
        sum,
        vec![
            (vec![t(ints(&[1, 2, 3]))], Ok("6")),
            (vec![t(vec![])], Ok("0")),
            (vec![l(vec![b(true), b(true)])], Ok("2")),
            (vec![t(ints(&[1])), i(10)], Ok("11")),
            (vec![l(vec![f(0.1); 10])], Ok("1.0")),
            (vec![l(vec![i(1), f(0.1), f(0.2), f(0.3)])], Ok("1.6")),
            (
                vec![l(vec![i(1 << 62), i(1 << 62), f(0.1), f(0.2)])],
                Ok("9.223372036854776e+18"),
            ),
            (
                vec![l(vec![f(0.1), i(1 << 70), f(0.2)])],
                Ok("1.1805916207174113e+21"),
            ),
            (vec![l(vec![f(0.1), f(0.2), f(0.3)]), f(0.0)], Ok("0.6")),
            (vec![l(vec![f(1e308), f(1e308), f(-1e308)])], Ok("inf")),
            (vec![l(vec![f(0.1), b(true), f(0.2)])], Ok("1.3")),
            (vec![l(vec![]), b(true)], Ok("True")),
            (vec![l(ints(&[1])), b(true)], Ok("2")),
            (
                vec![l(vec![t(ints(&[1])), t(ints(&[2]))]), t(vec![])],
                Ok("(1, 2)"),
            ),
            (
                vec![l(ints(&[i128::MAX, 1]))],
                Err("OverflowError: integer overflow (tileops integers are 128-bit)"),
            ),
            (
                vec![l(vec![s("a")])],
                Err("TypeError: unsupported operand type(s) for +: 'int' and 'str'"),
            ),
            (
                vec![l(vec![s("a")]), s("b")],
                Err("TypeError: sum() can't sum strings [use ''.join(seq) instead]"),
            ),
            (
                vec![],
                Err("TypeError: sum() takes at least 1 positional argument (0 given)"),
            ),
            (
                vec![i(1), i(2), i(3)],
                Err("TypeError: sum() takes at most 2 arguments (3 given)"),
            ),
            (vec![i(1)], Err("TypeError: 'int' object is not iterable")),
            (
                vec![i(1), s("")],
                Err("TypeError: 'int' object is not iterable"),
            ),
        ],
    );
}

#[test]
fn abs_like_python() {
    check(
        "abs",
        abs,
        vec![
            (vec![i(-3)], Ok("3")),
            (vec![i(3)], Ok("3")),
            (vec![b(true)], Ok("1")),
            (vec![f(-0.0)], Ok("0.0")),
            (vec![f(-2.5)], Ok("2.5")),
            (
                vec![i(i128::MIN)],
                Err("OverflowError: integer overflow (tileops integers are 128-bit)"),
            ),
            (
                vec![s("a")],
                Err("TypeError: bad operand type for abs(): 'str'"),
            ),
            (
                vec![i(1), i(2)],
                Err("TypeError: abs() takes exactly one argument (2 given)"),
            ),
        ],
    );
}

#[test]
fn log2_like_math_log2() {
    check(
        "log2",
        log2,
        vec![
            (vec![i(1)], Ok("0.0")),
            (vec![i(1024)], Ok("10.0")),
            (vec![i(1 << 100)], Ok("100.0")),
            (vec![i(3i128.pow(70))], Ok("110.94737505048093")),
            (vec![b(true)], Ok("0.0")),
            (vec![f(0.5)], Ok("-1.0")),
            (vec![f(f64::INFINITY)], Ok("inf")),
            (vec![f(f64::NAN)], Ok("nan")),
            (vec![i(0)], Err("ValueError: math domain error")),
            (vec![i(-4)], Err("ValueError: math domain error")),
            (vec![f(0.0)], Err("ValueError: math domain error")),
            (vec![f(-1.5)], Err("ValueError: math domain error")),
            (
                vec![f(f64::NEG_INFINITY)],
                Err("ValueError: math domain error"),
            ),
            (vec![s("a")], Err("TypeError: must be real number, not str")),
            (
                vec![i(1), i(2)],
                Err("TypeError: math.log2() takes exactly one argument (2 given)"),
            ),
        ],
    );
}

#[test]
fn ceil_and_floor_give_ints() {
    check(
        "ceil",
        ceil,
        vec![
            (vec![f(2.5)], Ok("3")),
            (vec![f(-2.5)], Ok("-2")),
            (vec![f(2.0)], Ok("2")),
            (vec![i(7)], Ok("7")),
            (vec![b(true)], Ok("1")),
            (vec![f(1e30)], Ok("1000000000000000019884624838656")),
            (
                vec![f(f64::INFINITY)],
                Err("OverflowError: cannot convert float infinity to integer"),
            ),
            (
                vec![f(f64::NAN)],
                Err("ValueError: cannot convert float NaN to integer"),
            ),
            (
                vec![f(1e39)],
                Err("OverflowError: integer overflow (tileops integers are 128-bit)"),
            ),
            (vec![s("a")], Err("TypeError: must be real number, not str")),
            (
                vec![],
                Err("TypeError: math.ceil() takes exactly one argument (0 given)"),
            ),
        ],
    );
    check(
        "floor",
        floor,
        vec![
            (vec![f(2.5)], Ok("2")),
            (vec![f(-2.5)], Ok("-3")),
            (vec![f(-0.0)], Ok("0")),
            (vec![i(-7)], Ok("-7")),
            (vec![b(false)], Ok("0")),
            (
                vec![f(f64::NEG_INFINITY)],
                Err("OverflowError: cannot convert float infinity to integer"),
            ),
            (
                vec![f(f64::NAN)],
                Err("ValueError: cannot convert float NaN to integer"),
            ),
            (
                vec![Value::None],
                Err("TypeError: must be real number, not NoneType"),
            ),
            (
                vec![i(1), i(2)],
                Err("TypeError: math.floor() takes exactly one argument (2 given)"),
            ),
        ],
    );
}

#[test]
fn every_helper_is_listed_once() {
    let mut names: Vec<&str> = ALL.iter().map(|(name, _)| *name).collect();
    names.sort_unstable();
    names.dedup();
    assert_eq!(names.len(), 17);
}
