//! Where `skiff load` reads a service's replicas while it runs, behind [`ReplicaSource`]: a running
//! `skiff up` (its admin `/status`) or a cluster (the revisions' Deployments), and the choice
//! between them when no flag names one.

use std::net::SocketAddr;
use std::time::Duration;

use anyhow::Context;
use async_trait::async_trait;
use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::{Api, ListParams};
use skiff_api::labels::{INFERENCE_SERVICE, REVISION_NAME};

use super::coldstart::{Fetch, Started};
use crate::standalone::status::{RevisionStatus, Status};

/// The admin port `skiff up` listens on unless told otherwise.
pub const DEFAULT_ADMIN: SocketAddr = SocketAddr::V4(std::net::SocketAddrV4::new(std::net::Ipv4Addr::LOCALHOST, 9091));

/// How long one sample may take.
const SAMPLE_TIMEOUT: Duration = Duration::from_secs(3);

/// One revision's replicas at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Revision {
    /// `<name>-predictor-00001`.
    pub name: String,
    /// Replicas the autoscaler asked for.
    pub desired: u32,
    /// Replicas ready.
    pub ready: u32,
    /// The ready replicas' addresses, where the source knows them.
    pub addresses: Option<Vec<String>>,
    /// Whether the autoscaler is in panic mode for it, where the source knows.
    pub panic: Option<bool>,
    /// Its latest replica start (the model's fetch, spawn, load), where the source tells it.
    pub started: Started,
}

/// A service's revisions at one moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Its revisions.
    pub revisions: Vec<Revision>,
}

impl Snapshot {
    /// Ready replicas over all revisions.
    pub fn ready(&self) -> u32 {
        self.revisions.iter().map(|r| r.ready).sum()
    }

    /// Replicas asked for over all revisions.
    pub fn desired(&self) -> u32 {
        self.revisions.iter().map(|r| r.desired).sum()
    }

    /// Whether the autoscaler panics for any revision; `None` when the source does not know.
    pub fn panic(&self) -> Option<bool> {
        self.revisions.iter().filter_map(|r| r.panic).reduce(|a, b| a || b)
    }
}

/// Something that tells a service's replicas.
#[async_trait]
pub trait ReplicaSource: Send + Sync {
    /// What it reads, for messages and the summary.
    fn describe(&self) -> String;
    /// The replicas now.
    async fn sample(&self) -> anyhow::Result<Snapshot>;
}

/// The service a run targets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Service {
    /// Namespace.
    pub namespace: String,
    /// InferenceService name.
    pub name: String,
}

/// A running `skiff up`, through `GET /status` on its admin port.
pub struct SkiffUp {
    admin: SocketAddr,
    service: Service,
    client: Client<HttpConnector, Empty<Bytes>>,
}

impl SkiffUp {
    /// Reads `service` from the `skiff up` whose admin endpoint is `admin`.
    pub fn new(admin: SocketAddr, service: Service) -> SkiffUp {
        SkiffUp { admin, service, client: Client::builder(TokioExecutor::new()).build_http() }
    }
}

#[async_trait]
impl ReplicaSource for SkiffUp {
    fn describe(&self) -> String {
        format!("skiff up at {} ({}/{})", self.admin, self.service.namespace, self.service.name)
    }

    async fn sample(&self) -> anyhow::Result<Snapshot> {
        let uri = format!("http://{}/status", self.admin).parse()?;
        let fetch = async {
            let response = self.client.get(uri).await?;
            anyhow::Ok(response.into_body().collect().await?.to_bytes())
        };
        let body = tokio::time::timeout(SAMPLE_TIMEOUT, fetch)
            .await
            .map_err(|_| anyhow::anyhow!("no answer within {SAMPLE_TIMEOUT:?}"))?
            .with_context(|| format!("no skiff up admin endpoint answers on {}", self.admin))?;
        from_status(&body, &self.service)
    }
}

/// The service's revisions in a `skiff up` status document (fields it does not know are ignored).
pub fn from_status(body: &[u8], service: &Service) -> anyhow::Result<Snapshot> {
    let status: Status = serde_json::from_slice(body).context("the admin endpoint's /status is not skiff up's")?;
    let found = status.services.iter().find(|s| s.name == service.name && s.namespace == service.namespace);
    let Some(found) = found else {
        let names: Vec<String> = status.services.iter().map(|s| format!("{}/{}", s.namespace, s.name)).collect();
        anyhow::bail!(
            "skiff up serves no InferenceService {}/{} (it serves: {})",
            service.namespace,
            service.name,
            if names.is_empty() { "nothing".to_owned() } else { names.join(", ") }
        );
    };
    let revisions = found
        .revisions
        .iter()
        .map(|r| Revision {
            name: r.name.clone(),
            desired: r.autoscaler.as_ref().map_or(r.desired, |a| a.desired_pods),
            ready: r.ready,
            addresses: Some(r.replicas.clone()),
            panic: r.autoscaler.as_ref().map(|a| a.panic),
            started: started(r),
        })
        .collect();
    Ok(Snapshot { revisions })
}

/// A `skiff up` revision's latest start: `fetched`, `lastSpawnMs` and `lastStartMs`.
fn started(revision: &RevisionStatus) -> Started {
    Started {
        fetch: revision.fetched.as_ref().map(|f| Fetch {
            uri: f.uri.clone(),
            bytes: f.bytes,
            downloaded: f.downloaded,
            cached: f.cached,
            ms: f.millis,
        }),
        spawn_ms: revision.last_spawn_ms,
        start_ms: revision.last_start_ms,
    }
}

/// A cluster: the Deployments the operator made for the InferenceService's revisions.
pub struct Cluster {
    api: Api<Deployment>,
    service: Service,
}

impl Cluster {
    /// Connects with the kubeconfig (or in-cluster) credentials.
    pub async fn connect(service: Service) -> anyhow::Result<Cluster> {
        let client = tokio::time::timeout(SAMPLE_TIMEOUT, kube::Client::try_default())
            .await
            .map_err(|_| anyhow::anyhow!("no Kubernetes client within {SAMPLE_TIMEOUT:?}"))?
            .context("no Kubernetes API (KUBECONFIG, ~/.kube/config or in-cluster)")?;
        Ok(Cluster { api: Api::namespaced(client, &service.namespace), service })
    }
}

/// The label selector of an InferenceService's Deployments.
pub fn selector(service: &Service) -> String {
    format!("{INFERENCE_SERVICE}={}", service.name)
}

#[async_trait]
impl ReplicaSource for Cluster {
    fn describe(&self) -> String {
        format!("Kubernetes Deployments {} in namespace {}", selector(&self.service), self.service.namespace)
    }

    async fn sample(&self) -> anyhow::Result<Snapshot> {
        let params = ListParams::default().labels(&selector(&self.service));
        let list = tokio::time::timeout(SAMPLE_TIMEOUT, self.api.list(&params))
            .await
            .map_err(|_| anyhow::anyhow!("the Kubernetes API did not answer within {SAMPLE_TIMEOUT:?}"))?
            .context("listing Deployments")?;
        anyhow::ensure!(!list.items.is_empty(), "no Deployments labelled {} found", selector(&self.service));
        Ok(from_deployments(&list.items))
    }
}

/// Each Deployment is a revision: `spec.replicas` asked for, `status.readyReplicas` ready.
pub fn from_deployments(deployments: &[Deployment]) -> Snapshot {
    let revisions = deployments
        .iter()
        .map(|d| Revision {
            name: d
                .metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(REVISION_NAME))
                .or(d.metadata.name.as_ref())
                .cloned()
                .unwrap_or_default(),
            desired: d.spec.as_ref().and_then(|s| s.replicas).map_or(1, |r| r.max(0) as u32),
            ready: d.status.as_ref().and_then(|s| s.ready_replicas).map_or(0, |r| r.max(0) as u32),
            addresses: None,
            panic: None,
            started: Started::default(),
        })
        .collect();
    Snapshot { revisions }
}

/// Which source `skiff load` reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// This `skiff up` only.
    SkiffUp(SocketAddr),
    /// The cluster only.
    Cluster,
    /// `skiff up` on its default admin port, else the cluster, else none.
    Either,
}

/// The source to sample, tried once. A named source that cannot be read is an error; with
/// [`Choice::Either`], `Ok(None)` and a message naming what was tried, and the load runs without.
pub async fn choose(choice: Choice, service: &Service) -> anyhow::Result<Option<Box<dyn ReplicaSource>>> {
    let skiff_up = |admin| -> Box<dyn ReplicaSource> { Box::new(SkiffUp::new(admin, service.clone())) };
    match choice {
        Choice::SkiffUp(admin) => tried(skiff_up(admin)).await.map(Some),
        Choice::Cluster => tried(Box::new(Cluster::connect(service.clone()).await?)).await.map(Some),
        Choice::Either => {
            let local = match tried(skiff_up(DEFAULT_ADMIN)).await {
                Ok(source) => return Ok(Some(source)),
                Err(e) => e,
            };
            let cluster = match Cluster::connect(service.clone()).await {
                Ok(cluster) => match tried(Box::new(cluster)).await {
                    Ok(source) => return Ok(Some(source)),
                    Err(e) => e,
                },
                Err(e) => e,
            };
            eprintln!(
                "skiff load: no replicas to sample, so no phases or cold starts in the results (the load runs anyway).\n  \
                 tried {}\n  tried {}\n  Name one with --admin ADDR or --kube (and --namespace).",
                brief(&local),
                brief(&cluster)
            );
            Ok(None)
        }
    }
}

/// What was tried and the root cause, without the layers between (kube's repeat themselves).
fn brief(error: &anyhow::Error) -> String {
    match error.chain().nth(1) {
        Some(_) => format!("{error}: {}", error.root_cause()),
        None => error.to_string(),
    }
}

async fn tried(source: Box<dyn ReplicaSource>) -> anyhow::Result<Box<dyn ReplicaSource>> {
    source.sample().await.with_context(|| source.describe())?;
    Ok(source)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iris() -> Service {
        Service { namespace: "default".into(), name: "iris".into() }
    }

    #[test]
    fn skiff_up_status_gives_revisions_and_tolerates_new_fields() {
        let body = br#"{"services":[{"name":"iris","namespace":"default","url":"u","ready":true,"file":"f",
            "newField":1,"latestCreatedRevision":null,"latestReadyRevision":null,"latestRolledoutRevision":null,
            "previousRolledoutRevision":null,"revisions":[{"name":"iris-predictor-00001","percent":100,"tag":null,
            "desired":2,"ready":1,"restarts":0,"lastStartMs":null,"lastSpawnMs":null,"replicas":["127.0.0.1:4000"],
            "queued":0,"coldStarts":3}]}],"errors":[]}"#;
        let snapshot = from_status(body, &iris()).unwrap();
        assert_eq!(
            snapshot.revisions,
            [Revision {
                name: "iris-predictor-00001".into(),
                desired: 2,
                ready: 1,
                addresses: Some(vec!["127.0.0.1:4000".into()]),
                panic: None,
                started: Started::default(),
            }]
        );
        let other = Service { namespace: "default".into(), name: "mlp".into() };
        let error = from_status(body, &other).unwrap_err().to_string();
        assert!(error.contains("default/mlp") && error.contains("default/iris"), "{error}");
    }

    #[test]
    fn skiff_up_status_gives_the_latest_start_with_its_fetch() {
        let body = br#"{"services":[{"name":"iris","namespace":"default","url":"u","ready":true,"file":"f",
            "latestCreatedRevision":null,"latestReadyRevision":null,"latestRolledoutRevision":null,
            "previousRolledoutRevision":null,"revisions":[{"name":"iris-predictor-00001","percent":100,"tag":null,
            "desired":1,"ready":1,"restarts":0,"lastStartMs":420,"lastSpawnMs":20,"replicas":["127.0.0.1:4000"],
            "fetched":{"uri":"s3://models/100M","bytes":104857738,"downloaded":104857738,"cached":false,"millis":1234},
            "queued":0},{"name":"iris-predictor-00002","percent":0,"tag":null,"desired":0,"ready":0,"restarts":0,
            "lastStartMs":null,"lastSpawnMs":null,"replicas":[],"queued":0}]}],"errors":[]}"#;
        let snapshot = from_status(body, &iris()).unwrap();
        let fetch = Fetch {
            uri: "s3://models/100M".into(),
            bytes: 104_857_738,
            downloaded: 104_857_738,
            cached: false,
            ms: 1234,
        };
        assert_eq!(
            snapshot.revisions[0].started,
            Started { fetch: Some(fetch), spawn_ms: Some(20), start_ms: Some(420) }
        );
        assert_eq!(snapshot.revisions[1].started, Started::default(), "no start yet, no fetch");
    }

    #[test]
    fn deployments_are_revisions() {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "iris-predictor-00002", "labels": {REVISION_NAME: "iris-predictor-00002"}},
            "spec": {"replicas": 3, "selector": {}, "template": {}},
            "status": {"readyReplicas": 1}
        }))
        .unwrap();
        let at_zero: Deployment = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "iris-predictor-00001"},
            "spec": {"replicas": 0, "selector": {}, "template": {}}
        }))
        .unwrap();
        let snapshot = from_deployments(&[deployment, at_zero]);
        assert_eq!((snapshot.desired(), snapshot.ready()), (3, 1));
        assert_eq!(snapshot.revisions[1].name, "iris-predictor-00001");
        assert_eq!(snapshot.revisions[0].started, Started::default(), "a Deployment tells no fetch, spawn or load");
        assert_eq!(selector(&iris()), "serving.kserve.io/inferenceservice=iris");
    }
}
