//! tileops-manifest's integration tests, one test binary (`cargo test -p tileops-manifest --test
//! it`): the `check` command as a user runs it, the diagnostics' rendering, the formula limits.

mod check_command;
mod diagnostics;
mod formula_limits;
