//! zonemesh's experiments in the network lab (`zonemesh-lab`): its figures against iputils
//! `ping` and `iperf3` ([`accuracy`]), and the placement evaluations that run real jobs where the
//! strategies put them — the lab's TCP training workload ([`train`]; evaluation v1,
//! [`training_evaluation`]) and Open MPI all-reduce ([`mpi`]; evaluation v2, [`mpi_evaluation`]
//! on the labs of [`scenarios`]), both beside the time [`collective_time`] predicts. The
//! `zonemesh-lab` command (`accuracy`, `evaluate`, `evaluate-mpi`, and the lab's own `up`,
//! `cleanup`, `bench`) is this crate's binary.
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
pub mod calibration;
pub mod collective_time;
pub mod localisation;
pub mod machine;
pub mod mpi;
pub mod mpi_evaluation;
pub mod rng;
pub mod scenarios;
pub mod train;
pub mod training_evaluation;
