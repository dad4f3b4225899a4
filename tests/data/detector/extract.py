#!/usr/bin/python3
"""Writes a store's performance results as the detector fixture CSV (one row per result:
run, suite, model, backend, status, noisy, samples in ms separated by spaces), so a test can
rebuild the store's series without the store's other tables. Usage: extract.py STORE.db > F.csv"""
import csv
import sqlite3
import struct
import sys

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
out = csv.writer(sys.stdout, lineterminator="\n")
out.writerow(["run", "suite", "model", "backend", "status", "noisy", "samples_ms"])
rows = db.execute(
    "SELECT run_id, suite, model, backend, status, noisy, samples FROM results"
    " WHERE mode = 'performance' ORDER BY run_id, suite, model, backend")
for run, suite, model, backend, status, noisy, blob in rows:
    samples = struct.unpack(f"<{len(blob or b'') // 8}d", blob or b"")
    out.writerow([run, suite, model, backend, status, noisy,
                  " ".join(f"{v:.6g}" for v in samples)])
