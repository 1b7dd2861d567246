#!/usr/bin/env python3
"""Write a large two-effect conformance case for judge speed comparisons.

    scripts/gencase.py N OUT.json [--shuffle]

The baseline holds N clinical notes (id, patient_id, type, note, created_at);
the after read holds the same N plus one new Triage note for patient p-new,
ordered by id (an ORDER BY id read) unless --shuffle. The two effects are the
ones the in-process benchmarks use: record_written with count_new_only and
forbid_collateral_loss, and exact_new_set over the whole read with
forbid_collateral_loss. Both are CONFIRMED, so the outcome is VERIFIED.
200,000 records make a file of about 50 MB.
"""

import json
import random
import sys


def record(i, patient, typ, note):
    return {"id": i, "patient_id": patient, "type": typ, "note": note,
            "created_at": "2026-01-01T%02d:%02d:%02dZ" % (i // 3600 % 24, i // 60 % 60, i % 60)}


def main(argv):
    if len(argv) not in (3, 4) or (len(argv) == 4 and argv[3] != "--shuffle"):
        print(__doc__, file=sys.stderr)
        return 2
    n = int(argv[1])
    before = [record(i, "p%d" % (i % 50000), "Consult", "routine follow-up") for i in range(1, n + 1)]
    after = list(before) + [record(n + 1, "p-new", "Triage", "chest pain")]
    if len(argv) == 4:
        rng = random.Random(14)
        before = before[:]
        rng.shuffle(before)
        rng.shuffle(after)
    case = {
        "effects": [
            {"kind": "record_written", "match": {"patient_id": {"param": "pid"}, "type": "Triage"},
             "count_new_only": True},
            {"kind": "exact_new_set", "new_records": [{"patient_id": {"param": "pid"}, "type": "Triage"}],
             "expected_count": 1},
        ],
        "params": {"pid": "p-new"},
        "before": {"reachable": True, "records": before},
        "after": {"reachable": True, "records": after},
    }
    with open(argv[2], "w") as f:
        json.dump(case, f, separators=(", ", ": "))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
