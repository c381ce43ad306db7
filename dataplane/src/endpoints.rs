//! The in-process endpoint registry: each revision's ready replicas with their in-flight counts,
//! shared by the router (which sends straight to a replica with room), the activator (which waits
//! for one) and whatever publishes readiness: the standalone replica backend, or an EndpointSlice
//! watch in a cluster ([`RevisionEndpoints::set_addresses`]). A published replica that fails its
//! periodic readiness probe ([`crate::readiness`]) stays listed but gets no new slot until it
//! passes again.

use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use arc_swap::ArcSwap;
use tokio::sync::{oneshot, watch};

use crate::failing::Failing;
use crate::key::RevisionKey;

/// One replica of a revision.
#[derive(Debug)]
pub struct Replica {
    /// Where it listens.
    pub addr: SocketAddr,
    in_flight: AtomicUsize,
    /// False while it fails its readiness probe: it takes no new request.
    probe_ready: AtomicBool,
    /// The revision's slots, told when this replica frees one (weak: the revision owns its replicas).
    slots: Weak<Slots>,
}

impl Replica {
    /// Requests currently sent to this replica through the router or the activator.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Acquire)
    }

    /// False while the replica fails its readiness probe (it is listed but takes no new request).
    pub fn probe_ready(&self) -> bool {
        self.probe_ready.load(Ordering::Acquire)
    }

    /// Takes the replica out of service (`false`: no new slot on it; requests on it keep
    /// running) or puts it back (`true`: its free slots go to the waiters first).
    pub fn set_probe_ready(&self, ready: bool) {
        let was = self.probe_ready.swap(ready, Ordering::SeqCst);
        if ready
            && !was
            && let Some(slots) = self.slots.upgrade()
        {
            slots.hand_out();
        }
    }
}

/// A request slot on a replica, given back on drop (to the first waiter, if any).
#[derive(Debug)]
pub struct Slot {
    replica: Arc<Replica>,
}

impl Slot {
    /// The replica this slot is on.
    pub fn replica(&self) -> &Arc<Replica> {
        &self.replica
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        // Sequentially consistent with `acquire`'s queueing: either this sees the waiter counted,
        // or that waiter's second look sees this slot free. With nobody waiting, no lock is taken.
        self.replica.in_flight.fetch_sub(1, Ordering::SeqCst);
        if let Some(slots) = self.replica.slots.upgrade()
            && slots.waiting.load(Ordering::SeqCst) > 0
        {
            slots.hand_out();
        }
    }
}

/// A revision's ready replicas and the requests waiting for a slot on one, first come, first
/// served: a freed slot or a new replica goes to the waiter at the head of the queue (one wake-up
/// per slot, not every waiter at once), and no newcomer takes a slot while others wait.
#[derive(Debug)]
struct Slots {
    container_concurrency: usize,
    ready: ArcSwap<Vec<Arc<Replica>>>,
    waiters: Mutex<VecDeque<oneshot::Sender<Slot>>>,
    /// `waiters.len()`, readable without the lock.
    waiting: AtomicUsize,
}

impl Slots {
    /// A slot on the least-loaded ready replica with room, waiters or not.
    fn take(&self) -> Option<Slot> {
        let ready = self.ready.load();
        let mut candidates: Vec<&Arc<Replica>> = ready.iter().filter(|r| r.probe_ready()).collect();
        candidates.sort_by_key(|r| r.in_flight());
        for replica in candidates {
            let taken = replica.in_flight.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (self.container_concurrency == 0 || n < self.container_concurrency).then_some(n + 1)
            });
            if taken.is_ok() {
                return Some(Slot { replica: replica.clone() });
            }
        }
        None
    }

    /// Gives free slots to the waiters in arrival order.
    fn hand_out(&self) {
        let mut waiters = self.waiters.lock().expect("waiters lock");
        let unclaimed = self.serve(&mut waiters);
        drop(waiters);
        // After the lock: dropping a slot hands out again.
        drop(unclaimed);
    }

    /// Under the lock: free slots to the waiters at the head of the queue, skipping those that gave
    /// up. Returns a slot taken for a waiter that left meanwhile, to be dropped after the lock.
    fn serve(&self, waiters: &mut VecDeque<oneshot::Sender<Slot>>) -> Option<Slot> {
        let mut unclaimed: Option<Slot> = None;
        while let Some(waiter) = waiters.front() {
            if waiter.is_closed() {
                waiters.pop_front();
                continue;
            }
            let Some(slot) = unclaimed.take().or_else(|| self.take()) else { break };
            let waiter = waiters.pop_front().expect("a front waiter");
            unclaimed = waiter.send(slot).err();
        }
        self.waiting.store(waiters.len(), Ordering::SeqCst);
        unclaimed
    }
}

/// The ready replicas of one revision.
#[derive(Debug)]
pub struct RevisionEndpoints {
    key: RevisionKey,
    slots: Arc<Slots>,
    arrivals: AtomicU64,
    /// Set while the revision fails for a cause a retry will not fix ([`crate::failing`]).
    failing: watch::Sender<Option<Arc<Failing>>>,
}

impl RevisionEndpoints {
    /// A revision with no ready replica; `container_concurrency` 0 = unlimited per replica.
    pub fn new(key: RevisionKey, container_concurrency: usize) -> Arc<RevisionEndpoints> {
        let slots = Slots {
            container_concurrency,
            ready: ArcSwap::from_pointee(Vec::new()),
            waiters: Mutex::new(VecDeque::new()),
            waiting: AtomicUsize::new(0),
        };
        Arc::new(RevisionEndpoints {
            key,
            slots: Arc::new(slots),
            arrivals: AtomicU64::new(0),
            failing: watch::Sender::new(None),
        })
    }

    /// The revision's namespace and name.
    pub fn key(&self) -> &RevisionKey {
        &self.key
    }

    /// Requests one replica takes at once (0 = unlimited).
    pub fn container_concurrency(&self) -> usize {
        self.slots.container_concurrency
    }

    /// A replica record for `addr`, bound to this revision's slots.
    pub fn replica(&self, addr: SocketAddr) -> Arc<Replica> {
        Arc::new(Replica {
            addr,
            in_flight: AtomicUsize::new(0),
            probe_ready: AtomicBool::new(true),
            slots: Arc::downgrade(&self.slots),
        })
    }

    /// The ready replicas now (as published: with any that fail their readiness probe for now).
    pub fn ready(&self) -> Arc<Vec<Arc<Replica>>> {
        self.slots.ready.load_full()
    }

    /// Publishes the ready set; the slots it brings go to the waiters first.
    pub fn set_ready(&self, replicas: Vec<Arc<Replica>>) {
        self.slots.ready.store(Arc::new(replicas));
        self.slots.hand_out();
    }

    /// Publishes the ready set given as addresses (what an EndpointSlice lists): a replica whose
    /// address stays keeps its record, and so its in-flight count; new addresses get new records.
    /// Returns whether the set changed.
    pub fn set_addresses(&self, addrs: impl IntoIterator<Item = SocketAddr>) -> bool {
        let current = self.slots.ready.load();
        let mut seen = HashSet::new();
        let next: Vec<Arc<Replica>> = addrs
            .into_iter()
            .filter(|addr| seen.insert(*addr))
            .map(|addr| current.iter().find(|r| r.addr == addr).cloned().unwrap_or_else(|| self.replica(addr)))
            .collect();
        let unchanged = next.len() == current.len() && next.iter().all(|r| current.iter().any(|c| Arc::ptr_eq(c, r)));
        if !unchanged {
            self.set_ready(next);
        }
        !unchanged
    }

    /// Takes a slot on the least-loaded ready replica that has room, unless requests are already
    /// waiting for one (they come first).
    pub fn try_acquire(&self) -> Option<Slot> {
        if self.slots.waiting.load(Ordering::Acquire) > 0 {
            return None;
        }
        self.slots.take()
    }

    /// Waits for a slot, behind every request that waited first.
    pub async fn acquire(&self) -> Slot {
        let (turn, unclaimed) = {
            let mut waiters = self.slots.waiters.lock().expect("waiters lock");
            if waiters.is_empty()
                && let Some(slot) = self.slots.take()
            {
                return slot;
            }
            let (turn, wait) = oneshot::channel();
            waiters.push_back(turn);
            self.slots.waiting.store(waiters.len(), Ordering::SeqCst);
            // A slot freed after the look above, by a drop that saw nobody waiting yet, is found
            // by this second look (see `Slot`'s drop).
            (wait, self.slots.serve(&mut waiters))
        };
        drop(unclaimed);
        match turn.await {
            Ok(slot) => slot,
            Err(_) => std::future::pending().await,
        }
    }

    /// Requests waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.slots.waiting.load(Ordering::Acquire)
    }

    /// Counts one request routed to this revision (straight to a replica or through the activator):
    /// the autoscaler's requests-per-second signal.
    pub fn arrived(&self) {
        self.arrivals.fetch_add(1, Ordering::Relaxed);
    }

    /// Requests routed to this revision so far.
    pub fn arrivals(&self) -> u64 {
        self.arrivals.load(Ordering::Relaxed)
    }

    /// Marks the revision as failing for a cause a retry will not fix (its replica backend decides,
    /// by [`crate::failing::Cause::retry_helps`]), or clears it (`None`: a replica is ready, or a
    /// retry can help again); requests waiting for a slot hear of it at once.
    pub fn set_failing(&self, failing: Option<Failing>) {
        self.failing.send_if_modified(|now| {
            let changed = now.as_deref() != failing.as_ref();
            if changed {
                *now = failing.map(Arc::new);
            }
            changed
        });
    }

    /// Why the revision fails for a cause a retry will not fix, if it does.
    pub fn failing(&self) -> Option<Arc<Failing>> {
        self.failing.borrow().clone()
    }

    /// Waits until the revision fails for a cause a retry will not fix; the failure.
    pub async fn failed(&self) -> Arc<Failing> {
        let mut failing = self.failing.subscribe();
        let failed = failing.wait_for(Option::is_some).await.expect("the sender lives in self");
        failed.clone().expect("waited for one")
    }

    /// True when some ready replica has room now.
    pub fn has_capacity(&self) -> bool {
        let cc = self.slots.container_concurrency;
        self.slots.ready.load().iter().any(|r| r.probe_ready() && (cc == 0 || r.in_flight() < cc))
    }
}

/// Every revision's endpoints, by namespace and revision name.
#[derive(Debug, Default)]
pub struct Endpoints {
    revisions: RwLock<HashMap<RevisionKey, Arc<RevisionEndpoints>>>,
}

impl Endpoints {
    /// The endpoints of `revision`.
    pub fn get(&self, revision: &RevisionKey) -> Option<Arc<RevisionEndpoints>> {
        self.revisions.read().expect("endpoints lock").get(revision).cloned()
    }

    /// The endpoints of `revision`, created with `container_concurrency` when it has none yet.
    pub fn get_or_insert(&self, revision: &RevisionKey, container_concurrency: usize) -> Arc<RevisionEndpoints> {
        if let Some(found) = self.get(revision) {
            return found;
        }
        let mut revisions = self.revisions.write().expect("endpoints lock");
        revisions
            .entry(revision.clone())
            .or_insert_with(|| RevisionEndpoints::new(revision.clone(), container_concurrency))
            .clone()
    }

    /// Adds (or replaces) a revision.
    pub fn insert(&self, endpoints: Arc<RevisionEndpoints>) {
        self.revisions.write().expect("endpoints lock").insert(endpoints.key.clone(), endpoints);
    }

    /// Forgets a revision.
    pub fn remove(&self, revision: &RevisionKey) -> Option<Arc<RevisionEndpoints>> {
        self.revisions.write().expect("endpoints lock").remove(revision)
    }

    /// The revisions registered now.
    pub fn keys(&self) -> Vec<RevisionKey> {
        self.revisions.read().expect("endpoints lock").keys().cloned().collect()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn addr(port: u16) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], port))
    }

    fn key(name: &str) -> RevisionKey {
        RevisionKey::new("default", name)
    }

    #[test]
    fn slots_go_to_the_least_loaded_replica_within_concurrency() {
        let rev = RevisionEndpoints::new(key("r"), 2);
        assert!(rev.try_acquire().is_none());
        rev.set_ready(vec![rev.replica(addr(1)), rev.replica(addr(2))]);
        let a = rev.try_acquire().unwrap();
        let b = rev.try_acquire().unwrap();
        assert_ne!(a.replica().addr, b.replica().addr, "spread before stacking");
        let c = rev.try_acquire().unwrap();
        let d = rev.try_acquire().unwrap();
        assert!(rev.try_acquire().is_none(), "2 replicas x concurrency 2");
        assert!(!rev.has_capacity());
        drop(c);
        assert!(rev.has_capacity());
        assert!(rev.try_acquire().is_some());
        drop((a, b, d));
    }

    #[tokio::test]
    async fn acquire_waits_for_a_ready_replica_or_a_release() {
        let rev = RevisionEndpoints::new(key("r"), 1);
        let waiter = tokio::spawn({
            let rev = rev.clone();
            async move { rev.acquire().await.replica().addr }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        rev.set_ready(vec![rev.replica(addr(7))]);
        assert_eq!(waiter.await.unwrap(), addr(7));

        let held = rev.try_acquire().unwrap();
        let second = tokio::spawn({
            let rev = rev.clone();
            async move { rev.acquire().await.replica().addr }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!second.is_finished(), "the only slot is held");
        drop(held);
        assert_eq!(second.await.unwrap(), addr(7));
    }

    /// Three requests wait at zero; one replica with one slot comes up. Each freed slot goes to the
    /// longest waiter, and a newcomer's `try_acquire` does not jump the queue.
    #[tokio::test]
    async fn waiters_are_served_first_come_first_served() {
        let rev = RevisionEndpoints::new(key("r"), 1);
        let (done, mut order) = tokio::sync::mpsc::unbounded_channel();
        for i in 0..3 {
            let (rev, done) = (rev.clone(), done.clone());
            tokio::spawn(async move {
                let slot = rev.acquire().await;
                done.send(i).unwrap();
                tokio::time::sleep(Duration::from_millis(10)).await;
                drop(slot);
            });
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        assert_eq!(rev.waiting(), 3);
        rev.set_ready(vec![rev.replica(addr(1))]);
        assert!(rev.try_acquire().is_none(), "no jumping the queue");
        let served: Vec<i32> =
            vec![order.recv().await.unwrap(), order.recv().await.unwrap(), order.recv().await.unwrap()];
        assert_eq!(served, [0, 1, 2]);
        assert_eq!(rev.waiting(), 0);
    }

    /// A waiter that gives up (its request timed out or its client left) is skipped.
    #[tokio::test]
    async fn a_waiter_that_gave_up_is_skipped() {
        let rev = RevisionEndpoints::new(key("r"), 1);
        let gone = tokio::time::timeout(Duration::from_millis(10), rev.acquire()).await;
        assert!(gone.is_err());
        let next = tokio::spawn({
            let rev = rev.clone();
            async move { rev.acquire().await.replica().addr }
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        rev.set_ready(vec![rev.replica(addr(2))]);
        assert_eq!(next.await.unwrap(), addr(2));
        assert_eq!(rev.ready()[0].in_flight(), 0, "the skipped waiter holds nothing");
    }

    /// A replica failing its readiness probe gets no new slot, with or without room; back in
    /// service, it serves the requests that waited meanwhile first.
    #[tokio::test]
    async fn a_replica_out_of_service_gets_no_slot_until_it_is_back() {
        let rev = RevisionEndpoints::new(key("r"), 1);
        rev.set_ready(vec![rev.replica(addr(1)), rev.replica(addr(2))]);
        let frozen = rev.ready()[0].clone();
        let held = rev.try_acquire().unwrap();
        assert_eq!(held.replica().addr, addr(1));
        frozen.set_probe_ready(false);
        drop(held);
        let other = rev.try_acquire().unwrap();
        assert_eq!(other.replica().addr, addr(2), "the frozen replica has room but is out of service");
        assert!(rev.try_acquire().is_none() && !rev.has_capacity());
        let waiter = tokio::spawn({
            let rev = rev.clone();
            async move { rev.acquire().await.replica().addr }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished());
        frozen.set_probe_ready(true);
        assert_eq!(waiter.await.unwrap(), addr(1), "back in service: the waiter gets its slot");
        drop(other);
    }

    #[test]
    fn the_registry_finds_revisions_by_namespace_and_name() {
        let endpoints = Endpoints::default();
        endpoints.insert(RevisionEndpoints::new(RevisionKey::new("a", "r"), 0));
        let other = endpoints.get_or_insert(&RevisionKey::new("b", "r"), 3);
        assert_eq!(other.container_concurrency(), 3);
        assert_eq!(endpoints.get(&RevisionKey::new("a", "r")).unwrap().container_concurrency(), 0);
        assert!(Arc::ptr_eq(&endpoints.get_or_insert(&RevisionKey::new("b", "r"), 9), &other));
        assert!(endpoints.remove(&RevisionKey::new("a", "r")).is_some());
        assert!(endpoints.get(&RevisionKey::new("a", "r")).is_none());
        assert_eq!(endpoints.keys(), [RevisionKey::new("b", "r")]);
    }

    #[test]
    fn address_updates_keep_the_in_flight_count_of_replicas_that_stay() {
        let rev = RevisionEndpoints::new(key("r"), 0);
        assert!(rev.set_addresses([addr(1), addr(2)]));
        let held = rev.try_acquire().unwrap();
        let busy = held.replica().addr;
        let other = if busy == addr(1) { addr(2) } else { addr(1) };
        assert!(!rev.set_addresses([addr(2), addr(1), addr(1)]), "same set, another order: no change");
        assert!(rev.set_addresses([busy, addr(3)]));
        let ready = rev.ready();
        assert_eq!(ready.len(), 2);
        let kept = ready.iter().find(|r| r.addr == busy).unwrap();
        assert!(Arc::ptr_eq(kept, held.replica()), "the same record");
        assert_eq!(kept.in_flight(), 1);
        assert!(ready.iter().all(|r| r.addr != other));
        drop(held);
        assert_eq!(kept.in_flight(), 0);
        assert!(rev.set_addresses([]));
        assert!(rev.ready().is_empty());
    }
}
