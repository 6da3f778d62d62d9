"""Benchmark of ``GET /v3/kafka/<cluster>/consumer/<group>/status`` against a bare aiohttp
handler returning a body of the same size, measured in the same run.

    .venv/bin/python bench/bench_api.py                   # 10,000 groups, 10 s per side
    .venv/bin/python bench/bench_api.py --seconds 5

The service holds ``--groups`` groups × ``--partitions`` partitions (one in five lagging, so
their ``/status`` lists partitions) fed through the real store and evaluation job. It serves
the real app; a bare aiohttp app serves a constant body as long as the average ``/status``
body. A second process (the load generator: aiohttp client, ``--concurrency`` requests in
flight over keep-alive connections on loopback) requests every group in turn, first from the
bare server, then from the real one, then both again; each side's best run counts. Printed as
JSON: requests/s of each side, the ratio (target >= 0.50), p50/p99 latency of each.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402

from monitor.config import parse_config  # noqa: E402
from monitor.evaluate.job import Evaluator  # noqa: E402
from monitor.model.observations import BrokerOffsets, CommitBatch  # noqa: E402
from monitor.serve.http.app import build_app  # noqa: E402
from monitor.service import Service  # noqa: E402

CLUSTER = "bench"
T0 = 1_800_000_000.0


def loaded_service(groups: int, partitions: int) -> Service:
    config = parse_config(
        {
            "clusters": [{"name": CLUSTER, "bootstrap_servers": ["127.0.0.1:1"]}],
            "evaluator": {"window": 10, "min_distance": "0.5s"},
            "http": {"host": "127.0.0.1", "port": 0},
        }
    )
    service = Service(config, collectors=[])
    store = service.store
    service.evaluator = Evaluator(store, config.evaluator, freshness=lambda _c: T0 + 11)
    topics = [f"topic-{g % 500}" for g in range(groups)]
    names = [f"group-{g:06d}" for g in range(groups)]
    for step in range(1, 11):
        t = T0 + step
        leo = step * 1000
        tps = sorted({(topic, p) for topic in set(topics) for p in range(partitions)})
        store.put_broker_offsets(
            BrokerOffsets(CLUSTER, t, [tp[0] for tp in tps], [tp[1] for tp in tps],
                          [0] * len(tps), [leo] * len(tps))
        )
        rows: dict[str, list[Any]] = {k: [] for k in ("g", "t", "p", "o")}
        for g, name in enumerate(names):
            lagging = g % 5 == 0
            for p in range(partitions):
                rows["g"].append(name)
                rows["t"].append(topics[g])
                rows["p"].append(p)
                rows["o"].append(leo - (step * 300 if lagging else 0))
        n = len(rows["o"])
        store.put_commits(
            CommitBatch(CLUSTER, "offsets_topic", t, rows["g"], rows["t"], rows["p"], rows["o"],
                        [int(t * 1000)] * n, [step] * n)
        )
    service.evaluator.run_once(T0 + 11)
    service.evaluated_clusters.add(CLUSTER)
    return service


def serve_forever(app: web.Application, port_out: Any) -> None:
    async def main() -> None:
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port_out.put(runner.addresses[0][1])
        await asyncio.Event().wait()

    asyncio.run(main())


def load(base: str, paths: list[str], seconds: float, concurrency: int, out: Any) -> None:
    """The load generator (a separate process): closed loop, ``concurrency`` in flight."""

    async def main() -> dict[str, Any]:
        latencies: list[float] = []
        errors = 0
        deadline = time.perf_counter() + seconds
        connector = aiohttp.TCPConnector(limit=concurrency)
        async with aiohttp.ClientSession(base, connector=connector) as session:

            async def worker(k: int) -> None:
                nonlocal errors
                i = k
                while time.perf_counter() < deadline:
                    started = time.perf_counter()
                    async with session.get(paths[i % len(paths)]) as response:
                        await response.read()
                        if response.status != 200:
                            errors += 1
                    latencies.append(time.perf_counter() - started)
                    i += concurrency

            began = time.perf_counter()
            await asyncio.gather(*(worker(k) for k in range(concurrency)))
            elapsed = time.perf_counter() - began
        latencies.sort()
        return {
            "requests": len(latencies),
            "errors": errors,
            "requests_per_s": round(len(latencies) / elapsed),
            "p50_ms": round(1000 * latencies[len(latencies) // 2], 3),
            "p99_ms": round(1000 * latencies[int(len(latencies) * 0.99)], 3),
        }

    out.put(asyncio.run(main()))


def run_load(base: str, paths: list[str], seconds: float, concurrency: int) -> dict[str, Any]:
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    proc = ctx.Process(target=load, args=(base, paths, seconds, concurrency, out))
    proc.start()
    result: dict[str, Any] = out.get(timeout=seconds + 120)
    proc.join(30)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--groups", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()

    started = time.perf_counter()
    service = loaded_service(args.groups, args.partitions)
    setup_s = time.perf_counter() - started
    result = service.evaluator.result(CLUSTER)
    assert result is not None
    names = result.group_names()
    paths = [f"/v3/kafka/{CLUSTER}/consumer/{g}/status" for g in names]
    real_ctx = mp.get_context("fork")
    q_real, q_bare = real_ctx.Queue(), real_ctx.Queue()

    async def sample_size() -> int:
        app = build_app(service)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        total = 0
        async with aiohttp.ClientSession() as session:
            for p in paths[:: max(1, len(paths) // 500)]:
                async with session.get(f"http://127.0.0.1:{port}{p}") as r:
                    total += len(await r.read())
        await runner.cleanup()
        return total // len(paths[:: max(1, len(paths) // 500)])

    body_size = asyncio.run(sample_size())  # the bare body: as long as the average answer
    bare_body = b'{"pad": "' + b"x" * max(0, body_size - 12) + b'"}'

    async def bare(request: web.Request) -> web.Response:
        return web.Response(body=bare_body, content_type="application/json")

    bare_app = web.Application()
    bare_app.router.add_get("/v3/kafka/{cluster}/consumer/{group}/status", bare)

    real_proc = real_ctx.Process(target=serve_forever, args=(build_app(service), q_real))
    bare_proc = real_ctx.Process(target=serve_forever, args=(bare_app, q_bare))
    real_proc.start()
    bare_proc.start()
    try:
        real_base = f"http://127.0.0.1:{q_real.get(timeout=60)}"
        bare_base = f"http://127.0.0.1:{q_bare.get(timeout=60)}"
        runs: dict[str, list[dict[str, Any]]] = {"bare": [], "status": []}
        for _ in range(args.rounds):
            runs["bare"].append(run_load(bare_base, paths, args.seconds, args.concurrency))
            runs["status"].append(run_load(real_base, paths, args.seconds, args.concurrency))
    finally:
        real_proc.kill()
        bare_proc.kill()
    best = {k: max(v, key=lambda r: r["requests_per_s"]) for k, v in runs.items()}
    ratio = best["status"]["requests_per_s"] / best["bare"]["requests_per_s"]
    print(
        json.dumps(
            {
                "python": platform.python_version(),
                "aiohttp": aiohttp.__version__,
                "groups": args.groups,
                "partitions_per_group": args.partitions,
                "setup_seconds": round(setup_s, 2),
                "body_bytes": body_size,
                "concurrency": args.concurrency,
                "seconds_per_run": args.seconds,
                "bare": best["bare"],
                "status": best["status"],
                "all_runs": runs,
                "ratio_status_vs_bare": round(ratio, 3),
                "target_ratio": 0.5,
                "target_met": ratio >= 0.5,
                "requests_per_s_spread": {
                    k: [r["requests_per_s"] for r in v] for k, v in runs.items()
                },
                "median_p99_ms": {
                    k: statistics.median(r["p99_ms"] for r in v) for k, v in runs.items()
                },
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()
