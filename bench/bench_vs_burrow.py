"""Side by side with Burrow 1.2.1: catch-up, memory and ``/status`` under load, one run.

    .venv/bin/python bench/bench_vs_burrow.py                          # 10k and 100k
    .venv/bin/python bench/bench_vs_burrow.py --sizes 10000,100000,1000000
    .venv/bin/python bench/bench_vs_burrow.py --sizes 10000 --seconds 5  # a quick look

For each size (group-partitions: ``size / 10`` groups of 10 partitions each) a fresh local
Kafka 0.9.0.1 broker (``monitor.dev.localkafka``, 50 offsets-topic partitions) is made to
write ``--rounds`` offset commits per group-partition into ``__consumer_offsets`` (real
OffsetCommit requests, so the broker's group coordinator writes every record). Then, one at a
time on that same broker and data, so they never share the CPUs:

* **Burrow 1.2.1**, Debian's ``burrow`` package, downloaded with ``apt-get download`` and
  unpacked into ``.cache/bench-tools/`` (nothing is installed); its offsets-topic consumer,
  in-memory storage with ``intervals=10``, client profile ``kafka-version="0.9.0.1"``;
* **kafka-monitor run**, ``offsets_source: offsets_topic``, every other setting defaulted.

Each side is measured the same way:

* ``catch_up_s``: from the process start until the last commit of every group is served by
  ``GET /v3/kafka/<cluster>/consumer/<group>`` (both sides' storage, no evaluation cache): the
  groups whose commits were written last into each offsets-topic partition are polled until
  all serve their final offsets, then every group is checked (``all_checked_s``: a group not
  yet served is polled again until it is, and moves ``catch_up_s`` to that time);
* ``ready_s``: kafka-monitor's ``/ready`` (Burrow has none); ``evaluation_s``: its last
  evaluation round after catch-up (``kafka_monitor_evaluation_duration_seconds``);
* ``rss_mb``: resident memory of the whole process tree after catch-up (ours: the supervisor
  and the service), and ``idle_rss_mb`` of the same program on an empty cluster, so that the
  growth per group-partition is ``(rss - idle) / size``; ``rss_by_process_mb``: the same per
  process (ours: the front, the service), split into heap, mapped files and shared memory;
* ``status``: ``wrk -t2 -c32 -d<seconds>s`` (Debian's ``wrk``, also unpacked into the cache)
  on ``/v3/kafka/<cluster>/consumer/<group>/status`` cycling through every group, while a
  second process re-commits the groups' offsets at ``--ingest-rate`` commits/s and the side
  evaluates on its own schedule: requests/s, p50 and p99 latency.

Printed as one JSON object: each size's figures for both sides and the ratios against
Burrow (catch-up speed-up, memory ratio, throughput ratio, p99 ratio), and the targets they
meet. ``kafka-monitor run`` is the supervisor with its HTTP front and the service process
(README, "Running it against your clusters"): the front answers ``/status`` from the round's
replies, so wrk measures the front, and ``rss_mb`` counts both processes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing as mp
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
import yaml  # noqa: E402
from confluent_kafka import (  # noqa: E402
    ConsumerGroupTopicPartitions,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient  # noqa: E402

from monitor.dev.localkafka import LocalKafka  # noqa: E402
from monitor.dev.localkafka.workload import librdkafka_logger  # noqa: E402

CLUSTER = "bench"
PARTITIONS = 10
TOPICS = 50
OFFSETS_PARTITIONS = 50
TOOLS = ROOT / ".cache" / "bench-tools"
DEBS = ("burrow", "wrk", "libluajit2-5.1-2")

CATCH_UP_SPEEDUP_TARGET = 2.0  # at 100k group-partitions
RSS_RATIO_TARGET = 1.0  # ours / Burrow's, at 100k
P99_TARGET_MS = 10.0
THROUGHPUT_RATIO_TARGET = 0.5


# -- tools ------------------------------------------------------------------------------------

def fetch_tools() -> dict[str, Path]:
    """Burrow and wrk from Debian's archive, unpacked (not installed) into the cache."""
    root = TOOLS / "root"
    burrow, wrk = root / "usr/bin/Burrow", root / "usr/bin/wrk"
    if not (burrow.exists() and wrk.exists()):
        if shutil.which("apt-get") is None or shutil.which("dpkg") is None:
            raise SystemExit("this benchmark needs apt-get and dpkg to fetch Burrow and wrk")
        debs = TOOLS / "debs"
        debs.mkdir(parents=True, exist_ok=True)
        subprocess.run(["apt-get", "download", *DEBS], cwd=debs, check=True,
                       stdout=subprocess.DEVNULL)
        for deb in sorted(debs.glob("*.deb")):
            subprocess.run(["dpkg", "-x", str(deb), str(root)], check=True)
    libs = root / "usr/lib/x86_64-linux-gnu"
    return {"burrow": burrow, "wrk": wrk, "libs": libs}


def java_hash_partition(group: str, partitions: int) -> int:
    """The offsets-topic partition Kafka 0.9 writes a group's commits to
    (``Utils.abs(groupId.hashCode) % partitions``)."""
    h = 0
    for ch in group:
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    return (h & 0x7FFFFFFF) % partitions


def group_name(g: int) -> str:
    return f"bench-group-{g:07d}"


def topic_of(g: int) -> str:
    return f"bench-topic-{g % TOPICS:02d}"


def final_offset(rounds: int) -> int:
    return rounds  # round r commits offset r + 1


# -- data -------------------------------------------------------------------------------------

def write_data(kafka: LocalKafka, groups: int, rounds: int) -> dict[str, Any]:
    """Topics with records to commit against, then ``rounds`` commits per group-partition."""
    config: dict[str, Any] = {**kafka.client_config(), "logger": librdkafka_logger}
    for t in range(min(TOPICS, groups)):
        kafka.create_topic(topic_of(t), PARTITIONS)
    producer = Producer(config)
    for t in range(min(TOPICS, groups)):
        for p in range(PARTITIONS):
            for _ in range(rounds + 1):
                producer.produce(topic_of(t), b"x", partition=p)
                producer.poll(0)
    producer.flush(60)
    admin = AdminClient(config)
    t0 = time.perf_counter()
    pending: list[Any] = []
    for r in range(rounds):
        for g in range(groups):
            request = ConsumerGroupTopicPartitions(
                group_name(g), [TopicPartition(topic_of(g), p, r + 1) for p in range(PARTITIONS)]
            )
            pending.extend(admin.alter_consumer_group_offsets([request]).values())
            if len(pending) >= 256:
                for future in pending:
                    future.result()
                pending.clear()
    for future in pending:
        future.result()
    seconds = time.perf_counter() - t0
    commits = groups * PARTITIONS * rounds
    return {"commits": commits, "write_s": round(seconds, 1),
            "write_commits_per_s": round(commits / seconds)}


def sentinels(groups: int) -> list[str]:
    """Groups whose last commits were written last into each offsets-topic partition (with
    requests in flight the order among the last few hundred is loose: take those too)."""
    last: dict[int, list[int]] = {}
    for g in range(groups):
        last.setdefault(java_hash_partition(group_name(g), OFFSETS_PARTITIONS), []).append(g)
    chosen = {g for gs in last.values() for g in gs[-3:]}
    chosen.update(range(max(0, groups - 512), groups))
    return [group_name(g) for g in sorted(chosen)]


def ingest_load(bootstrap: str, groups: int, rounds: int, rate: int,
                stop: Any, counter: Any) -> None:
    """Re-commit every group's final offsets at ``rate`` commits/s (idle consumers committing
    on their timer: the verdicts stay as they are, the reader decodes every record)."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "api.version.request": False,
                         "broker.version.fallback": "0.9.0.1", "log_level": 0})
    per_second = max(1, rate // PARTITIONS)
    g = 0
    pending: list[Any] = []
    while not stop.is_set():
        t0 = time.monotonic()
        for _ in range(per_second):
            request = ConsumerGroupTopicPartitions(
                group_name(g), [TopicPartition(topic_of(g), p, final_offset(rounds))
                                for p in range(PARTITIONS)])
            pending.extend(admin.alter_consumer_group_offsets([request]).values())
            g = (g + 1) % groups
            if len(pending) >= 256:
                for future in pending:
                    future.result()
                pending.clear()
        for future in pending:
            future.result()
        pending.clear()
        with counter.get_lock():
            counter.value += per_second * PARTITIONS
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))


# -- processes --------------------------------------------------------------------------------

def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def tree_rss_bytes(root_pid: int) -> int:
    """Resident memory of a process and all its descendants (Linux /proc)."""
    return sum(p["VmRSS"] for p in tree_memory(root_pid).values())


def tree_memory(root_pid: int) -> dict[str, dict[str, int]]:
    """Per process of the tree (``pid name``): resident memory (``VmRSS``) and its parts
    (``RssAnon``: heap; ``RssFile``: mapped files, code included; ``RssShmem``: shared memory,
    such as the front's reply table in /dev/shm), in bytes."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
            children.setdefault(ppid, []).append(int(entry))
    out: dict[str, dict[str, int]] = {}
    todo = [root_pid]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            with open(f"/proc/{pid}/status") as f:
                fields = dict(line.split(":", 1) for line in f if ":" in line)
        except OSError:
            continue
        out[f"{pid} {fields['Name'].strip()}"] = {
            key: int(fields[key].split()[0]) * 1024
            for key in ("VmRSS", "RssAnon", "RssFile", "RssShmem") if key in fields}
    return out


class Side:
    """One monitor under test: how to start it, and where it answers."""

    name: str
    proc: subprocess.Popen[bytes]
    port: int

    def __init__(self, work: Path) -> None:
        self.work = work
        self.port = free_port()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def command(self, kafka: LocalKafka) -> tuple[list[str], dict[str, str]]:
        raise NotImplementedError

    def start(self, kafka: LocalKafka) -> float:
        cmd, env = self.command(kafka)
        log = (self.work / f"{self.name}.log").open("w")
        t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, cwd=self.work, env={**os.environ, **env},
                                     stdout=log, stderr=subprocess.STDOUT)
        return t0

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def rss(self) -> int:
        return tree_rss_bytes(self.proc.pid)


class Burrow(Side):
    name = "burrow"

    def __init__(self, work: Path, binary: Path) -> None:
        super().__init__(work)
        self.binary = binary

    def command(self, kafka: LocalKafka) -> tuple[list[str], dict[str, str]]:
        servers = json.dumps(kafka.bootstrap_servers.split(","))
        (self.work / "burrow.toml").write_text(f"""
[general]
pidfile="{self.work / 'burrow.pid'}"
[logging]
level="warn"
[zookeeper]
servers=["{kafka.zookeeper_connect}"]
timeout=6
root-path="/burrow-bench"
[client-profile.bench]
client-id="burrow-bench"
kafka-version="0.9.0.1"
[cluster.{CLUSTER}]
class-name="kafka"
servers={servers}
client-profile="bench"
topic-refresh=10
offset-refresh=10
[consumer.{CLUSTER}]
class-name="kafka"
cluster="{CLUSTER}"
servers={servers}
client-profile="bench"
offsets-topic="__consumer_offsets"
start-latest=false
[httpserver.default]
address="127.0.0.1:{self.port}"
[storage.default]
class-name="inmemory"
workers=20
intervals=10
expire-group=604800
min-distance=1
[evaluator.default]
class-name="caching"
expire-cache=10
""")
        return [str(self.binary), "-config-dir", str(self.work)], {}


class KafkaMonitor(Side):
    name = "kafka-monitor"

    def command(self, kafka: LocalKafka) -> tuple[list[str], dict[str, str]]:
        config = {
            "clusters": [{
                "name": CLUSTER,
                "bootstrap_servers": kafka.bootstrap_servers.split(","),
                "broker_version_fallback": "0.9.0.1",
                "offsets_source": "offsets_topic",
            }],
            "http": {"host": "127.0.0.1", "port": self.port},
        }
        path = self.work / "monitor.yaml"
        path.write_text(yaml.safe_dump(config))
        return [sys.executable, "-m", "monitor", "run", "--config", str(path)], {}


# -- measurements -----------------------------------------------------------------------------

async def served(session: aiohttp.ClientSession, base: str, group: str, offset: int) -> bool:
    """Whether the group's detail holds ``offset`` as the newest commit of every partition."""
    try:
        async with session.get(f"{base}/v3/kafka/{CLUSTER}/consumer/{group}") as r:
            if r.status != 200:
                return False
            body = await r.json()
    except (TimeoutError, aiohttp.ClientError, json.JSONDecodeError):
        return False
    partitions = [p for slots in (body.get("topics") or {}).values() for p in slots]
    if len(partitions) != PARTITIONS:
        return False
    for p in partitions:
        offsets = [e["offset"] for e in (p or {}).get("offsets") or [] if e]
        if not offsets or max(offsets) != offset:
            return False
    return True


async def poll_until_served(base: str, names: list[str], offset: int, deadline: float,
                            alive: Callable[[], bool], count_first_pass: bool) -> float | None:
    """Poll ``names`` (32 in flight) until every one is served: the time of the last pass
    that found one newly served (with ``count_first_pass`` false, None if the first pass
    found them all: they were served before it started)."""
    pending = list(names)
    last: float | None = None
    first_pass = True
    connector = aiohttp.TCPConnector(limit=32)
    timeout = aiohttp.ClientTimeout(total=10)
    sem = asyncio.Semaphore(32)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

        async def check(name: str) -> bool:
            async with sem:
                return await served(session, base, name, offset)

        while pending:
            if time.monotonic() > deadline or not alive():
                raise TimeoutError(f"{len(pending)} groups never served, e.g. {pending[:3]}")
            results = await asyncio.gather(*(check(n) for n in pending))
            still = [n for n, ok in zip(pending, results, strict=True) if not ok]
            if len(still) < len(pending) and (count_first_pass or not first_pass):
                last = time.monotonic()
            first_pass = False
            pending = still
            if pending:
                await asyncio.sleep(0.1)
    return last


def wait_http(url: str, deadline: float, alive: Callable[[], bool], ok: int = 200) -> float:
    import urllib.error
    import urllib.request

    while time.monotonic() < deadline and alive():
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == ok:
                    return time.monotonic()
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(0.05)
    raise TimeoutError(f"{url} never answered {ok}")


def run_wrk(tools: dict[str, Path], base: str, groups: int, seconds: int) -> dict[str, Any]:
    script = Path(tempfile.mkstemp(suffix=".lua")[1])
    script.write_text(f"""
local i = 0
request = function()
  i = (i + 1) % {groups}
  return wrk.format("GET", string.format("/v3/kafka/{CLUSTER}/consumer/bench-group-%07d/status", i))
end
""")
    env = {**os.environ, "LD_LIBRARY_PATH": str(tools["libs"])}
    out = subprocess.run(
        [str(tools["wrk"]), "-t2", "-c32", f"-d{seconds}s", "--latency", "-s", str(script), base],
        capture_output=True, text=True, env=env, check=True).stdout
    script.unlink()

    def ms(label: str) -> float:
        m = re.search(rf"^\s*{re.escape(label)}\s+([\d.]+)(us|ms|s)\s*$", out, re.M)
        if m is None:
            raise RuntimeError(f"wrk printed no {label}:\n{out}")
        return float(m.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[m.group(2)]

    rate = re.search(r"Requests/sec:\s+([\d.]+)", out)
    non2xx = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", out)
    assert rate is not None, out
    top = re.search(r"^\s*Latency\s+\S+\s+\S+\s+([\d.]+)(us|ms|s)\s", out, re.M)
    assert top is not None, out
    return {"requests_per_s": round(float(rate.group(1))), "p50_ms": ms("50%"),
            "p90_ms": ms("90%"), "p99_ms": ms("99%"),
            "max_ms": float(top.group(1)) * {"us": 0.001, "ms": 1.0, "s": 1000.0}[top.group(2)],
            "non_2xx": int(non2xx.group(1)) if non2xx else 0}


def evaluation_seconds(base: str) -> float:
    """The last evaluation round's duration, as the service exports it."""
    import urllib.request

    with urllib.request.urlopen(f"{base}/metrics", timeout=30) as r:
        text = r.read().decode()
    name = f'kafka_monitor_evaluation_duration_seconds{{cluster="{CLUSTER}"}}'
    m = re.search(rf"^{re.escape(name)} (\S+)$", text, re.M)
    if m is None:
        raise RuntimeError("no kafka_monitor_evaluation_duration_seconds in /metrics")
    return round(float(m.group(1)), 3)


@contextmanager
def ingesting(bootstrap: str, groups: int, rounds: int, rate: int) -> Iterator[Any]:
    ctx = mp.get_context("spawn")
    stop, counter = ctx.Event(), ctx.Value("q", 0)
    proc = ctx.Process(target=ingest_load, args=(bootstrap, groups, rounds, rate, stop, counter),
                       daemon=True)
    proc.start()
    try:
        time.sleep(3)  # at full rate before the load starts
        yield counter
    finally:
        stop.set()
        proc.join(15)
        if proc.is_alive():
            proc.kill()


def measure(side: Side, kafka: LocalKafka, groups: int, rounds: int, args: argparse.Namespace,
            tools: dict[str, Path]) -> dict[str, Any]:
    t0 = side.start(kafka)
    alive = lambda: side.proc.poll() is None  # noqa: E731
    out: dict[str, Any] = {}
    try:
        deadline = t0 + args.timeout
        if isinstance(side, KafkaMonitor):
            out["ready_s"] = round(wait_http(f"{side.base}/ready", deadline, alive) - t0, 2)
        else:
            wait_http(f"{side.base}/burrow/admin", deadline, alive)
        offset = final_offset(rounds)
        first = asyncio.run(poll_until_served(
            side.base, sentinels(groups), offset, deadline, alive, count_first_pass=True))
        assert first is not None
        out["sentinels_served_s"] = round(first - t0, 2)
        last = asyncio.run(poll_until_served(
            side.base, [group_name(g) for g in range(groups)], offset, deadline, alive,
            count_first_pass=False))
        out["all_checked_s"] = round(time.monotonic() - t0, 2)
        out["catch_up_s"] = round((last if last is not None else first) - t0, 2)
        time.sleep(args.settle)
        out["rss_mb"] = round(side.rss() / 2**20, 1)
        out["rss_by_process_mb"] = {
            name: {k: round(v / 2**20, 1) for k, v in parts.items()}
            for name, parts in tree_memory(side.proc.pid).items()}
        if isinstance(side, KafkaMonitor):
            out["evaluation_s"] = evaluation_seconds(side.base)
        with ingesting(kafka.bootstrap_servers, groups, rounds, args.ingest_rate) as counter:
            c0, w0 = counter.value, time.monotonic()
            out["status"] = run_wrk(tools, side.base, groups, args.seconds)
            out["status"]["ingest_commits_per_s"] = round(
                (counter.value - c0) / (time.monotonic() - w0))
        out["rss_after_load_mb"] = round(side.rss() / 2**20, 1)
        out["rss_after_load_by_process_mb"] = {
            name: {k: round(v / 2**20, 1) for k, v in parts.items()}
            for name, parts in tree_memory(side.proc.pid).items()}
    finally:
        side.stop()
    return out


def idle_rss(side: Side, kafka: LocalKafka, timeout: float) -> float:
    """The program's resident memory on a cluster with no groups, once it answers."""
    t0 = side.start(kafka)
    try:
        alive = lambda: side.proc.poll() is None  # noqa: E731
        path = "/ready" if isinstance(side, KafkaMonitor) else "/burrow/admin"
        wait_http(side.base + path, t0 + timeout, alive)
        time.sleep(15)
        return round(side.rss() / 2**20, 1)
    finally:
        side.stop()


def ratios(burrow: dict[str, Any], ours: dict[str, Any]) -> dict[str, Any]:
    return {
        "catch_up_speedup": round(burrow["catch_up_s"] / ours["catch_up_s"], 2),
        "rss_ratio": round(ours["rss_mb"] / burrow["rss_mb"], 2),
        "throughput_ratio": round(
            ours["status"]["requests_per_s"] / burrow["status"]["requests_per_s"], 2),
        "p99_ms": ours["status"]["p99_ms"],
        # Burrow's own p99 in the same run: what this machine allows under the same load.
        "p99_ratio": round(ours["status"]["p99_ms"] / burrow["status"]["p99_ms"], 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--sizes", default="10000,100000", help="group-partitions, comma-separated")
    ap.add_argument("--rounds", type=int, default=50, help="commits per group-partition")
    ap.add_argument("--rounds-at-1m", type=int, default=5,
                    help="commits per group-partition at 1M group-partitions and above")
    ap.add_argument("--seconds", type=int, default=10, help="wrk duration")
    ap.add_argument("--ingest-rate", type=int, default=10_000, help="commits/s during wrk")
    ap.add_argument("--settle", type=float, default=15.0,
                    help="seconds after catch-up before reading RSS (a round or so)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--sides", default="burrow,kafka-monitor")
    args = ap.parse_args()
    tools = fetch_tools()
    sides = args.sides.split(",")
    result: dict[str, Any] = {
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                    "note": "broker JVM, the side under test, wrk and the ingest load share "
                            "these CPUs; the sides run one after the other"},
        "burrow": "Burrow 1.2.1 (Debian burrow package), inmemory intervals=10, evaluator "
                  "caching expire-cache=10, offsets-topic consumer from the earliest offset",
        "kafka_monitor": "kafka-monitor run, offsets_source offsets_topic, defaults",
        "sizes": {},
    }
    with tempfile.TemporaryDirectory(prefix="bench-vs-burrow-") as tmp:
        work = Path(tmp)
        # Idle processes, on a broker with nothing but their own topics.
        with LocalKafka(1, offsets_topic_partitions=OFFSETS_PARTITIONS, heap="512m") as kafka:
            idle = {}
            if "burrow" in sides:
                idle["burrow"] = idle_rss(Burrow(work, tools["burrow"]), kafka, 120)
            if "kafka-monitor" in sides:
                idle["kafka-monitor"] = idle_rss(KafkaMonitor(work), kafka, 120)
            result["idle_rss_mb"] = idle
        for size in (int(s) for s in args.sizes.split(",")):
            groups = size // PARTITIONS
            rounds = args.rounds_at_1m if size >= 1_000_000 else args.rounds
            entry: dict[str, Any] = {"groups": groups, "partitions_per_group": PARTITIONS,
                                     "commits_per_group_partition": rounds}
            with LocalKafka(1, offsets_topic_partitions=OFFSETS_PARTITIONS, heap="1g") as kafka:
                entry["data"] = write_data(kafka, groups, rounds)
                print(json.dumps({size: entry["data"]}), file=sys.stderr, flush=True)
                for name in sides:
                    side: Side = (Burrow(work, tools["burrow"]) if name == "burrow"
                                  else KafkaMonitor(work))
                    entry[name] = measure(side, kafka, groups, rounds, args, tools)
                    entry[name]["growth_per_group_partition_kb"] = round(
                        (entry[name]["rss_mb"] - idle.get(name, 0)) * 1024 / size, 2)
                    print(json.dumps({size: {name: entry[name]}}), file=sys.stderr, flush=True)
            if "burrow" in entry and "kafka-monitor" in entry:
                r = ratios(entry["burrow"], entry["kafka-monitor"])
                r["targets"] = {
                    "catch_up_speedup_ge_2_at_100k":
                    r["catch_up_speedup"] >= CATCH_UP_SPEEDUP_TARGET if size == 100_000 else None,
                    "catch_up_not_slower_at_10k": r["catch_up_speedup"] >= 1.0
                    if size == 10_000 else None,
                    "rss_le_burrow": r["rss_ratio"] <= RSS_RATIO_TARGET,
                    "p99_le_10ms": r["p99_ms"] <= P99_TARGET_MS,
                    "p99_le_burrow": r["p99_ratio"] <= 1.0,
                    "throughput_ge_half": r["throughput_ratio"] >= THROUGHPUT_RATIO_TARGET,
                }
                entry["ratios"] = r
            result["sizes"][size] = entry
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
