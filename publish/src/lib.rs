//! zonemesh's publisher: the measured tiers where batch schedulers read topology.
//!
//! - [`objects`] builds, from a [`Tiers`](zonemesh_domain::Tiers) answer alone, the Volcano
//!   HyperNodes, the Kueue Topology and node labels, and the scheduler-plugins NetworkTopology
//!   (and its ConfigMap when asked for; pure: the same tiers give the same objects);
//! - [`writer`] puts them into a cluster with kube-rs, touching only what zonemesh owns;
//! - [`health`] acts on the open faults where every scheduler looks: the node label
//!   `zonemesh.io/network-health` and, when asked, the taint `zonemesh.io/network-fault`
//!   (`--publish health`, `--taint-faulty-nodes`), within guard rails;
//! - [`run`] is the aggregator's one writer task (`--publish volcano,kueue,diktyo,health`);
//! - [`yaml`] prints them for `zonemesh publish --dry-run -o yaml`;
//! - [`slurm`] writes the same tiers as Slurm's `topology.conf` (tree or block) or
//!   `topology.yaml`, checked against slurmctld's rules (`zonemesh publish --slurm`).
//!
//! ```
//! use zonemesh_domain::{NodeName, TierGroup, TierZone, Tiers, ZoneName};
//! use zonemesh_publish::{Kind, Settings, desired, yaml};
//!
//! let name = |s: &str| ZoneName::parse("name", s).unwrap();
//! let tiers = Tiers {
//!     zones: vec![TierZone {
//!         name: name("zone-a"),
//!         group: name("group-1"),
//!         region: None,
//!         nodes: vec![NodeName::parse("node", "a1").unwrap()],
//!         fresh: true,
//!         rtt_us: Some(80.0),
//!         throughput_bps: None,
//!     }],
//!     groups: vec![TierGroup {
//!         name: name("group-1"),
//!         zones: vec![name("zone-a")],
//!         inside: Default::default(),
//!         held: false,
//!         nearest: None,
//!     }],
//!     ..Tiers::default()
//! };
//! let objects = desired(&tiers, &Settings::default());
//! let hypernodes: Vec<&str> = objects
//!     .objects
//!     .iter()
//!     .filter(|o| o.kind == Kind::HyperNode)
//!     .map(|o| o.name.as_str())
//!     .collect();
//! assert_eq!(hypernodes, ["zonemesh-cluster", "zonemesh-group-1", "zonemesh-zone-a"]);
//! assert_eq!(objects.node_labels["a1"]["zonemesh.io/zone-group"], "group-1");
//! let text = yaml::documents(objects.objects.iter().map(|o| &o.manifest));
//! assert!(text.contains("tierName: \"zonemesh-zone-group\""));
//! ```

pub mod health;
pub mod metrics;
pub mod names;
pub mod objects;
pub mod run;
pub mod slurm;
pub mod writer;
pub mod yaml;

pub use metrics::{PublishMetrics, Verb};
pub use objects::{
    Desired, Kind, KueueVersion, Object, Scheduler, Settings, SettingsError, desired,
};
pub use writer::{PublishError, Round, Writer};
