//! The query layer: every query of the gRPC `Topology` service and of the web API runs here, on
//! a [`Reader`] (the latest published snapshot, on the query pool), timed and counted per RPC.
//! Both edges are thin adapters: they check their request into a domain query, call this, and
//! turn the domain answer or the [`Error`] (through its one code table) into their wire form.

use std::sync::Arc;

use zonemesh_domain::{
    Faults, Matrix, MatrixQuery, NodeName, Nodes, NodesQuery, PathAnswer, PlaceAnswer, PlaceQuery,
    RankQuery, Ranking, Tiers, UnixMs, Zones, ZonesQuery,
};
use zonemesh_engine::Snapshot;

use super::faults::FaultsWatch;
use super::metrics::{Metrics, Rpc};
use super::reader::Reader;
use super::tiers::TiersWatch;
use crate::Error;
use crate::cluster::Progress;

/// How long `GetTiers` waits for the first derivation after a start.
const FIRST_TIERS_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// The queries, over one reader.
#[derive(Debug, Clone)]
pub struct Queries {
    reader: Reader,
    metrics: Arc<Metrics>,
    tiers: TiersWatch,
    faults: FaultsWatch,
    /// A replica answers only while it is caught up with the log, within `--max-lag`.
    gate: Option<Arc<Progress>>,
}

impl Queries {
    /// Queries on `reader`'s snapshots; `GetTiers` answers from the tiers task's `tiers`,
    /// `ListFaults` from the faults task's `faults`. A replica's `gate` makes them UNAVAILABLE
    /// while it lags.
    pub fn new(
        reader: Reader,
        metrics: Arc<Metrics>,
        tiers: TiersWatch,
        faults: FaultsWatch,
        gate: Option<Arc<Progress>>,
    ) -> Self {
        Self {
            reader,
            metrics,
            tiers,
            faults,
            gate,
        }
    }

    /// Why a replica does not answer now, as an error (UNAVAILABLE: a client asks another).
    fn closed(&self) -> Result<(), Error> {
        match self.gate.as_ref().and_then(|g| g.why_unready()) {
            Some(why) => Err(Error::TryAgain(format!("{why}; ask another replica"))),
            None => Ok(()),
        }
    }

    /// Runs `f` on the latest snapshot and records it as one `rpc`.
    async fn run<T: Send + 'static>(
        &self,
        rpc: Rpc,
        f: impl FnOnce(&Snapshot, UnixMs) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let started = zonemesh_common::time::Stopwatch::start();
        let result = match self.closed() {
            Ok(()) => self.reader.query(f).await.and_then(|r| r),
            Err(e) => Err(e),
        };
        self.metrics
            .observe_query(rpc, started.elapsed().as_secs_f64(), result.is_ok());
        result
    }

    /// `ListNodes`: one page of nodes.
    pub async fn list_nodes(&self, query: NodesQuery) -> Result<Nodes, Error> {
        self.run(Rpc::ListNodes, move |t, now| Ok(t.list_nodes(&query, now)?))
            .await
    }

    /// `ListZones`: the zones and one page of zone links, each with its open faults.
    pub async fn list_zones(&self, query: ZonesQuery) -> Result<Zones, Error> {
        let open = self.faults.borrow().clone();
        self.run(Rpc::ListZones, move |t, now| {
            let mut zones = t.list_zones(&query, now);
            for link in &mut zones.links {
                link.faults = open
                    .faults
                    .iter()
                    .filter(|f| f.is_zone_link(&link.src_zone, &link.dst_zone))
                    .cloned()
                    .collect();
            }
            Ok(zones)
        })
        .await
    }

    /// `GetPath`: one path's figures, measured or estimated, and the open faults that explain
    /// them.
    pub async fn path(&self, src: NodeName, dst: NodeName) -> Result<PathAnswer, Error> {
        let open = self.faults.borrow().clone();
        self.run(Rpc::GetPath, move |t, now| {
            let (s, d) = (t.require("src", &src)?, t.require("dst", &dst)?);
            let figures = t.path_figures(s, d, now);
            let (zs, zd) = (&t.zone(t.zone_of(s)).name, &t.zone(t.zone_of(d)).name);
            let faults = open
                .faults
                .iter()
                .filter(|f| f.explains_path(&src, &dst, zs, zd))
                .cloned()
                .collect();
            Ok(PathAnswer {
                src,
                dst,
                figures,
                faults,
            })
        })
        .await
    }

    /// `GetMatrix`: one page of rows.
    pub async fn matrix(&self, query: MatrixQuery) -> Result<Matrix, Error> {
        self.run(Rpc::GetMatrix, move |t, now| Ok(t.matrix(&query, now)?))
            .await
    }

    /// `RankNodes`.
    pub async fn rank(&self, query: RankQuery) -> Result<Ranking, Error> {
        self.run(Rpc::RankNodes, move |t, now| Ok(t.rank(&query, now)?))
            .await
    }

    /// `Place`.
    pub async fn place(&self, query: PlaceQuery) -> Result<PlaceAnswer, Error> {
        self.run(Rpc::Place, move |t, now| Ok(t.place(&query, now)?))
            .await
    }

    /// `ListFaults`: the open faults as of the faults task's latest look.
    pub fn faults(&self) -> Result<Arc<Faults>, Error> {
        let started = zonemesh_common::time::Stopwatch::start();
        let result = self.closed().map(|()| self.faults.borrow().clone());
        self.metrics.observe_query(
            Rpc::ListFaults,
            started.elapsed().as_secs_f64(),
            result.is_ok(),
        );
        result
    }

    /// `GetTiers`: the latest tiers (waiting for the first derivation at most 5 s).
    pub async fn tiers(&self) -> Result<Arc<Tiers>, Error> {
        let started = zonemesh_common::time::Stopwatch::start();
        let mut rx = self.tiers.clone();
        let result = self.closed();
        let result = match result {
            Err(e) => Err(e),
            Ok(()) => {
                match tokio::time::timeout(FIRST_TIERS_WAIT, rx.wait_for(Option::is_some)).await {
                    Ok(Ok(t)) => Ok(t.clone().expect("waited for Some")),
                    _ => Err(Error::TryAgain(
                        "the tiers are not derived yet (the aggregator is starting)".into(),
                    )),
                }
            }
        };
        self.metrics.observe_query(
            Rpc::GetTiers,
            started.elapsed().as_secs_f64(),
            result.is_ok(),
        );
        result
    }
}
