//! A timing-mode simulator on a runtime and threads of its own, for the known-answer tests: a
//! stall of the test's runtime (where the bench's client runs) then delays only the client's
//! reading, which is exactly the error the tests measure, instead of delaying the server's
//! answers and the client's reading alike so that the two cancel out.

use std::sync::Arc;
use std::sync::mpsc as std_mpsc;

use bench::config::TimingConfig;
use bench::sim::{self, SimHandle, SimOptions, TimingBackend};
use tokio::sync::oneshot;

/// The simulator and the thread its runtime runs on; [`Apart::shutdown`] stops both.
pub struct Apart {
    pub handle: SimHandle,
    stop: oneshot::Sender<()>,
    thread: std::thread::JoinHandle<()>,
}

/// Start a timing-mode simulator on 127.0.0.1 in its own one-worker runtime on its own thread.
pub fn start_timing_sim_apart(timing: TimingConfig, opts: SimOptions) -> Apart {
    let (handle_tx, handle_rx) = std_mpsc::channel();
    let (stop, stop_rx) = oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("known-answer-server".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("known-answer-server")
                .enable_all()
                .build()
                .expect("the server's runtime");
            let backend = Arc::new(TimingBackend::new(timing));
            let handle = rt
                .block_on(sim::start(opts, backend, ([127, 0, 0, 1], 0).into()))
                .expect("start the simulator");
            handle_tx.send(handle).expect("the test waits for the handle");
            // Serve until the test is done; the server task lives on this runtime.
            let _ = rt.block_on(stop_rx);
        })
        .expect("spawn the server's thread");
    let handle = handle_rx.recv().expect("the server started");
    Apart { handle, stop, thread }
}

impl Apart {
    pub async fn shutdown(self) {
        self.handle.shutdown().await;
        let _ = self.stop.send(());
        tokio::task::spawn_blocking(move || self.thread.join())
            .await
            .expect("join")
            .expect("the server's thread ended cleanly");
    }
}
