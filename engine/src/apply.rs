//! Applying agents' reports: the admission limits on nodes and paths, replays applied once,
//! windows measured under zonemesh's own throughput tests kept out of the figures, and the
//! running sums kept in step with every path that changes.

use std::collections::HashSet;
use std::sync::Arc;

use zonemesh_domain::{FieldError, Report, UnixMs};

use crate::sums::Contribution;
use crate::{Error, LimitHit, NodeId, Snapshot, Sums, Topology};

/// Outcome of [`Topology::apply_report`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// The report was new and is now part of the matrix.
    Applied,
    /// The report's sequence was already applied: nothing changed.
    Duplicate,
}

/// A latency window that ends within this long after a throughput test of one of its nodes is
/// still taken as measured under that load (queues take a moment to drain).
pub const LOAD_MARGIN_MS: i64 = 500;

impl Topology {
    /// Whether the report of `node` fits under the limits (see [`Snapshot::admit_report`]).
    pub fn admit_report(&self, node: NodeId, report: &Report) -> Result<(), Error> {
        self.snap.admit_report(node, report)
    }

    /// Applies a checked report from the agent of `node`: every path sample is folded in, unless
    /// the sequence was applied before (a replay), in which case nothing changes.
    ///
    /// The report must come from `Report::only_from` for this node (every `src` is the node).
    pub fn apply_report(
        &mut self,
        node: NodeId,
        report: &Report,
        now: UnixMs,
    ) -> Result<Applied, Error> {
        let info = self.snap.node(node);
        if let Some(bad) = report.paths.iter().position(|p| p.src != info.name) {
            return Err(Error::InvalidArgument(FieldError::new(
                format!("paths[{bad}].src"),
                format!(
                    "{} is not the reporting node {}",
                    report.paths[bad].src, info.name
                ),
            )));
        }
        if report.sequence <= info.applied_seq {
            return Ok(Applied::Duplicate);
        }
        let dsts: Vec<NodeId> = report
            .paths
            .iter()
            .map(|p| self.intern_node(&p.dst))
            .collect();
        let config = self.snap.config.path;
        let mut newest = self.snap.node(node).newest_sample;
        // The last exchanges' timeout the report carries, for the node (`NodeInfo`).
        let mut timeout = None;
        let mut changed: Vec<(NodeId, Contribution, Contribution)> = Vec::new();
        // One row, changed in place (copied first if a snapshot shares it); new paths merged in
        // at once.
        let row = Arc::make_mut(self.snap.rows.get_mut(node.0 as usize));
        let mut new: Vec<NodeId> = dsts
            .iter()
            .copied()
            .filter(|d| row.find(*d).is_err())
            .collect();
        new.sort_unstable();
        new.dedup();
        row.add(&new);
        self.snap.path_count += new.len();
        for (sample, &dst) in report.paths.iter().zip(&dsts) {
            // The window's span by this aggregator's clock: it ended when it arrived.
            let span = sample
                .window_end
                .0
                .saturating_sub(sample.window_start.0)
                .max(0);
            let from = UnixMs(now.0 - span);
            let under_load = loaded_between(&self.loaded, node, from, now)
                || loaded_between(&self.loaded, dst, from, now);
            if under_load && sample.sent > 0 {
                self.windows_under_load += 1;
            }
            if let Some(t) = sample.throughput.and_then(|t| t.exchange?.timeout) {
                timeout = Some(t);
            }
            let i = row.find(dst).expect("added above");
            let entry = &mut row.entries[i];
            entry.state.apply(sample, now, &config, under_load);
            if let Some(t) = entry.state.current_at(&config) {
                newest = Some(newest.map_or(t, |n| n.max(t)));
            }
            let new = Contribution::of(&entry.state, now, &config);
            let old = std::mem::replace(&mut entry.contribution, new);
            if old != new {
                changed.push((dst, old, new));
            }
        }
        for (dst, old, new) in changed {
            self.snap.account(node, dst, &old, -1.0);
            self.snap.account(node, dst, &new, 1.0);
        }
        let info = self.snap.nodes.get_mut(node.0 as usize);
        if let Some(t) = timeout {
            info.exchange_timeout_us = Some(t.get() as f32);
        }
        info.applied_seq = report.sequence;
        info.last_seen = Some(now);
        info.newest_sample = newest;
        self.dirty_nodes.insert(node);
        self.dirty_sources.insert(node);
        Ok(Applied::Applied)
    }

    /// Notes that `src` and `dst` take part in a throughput test from `from` to `until`. Their
    /// paths' latency windows that overlap it are measured under that load (bulk traffic fills
    /// queues and delays probes) and are left out of the RTT and loss figures, counted only in
    /// the lifetime totals, as perfSONAR keeps latency tests apart from throughput tests.
    pub fn note_throughput_test(&mut self, src: NodeId, dst: NodeId, from: UnixMs, until: UnixMs) {
        let keep_after = from.0 - 10 * self.snap.config.path.window_ms.max(1);
        for n in [src, dst] {
            let intervals = &mut self.loaded[n.0 as usize];
            intervals.retain(|(_, u)| u.0 >= keep_after);
            intervals.push((from, until));
        }
    }

    /// The throughput tests each node takes part in, as [`Topology::note_throughput_test`]
    /// noted them (recent ones only): what a replica's checkpoint keeps.
    pub fn throughput_tests(&self) -> impl Iterator<Item = (NodeId, &[(UnixMs, UnixMs)])> {
        self.loaded
            .iter()
            .enumerate()
            .filter(|(_, t)| !t.is_empty())
            .map(|(i, t)| (NodeId(i as u32), t.as_slice()))
    }

    /// Puts back the throughput tests of `node` a checkpoint kept.
    pub fn restore_throughput_tests(&mut self, node: NodeId, tests: &[(UnixMs, UnixMs)]) {
        if let Some(t) = self.loaded.get_mut(node.0 as usize) {
            t.clear();
            t.extend_from_slice(tests);
        }
    }

    /// Latency windows left out because a throughput test loaded their path.
    pub fn windows_under_load(&self) -> u64 {
        self.windows_under_load
    }
}

/// Whether `node` was in a throughput test between `from` and `to` (or up to
/// [`LOAD_MARGIN_MS`] before `from`).
fn loaded_between(
    loaded: &[Vec<(UnixMs, UnixMs)>],
    node: NodeId,
    from: UnixMs,
    to: UnixMs,
) -> bool {
    loaded[node.0 as usize]
        .iter()
        .any(|(f, u)| f.0 <= to.0 && u.0 + LOAD_MARGIN_MS >= from.0)
}

impl Snapshot {
    /// Adds (`sign` 1) or takes out (-1) what one path contributes to the sums.
    pub(crate) fn account(&mut self, src: NodeId, dst: NodeId, c: &Contribution, sign: f64) {
        let (zs, zd) = (self.zone_of(src), self.zone_of(dst));
        if zs == zd {
            self.node_sums.get_mut(src.0 as usize).add(c, sign);
            self.node_sums.get_mut(dst.0 as usize).add(c, sign);
            // A path to a faulty zone-mate counts against the mate (see `own`).
            if src != dst {
                if self.model.has_own_fault(dst) {
                    self.left_sums.get_mut(src.0 as usize).add(c, sign);
                }
                if self.model.has_own_fault(src) {
                    self.left_sums.get_mut(dst.0 as usize).add(c, sign);
                }
            }
        }
        let row = Arc::make_mut(self.link_sums.get_mut(zs.0 as usize));
        if row.len() <= zd.0 as usize {
            row.resize(zd.0 as usize + 1, Sums::default());
        }
        row[zd.0 as usize].add(c, sign);
    }
}

impl Snapshot {
    /// Whether the report of `node` fits under [`EngineConfig`](crate::EngineConfig)'s
    /// `max_nodes` (its destinations become nodes) and `max_paths`. Replays always fit.
    pub fn admit_report(&self, node: NodeId, report: &Report) -> Result<(), Error> {
        let snap = self;
        if report.sequence <= snap.node(node).applied_seq {
            return Ok(());
        }
        let row = snap.rows.get(node.0 as usize);
        let mut new_nodes = HashSet::new();
        let mut new_paths = 0usize;
        for sample in &report.paths {
            match snap.id(&sample.dst) {
                Some(dst) => {
                    if row.get(dst).is_none() {
                        new_paths += 1;
                    }
                }
                None => {
                    if new_nodes.insert(&sample.dst) {
                        new_paths += 1;
                    }
                }
            }
        }
        let config = &snap.config;
        if !new_nodes.is_empty() && snap.nodes.len() + new_nodes.len() > config.max_nodes {
            return Err(Error::Limit {
                limit: LimitHit::Nodes,
                message: format!(
                    "report {}: its {} unknown destinations would pass the {} nodes of --max-nodes",
                    report.sequence,
                    new_nodes.len(),
                    config.max_nodes
                ),
            });
        }
        if new_paths > 0 && snap.path_count + new_paths > config.max_paths {
            return Err(Error::Limit {
                limit: LimitHit::Paths,
                message: format!(
                    "report {}: its {new_paths} new paths would pass the {} paths of --max-paths",
                    report.sequence, config.max_paths
                ),
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::*;
    use crate::*;
    use zonemesh_domain::*;

    #[test]
    fn limits_refuse_new_nodes_and_paths_but_never_replays_or_known_ones() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig {
            max_nodes: 3,
            max_paths: 2,
            ..EngineConfig::default()
        });
        let (a, _) = t.register(&hello("a", "z1"), now);
        let report = |sequence, dsts: &[&str]| Report {
            sequence,
            paths: dsts
                .iter()
                .map(|d| sample("a", d, 100.0, 0, None))
                .collect(),
        };
        // b and c fit (3 nodes, 2 paths); so does the same pair again.
        let first = report(1, &["b", "c"]);
        assert!(t.admit_report(a, &first).is_ok());
        t.apply_report(a, &first, now).unwrap();
        assert!(t.admit_report(a, &report(2, &["b", "c"])).is_ok());
        // A fourth node does not, as a destination or as an agent.
        let e = t.admit_report(a, &report(2, &["d"])).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Limit {
                    limit: LimitHit::Nodes,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("--max-nodes"), "{e}");
        // b and c are only destinations: a real agent still gets in, up to 3 registered.
        assert!(t.admit_hello(&hello("d", "z1")).is_ok());
        t.register(&hello("b", "z1"), now);
        t.register(&hello("c", "z1"), now);
        let e = t.admit_hello(&hello("d", "z1")).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Limit {
                    limit: LimitHit::Nodes,
                    ..
                }
            ),
            "{e}"
        );
        // At --max-nodes (a, b, c), a report to known nodes adds none and fits.
        assert!(t.admit_report(a, &report(2, &["b", "c"])).is_ok());
        // A known node says hello again; a replay is always admitted.
        assert!(t.admit_hello(&hello("b", "z1")).is_ok());
        assert!(t.admit_report(a, &report(1, &["d", "e"])).is_ok());
        // b's path to a would be a third path.
        let b = t.id(&name("b")).unwrap();
        let back = Report {
            sequence: 1,
            paths: vec![sample("b", "a", 100.0, 0, None)],
        };
        let e = t.admit_report(b, &back).unwrap_err();
        assert!(
            matches!(
                e,
                Error::Limit {
                    limit: LimitHit::Paths,
                    ..
                }
            ),
            "{e}"
        );
        assert!(e.to_string().contains("--max-paths"), "{e}");
        assert_eq!(t.view().path_count(), 2);
    }

    #[test]
    fn replays_are_applied_once() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, seq) = t.register(&hello("a", "z1"), now);
        assert_eq!(seq, 0);
        t.register(&hello("b", "z1"), now);
        let report = Report {
            sequence: 1,
            paths: vec![sample("a", "b", 100.0, 0, None)],
        };
        assert_eq!(t.apply_report(a, &report, now).unwrap(), Applied::Applied);
        assert_eq!(t.apply_report(a, &report, now).unwrap(), Applied::Duplicate);
        let b = t.id(&name("b")).unwrap();
        assert_eq!(t.view().path(a, b).unwrap().sent_total, 100);
        assert_eq!(t.register(&hello("a", "z1"), now).1, 1);
    }

    #[test]
    fn a_report_about_another_nodes_path_changes_nothing() {
        let now = UnixMs(1_000_000);
        let mut t = Topology::new(EngineConfig::default());
        let (a, _) = t.register(&hello("a", "z1"), now);
        let report = Report {
            sequence: 1,
            paths: vec![
                sample("a", "b", 100.0, 0, None),
                sample("c", "b", 1.0, 0, None),
            ],
        };
        let err = t.apply_report(a, &report, now).unwrap_err();
        assert!(err.to_string().contains("paths[1].src"), "{err}");
        assert_eq!(t.view().path_count(), 0);
        assert_eq!(t.node(a).applied_seq, 0);
    }

    #[test]
    fn figures_held_back_by_throughput_tests_stay_current_for_a_bounded_time() {
        // All three nodes measured at `now`, then every window arrives during a long test of
        // a and b (so c's windows toward them are held back too).
        let now = UnixMs(1_000_000);
        let mut t = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
        let mut quiet = t.clone();
        let names = ["z0-n0", "z0-n1", "z0-n2"];
        let ids: Vec<NodeId> = names.iter().map(|n| t.id(&name(n)).unwrap()).collect();
        t.note_throughput_test(
            ids[0],
            ids[1],
            UnixMs(now.0 + 1_000),
            UnixMs(now.0 + 300_000),
        );
        let figures_before = t.view().path(ids[2], ids[1]).unwrap().merged;
        let stale_after = t.config().path.stale_after_ms;
        let report_all = |t: &mut Topology, at: UnixMs, seq: u64| {
            for (i, src) in names.iter().enumerate() {
                let paths = names
                    .iter()
                    .filter(|d| *d != src)
                    .map(|dst| sample(src, dst, 5_000.0, 50, None))
                    .collect();
                t.apply_report(
                    ids[i],
                    &Report {
                        sequence: seq,
                        paths,
                    },
                    at,
                )
                .unwrap();
            }
            t.sweep(at);
        };
        let mut at = now;
        for seq in 10.. {
            at = UnixMs(at.0 + 10_000);
            if at.0 > now.0 + 2 * stale_after {
                break;
            }
            report_all(&mut t, at, seq);
        }
        // Past the stale timeout, the nodes are READY with their figures from before the test
        // (the loaded windows' 5 ms and 50 % loss never enter them), and they rank as measured.
        let at = UnixMs(now.0 + 2 * stale_after);
        for &id in &ids {
            assert_eq!(t.view().state(id, at).0, NodeState::Ready);
        }
        assert_eq!(
            t.view().path(ids[2], ids[1]).unwrap().merged,
            figures_before
        );
        assert!(
            !t.view()
                .path(ids[2], ids[1])
                .unwrap()
                .is_stale(at, &t.config().path)
        );
        let ranked = t.view().rank_ids(&RankQuery::default(), at).unwrap();
        assert!(
            ranked
                .iter()
                .all(|r| r.reason.is_empty() && r.figures.loss == Some(0.0)),
            "{ranked:?}"
        );
        // Without the held-back windows the same figures are stale by then.
        quiet.sweep(at);
        assert_eq!(quiet.view().state(ids[0], at).0, NodeState::Stale);
        // The hold is bounded: still under test, the figures go stale HOLD_STALE_AFTERS stale
        // timeouts after they were measured, plus the stale timeout.
        let mut seq = 100;
        let end = now.0 + (path::HOLD_STALE_AFTERS + 1) * stale_after + 10_000;
        let mut at = UnixMs(now.0 + 2 * stale_after);
        while at.0 < end {
            at = UnixMs(at.0 + 10_000);
            seq += 1;
            report_all(&mut t, at, seq);
        }
        for &id in &ids {
            assert_eq!(t.view().state(id, at).0, NodeState::Stale, "held for ever");
        }
        assert!(
            t.view()
                .path(ids[2], ids[1])
                .unwrap()
                .is_stale(at, &t.config().path)
        );
    }

    #[test]
    fn windows_measured_during_a_throughput_test_stay_out_of_the_figures() {
        let now = UnixMs(1_000_000);
        let mut t = mesh(1, 3, |_, _| 100.0, |_, _| 0, now);
        let (a, b, c) = (
            t.id(&name("z0-n0")).unwrap(),
            t.id(&name("z0-n1")).unwrap(),
            t.id(&name("z0-n2")).unwrap(),
        );
        // a sends to b from 1,005,000 to 1,009,000; c probes b in a window that overlaps it,
        // with RTTs the queue of the test inflated.
        t.note_throughput_test(a, b, UnixMs(1_005_000), UnixMs(1_009_000));
        let loaded = |seq, at: i64| Report {
            sequence: seq,
            paths: vec![zonemesh_domain::PathSample {
                window_start: UnixMs(at - 10_000),
                window_end: UnixMs(at),
                ..sample("z0-n2", "z0-n1", 5_000.0, 50, None)
            }],
        };
        let before = t.view().path(c, b).unwrap().clone();
        t.apply_report(c, &loaded(100, 1_012_000), UnixMs(1_012_000))
            .unwrap();
        let after = t.view().path(c, b).unwrap();
        assert_eq!(after.merged, before.merged, "figures unchanged");
        assert_eq!(
            after.sent_total,
            before.sent_total + 100,
            "but every probe counted"
        );
        assert_eq!(t.windows_under_load(), 1);
        // A window that ends long after the test is measured as usual.
        t.apply_report(c, &loaded(101, 1_030_000), UnixMs(1_030_000))
            .unwrap();
        assert!(t.view().path(c, b).unwrap().merged.sent > before.merged.sent);
        assert_eq!(t.windows_under_load(), 1);
        // b's own window over the test is left out too, whichever peer it probed.
        t.apply_report(
            b,
            &Report {
                sequence: 100,
                paths: vec![sample("z0-n1", "z0-n2", 100.0, 0, None)],
            },
            UnixMs(1_012_000),
        )
        .unwrap();
        assert_eq!(t.windows_under_load(), 2, "b itself was in the test");
    }
}
