//! The kubelet API (I/O shell), the part `kubectl logs` needs: HTTPS on `--kubelet-port` (10250)
//! serving `GET /containerLogs/{namespace}/{pod}/{container}`, which the API server calls for
//! `pods/log`. As the kubelet does it: a client certificate signed by the cluster CA names the
//! caller, and a SubjectAccessReview for `get nodes/proxy` on this node decides (the kubelet maps
//! every path outside `/stats`, `/metrics`, `/logs` and `/spec` to `nodes/proxy`). No bearer
//! tokens (TokenReview), no anonymous access, no cache of decisions (one review per request).

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::TryStreamExt;
use http::{Method, Request, Response, StatusCode, header};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use k8s_openapi::api::authorization::v1::{ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec};
use kube::Client;
use kube::api::{Api, PostParams};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::config::Config;
use crate::error::{Error, Result};
use crate::kubelet_tls::{Identity, server_config};
use crate::logfiles::PodLogs;
use crate::logquery;

/// How long a client has to finish the TLS handshake.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

type Body = BoxBody<Bytes, Error>;

/// What the request handler needs.
struct KubeletApi {
    client: Client,
    node: String,
    logs: Arc<PodLogs>,
}

/// Starts the kubelet API if `--tls-cert-file`, `--tls-private-key-file` and `--client-ca-file`
/// are set; returns the port it listens on, or `None` when it is off. Serves until `cancel`.
pub async fn start(
    config: &Config,
    client: Client,
    logs: Arc<PodLogs>,
    cancel: CancellationToken,
) -> Result<Option<u16>> {
    let Some((cert, key, ca)) = config.kubelet_tls() else {
        info!("kubelet API off (no --tls-cert-file/--tls-private-key-file/--client-ca-file): no `kubectl logs`");
        return Ok(None);
    };
    let acceptor = TlsAcceptor::from(server_config(cert, key, ca)?);
    let addr = SocketAddr::from((config.kubelet_address, config.kubelet_port));
    let listener =
        TcpListener::bind(addr).await.map_err(|e| Error::io(format!("binding the kubelet API to {addr}"), e))?;
    let api = Arc::new(KubeletApi { client, node: config.node_name.clone(), logs });
    info!(%addr, "kubelet API listening (container logs)");
    tokio::spawn(accept_loop(listener, acceptor, api, cancel));
    Ok(Some(config.kubelet_port))
}

async fn accept_loop(listener: TcpListener, acceptor: TlsAcceptor, api: Arc<KubeletApi>, cancel: CancellationToken) {
    loop {
        let (tcp, peer) = tokio::select! {
            _ = cancel.cancelled() => return,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    warn!(error = %e, "kubelet API accept failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
        };
        let (acceptor, api) = (acceptor.clone(), api.clone());
        tokio::spawn(async move {
            let tls = match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                Ok(Ok(tls)) => tls,
                Ok(Err(e)) => return debug!(%peer, error = %e, "kubelet API TLS handshake failed"),
                Err(_) => return debug!(%peer, "kubelet API TLS handshake timed out"),
            };
            let identity = tls.get_ref().1.peer_certificates().and_then(|c| c.first()).and_then(|der| {
                Identity::from_der(der).map_err(|e| warn!(%peer, error = %e, "unusable client certificate")).ok()
            });
            let service = service_fn(move |req| {
                let (api, identity) = (api.clone(), identity.clone());
                async move { Ok::<_, Infallible>(api.handle(req, identity).await) }
            });
            if let Err(e) = http1::Builder::new().serve_connection(TokioIo::new(tls), service).await {
                debug!(%peer, error = %e, "kubelet API connection ended");
            }
        });
    }
}

impl KubeletApi {
    /// Answers one request; every refusal becomes its status here, as plain text.
    async fn handle(&self, req: Request<Incoming>, identity: Option<Identity>) -> Response<Body> {
        let user = identity.as_ref().map_or("<none>", |i| i.user.as_str()).to_string();
        let uri = req.uri().clone();
        let answer = match self.serve(&req, identity).await {
            Ok(r) => r,
            Err(e) => {
                let status = match &e {
                    Error::Refused { status, .. } => StatusCode::from_u16(*status).unwrap_or(StatusCode::BAD_REQUEST),
                    _ => StatusCode::INTERNAL_SERVER_ERROR,
                };
                text(status, format!("{e}\n"))
            }
        };
        info!(%user, method = %req.method(), %uri, status = answer.status().as_u16(), "kubelet API");
        answer
    }

    async fn serve(&self, req: &Request<Incoming>, identity: Option<Identity>) -> Result<Response<Body>> {
        let identity = identity.ok_or_else(|| {
            Error::refused(401, "Unauthorized: present a client certificate signed by the cluster CA")
        })?;
        if req.method() != Method::GET {
            return Err(Error::refused(405, format!("method {} is not allowed (only GET)", req.method())));
        }
        self.authorize(&identity).await?;
        let log_req = logquery::parse(req.uri().path(), req.uri().query())?;
        let stream = self.logs.open(&log_req).await?;
        let body = StreamBody::new(stream.map_ok(Frame::data));
        Ok(Response::builder()
            .status(StatusCode::OK)
            .header(header::CONTENT_TYPE, "text/plain")
            .body(BodyExt::boxed(body))
            .expect("valid response"))
    }

    /// A SubjectAccessReview for `get nodes/proxy` on this node, for the certificate's user.
    async fn authorize(&self, identity: &Identity) -> Result<()> {
        let review = access_review(identity, &self.node);
        let api: Api<SubjectAccessReview> = Api::all(self.client.clone());
        let status = api.create(&PostParams::default(), &review).await?.status.unwrap_or_default();
        if status.allowed {
            return Ok(());
        }
        Err(Error::refused(
            403,
            format!(
                "Forbidden (user={}, verb=get, resource=nodes, subresource=proxy){}",
                identity.user,
                status.reason.map(|r| format!(": {r}")).unwrap_or_default()
            ),
        ))
    }
}

/// The review the kubelet makes for a `GET` of a path outside its special ones.
fn access_review(identity: &Identity, node: &str) -> SubjectAccessReview {
    let mut groups = identity.groups.clone();
    groups.push("system:authenticated".into());
    SubjectAccessReview {
        metadata: Default::default(),
        spec: SubjectAccessReviewSpec {
            user: Some(identity.user.clone()),
            groups: Some(groups),
            resource_attributes: Some(ResourceAttributes {
                verb: Some("get".into()),
                resource: Some("nodes".into()),
                subresource: Some("proxy".into()),
                name: Some(node.into()),
                ..Default::default()
            }),
            ..Default::default()
        },
        status: None,
    }
}

fn text(status: StatusCode, body: String) -> Response<Body> {
    Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "text/plain; charset=utf-8")
        .body(Full::new(Bytes::from(body)).map_err(|never| match never {}).boxed())
        .expect("valid response")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn review_asks_for_nodes_proxy_on_this_node() {
        let id = Identity { user: "kube-apiserver-kubelet-client".into(), groups: vec!["g".into()] };
        let r = access_review(&id, "skiff-node");
        assert_eq!(r.spec.user.as_deref(), Some("kube-apiserver-kubelet-client"));
        assert_eq!(r.spec.groups.unwrap(), vec!["g".to_string(), "system:authenticated".to_string()]);
        let a = r.spec.resource_attributes.unwrap();
        assert_eq!(
            (a.verb.as_deref(), a.resource.as_deref(), a.subresource.as_deref(), a.name.as_deref()),
            (Some("get"), Some("nodes"), Some("proxy"), Some("skiff-node"))
        );
    }
}
