//! Precise send times for the open loop. tokio's timer ends a wait at the first millisecond
//! tick at or after its deadline, so on the timer alone a request leaves up to a millisecond
//! after its intended time, plus the wake-up (measured at 200 requests/s: p99 2.1 ms). The open
//! loop therefore sleeps on tokio's timer only until [`LEAD`] before the intended time (that
//! wait can be cancelled by Ctrl-C), then hands the last stretch to the pacer: a thread of its
//! own that sleeps with the operating system's high-resolution timer and wakes the task. The
//! pacer's sleeps are short (at most `LEAD` plus the timer's tick), one at a time, in send
//! order.

use std::sync::mpsc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;

/// How long before the intended time the coarse wait hands over to the pacer: two ticks of
/// tokio's 1 ms timer, so the coarse wait never overshoots the intended time.
pub(crate) const LEAD: Duration = Duration::from_millis(2);

/// The pacer thread; it ends when the `Pacer` is dropped.
pub(crate) struct Pacer {
    tx: mpsc::Sender<(std::time::Instant, oneshot::Sender<()>)>,
}

impl Pacer {
    /// Start the pacer's thread.
    pub fn start() -> std::io::Result<Pacer> {
        let (tx, rx) = mpsc::channel::<(std::time::Instant, oneshot::Sender<()>)>();
        std::thread::Builder::new().name("infergate-pacer".into()).spawn(move || {
            while let Ok((at, done)) = rx.recv() {
                let now = std::time::Instant::now();
                if at > now {
                    std::thread::sleep(at - now);
                }
                let _ = done.send(());
            }
        })?;
        Ok(Pacer { tx })
    }

    /// When the coarse wait should end for a send at `intended`.
    pub(crate) fn coarse_deadline(intended: Instant) -> Instant {
        intended.checked_sub(LEAD).unwrap_or(intended)
    }

    /// Wait, precisely, until `intended` (call after the coarse wait: this wait is not
    /// cancellable and should be short). Returns at once when the time has passed.
    pub async fn until(&self, intended: Instant) {
        if intended <= Instant::now() {
            return;
        }
        let (done, woken) = oneshot::channel();
        if self.tx.send((intended.into_std(), done)).is_err() {
            // The thread is gone (it never exits while the pacer lives): fall back to the timer.
            tokio::time::sleep_until(intended).await;
            return;
        }
        let _ = woken.await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_pacer_never_wakes_early_and_a_past_time_returns_at_once() {
        let pacer = Pacer::start().unwrap();
        for ms in [0u64, 1, 3] {
            let intended = Instant::now() + Duration::from_millis(ms);
            pacer.until(intended).await;
            assert!(Instant::now() >= intended, "woke before {ms} ms");
        }
        let past = Instant::now();
        pacer.until(past).await;
        assert_eq!(Pacer::coarse_deadline(past + LEAD), past);
    }
}
