//! Timing the activator's cold starts (the rule is [`skiff_dataplane::cold_start`]'s): from the
//! first request held while the revision had no ready replica — the moment the activator asks the
//! autoscaler to scale from zero — to its slot on the first ready replica, and to its answer's end.

use std::sync::Arc;

use prometheus_client::metrics::histogram::Histogram;
use skiff_dataplane::cold_start::FirstHeld;

use crate::load::Load;

/// One revision's cold-start histograms.
#[derive(Debug, Clone)]
pub struct ColdStartHistograms {
    /// First held request to the end of its answer.
    pub to_response: Histogram,
    /// First held request (the scale-from-zero request) to its slot on the first ready replica.
    pub to_ready: Histogram,
}

/// The first held request of a cold start, until its answer ends (or it fails: then the cold start
/// is abandoned, not counted).
pub struct ColdStartTimer {
    load: Arc<Load>,
    first: Option<FirstHeld>,
    histograms: ColdStartHistograms,
    answered: bool,
}

impl ColdStartTimer {
    /// A request arrived while no replica was ready: a timer when it is the first of a cold start.
    pub fn begin(load: &Arc<Load>, histograms: &ColdStartHistograms) -> Option<ColdStartTimer> {
        let first = load.cold_start().arrived_at_zero()?;
        Some(ColdStartTimer { load: load.clone(), first: Some(first), histograms: histograms.clone(), answered: false })
    }

    /// The request got its slot on the first ready replica.
    pub fn ready(&self) {
        if let Some(first) = &self.first {
            self.histograms.to_ready.observe(first.elapsed().as_secs_f64());
        }
    }

    /// A replica answered; the cold start ends when this drops, with the answer's body.
    pub fn answered(mut self) -> ColdStartTimer {
        self.answered = true;
        self
    }
}

impl Drop for ColdStartTimer {
    fn drop(&mut self) {
        let Some(first) = self.first.take() else { return };
        let cold_start = self.load.cold_start();
        if self.answered {
            self.histograms.to_response.observe(cold_start.answered(first).as_secs_f64());
        } else {
            cold_start.abandoned(first);
        }
    }
}
