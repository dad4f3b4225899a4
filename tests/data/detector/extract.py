#!/usr/bin/python3
"""Writes a store's performance results as the detector fixture CSV (one row per result:
run, suite, model, backend, status, noisy, samples in ms separated by spaces, and where
--counters cachegrind counted them the simulated instructions per call), so a test can rebuild
the store's series without the store's other tables. Usage: extract.py STORE.db > F.csv"""
import csv
import sqlite3
import struct
import sys

db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
out = csv.writer(sys.stdout, lineterminator="\n")
columns = [c[1] for c in db.execute("PRAGMA table_info(results)")]
counted = "sim_instructions" in columns and db.execute(
    "SELECT count(*) FROM results WHERE sim_instructions IS NOT NULL").fetchone()[0] > 0
out.writerow(["run", "suite", "model", "backend", "status", "noisy", "samples_ms"] +
             (["sim_instructions"] if counted else []))
rows = db.execute(
    "SELECT run_id, suite, model, backend, status, noisy, samples, "
    + ("sim_instructions" if counted else "NULL") + " FROM results"
    " WHERE mode = 'performance' ORDER BY run_id, suite, model, backend")


def doubles(blob, spec):
    return " ".join(format(v, spec) for v in struct.unpack(f"<{len(blob or b'') // 8}d", blob or b""))


for run, suite, model, backend, status, noisy, blob, counts in rows:
    out.writerow([run, suite, model, backend, status, noisy, doubles(blob, ".6g")] +
                 ([doubles(counts, ".0f")] if counted else []))
