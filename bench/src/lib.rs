//! infergate's measuring runtime: the async client, the runner and what drives them.
//!
//! Data flows one way: config -> workload -> load schedule -> client -> per-request records ->
//! metrics -> summary. The values are the data model's (`infergate-model`); this crate sends the
//! requests and times them (`client`), runs a bench in four typed steps (`runner`), scrapes a
//! server's metrics during a run (`scrape`), runs sweeps stage by stage (`sweep`), the acceptance
//! checks (`accept`) and the known-answer self-test (`known_answer`). The embedded simulator it
//! measures by default is `infergate-sim`.

pub mod accept;
pub mod capacity;
pub mod client;
pub mod fdlimit;
pub mod known_answer;
pub mod runner;
pub mod scrape;
pub mod sweep;
