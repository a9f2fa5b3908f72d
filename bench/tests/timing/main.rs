//! The timing tests of `infergate-bench`, in a test binary of their own. They measure the bench
//! against the simulator to the millisecond on a machine that may have two cores; cargo runs test
//! binaries one after another, so none of the other integration tests (`tests/it`, which run in
//! parallel with each other) shares the cores while these measure.

// The same helpers as `tests/it`; each binary uses part of them.
#[allow(dead_code)]
#[path = "../it/support.rs"]
mod support;

mod coordinated_omission;
mod known_answer;
