"""Runs one scheduling scenario with tritonclient (gRPC) against one server and prints what it
saw as JSON on stdout; run against Triton and against dynamo-kserve serving the same
config.pbtxt files (scheduling-parity.conformance.test.ts), the two are compared.

Usage: scheduling_parity.py GRPC_URL SCENARIO [MODEL]
  batching MODEL  closed-loop load (CONCURRENCY requests in flight, TOTAL in all); the model's
                  batch_stats (executions by batch size) gathered during it
  queue MODEL     BURST requests at once at a model with a small max_queue_size; the outcomes
  priority MODEL  a request keeps the only instance busy; low-priority requests queue, then
                  high-priority ones; the order they finish in
  load MODEL      loads the model unless it is READY; the error, its state and reason in the repository index, and
                  its statistics
"""

import json
import sys
import threading
import time
from collections import Counter

import numpy as np
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

URL, SCENARIO, MODEL = sys.argv[1], sys.argv[2], sys.argv[3]
CONCURRENCY = 16
TOTAL = 320
BURST = 8
client = grpcclient.InferenceServerClient(URL)


def request_inputs(value):
    tensor = grpcclient.InferInput("INPUT0", [1, 1], "FP32")
    tensor.set_data_from_numpy(np.array([[value]], dtype=np.float32))
    return [tensor]


def batch_stats():
    stats = client.get_inference_statistics(MODEL, as_json=True)["model_stats"][0]
    return {int(entry["batch_size"]): int(entry["compute_infer"]["count"]) for entry in stats.get("batch_stats", [])}


def batching():
    before = batch_stats()
    slots = threading.Semaphore(CONCURRENCY)
    done = threading.Event()
    errors = []
    finished = [0]
    lock = threading.Lock()

    def callback(result, error):
        with lock:
            if error is not None:
                errors.append(error.message())
            finished[0] += 1
            if finished[0] == TOTAL:
                done.set()
        slots.release()

    for index in range(TOTAL):
        slots.acquire()
        client.async_infer(MODEL, request_inputs(float(index)), callback)
    done.wait(120)
    after = batch_stats()
    executions = {size: after.get(size, 0) - before.get(size, 0) for size in after}
    return {
        "requests": finished[0],
        "errors": errors,
        "executions by batch size": {str(size): count for size, count in sorted(executions.items()) if count > 0},
    }


def outcome_class(error):
    if error is None:
        return "OK"
    # The message class: Triton's words for a full queue, whatever prefix names the request.
    kind = "queue full" if "Exceeds maximum queue size" in error.message() else error.message()
    return f"{error.status()}: {kind}"


def queue():
    outcomes = []
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def callback(result, error):
        with lock:
            outcomes.append(outcome_class(error))
        done.release()

    for index in range(BURST):
        client.async_infer(MODEL, request_inputs(float(index)), callback)
    for _ in range(BURST):
        done.acquire(timeout=60)
    return {"outcomes": dict(Counter(outcomes))}


def priority():
    order = []
    lock = threading.Lock()
    done = threading.Semaphore(0)

    def send(label, level):
        def callback(result, error):
            with lock:
                order.append(label if error is None else f"{label}: {outcome_class(error)}")
            done.release()

        client.async_infer(MODEL, request_inputs(0.0), callback, priority=level)

    # The model's one instance runs "busy" for 600 ms; all six others are queued meanwhile.
    send("busy", 2)
    time.sleep(0.1)
    for index in range(3):
        send(f"low {index}", 2)
        time.sleep(0.02)
    for index in range(3):
        send(f"high {index}", 1)
        time.sleep(0.02)
    for _ in range(7):
        done.acquire(timeout=60)
    return {"finish order": order}


def index_entry():
    index = client.get_model_repository_index(as_json=True).get("models", [])
    return next((model for model in index if model["name"] == MODEL), {})


def load():
    error = None
    if index_entry().get("state") != "READY":
        try:
            client.load_model(MODEL)
        except InferenceServerException as failure:
            error = {"status": str(failure.status()), "message": failure.message()}
    entry = index_entry()
    stats = None
    if entry.get("state") == "READY":
        stats = client.get_inference_statistics(MODEL, as_json=True)["model_stats"][0]
    return {"error": error, "state": entry.get("state"), "reason": entry.get("reason", ""), "stats": stats}


print(json.dumps({"batching": batching, "queue": queue, "priority": priority, "load": load}[SCENARIO]()))
