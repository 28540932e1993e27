//! The `Topology` gRPC service: a thin adapter over the [`Queries`] layer. Each RPC checks its
//! request into a domain query at the edge (`zonemesh_proto::convert`, refusing with the field's
//! name), runs it, and turns the domain answer into the wire answer.

use std::sync::Arc;

use tonic::{Request, Response, Status};
use zonemesh_domain::{MatrixQuery, NodeName, NodesQuery, PlaceQuery, RankQuery, ZonesQuery};
use zonemesh_proto::v1;

use super::metrics::Surface;
use super::query::Queries;
use crate::Error;

/// The Topology service.
#[derive(Debug, Clone)]
pub struct TopologyService {
    queries: Queries,
}

impl TopologyService {
    /// A service answering from `queries`.
    pub fn new(queries: Queries) -> Self {
        Self { queries }
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
            .check(Surface::Query, peer, authorization, super::auth::Need::Read)
            .map_err(|d| d.status())?;
        Ok(request)
    }
}

/// A request refused at the edge.
fn invalid(e: zonemesh_domain::FieldError) -> Status {
    Error::InvalidArgument(e).status()
}

/// The domain answer as the wire answer, or the error as its status.
fn wire<D, W: From<D>>(answer: Result<D, Error>) -> Result<Response<W>, Status> {
    answer
        .map(|a| Response::new(W::from(a)))
        .map_err(|e| e.status())
}

#[tonic::async_trait]
impl v1::topology_server::Topology for TopologyService {
    async fn list_nodes(
        &self,
        request: Request<v1::ListNodesRequest>,
    ) -> Result<Response<v1::ListNodesResponse>, Status> {
        let query = NodesQuery::try_from(request.into_inner()).map_err(invalid)?;
        wire(self.queries.list_nodes(query).await)
    }

    async fn list_zones(
        &self,
        request: Request<v1::ListZonesRequest>,
    ) -> Result<Response<v1::ListZonesResponse>, Status> {
        let query = ZonesQuery::try_from(request.into_inner()).map_err(invalid)?;
        wire(self.queries.list_zones(query).await)
    }

    async fn get_path(
        &self,
        request: Request<v1::GetPathRequest>,
    ) -> Result<Response<v1::GetPathResponse>, Status> {
        let r = request.into_inner();
        let src = NodeName::parse("src", r.src).map_err(invalid)?;
        let dst = NodeName::parse("dst", r.dst).map_err(invalid)?;
        wire(self.queries.path(src, dst).await)
    }

    async fn get_matrix(
        &self,
        request: Request<v1::GetMatrixRequest>,
    ) -> Result<Response<v1::GetMatrixResponse>, Status> {
        let query = MatrixQuery::try_from(request.into_inner()).map_err(invalid)?;
        wire(self.queries.matrix(query).await)
    }

    async fn rank_nodes(
        &self,
        request: Request<v1::RankNodesRequest>,
    ) -> Result<Response<v1::RankNodesResponse>, Status> {
        let query = RankQuery::try_from(request.into_inner()).map_err(invalid)?;
        wire(self.queries.rank(query).await)
    }

    async fn get_tiers(
        &self,
        _request: Request<v1::GetTiersRequest>,
    ) -> Result<Response<v1::GetTiersResponse>, Status> {
        let tiers = self.queries.tiers().await;
        wire(tiers.map(|t| (*t).clone()))
    }

    async fn list_faults(
        &self,
        _request: Request<v1::ListFaultsRequest>,
    ) -> Result<Response<v1::ListFaultsResponse>, Status> {
        wire(self.queries.faults().map(|f| (*f).clone()))
    }

    async fn place(
        &self,
        request: Request<v1::PlaceRequest>,
    ) -> Result<Response<v1::PlaceResponse>, Status> {
        let query = PlaceQuery::try_from(request.into_inner()).map_err(invalid)?;
        wire(self.queries.place(query).await)
    }
}
