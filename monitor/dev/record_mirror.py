"""A mirror that copies records as MirrorMaker 2 does, for the dev rig and the failover tests:
key, value, headers and timestamp kept; the same partition when the destination has as many
(MirrorMaker 2's default), else the producer's key hash (a different layout, as after a
repartition or with another partitioner); the source offsets committed in its group only once
the destination acknowledged the records (at-least-once: a restart copies again, never skips).

Kafka 0.9's own MirrorMaker (``localkafka/mirrormaker.py``) cannot keep timestamps: 0.9
records have none. Run ``python -m monitor.dev.record_mirror --help``; SIGTERM stops it after a
last commit, SIGSTOP pauses it (a mirror falling behind).
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from types import FrameType

from confluent_kafka import TIMESTAMP_NOT_AVAILABLE, Consumer, KafkaError, Producer
from confluent_kafka.admin import AdminClient, NewTopic

_BATCH = 500


class RecordMirror:
    def __init__(self, source: str, destination: str, topics: list[str], group: str,
                 prefix: str = "") -> None:
        self.topics = topics
        self.prefix = prefix
        self.consumer = Consumer({
            "bootstrap.servers": source, "group.id": group, "auto.offset.reset": "earliest",
            "enable.auto.commit": False, "client.id": f"record-mirror-{group}"})
        self.producer = Producer({"bootstrap.servers": destination, "linger.ms": 5,
                                  "enable.idempotence": False, "acks": "all"})
        self.admin = AdminClient({"bootstrap.servers": destination})
        self.partitions: dict[str, int] = {}
        self.running = True

    def _same_partition(self, topic: str, source_partitions: int) -> bool:
        if topic not in self.partitions:
            meta = self.admin.list_topics(topic, timeout=10).topics.get(topic)
            if meta is None or meta.error is not None or not meta.partitions:
                self.admin.create_topics([NewTopic(topic, source_partitions, 1)])[topic] \
                    .result(10)
                self.partitions[topic] = source_partitions
            else:
                self.partitions[topic] = len(meta.partitions)
        return self.partitions[topic] == source_partitions

    def run(self) -> None:
        self.consumer.subscribe(self.topics)
        counts: dict[str, int] = {}
        while self.running:
            messages = self.consumer.consume(_BATCH, 0.2)
            copied = False
            for m in messages:
                err = m.error()
                if err is not None:
                    if err.code() != KafkaError._PARTITION_EOF:
                        print(f"record-mirror: {err}", file=sys.stderr, flush=True)
                    continue
                topic = m.topic() or ""
                if topic not in counts:
                    meta = self.consumer.list_topics(topic, timeout=10).topics[topic]
                    counts[topic] = len(meta.partitions)
                dest = self.prefix + topic
                kind, ts = m.timestamp()
                extra: dict[str, object] = {}
                if kind != TIMESTAMP_NOT_AVAILABLE and ts > 0:
                    extra["timestamp"] = ts
                if self._same_partition(dest, counts[topic]):
                    extra["partition"] = m.partition()
                self.producer.produce(dest, key=m.key(), value=m.value(),
                                      headers=m.headers(), **extra)  # type: ignore[arg-type]
                copied = True
            if copied:
                if self.producer.flush(30) > 0:
                    raise RuntimeError("destination did not acknowledge the records in 30 s")
                self.consumer.commit(asynchronous=False)
        self.producer.flush(30)
        self.consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m monitor.dev.record_mirror",
                                     description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--source", required=True, help="bootstrap servers")
    parser.add_argument("--destination", required=True, help="bootstrap servers")
    parser.add_argument("--topics", required=True, help="comma-separated")
    parser.add_argument("--group", required=True, help="its consumer group on the source")
    parser.add_argument("--prefix", default="", help="destination topic name prefix")
    args = parser.parse_args(argv)
    mirror = RecordMirror(args.source, args.destination, args.topics.split(","), args.group,
                          args.prefix)

    def stop(signum: int, frame: FrameType | None) -> None:
        mirror.running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(f"record-mirror: {args.topics} {args.source} -> {args.destination}", flush=True)
    started = time.monotonic()
    mirror.run()
    print(f"record-mirror: stopped after {time.monotonic() - started:.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
