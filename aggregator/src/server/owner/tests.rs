//! The owner on an injected clock, with writes done inline on the task: group commit,
//! acknowledgements held while the store fails, housekeeping under a steady stream of
//! reports, and "acknowledged means visible".

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicUsize, Ordering};

use zonemesh_domain::NodeState;
use zonemesh_engine::testing::{hello, name, sample};
use zonemesh_engine::{EngineConfig, NodeId};

use std::time::Duration;

use super::*;
use crate::store::{Batch, Contents, MemStore};

/// A clock the test moves.
#[derive(Debug, Default)]
struct ManualClock(AtomicI64);

impl ManualClock {
    fn at(ms: i64) -> Arc<Self> {
        Arc::new(Self(AtomicI64::new(ms)))
    }
    fn advance(&self, ms: i64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now(&self) -> UnixMs {
        UnixMs(self.0.load(Ordering::SeqCst))
    }
}

/// A store in memory that counts its writes, fails them while `failing` is set and holds
/// them (as a hung disk does) while `hanging` is set.
#[derive(Debug, Default)]
struct Flaky {
    inner: MemStore,
    failing: Arc<AtomicBool>,
    hanging: Arc<AtomicBool>,
    commits: Arc<AtomicUsize>,
    reports_written: Arc<Mutex<Vec<usize>>>,
}

impl Store for Flaky {
    fn load(&self) -> Result<Contents, Error> {
        self.inner.load()
    }
    fn commit(&mut self, batch: &Batch) -> Result<(), Error> {
        for _ in 0..3_000 {
            if !self.hanging.load(Ordering::SeqCst) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        if self.failing.load(Ordering::SeqCst) {
            return Err(Error::Store {
                path: "memory".into(),
                action: "write",
                source: std::io::Error::other("the disk is full"),
            });
        }
        self.commits.fetch_add(1, Ordering::SeqCst);
        self.reports_written.lock().unwrap().push(batch.rows.len());
        self.inner.commit(batch)
    }
    fn size_bytes(&self) -> u64 {
        self.inner.size_bytes()
    }
    fn replace_all(&mut self, records: &[crate::store::Record]) -> Result<(), Error> {
        self.inner.replace_all(records)
    }
}

struct Harness {
    owner: Owner,
    clock: Arc<ManualClock>,
    failing: Arc<AtomicBool>,
    hanging: Arc<AtomicBool>,
    commits: Arc<AtomicUsize>,
    metrics: Arc<Metrics>,
}

fn harness() -> Harness {
    harness_with(|_| {})
}

fn harness_with(adjust: impl FnOnce(&mut OwnerConfig)) -> Harness {
    let clock = ManualClock::at(1_000_000);
    let store = Flaky::default();
    let (failing, hanging, commits) = (
        store.failing.clone(),
        store.hanging.clone(),
        store.commits.clone(),
    );
    let metrics = Arc::new(Metrics::default());
    let mut config = OwnerConfig {
        tick: Duration::from_millis(100),
        inline_writes: true,
        // Every fit on the blocking pool, as on a large cluster.
        model_on_owner_paths: 0,
        query_threads: 1,
        clock: clock.clone(),
        ..OwnerConfig::default()
    };
    adjust(&mut config);
    let (owner, _stopped) = spawn(
        Topology::new(EngineConfig::default()),
        Box::new(store),
        None,
        metrics.clone(),
        StoreHealth::default(),
        config,
        None,
    )
    .unwrap();
    Harness {
        owner,
        clock,
        failing,
        hanging,
        commits,
        metrics,
    }
}

/// An agent's session: its node and its outbound channel's receiving end.
struct Agent {
    node: NodeId,
    session: u64,
    inbox: mpsc::Receiver<Outbound>,
    name: &'static str,
}

async fn connect(h: &Harness, node: &'static str, zone: &str) -> Agent {
    let (outbound, inbox) = mpsc::channel(1024);
    let (reply, replied) = oneshot::channel();
    h.owner
        .send(Command::Hello {
            hello: hello(node, zone),
            outbound,
            reply,
            logged: None,
        })
        .await
        .unwrap();
    let (id, session) = replied.await.unwrap().unwrap();
    Agent {
        node: id,
        session,
        inbox,
        name: node,
    }
}

async fn report(h: &Harness, agent: &Agent, sequence: u64, to: &str, rtt_us: f64) {
    let mut s = sample(agent.name, to, rtt_us, 0, None);
    let now = h.clock.now();
    s.window_start = UnixMs(now.0 - 10_000);
    s.window_end = now;
    let permit = h
        .owner
        .budget()
        .try_acquire_many_owned(budget_permits(1))
        .ok();
    h.owner
        .send(Command::Report {
            node: agent.node,
            session: agent.session,
            report: Report {
                sequence,
                paths: vec![s],
            },
            permit,
        })
        .await
        .unwrap();
}

/// The highest sequence acknowledged among the messages waiting, within `limit`.
async fn acked(agent: &mut Agent, limit: Duration) -> Option<u64> {
    let deadline = tokio::time::Instant::now() + limit;
    let mut highest = None;
    loop {
        let next = tokio::time::timeout_at(deadline, agent.inbox.recv()).await;
        match next {
            Ok(Some(Outbound::Ack { sequence })) => {
                highest = Some(sequence);
                return highest;
            }
            Ok(Some(_)) => continue,
            _ => return highest,
        }
    }
}

#[tokio::test]
async fn a_report_acknowledged_is_visible_to_queries_and_writes_are_grouped() {
    let h = harness();
    let mut a = connect(&h, "a", "z1").await;
    let _b = connect(&h, "b", "z1").await;
    assert_eq!(
        acked(&mut a, Duration::from_secs(5)).await,
        Some(0),
        "the hello's ack"
    );
    for seq in 1..=50 {
        report(&h, &a, seq, "b", 100.0 + seq as f64).await;
    }
    // Wait for the last report's acknowledgement; then a query sees it, with no wait.
    let mut last = 0;
    while last < 50 {
        last = acked(&mut a, Duration::from_secs(5))
            .await
            .expect("acks come");
    }
    let (src, dst) = (a.node, h.owner.reader().snapshot().id(&name("b")).unwrap());
    let seen = h
        .owner
        .query(move |t, _| t.path(src, dst).map(|p| p.sent_total))
        .await
        .unwrap();
    assert_eq!(
        seen,
        Some(50 * 100),
        "every acknowledged report is in the snapshot"
    );
    assert_eq!(
        h.owner.budget().available_permits(),
        INGEST_BUDGET_PATHS,
        "all given back"
    );
    let commits = h.commits.load(Ordering::SeqCst);
    assert!(
        commits < 50,
        "50 reports in {commits} writes: acknowledgements wait for a group commit"
    );
}

#[tokio::test]
async fn acknowledgements_wait_while_the_store_fails_and_come_when_it_recovers() {
    let h = harness();
    let mut a = connect(&h, "a", "z1").await;
    let _b = connect(&h, "b", "z1").await;
    assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
    h.failing.store(true, Ordering::SeqCst);
    report(&h, &a, 1, "b", 100.0).await;
    report(&h, &a, 2, "b", 100.0).await;
    assert_eq!(
        acked(&mut a, Duration::from_millis(1_500)).await,
        None,
        "nothing acknowledged while writes fail"
    );
    assert!(h.metrics.store_errors.get() >= 1);
    // Applied (and visible) all the same: only the acknowledgement waits for durability.
    let visible = h.owner.query(|t, _| t.path_count()).await.unwrap();
    assert_eq!(visible, 1);
    assert_eq!(
        h.owner.budget().available_permits(),
        INGEST_BUDGET_PATHS - 2,
        "held until acknowledged"
    );
    h.failing.store(false, Ordering::SeqCst);
    let mut last = 0;
    while last < 2 {
        last = acked(&mut a, Duration::from_secs(5))
            .await
            .expect("acknowledged once the write succeeds (retried every second)");
    }
    assert_eq!(h.owner.budget().available_permits(), INGEST_BUDGET_PATHS);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_that_hangs_makes_the_store_unhealthy_until_it_finishes() {
    let h = harness_with(|c| {
        c.inline_writes = false;
        c.store_stall = Duration::from_millis(300);
    });
    let mut a = connect(&h, "a", "z1").await;
    let _b = connect(&h, "b", "z1").await;
    assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
    h.hanging.store(true, Ordering::SeqCst);
    report(&h, &a, 1, "b", 100.0).await;
    // Neither acknowledged nor healthy while the write hangs.
    assert_eq!(acked(&mut a, Duration::from_millis(1_000)).await, None);
    let failure = h
        .owner
        .store_health()
        .problem()
        .expect("a stalled write is a store failure");
    assert!(failure.contains("has not finished in 0.3 s"), "{failure}");
    // The write returns: acknowledged, healthy again.
    h.hanging.store(false, Ordering::SeqCst);
    assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(1));
    assert_eq!(h.owner.store_health().problem(), None);
}

#[tokio::test]
async fn the_model_is_fitted_away_from_the_owner_and_published() {
    let h = harness();
    let mut a = connect(&h, "a", "z1").await;
    let _b = connect(&h, "b", "z1").await;
    assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
    report(&h, &a, 1, "b", 100.0).await;
    assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(1));
    h.clock.advance(1_000);
    let after = h.clock.now();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let snapshot = h.owner.reader().snapshot();
        let model = snapshot.model();
        if model.fitted_at().is_some_and(|at| at.0 >= after.0)
            && model.node(a.node).is_some_and(|t| t.paths == 1)
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no model fitted at {after:?} or later was published: {:?}",
            model.fitted_at()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn housekeeping_runs_under_a_steady_stream_of_reports() {
    let h = harness();
    let mut a = connect(&h, "a", "z1").await;
    let gone = connect(&h, "gone", "z1").await;
    let _b = connect(&h, "b", "z1").await;
    assert_eq!(acked(&mut a, Duration::from_secs(5)).await, Some(0));
    h.owner
        .send(Command::Goodbye {
            node: gone.node,
            session: gone.session,
        })
        .await
        .unwrap();
    // "gone" is DOWN once 30 s pass without its agent; the sweep must notice while a
    // reports without a pause.
    let gone_id = gone.node;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    // (A snapshot published before "gone" said hello does not hold it yet.)
    let connected =
        |s: &Snapshot| s.nodes().len() <= gone_id.0 as usize || s.node(gone_id).connected;
    while connected(&h.owner.reader().snapshot()) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the goodbye is applied"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    h.clock.advance(31_000);
    let feeder = {
        let (owner, clock) = (h.owner.clone(), h.clock.clone());
        let a = Agent {
            node: a.node,
            session: a.session,
            inbox: mpsc::channel(1).1,
            name: "a",
        };
        tokio::spawn(async move {
            let h = Harness {
                owner,
                clock,
                failing: Arc::default(),
                hanging: Arc::default(),
                commits: Arc::default(),
                metrics: Arc::default(),
            };
            for seq in 1..=100_000 {
                report(&h, &a, seq, "b", 100.0).await;
            }
        })
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    let version_before = h.owner.reader().snapshot().membership_version();
    loop {
        let snapshot = h.owner.reader().snapshot();
        let now = h.clock.now();
        if snapshot.state(gone_id, now).0 == NodeState::Down
            && snapshot.membership_version() > version_before
        {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no sweep under a stream of reports: membership {} (before {version_before}), {:?}, publishes {}",
            snapshot.membership_version(),
            snapshot.state(gone_id, now),
            h.metrics.publishes.get()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!feeder.is_finished(), "the reports were still coming");
    feeder.abort();
}
