"""Draws bench/results/<date>.png from the harness's JSON: per scenario, each server's
throughput (bars) and its p50/p99 latency (markers on a second axis).

Usage: chart.py RESULTS.json OUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

with open(sys.argv[1]) as results_file:
    report = json.load(results_file)
scenarios = [s for s in report["scenarios"] if any("rps" in r and "error" not in r for r in s["results"])]
figure, axes = plt.subplots(len(scenarios), 1, figsize=(11, 3.2 * len(scenarios)), squeeze=False)
for axis, scenario in zip(axes[:, 0], scenarios, strict=True):
    results = [r for r in scenario["results"] if "rps" in r and "error" not in r]
    labels = [r["label"] for r in results]
    bytes_unit = scenario["unit"] == "bytes/s"
    values = [r["bytesPerSecond"] / 1e6 if bytes_unit else r["rps"] for r in results]
    axis.barh(labels, values, color="#4c72b0")
    axis.set_xlabel("MB/s" if bytes_unit else scenario["unit"])
    axis.set_title(scenario["title"], fontsize=10)
    axis.invert_yaxis()
    latency = axis.twiny()
    latency.plot([r["p50Ms"] for r in results], labels, "o", color="#dd8452", label="p50 ms")
    latency.plot([r["p99Ms"] for r in results], labels, "x", color="#c44e52", label="p99 ms")
    latency.set_xlabel("latency ms")
    latency.legend(loc="lower right", fontsize=8)
figure.tight_layout()
figure.savefig(sys.argv[2], dpi=90)
