//! *(runtime)* The known-answer server in a process of its own and the self-test measured
//! against it (`cargo xtask selftest`; the timing tests use both).
//!
//! [`server`]: the simulator's timing mode on one thread in a process of its own, which records
//! for every chunk when its schedule made it due and when it handed it over, and the other side
//! that starts and stops it. [`run`]: the bench run against it at a concurrency and event rate,
//! its records set beside the server's request by request and gap by gap ([`run::compare`]),
//! judged against the bounds of `selftest`, measured again on a disturbed machine.

pub mod run;
pub mod server;
