//! zonemesh's experiments in the network lab (`zonemesh-lab`): its figures against iputils
//! `ping` and `iperf3` ([`accuracy`]), and the placement evaluations that run real jobs where the
//! strategies put them — the lab's TCP training workload ([`train`], evaluation v1: [`evaluate`])
//! and Open MPI all-reduce ([`mpi`], evaluation v2: [`evaluate_mpi`] on the labs of
//! [`scenarios`]). The `zonemesh-lab` command (`accuracy`, `evaluate`, `evaluate-mpi`, and the
//! lab's own `up`, `cleanup`, `bench`) is this crate's binary.
//!
//! ```
//! use zonemesh_experiments::scenarios::{Scenario, Setup};
//!
//! // Scenario (c) on seed 1: the lossy and the slow node share zone-a.
//! let setup = Setup::new(Scenario::C, 1);
//! assert!(setup.lossy.starts_with('a') && setup.slow.starts_with('a'));
//! assert_eq!(setup.spec().all_nodes().count(), 12);
//! ```

pub mod accuracy;
pub mod evaluate;
pub mod evaluate_mpi;
pub mod model;
pub mod mpi;
pub mod scenarios;
pub mod train;
