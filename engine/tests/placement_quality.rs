//! `Place`'s greedy choice stays close to the exact optimum on small random clusters. The bounds
//! are the figures measured when this test was written (docs/BENCHMARKS.md, `--bench placement`)
//! with a margin: a change to placement that makes it worse fails here.

#[path = "support/quality.rs"]
#[allow(dead_code)]
mod quality;

#[test]
fn the_greedy_placement_stays_near_the_exact_optimum() {
    let s = quality::summary(0..400);
    println!("{s:?}");
    assert!(
        s.optimal >= OPTIMAL_AT_LEAST,
        "optimal in {:.3} of instances",
        s.optimal
    );
    assert!(
        s.mean_cost <= MEAN_COST_GAP_AT_MOST,
        "mean cost gap {:.4}",
        s.mean_cost
    );
    assert!(
        s.max_cost <= MAX_COST_GAP_AT_MOST,
        "max cost gap {:.4}",
        s.max_cost
    );
}

#[test]
fn the_exact_placement_beats_or_ties_the_greedy_one_and_takes_one_slot_per_node() {
    // `gap` asserts that the exhaustive search is never worse.
    for seed in 1_000..1_050 {
        quality::gap(&quality::instance(seed));
    }
    let mut i = quality::instance(3);
    i.query.candidates = vec![(
        zonemesh_domain::NodeName::parse("node", "z0-n0").unwrap(),
        2,
    )];
    let err = i
        .topology
        .view()
        .place_exact_ids(&i.query, i.now)
        .unwrap_err();
    assert!(err.to_string().contains("candidates[0].slots"), "{err}");
}

// Measured 2026-12-03 over seeds 0..400: optimal in 99.25 % of the instances, cost gap mean
// 0.00023, max 0.062 (normalised cost). With three starting nodes instead of the budget rule,
// 91.5 % were optimal (2,000 seeds), which these bounds reject.
const OPTIMAL_AT_LEAST: f64 = 0.97;
const MEAN_COST_GAP_AT_MOST: f64 = 0.002;
const MAX_COST_GAP_AT_MOST: f64 = 0.1;
