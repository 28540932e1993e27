//! Housekeeping: sliding windows forward, paths turning stale, nodes turning unreachable, and
//! the exact recomputation of the running sums, in one pass or in steps.

use zonemesh_domain::{NodeState, UnixMs};

use crate::sums::{Contribution, Sums};
use crate::{NodeId, REBUILD_EVERY, Topology};

/// Where a stepwise sweep is, and what it has counted so far.
#[derive(Debug, Clone, Default)]
pub(crate) struct SweepCursor {
    /// The next source node whose outgoing paths are swept.
    next_src: usize,
    /// Which nodes were DOWN when the pass began.
    down_before: Vec<bool>,
    /// Per destination: fresh paths into it, and those with a reply.
    fresh_in: Vec<u32>,
    alive_in: Vec<u32>,
}

impl Topology {
    pub(crate) fn rebuild_sums(&mut self, now: UnixMs) {
        self.sweeps_since_rebuild = 0;
        let config = self.config.path;
        self.node_sums.iter_mut().for_each(|s| *s = Sums::default());
        self.link_sums.clear();
        let keys: Vec<(NodeId, NodeId)> = self.paths.keys().copied().collect();
        for (src, dst) in keys {
            let entry = self.paths.get_mut(&(src, dst)).expect("key from the map");
            let c = Contribution::of(&entry.state, now, &config);
            entry.contribution = c;
            self.account(src, dst, &c, 1.0);
        }
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

    /// The sweep in steps, so that a server can answer queries between them: goes on with the
    /// pass in progress (or begins one) over the outgoing paths of whole source nodes, about
    /// `max_paths` of them, and returns whether the pass is complete. Between steps the figures
    /// are as correct as between two passes of [`sweep`](Self::sweep): a path not yet swept
    /// this pass keeps the state the previous pass left it in.
    pub fn sweep_step(&mut self, now: UnixMs, max_paths: usize) -> bool {
        let n = self.nodes.len();
        let mut cursor = match self.sweep_cursor.take() {
            Some(c) => c,
            None => SweepCursor {
                next_src: 0,
                down_before: (0..n)
                    .map(|i| self.state(NodeId(i as u32), now).0 == NodeState::Down)
                    .collect(),
                fresh_in: vec![0; n],
                alive_in: vec![0; n],
            },
        };
        let config = self.config.path;
        let horizon = now.0 - config.window_ms;
        let mut changed: Vec<((NodeId, NodeId), Contribution, Contribution)> = Vec::new();
        let mut swept = 0usize;
        while cursor.next_src < n && swept < max_paths {
            let src = NodeId(cursor.next_src as u32);
            cursor.next_src += 1;
            for &dst in &self.outgoing[src.0 as usize] {
                swept += 1;
                let Some(entry) = self.paths.get_mut(&(src, dst)) else {
                    continue;
                };
                let state = &mut entry.state;
                let slides = state.windows.len() > config.max_windows
                    || (state.windows.len() > 1 && state.windows[0].at.0 < horizon);
                if slides {
                    state.expire(now, &config);
                }
                let was_fresh = entry.contribution.at.is_some();
                let throughput_aged = entry.contribution.tput.is_some()
                    && state.fresh_throughput(now, &config).is_none();
                if slides || throughput_aged || was_fresh == state.is_stale(now, &config) {
                    let new = Contribution::of(state, now, &config);
                    if new != entry.contribution {
                        changed.push(((src, dst), entry.contribution, new));
                        entry.contribution = new;
                    }
                }
                let d = dst.0 as usize;
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
            self.account(src, dst, &old, -1.0);
            self.account(src, dst, &new, 1.0);
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
            self.unreachable[i] = *fresh > 0 && *alive == 0;
        }
        let changed =
            cursor.down_before.iter().enumerate().any(|(i, before)| {
                *before != (self.state(NodeId(i as u32), now).0 == NodeState::Down)
            });
        if changed {
            self.membership_version += 1;
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
        let s = t.node_sums(a);
        assert_eq!(s.rtt_n, 4);
        assert_eq!(s.rtt_mean(), Some(100.0));
        let (z0, z1) = (t.zone_of(a), t.zone_of(t.id(&name("z1-n0")).unwrap()));
        assert_eq!(t.link_sums(z0, z1).unwrap().rtt_n, 9);
        let mut t = t;
        let later = UnixMs(now.0 + 31_000);
        t.sweep(later);
        assert_eq!(t.node_sums(a).rtt_n, 0, "stale paths leave the sums");
        assert_eq!(t.state(a, later).0, NodeState::Stale);
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
        for (id, info) in whole.nodes() {
            assert_eq!(
                whole.state(id, later),
                stepped.state(id, later),
                "{}",
                info.name
            );
            // The same paths, added up in another order.
            let (a, b) = (whole.node_sums(id), stepped.node_sums(id));
            assert_eq!((a.rtt_n, a.loss_n, a.tput_n), (b.rtt_n, b.loss_n, b.tput_n));
            assert!(
                (a.rtt - b.rtt).abs() <= 1e-6 * a.rtt.abs().max(1.0),
                "{}",
                info.name
            );
            assert!((a.loss - b.loss).abs() <= 1e-9, "{}", info.name);
        }
        let unreachable = whole.id(&name("z0-n1")).unwrap();
        assert_eq!(whole.state(unreachable, later).0, NodeState::Down);
        let zones = |t: &Topology| t.list_zones(later).zones;
        assert_eq!(zones(&whole), zones(&stepped));
        assert_eq!(whole.membership_version(), stepped.membership_version());
    }
}
