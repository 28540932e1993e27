//! Housekeeping: sliding windows forward, paths turning stale, nodes turning unreachable, and
//! the exact recomputation of the running sums, in one pass or in steps.

use std::sync::Arc;

use zonemesh_domain::{NodeState, UnixMs};

use crate::cow::CowVec;
use crate::path::{PathConfig, PathState};
use crate::sums::{Contribution, Sums};
use crate::{NodeId, REBUILD_EVERY, Snapshot, Topology};

/// Where a stepwise sweep is, and what it has counted so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct SweepCursor {
    /// The next source node whose outgoing paths are swept.
    next_src: usize,
    /// Per destination: fresh paths into it, and those with a reply.
    fresh_in: Vec<u32>,
    alive_in: Vec<u32>,
}

/// Whether the sweep has work on a path: a window to slide out, a throughput figure that aged
/// out, or figures that turned stale (or fresh) since they were last counted.
fn needs_sweep(
    state: &PathState,
    counted: &Contribution,
    now: UnixMs,
    config: &PathConfig,
) -> bool {
    let horizon = now.0 - config.window_ms;
    let slides = state.windows.len() > config.max_windows
        || (state.windows.len() > 1 && state.windows.first().is_some_and(|w| w.at.0 < horizon));
    let throughput_aged = counted.tput().is_some() && state.fresh_throughput(now, config).is_none();
    slides || throughput_aged || counted.at().is_some() == state.is_stale(now, config)
}

impl Topology {
    /// Recomputes every sum from the paths, which clears rounding drift. Rows are written only
    /// where a path's remembered contribution was not what it adds now (the sweeps keep them
    /// exact), so that a rebuild does not copy the rows a snapshot shares.
    pub(crate) fn rebuild_sums(&mut self, now: UnixMs) {
        self.sweeps_since_rebuild = 0;
        let config = self.snap.config.path;
        let mut fresh = Snapshot {
            node_sums: (0..self.snap.nodes.len())
                .map(|_| Sums::default())
                .collect(),
            left_sums: (0..self.snap.nodes.len())
                .map(|_| Sums::default())
                .collect(),
            link_sums: (0..self.snap.zones.len())
                .map(|_| Arc::new(Vec::new()))
                .collect::<CowVec<_>>(),
            ..self.snap.clone()
        };
        for src in 0..self.snap.rows.len() {
            let row = self.snap.rows.get(src);
            let stale: Vec<usize> = row
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| Contribution::of(&e.state, now, &config) != e.contribution)
                .map(|(i, _)| i)
                .collect();
            if !stale.is_empty() {
                let row = Arc::make_mut(self.snap.rows.get_mut(src));
                for i in stale {
                    let e = &mut row.entries[i];
                    e.contribution = Contribution::of(&e.state, now, &config);
                }
            }
            for (dst, e) in self.snap.rows.get(src).iter() {
                fresh.account(NodeId(src as u32), dst, &e.contribution, 1.0);
            }
        }
        self.snap.node_sums = fresh.node_sums;
        self.snap.left_sums = fresh.left_sums;
        self.snap.link_sums = fresh.link_sums;
    }

    /// The sums recounted from what every path says it added (its remembered contribution): what
    /// the running sums must equal, up to rounding, whenever they are read.
    #[cfg(test)]
    pub(crate) fn recounted(&self) -> Snapshot {
        let mut fresh = Snapshot {
            node_sums: (0..self.snap.nodes.len())
                .map(|_| Sums::default())
                .collect(),
            left_sums: (0..self.snap.nodes.len())
                .map(|_| Sums::default())
                .collect(),
            link_sums: (0..self.snap.zones.len())
                .map(|_| Arc::new(Vec::new()))
                .collect::<CowVec<_>>(),
            ..self.snap.clone()
        };
        for src in 0..self.snap.rows.len() {
            for (dst, e) in self.snap.rows.get(src).iter() {
                fresh.account(NodeId(src as u32), dst, &e.contribution, 1.0);
            }
        }
        fresh
    }

    /// Housekeeping, about once a second: slides windows, turns paths stale (taking them out of
    /// the sums) and re-evaluates which nodes are unreachable or DOWN, in one pass over the paths
    /// that does real work only for paths whose figures change. Every [`REBUILD_EVERY`] sweeps it
    /// recomputes every sum exactly, which clears rounding drift. Bumps the membership version
    /// when a node changes between up and down.
    ///
    /// One whole pass; a pass that [`sweep_step`](Self::sweep_step) had begun starts over.
    pub fn sweep(&mut self, now: UnixMs) {
        self.sweep_cursor = None;
        while !self.sweep_step(now, usize::MAX) {}
    }

    /// The sweep in steps, so that a server can publish between them: goes on with the pass in
    /// progress (or begins one) over the outgoing paths of whole source nodes, about `max_paths`
    /// of them, and returns whether the pass is complete. Between steps the figures are as
    /// correct as between two passes of [`sweep`](Self::sweep): a path not yet swept this pass
    /// keeps the state the previous pass left it in. Only rows with work are written.
    pub fn sweep_step(&mut self, now: UnixMs, max_paths: usize) -> bool {
        let n = self.snap.nodes.len();
        let mut cursor = match self.sweep_cursor.take() {
            Some(c) => c,
            None => SweepCursor {
                next_src: 0,
                fresh_in: vec![0; n],
                alive_in: vec![0; n],
            },
        };
        let config = self.snap.config.path;
        let mut changed: Vec<((NodeId, NodeId), Contribution, Contribution)> = Vec::new();
        let mut swept = 0usize;
        while cursor.next_src < n && swept < max_paths {
            let src = NodeId(cursor.next_src as u32);
            cursor.next_src += 1;
            let work: Vec<usize> = self
                .snap
                .rows
                .get(src.0 as usize)
                .entries
                .iter()
                .enumerate()
                .filter(|(_, e)| needs_sweep(&e.state, &e.contribution, now, &config))
                .map(|(i, _)| i)
                .collect();
            if !work.is_empty() {
                let row = Arc::make_mut(self.snap.rows.get_mut(src.0 as usize));
                for i in work {
                    let (dst, entry) = (row.dsts[i], &mut row.entries[i]);
                    entry.state.expire(now, &config);
                    let new = Contribution::of(&entry.state, now, &config);
                    if new != entry.contribution {
                        changed.push(((src, dst), entry.contribution, new));
                        entry.contribution = new;
                    }
                }
            }
            for (dst, entry) in self.snap.rows.get(src.0 as usize).iter() {
                swept += 1;
                let d = dst.0 as usize;
                let state = &entry.state;
                if d < cursor.fresh_in.len()
                    && !state.is_stale(now, &config)
                    && state.merged.sent > 0
                {
                    cursor.fresh_in[d] += 1;
                    cursor.alive_in[d] += u32::from(state.merged.received > 0);
                }
            }
        }
        for ((src, dst), old, new) in changed {
            self.snap.account(src, dst, &old, -1.0);
            self.snap.account(src, dst, &new, 1.0);
        }
        if cursor.next_src < n {
            self.sweep_cursor = Some(cursor);
            return false;
        }
        self.sweeps_since_rebuild += 1;
        if self.sweeps_since_rebuild >= REBUILD_EVERY {
            self.rebuild_sums(now);
        }
        // Nodes that registered during the pass are judged by the next one.
        for (i, (fresh, alive)) in cursor.fresh_in.iter().zip(&cursor.alive_in).enumerate() {
            let unreachable = *fresh > 0 && *alive == 0;
            if self.snap.nodes.get(i).unreachable != unreachable {
                self.snap.nodes.get_mut(i).unreachable = unreachable;
            }
        }
        // Up and down as this pass leaves them, beside what the previous pass left: a node that
        // turned DOWN between passes (its agent's time ran out) changes the plan as one that
        // turned DOWN during a pass does.
        let down: Vec<bool> = (0..self.snap.nodes.len())
            .map(|i| self.snap.state(NodeId(i as u32), now).0 == NodeState::Down)
            .collect();
        let changed =
            down.len() != self.down_after_last_pass.len() || down != self.down_after_last_pass;
        if changed {
            self.snap.membership_version += 1;
        }
        self.down_after_last_pass = down;
        // Refit when the last fit is older than its cost allows (see `MODEL_PATHS_PER_MS`), and
        // at least every `model_every_ms`, unless the caller fits elsewhere.
        if !self.models_elsewhere && self.model_due(now) {
            self.fit_model(now);
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::testing::*;
    use crate::*;
    use zonemesh_domain::*;

    #[test]
    fn sums_follow_updates_and_staleness() {
        let now = UnixMs(1_000_000);
        let t = mesh(2, 3, |_, _| 100.0, |_, _| 0, now);
        let a = t.id(&name("z0-n0")).unwrap();
        // Two zone peers, both directions.
        let s = t.view().node_sums(a);
        assert_eq!(s.rtt_n, 4);
        assert_eq!(s.rtt_mean(), Some(100.0));
        let (z0, z1) = (
            t.view().zone_of(a),
            t.view().zone_of(t.id(&name("z1-n0")).unwrap()),
        );
        assert_eq!(t.view().link_sums(z0, z1).unwrap().rtt_n, 9);
        let mut t = t;
        let later = UnixMs(now.0 + 31_000);
        t.sweep(later);
        assert_eq!(t.view().node_sums(a).rtt_n, 0, "stale paths leave the sums");
        assert_eq!(t.view().state(a, later).0, NodeState::Stale);
    }

    #[test]
    fn a_sweep_in_small_steps_ends_where_one_pass_ends() {
        let now = UnixMs(1_000_000);
        // Every path into z0-n1 loses everything: it turns unreachable. Then half the nodes go
        // quiet long enough for their paths to turn stale.
        let mut whole = mesh(
            3,
            4,
            |s, d| 100.0 + (s.len() + d.len()) as f64,
            |_, d| if d == "z0-n1" { 100 } else { 0 },
            now,
        );
        let later = UnixMs(now.0 + 31_000);
        for n in ["z1-n0", "z1-n1", "z2-n3"] {
            let id = whole.id(&name(n)).unwrap();
            let paths = whole
                .view()
                .nodes()
                .filter(|(other, _)| *other != id)
                .map(|(_, info)| {
                    let dst = info.name.as_str();
                    sample(n, dst, 120.0, if dst == "z0-n1" { 100 } else { 0 }, None)
                })
                .collect();
            let seq = whole.node(id).applied_seq + 1;
            whole
                .apply_report(
                    id,
                    &Report {
                        sequence: seq,
                        paths,
                    },
                    later,
                )
                .unwrap();
        }
        let mut stepped = whole.clone();
        whole.sweep(later);
        let mut steps = 0;
        while !stepped.sweep_step(later, 5) {
            steps += 1;
            assert!(steps < 1_000, "the pass never ends");
        }
        assert!(
            steps >= 10,
            "{steps} steps for 132 paths of at most 5 (whole sources)"
        );
        for (id, info) in whole.view().nodes() {
            assert_eq!(
                whole.view().state(id, later),
                stepped.view().state(id, later),
                "{}",
                info.name
            );
            // The same paths, added up in another order.
            let (a, b) = (whole.view().node_sums(id), stepped.view().node_sums(id));
            assert_eq!((a.rtt_n, a.loss_n, a.tput_n), (b.rtt_n, b.loss_n, b.tput_n));
            assert!(
                (a.rtt - b.rtt).abs() <= 1e-6 * a.rtt.abs().max(1.0),
                "{}",
                info.name
            );
            assert!((a.loss - b.loss).abs() <= 1e-9, "{}", info.name);
        }
        let unreachable = whole.id(&name("z0-n1")).unwrap();
        assert_eq!(
            whole.view().state(unreachable, later).0,
            NodeState::Unreachable
        );
        let zones = |t: &Topology| t.view().zone_links(later).zones;
        assert_eq!(zones(&whole), zones(&stepped));
        assert_eq!(
            whole.view().membership_version(),
            stepped.view().membership_version()
        );
    }
}
