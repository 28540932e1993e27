//! The ways in that are not gRPC from Rust: a Python client (grpcio, stubs generated from the
//! .proto files) and the embedded engine example.

use std::process::Command;

use anyhow::{Result, ensure};
use zonemesh_tests::{FakeAgent, start_aggregator};

fn python_has_grpc() -> bool {
    zonemesh_tests::tool_available(
        "python3",
        &["-c", "import grpc, grpc_tools"],
        "pip install grpcio grpcio-tools",
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_python_client_places_a_job() -> Result<()> {
    if !python_has_grpc() {
        eprintln!("grpcio not installed: skipped here (CI runs it)");
        return Ok(());
    }
    let dir = tempfile::tempdir()?;
    let aggregator = start_aggregator(&["--in-memory"], dir.path())?;
    let mut a = FakeAgent::connect(&aggregator, "gpu-1", "zone-a").await?;
    let mut b = FakeAgent::connect(&aggregator, "gpu-2", "zone-a").await?;
    a.report(&[("gpu-2", 45.0, 0, 9.4e8)]).await?;
    b.report(&[("gpu-1", 47.0, 0, 9.3e8)]).await?;

    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../proto/examples/python/place.py"
    );
    let addr = aggregator.grpc.to_string();
    let run = |workers: &str| {
        Command::new("python3")
            .args([script, "--aggregator", &addr, "--workers", workers])
            .output()
    };
    let out = run("2")?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(stdout.contains("placed 2 workers in zone-a"), "{stdout}");
    ensure!(
        stdout.contains("gpu-1") && stdout.contains("gpu-2"),
        "{stdout}"
    );

    // More workers than nodes: refused with the aggregator's reason, exit status 1.
    let out = run("5")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    ensure!(out.status.code() == Some(1), "{stderr}");
    ensure!(stderr.contains("FAILED_PRECONDITION"), "{stderr}");
    Ok(())
}

#[test]
fn the_embedded_scheduler_example_runs_and_keeps_its_rules() -> Result<()> {
    let out = Command::new(zonemesh_tests::example("embedded_scheduler")).output()?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    ensure!(stdout.lines().count() == 4, "{stdout}");
    ensure!(
        stdout.contains("resnet-50  4 workers -> a-gpu1"),
        "{stdout}"
    );
    Ok(())
}
