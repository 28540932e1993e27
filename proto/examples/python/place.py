#!/usr/bin/env python3
"""Ask a zonemesh aggregator where to put a job, from Python (grpcio), without zonemesh's code.

    pip install grpcio grpcio-tools
    python3 proto/examples/python/place.py --aggregator 127.0.0.1:7400 --workers 4

The Python stubs are generated from proto/zonemesh/v1/*.proto at start (grpcio-tools), into a
temporary directory. Exit status: 0 placed, 1 the aggregator refused (the message says why),
2 bad arguments or no aggregator.
"""

import argparse
import pathlib
import sys
import tempfile


def generate_stubs(out: pathlib.Path) -> None:
    from grpc_tools import protoc
    import grpc_tools

    proto_root = pathlib.Path(__file__).resolve().parents[2]
    include = pathlib.Path(grpc_tools.__file__).parent / "_proto"
    sources = sorted(str(p) for p in (proto_root / "zonemesh" / "v1").glob("*.proto"))
    status = protoc.main([
        "grpc_tools.protoc",
        f"-I{proto_root}",
        f"-I{include}",
        f"--python_out={out}",
        f"--grpc_python_out={out}",
        *sources,
    ])
    if status != 0:
        sys.exit(f"protoc failed on {sources}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aggregator", default="127.0.0.1:7400", help="host:port of the gRPC API")
    parser.add_argument("--workers", type=int, default=4, help="workers of the job")
    parser.add_argument("--policy", default="PREFER_ONE", choices=["REQUIRE_ONE", "PREFER_ONE", "ANY"])
    parser.add_argument("--timeout", type=float, default=10.0, help="seconds")
    args = parser.parse_args()
    if args.workers < 1:
        parser.error("--workers must be at least 1")

    with tempfile.TemporaryDirectory() as tmp:
        generate_stubs(pathlib.Path(tmp))
        sys.path.insert(0, tmp)
        import grpc
        from zonemesh.v1 import topology_pb2, topology_pb2_grpc

        with grpc.insecure_channel(args.aggregator) as channel:
            topology = topology_pb2_grpc.TopologyStub(channel)
            request = topology_pb2.PlaceRequest(
                workers=args.workers,
                zone_policy=topology_pb2.ZonePolicy.Value(f"ZONE_POLICY_{args.policy}"),
            )
            try:
                answer = topology.Place(request, timeout=args.timeout)
            except grpc.RpcError as e:
                code = e.code()
                print(f"Place refused: {code.name}: {e.details()}", file=sys.stderr)
                return 2 if code == grpc.StatusCode.UNAVAILABLE else 1

    print(f"placed {args.workers} workers in {', '.join(answer.zones)}")
    for a in answer.assignments:
        print(f"  {a.node}\t{a.zone}\t{a.workers} worker(s)")
    print(f"worst RTT {answer.worst_rtt_us:.0f} µs, worst loss {answer.worst_loss_ratio * 100:.2f} %, "
          f"bottleneck {answer.bottleneck_throughput_bps / 1e6:.1f} Mbit/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
