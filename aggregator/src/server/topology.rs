//! The Topology service: every RPC checks its request at the edge, then runs as a query on the
//! owner task.

use std::sync::Arc;
use std::time::Instant;

use tonic::{Request, Response, Status};
use zonemesh_domain::NodeName;
use zonemesh_proto::v1;

use super::core::Core;
use super::metrics::Metrics;
use crate::Error;
use zonemesh_domain::{MatrixQuery, NodesQuery, PlaceQuery, RankQuery, ZonesQuery};

/// The Topology service.
#[derive(Debug, Clone)]
pub struct TopologyService {
    core: Core,
    metrics: Arc<Metrics>,
}

impl TopologyService {
    /// A service that queries `core`.
    pub fn new(core: Core, metrics: Arc<Metrics>) -> Self {
        Self { core, metrics }
    }

    async fn run<T: Send + 'static>(
        &self,
        rpc: &'static str,
        f: impl FnOnce(&zonemesh_engine::Snapshot, zonemesh_domain::UnixMs) -> Result<T, Error>
        + Send
        + 'static,
    ) -> Result<Response<T>, Status> {
        let started = Instant::now();
        let result = self.core.query(f).await.and_then(|r| r);
        self.metrics
            .observe_query(rpc, started.elapsed().as_secs_f64(), result.is_ok());
        result.map(Response::new).map_err(|e| e.status())
    }
}

/// The interceptor in front of the Topology service: every RPC needs read access (see
/// [`super::auth`]).
pub fn authenticate(
    guard: Arc<super::auth::Guard>,
) -> impl FnMut(Request<()>) -> Result<Request<()>, Status> + Clone + Send + Sync + 'static {
    move |request: Request<()>| {
        let peer = request.extensions().get::<super::tls::Peer>();
        let authorization = request
            .metadata()
            .get("authorization")
            .map(|v| v.as_bytes());
        guard
            .check("query", peer, authorization, super::auth::Need::Read)
            .map_err(|d| d.status())?;
        Ok(request)
    }
}

fn invalid(e: zonemesh_domain::FieldError) -> Status {
    Error::InvalidArgument(e).status()
}

#[tonic::async_trait]
impl v1::topology_server::Topology for TopologyService {
    async fn list_nodes(
        &self,
        request: Request<v1::ListNodesRequest>,
    ) -> Result<Response<v1::ListNodesResponse>, Status> {
        let query = NodesQuery::try_from(request.into_inner()).map_err(invalid)?;
        self.run("ListNodes", move |t, now| {
            Ok(t.list_nodes(&query, now)?.into())
        })
        .await
    }

    async fn list_zones(
        &self,
        request: Request<v1::ListZonesRequest>,
    ) -> Result<Response<v1::ListZonesResponse>, Status> {
        let query = ZonesQuery::try_from(request.into_inner()).map_err(invalid)?;
        self.run("ListZones", move |t, now| {
            Ok(t.list_zones(&query, now).into())
        })
        .await
    }

    async fn get_path(
        &self,
        request: Request<v1::GetPathRequest>,
    ) -> Result<Response<v1::GetPathResponse>, Status> {
        let r = request.into_inner();
        let src = NodeName::parse("src", r.src).map_err(invalid)?;
        let dst = NodeName::parse("dst", r.dst).map_err(invalid)?;
        self.run("GetPath", move |t, now| {
            let (s, d) = (t.require("src", &src)?, t.require("dst", &dst)?);
            Ok(v1::GetPathResponse {
                src: src.to_string(),
                dst: dst.to_string(),
                figures: Some(t.path_figures(s, d, now).into()),
            })
        })
        .await
    }

    async fn get_matrix(
        &self,
        request: Request<v1::GetMatrixRequest>,
    ) -> Result<Response<v1::GetMatrixResponse>, Status> {
        let query = MatrixQuery::try_from(request.into_inner()).map_err(invalid)?;
        self.run("GetMatrix", move |t, now| Ok(t.matrix(&query, now)?.into()))
            .await
    }

    async fn rank_nodes(
        &self,
        request: Request<v1::RankNodesRequest>,
    ) -> Result<Response<v1::RankNodesResponse>, Status> {
        let query = RankQuery::try_from(request.into_inner()).map_err(invalid)?;
        self.run("RankNodes", move |t, now| Ok(t.rank(&query, now)?.into()))
            .await
    }

    async fn place(
        &self,
        request: Request<v1::PlaceRequest>,
    ) -> Result<Response<v1::PlaceResponse>, Status> {
        let query = PlaceQuery::try_from(request.into_inner()).map_err(invalid)?;
        self.run("Place", move |t, now| Ok(t.place(&query, now)?.into()))
            .await
    }
}
