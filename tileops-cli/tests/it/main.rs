//! tileops-cli's integration tests, one test binary (`cargo test -p tileops-cli --test it`).

mod cli;
