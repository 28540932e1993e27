//! Placement quality: `Place`'s greedy choice beside the exact optimum on random clusters of up
//! to 12 nodes. Prints the gaps; run with
//!
//! ```text
//! cargo bench -p zonemesh-aggregator --bench placement
//! ```

#[path = "../tests/support/quality.rs"]
#[allow(dead_code)]
mod quality;

fn main() {
    let s = quality::summary(0..2_000);
    println!("instances: {}", s.instances);
    println!("greedy as good as the optimum: {:.1} %", s.optimal * 100.0);
    println!(
        "worst-pair cost above the optimum's (normalised, 1.0 = worst figures of the zones): mean {:.4}, p95 {:.4}, max {:.4}",
        s.mean_cost, s.p95_cost, s.max_cost
    );
    println!(
        "worst RTT over the optimum's: mean {:+.2} %, max {:+.2} %",
        s.mean_rtt * 100.0,
        s.max_rtt * 100.0
    );
    println!(
        "bottleneck throughput below the optimum's: mean {:+.2} %, max {:+.2} %",
        s.mean_throughput * 100.0,
        s.max_throughput * 100.0
    );
}
