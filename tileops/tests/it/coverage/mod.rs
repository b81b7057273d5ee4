//! Every kernel entry point x dtype reached through the ops' public API (all GPU tests).

mod gpu;
mod ledger;
