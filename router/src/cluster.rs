//! Kubernetes mode: routes come from InferenceServices (their status' traffic split and URL, and
//! the predictor's timeout), endpoints from each revision Service's EndpointSlices, and the
//! activators from the EndpointSlices of the activator's Service. The pure part is [`route_of`];
//! [`follow_routes`] is the watch.

use std::collections::BTreeMap;

use futures::StreamExt;
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, ResourceExt};
use skiff_api::InferenceServiceResource;
use skiff_api::revision::{EXPLAINER, TRANSFORMER};
use skiff_api::serving::route_timeout;

use crate::Router;
use crate::table::ServiceRoute;

/// The route of an InferenceService, once its status splits traffic across revisions.
pub fn route_of(isvc: &InferenceServiceResource) -> Option<ServiceRoute> {
    let status = isvc.status.as_ref()?;
    let targets = status.predictor()?.traffic.clone();
    if targets.is_empty() {
        return None;
    }
    let traffic = |component: &str| status.component(component).map(|c| c.traffic.clone()).unwrap_or_default();
    Some(ServiceRoute {
        namespace: isvc.namespace()?,
        name: isvc.name_any(),
        targets,
        transformer: traffic(TRANSFORMER),
        explainer: traffic(EXPLAINER),
        timeout: Some(route_timeout(
            &isvc.spec.predictor,
            isvc.metadata.annotations.as_ref().unwrap_or(&BTreeMap::new()),
        )),
        host: status.url.as_deref().and_then(url_host).map(str::to_owned),
    })
}

/// The host of `http://host[:port]/path`.
fn url_host(url: &str) -> Option<&str> {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, host)| host);
    let host = if host.starts_with('[') {
        host.find(']').map_or(host, |end| &host[..=end])
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) if port.bytes().all(|b| b.is_ascii_digit()) => name,
            _ => host,
        }
    };
    (!host.is_empty()).then_some(host)
}

/// Publishes `router`'s routes from every InferenceService in the cluster, each time one changes;
/// `synced` is called once the first complete list is published. Runs until the stream ends.
pub async fn follow_routes(api: Api<InferenceServiceResource>, router: Router, mut synced: impl FnMut()) {
    let stream = watcher(api, watcher::Config::default()).default_backoff();
    let mut stream = std::pin::pin!(stream);
    let mut routes: BTreeMap<(String, String), ServiceRoute> = BTreeMap::new();
    let mut listing: Option<BTreeMap<(String, String), ServiceRoute>> = None;
    while let Some(event) = stream.next().await {
        let key = |isvc: &InferenceServiceResource| (isvc.namespace().unwrap_or_default(), isvc.name_any());
        match event {
            Ok(watcher::Event::Init) => listing = Some(BTreeMap::new()),
            Ok(watcher::Event::InitApply(isvc)) => {
                if let (Some(listing), Some(route)) = (listing.as_mut(), route_of(&isvc)) {
                    listing.insert(key(&isvc), route);
                }
            }
            Ok(watcher::Event::InitDone) => {
                routes = listing.take().unwrap_or_default();
                router.publish(routes.values().cloned().collect());
                synced();
            }
            Ok(watcher::Event::Apply(isvc)) => {
                let changed = match route_of(&isvc) {
                    Some(route) => routes.insert(key(&isvc), route.clone()).as_ref() != Some(&route),
                    None => routes.remove(&key(&isvc)).is_some(),
                };
                if changed {
                    router.publish(routes.values().cloned().collect());
                }
            }
            Ok(watcher::Event::Delete(isvc)) => {
                if routes.remove(&key(&isvc)).is_some() {
                    router.publish(routes.values().cloned().collect());
                }
            }
            Err(e) => tracing::warn!(error = %e, "InferenceService watch failed; retrying"),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use serde_json::json;

    use super::*;

    #[test]
    fn routes_follow_the_status_traffic_url_and_timeout() {
        let isvc: InferenceServiceResource = serde_json::from_value(json!({
            "apiVersion": "serving.kserve.io/v1beta1", "kind": "InferenceService",
            "metadata": {"name": "iris", "namespace": "ml", "annotations": {"serving.knative.dev/progress-deadline": "10m"}},
            "spec": {"predictor": {"timeout": 30, "model": {"modelFormat": {"name": "onnx"}, "storageUri": "file:///m"}}},
            "status": {"url": "http://iris.ml.example.com", "components": {"predictor": {"traffic": [
                {"revisionName": "iris-predictor-00002", "percent": 25, "tag": "latest", "latestRevision": true},
                {"revisionName": "iris-predictor-00001", "percent": 75, "tag": "prev"},
            ]}}},
        }))
        .unwrap();
        let route = route_of(&isvc).unwrap();
        assert_eq!((route.namespace.as_str(), route.name.as_str()), ("ml", "iris"));
        assert_eq!(route.targets.iter().map(|t| t.percent).collect::<Vec<_>>(), [25, 75]);
        assert_eq!(route.timeout, Some(Duration::from_secs(630)), "the timeout after a progress deadline's hold");
        assert_eq!(route.host.as_deref(), Some("iris.ml.example.com"));

        let mut pending = isvc.clone();
        pending.status = None;
        assert_eq!(route_of(&pending), None, "no status, no route");
    }

    #[test]
    fn url_hosts() {
        assert_eq!(url_host("http://iris.ml.example.com"), Some("iris.ml.example.com"));
        assert_eq!(url_host("https://iris.ml.example.com:8443/v1"), Some("iris.ml.example.com"));
        assert_eq!(url_host("http://[::1]:80/"), Some("[::1]"));
        assert_eq!(url_host("http://"), None);
    }
}
