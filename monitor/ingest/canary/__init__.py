"""Canary probes: end-to-end availability, latency, loss and duplicates (Xinfra Monitor's
model), per partition and per leader broker, for a cluster or across a mirror.

* ``record``: the canary record format (versioned; instance, stream, run epoch, sequence, send
  time);
* ``tracker``: sequence tracking (lost, duplicated, out of order, late) and windowed figures;
* ``probe``: the producer and consumer threads, topic placement, the snapshot the API serves;
* ``metrics``: the Prometheus families.
"""
