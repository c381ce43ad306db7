//! The autoscaler's HTTP endpoints for the activator (on the controller's admin port): a poke
//! when a request waits for a revision at zero (which wakes a revision of another autoscaler's
//! class, [`super::wake`]), and the held counts every second. Callers prove
//! who they are with a ServiceAccount token, checked by a TokenReview (a passed check is kept
//! for a minute); only the activator's ServiceAccount may call.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, StatusCode, header};
use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};
use kube::Api;
use kube::api::PostParams;
use skiff_autoscaler::Decision;
use skiff_dataplane::RevisionKey;
use skiff_dataplane::report::{Held, HeldReport, POKE_PATH, REPORT_PATH};
use skiff_dataplane::runner::journal::Step;

use super::Scaler;
use super::wake::Wakes;

/// The autoscaler's API once this replica leads (set once): the admin endpoint serves it, the
/// decisions' collector reads it.
pub type AutoscalerGate = Arc<OnceLock<Arc<AutoscalerApi>>>;

/// How long a token that passed review is trusted without asking again.
const REVIEW_TTL: Duration = Duration::from_secs(60);
/// Largest request body taken.
pub const MAX_BODY: usize = 1 << 20;

/// Answers the activator's calls.
pub struct AutoscalerApi {
    runner: Arc<Scaler>,
    wakes: Arc<Wakes>,
    reviews: Api<TokenReview>,
    allowed_user: String,
    passed: Mutex<HashMap<u64, Instant>>,
}

/// What went wrong with a call, as the status and message it is answered with.
type Refusal = (StatusCode, String);

impl AutoscalerApi {
    /// Calls from the ServiceAccount `allowed_user` (`system:serviceaccount:<ns>:<name>`) reach
    /// `runner`, or `wakes` for a revision another autoscaler scales.
    pub fn new(
        runner: Arc<Scaler>,
        wakes: Arc<Wakes>,
        reviews: Api<TokenReview>,
        allowed_user: String,
    ) -> AutoscalerApi {
        AutoscalerApi { runner, wakes, reviews, allowed_user, passed: Mutex::new(HashMap::new()) }
    }

    /// The autoscaler's latest decision of every revision.
    pub fn decisions(&self) -> Vec<(RevisionKey, Decision)> {
        self.runner.decisions()
    }

    /// What `revision`'s decider was fed and answered, if it is autoscaled.
    pub fn journal(&self, revision: &RevisionKey) -> Option<Vec<Step>> {
        self.runner.journal(revision)
    }

    /// Whether `path` is one of these endpoints.
    pub fn serves(path: &str) -> bool {
        path == POKE_PATH || path == REPORT_PATH
    }

    /// Handles a POST to `path` with `headers` and `body`.
    pub async fn handle(&self, path: &str, headers: &HeaderMap, body: &Bytes) -> Result<(), Refusal> {
        self.authenticate(headers).await?;
        let bad = |e: serde_json::Error| (StatusCode::BAD_REQUEST, format!("body: {e}"));
        match path {
            POKE_PATH => {
                let held: Held = serde_json::from_slice(body).map_err(bad)?;
                if !self.wakes.poke(&held.key()) {
                    self.runner.poke(&held.key(), &held.from, held.held);
                }
            }
            _ => {
                let report: HeldReport = serde_json::from_slice(body).map_err(bad)?;
                for held in report.revisions {
                    self.runner.report_held(&held.key(), &held.from, held.held);
                }
            }
        }
        Ok(())
    }

    async fn authenticate(&self, headers: &HeaderMap) -> Result<(), Refusal> {
        let unauthorized = |why: &str| (StatusCode::UNAUTHORIZED, why.to_owned());
        let token = headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .ok_or_else(|| unauthorized("a bearer token is required"))?;
        let digest = {
            let mut hasher = DefaultHasher::new();
            token.hash(&mut hasher);
            hasher.finish()
        };
        if self.passed.lock().expect("review lock").get(&digest).is_some_and(|at| at.elapsed() < REVIEW_TTL) {
            return Ok(());
        }
        let review = TokenReview {
            spec: TokenReviewSpec { token: Some(token.to_owned()), ..TokenReviewSpec::default() },
            ..TokenReview::default()
        };
        let reviewed = self
            .reviews
            .create(&PostParams::default(), &review)
            .await
            .map_err(|e| (StatusCode::SERVICE_UNAVAILABLE, format!("token review failed: {e}")))?;
        let status = reviewed.status.unwrap_or_default();
        let user = status.user.and_then(|u| u.username).unwrap_or_default();
        if status.authenticated != Some(true) {
            return Err(unauthorized("the token is not valid"));
        }
        if user != self.allowed_user {
            return Err((StatusCode::FORBIDDEN, format!("{user} may not call the autoscaler")));
        }
        let mut passed = self.passed.lock().expect("review lock");
        passed.retain(|_, at| at.elapsed() < REVIEW_TTL);
        passed.insert(digest, Instant::now());
        Ok(())
    }
}
