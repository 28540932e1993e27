//! The zonemesh fleet simulator: thousands of synthetic agents that drive the real aggregator over
//! gRPC — following its probe plans and throughput grants, reporting a synthetic cluster's truth,
//! coming and going — and the scale benchmark built on them (`zonemesh-fleet bench`).
//!
//! - [`topo`] — the synthetic cluster: zones on a plane, node delays, lossy and slow nodes.
//! - [`sim`] — the agents: one `Ingest.Connect` stream each, many streams per connection.
//! - [`bench`] — one size measured: registration, plans, ingest at the plan's pace and flooding,
//!   query latencies meanwhile, memory, store size and restart time.
//! - [`replicated`] — the same with replicas on a NATS JetStream log (`bench --cluster`): ingest
//!   through the log, acknowledgement latency, failovers, and what fsyncing every write costs.

pub mod bench;
pub mod replicated;
pub mod sim;
pub mod topo;
