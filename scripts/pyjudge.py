#!/usr/bin/env python3
"""A plain Python judge of docs/contracts.md, for speed comparisons with `verifyctl judge`.

Standard library only. It reads a conformance case (docs/contracts.md section 8) with
json.load and prints the same outcome JSON as `verifyctl judge --case`:
outcome, and per effect verdict, result, reasons, counts, values and the
contract hash. It is written the obvious way (dicts, sets, one pass per
read), as a careful engineer would write a judge in Python; it is not tuned.

    scripts/pyjudge.py CASE.json            judge one case
    scripts/pyjudge.py --check DIR          judge every DIR/*.json conformance
                                            case and compare with its expect

Refusals are reduced to the three codes and exit 2; the messages are shorter
than the daemon's. Freshness is supported. The Go judge is the reference: this
file exists to measure it against.
"""

import datetime
import decimal
import hashlib
import json
import sys

KNOWN_KEYS = {
    "kind", "match", "expected_count", "count_new_only", "idempotency_key", "key_field",
    "field", "value", "new_records", "identity_field", "forbid_collateral_loss", "risk",
    "timeout_s", "probe",
}
KINDS = ("record_written", "field_equals", "exact_new_set")


class Refusal(Exception):
    def __init__(self, code, message, path):
        super().__init__(message)
        self.code, self.message, self.path = code, message, path


# --- canonical text (docs/contracts.md section 2) -------------------------------------

def canon_number(d):
    if isinstance(d, int):
        return str(d)
    if d == 0:
        return "0"
    sign, digits, exp = d.normalize().as_tuple()
    ds = "".join(map(str, digits))
    n = len(ds)
    neg = "-" if sign else ""
    if exp >= 0:
        if n + exp > 1000:
            return neg + ds + "e" + str(exp)
        return neg + ds + "0" * exp
    if -exp < n:
        return neg + ds[: n + exp] + "." + ds[n + exp:]
    if -exp - n > 1000:
        return neg + ds + "e" + str(exp)
    return neg + "0." + "0" * (-exp - n) + ds


def canon_string_json(s):
    out = ['"']
    for ch in s:
        c = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif c < 0x20 or c == 0x7F or (0x80 <= c < 0x10000):
            out.append("\\u%04x" % c)
        elif c >= 0x10000:
            c -= 0x10000
            out.append("\\u%04x\\u%04x" % (0xD800 + (c >> 10), 0xDC00 + (c & 0x3FF)))
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def canon_json(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, str):
        return canon_string_json(v)
    if isinstance(v, (int, decimal.Decimal)):
        return canon_number(v)
    if isinstance(v, dict):
        return "{" + ",".join(canon_string_json(k) + ":" + canon_json(v[k]) for k in sorted(v)) + "}"
    if isinstance(v, list):
        return "[" + ",".join(canon_json(e) for e in v) + "]"
    return "null"


def canon(v):
    """Canonical text of a record value, or None for no value."""
    if v is None:
        return None
    if isinstance(v, str):
        return v
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, (int, decimal.Decimal)):
        return canon_number(v)
    return canon_json(v)


# --- contracts (docs/contracts.md section 1) ------------------------------------------

def load_value(v, params, path):
    if isinstance(v, str):
        return v
    if isinstance(v, dict) and len(v) == 1 and isinstance(v.get("literal"), str):
        return v["literal"]
    if isinstance(v, dict) and len(v) == 1 and isinstance(v.get("param"), str):
        if v["param"] not in params:
            raise Refusal("UNBOUND_PARAM", "missing parameter " + v["param"], path + ".param")
        return params[v["param"]]
    raise Refusal("INVALID_CONTRACT", "a value is text, {literal} or {param}", path)


def load_selector(m, params, path):
    if not isinstance(m, dict):
        raise Refusal("INVALID_CONTRACT", "a selector is a map", path)
    return {k: load_value(v, params, path + "." + k) for k, v in m.items()}


def load_effect(e, params, path):
    if not isinstance(e, dict):
        raise Refusal("INVALID_CONTRACT", "an effect is a map", path)
    for k in e:
        if k not in KNOWN_KEYS:
            raise Refusal("INVALID_CONTRACT", "unknown key " + k, path + "." + k)
    kind = e.get("kind")
    if kind not in KINDS:
        raise Refusal("INVALID_CONTRACT", "bad kind", path + ".kind")
    c = {
        "kind": kind,
        "match": load_selector(e.get("match", {}), params, path + ".match"),
        "expected_count": e.get("expected_count", 1),
        "count_new_only": e.get("count_new_only", False),
        "idempotency_key": None,
        "key_field": e.get("key_field", "key"),
        "field": e.get("field"),
        "value": None,
        "new_records": [],
        "identity_field": e.get("identity_field", "id"),
        "forbid_collateral_loss": e.get("forbid_collateral_loss", True),
    }
    n = c["expected_count"]
    if isinstance(n, bool) or not isinstance(n, (int, decimal.Decimal)) or n < 0 or n != int(n):
        raise Refusal("INVALID_CONTRACT", "expected_count is an integer >= 0", path + ".expected_count")
    c["expected_count"] = int(n)
    if "idempotency_key" in e and e["idempotency_key"] is not None:
        c["idempotency_key"] = load_value(e["idempotency_key"], params, path + ".idempotency_key")
    if c["count_new_only"] and kind != "record_written":
        raise Refusal("INVALID_CONTRACT", "count_new_only is for record_written", path + ".count_new_only")
    if kind == "field_equals":
        if not isinstance(c["field"], str) or "value" not in e:
            raise Refusal("INVALID_CONTRACT", "field_equals needs field and value", path)
        c["value"] = load_value(e["value"], params, path + ".value")
    elif "field" in e or "value" in e:
        raise Refusal("INVALID_CONTRACT", "field and value are for field_equals", path)
    nr = e.get("new_records", [])
    if nr and kind != "exact_new_set":
        raise Refusal("INVALID_CONTRACT", "new_records is for exact_new_set", path + ".new_records")
    if kind == "exact_new_set":
        c["new_records"] = [load_selector(s, params, "%s.new_records[%d]" % (path, i)) for i, s in enumerate(nr)]
        if any(not s for s in c["new_records"]):
            raise Refusal("INVALID_CONTRACT", "an empty member", path + ".new_records")
        if c["expected_count"] != len(c["new_records"]):
            raise Refusal("INVALID_CONTRACT", "expected_count differs from new_records", path + ".expected_count")
    return c


def contract_hash(c):
    m = {
        "kind": c["kind"], "match": c["match"], "field": c["field"] if c["kind"] == "field_equals" else None,
        "value": c["value"], "expected_count": c["expected_count"], "idempotency_key": c["idempotency_key"],
        "key_field": c["key_field"], "forbid_collateral_loss": c["forbid_collateral_loss"],
    }
    if c["count_new_only"]:
        m["count_new_only"] = True
    if c["kind"] == "exact_new_set":
        m["new_records"] = c["new_records"]
        m["identity_field"] = c["identity_field"]
    elif c["identity_field"] != "id":
        m["identity_field"] = c["identity_field"]
    return "sha256:" + hashlib.sha256(canon_json(m).encode()).hexdigest()


# --- judgement (docs/contracts.md section 3) ------------------------------------------

def matches(r, sel):
    for f, want in sel.items():
        if canon(r.get(f)) != want:
            return False
    return True


def key_ok(c, r):
    return c["idempotency_key"] is None or canon(r.get(c["key_field"])) == c["idempotency_key"]


def identity(r, field):
    t = canon(r.get(field))
    if t is not None:
        return ("f", t)
    return ("w", canon_json(r))


def verdict(decision, reasons, observed=None, expected=None, matched=()):
    return {"verdict": decision, "reasons": [{"code": c, "message": m} for c, m in reasons],
            "observed_count": observed, "expected_count": expected,
            "observed_value": None, "expected_value": None, "matched": list(matched)}


def judge_record_written(c, before, after):
    what = "new matching records" if c["count_new_only"] else "matching records"
    base_ids = None
    if c["count_new_only"] or c["forbid_collateral_loss"]:
        base_ids = {identity(r, c["identity_field"]) for r in before}
    matched = []
    for r in after:
        if c["count_new_only"] and identity(r, c["identity_field"]) in base_ids:
            continue
        if matches(r, c["match"]) and key_ok(c, r):
            matched.append(r)
    loss = 0
    if c["forbid_collateral_loss"]:
        after_ids = {identity(r, c["identity_field"]) for r in after}
        for r in before:
            if not matches(r, c["match"]) and identity(r, c["identity_field"]) not in after_ids:
                loss += 1
    n, x = len(matched), c["expected_count"]
    reasons = []
    if n > x:
        reasons.append(("COUNT_OVER", "found %d %s, expected exactly %d" % (n, what, x)))
    elif n < x:
        reasons.append(("COUNT_UNDER", "found %d %s, expected exactly %d" % (n, what, x)))
    if loss:
        reasons.append(("COLLATERAL_LOSS", "%d pre-existing record(s) outside the selector vanished" % loss))
    if reasons:
        return verdict("REFUTED", reasons, n, x, matched)
    return verdict("CONFIRMED", [("COUNT_EXACT", "found exactly %d %s" % (n, what))], n, x, matched)


def judge_field_equals(c, after):
    matched = [r for r in after if matches(r, c["match"]) and key_ok(c, r)]
    n = len(matched)
    if n == 0:
        v = verdict("REFUTED", [("FIELD_NO_MATCH", "no record matches the selector")], 0, 1)
    elif n > 1:
        v = verdict("REFUTED", [("FIELD_AMBIGUOUS", "%d records match the selector" % n)], n, 1, matched)
    else:
        got = canon(matched[0].get(c["field"]))
        if got == c["value"]:
            v = verdict("CONFIRMED", [("FIELD_EQUAL", "field reads back")], 1, 1, matched)
        else:
            v = verdict("REFUTED", [("FIELD_MISMATCH", "field differs")], 1, 1, matched)
        v["observed_value"] = got
    return v


def judge_exact_new_set(c, before, after):
    field = c["identity_field"]
    missing = sum(1 for r in before if canon(r.get(field)) is None) + sum(1 for r in after if canon(r.get(field)) is None)
    if missing:
        return verdict("INDETERMINATE", [("IDENTITY_MISSING", "%d record(s) carry no %s" % (missing, field))])
    base_ids = {canon(r[field]) for r in before}
    added = [r for r in after if canon(r[field]) not in base_ids and matches(r, c["match"])]
    n, x = len(added), c["expected_count"]
    reasons = []
    if n != x:
        reasons.append(("SET_CARDINALITY", "%d record(s) were added in scope, expected exactly %d" % (n, x)))
    groups = {}
    for sel in c["new_records"]:
        k = tuple(sorted(sel.items()))
        g = groups.setdefault(k, [sel, 0, 0])
        g[1] += 1
    undeclared = 0
    for r in added:
        named = False
        for g in groups.values():
            if matches(r, g[0]):
                g[2] += 1
                named = True
        if not named:
            undeclared += 1
    off = [g for g in groups.values() if g[1] != g[2]]
    if off:
        reasons.append(("SET_MEMBER_MULTIPLICITY", "%d member(s) added a different number of times" % len(off)))
    if undeclared:
        reasons.append(("SET_UNDECLARED", "%d added record(s) match no declared member" % undeclared))
    if c["forbid_collateral_loss"]:
        after_ids = {canon(r[field]) for r in after}
        loss = sum(1 for r in before if matches(r, c["match"]) and canon(r[field]) not in after_ids)
        if loss:
            reasons.append(("SET_SCOPE_LOSS", "%d pre-existing record(s) in scope vanished" % loss))
    if reasons:
        return verdict("REFUTED", reasons, n, x, added)
    return verdict("CONFIRMED", [("SET_EXACT", "exactly the %d declared record(s) were added" % n)], n, x, added)


def parse_ts(v):
    if isinstance(v, (int, decimal.Decimal)) and not isinstance(v, bool):
        return datetime.datetime.fromtimestamp(float(v), datetime.timezone.utc)
    if isinstance(v, str):
        try:
            return datetime.datetime.fromtimestamp(float(v), datetime.timezone.utc)
        except ValueError:
            pass
        t = datetime.datetime.fromisoformat(v.replace("Z", "+00:00"))
        if t.tzinfo is None:
            t = t.replace(tzinfo=datetime.timezone.utc)
        return t
    raise ValueError("no timestamp")


def judge(c, before, after, fresh):
    if not after["reachable"]:
        v = verdict("INDETERMINATE", [("SOR_UNREACHABLE", "the after read failed")])
        v["unavailable"] = True
    elif (c["kind"] == "exact_new_set" or (c["kind"] == "record_written" and (c["count_new_only"] or c["forbid_collateral_loss"]))) and not before["reachable"]:
        v = verdict("INDETERMINATE", [("BASELINE_UNREACHABLE", "the baseline read failed")])
    else:
        recs_b, recs_a = before.get("records") or [], after["records"]
        if c["kind"] == "record_written":
            v = judge_record_written(c, recs_b, recs_a)
        elif c["kind"] == "field_equals":
            v = judge_field_equals(c, recs_a)
        else:
            v = judge_exact_new_set(c, recs_b, recs_a)
        if v["verdict"] == "CONFIRMED" and fresh and v["matched"]:
            field, window, now = fresh
            for r in v["matched"]:
                try:
                    age = (now - parse_ts(r.get(field))).total_seconds()
                    ok = abs(age) <= window
                except (ValueError, TypeError, OverflowError):
                    ok = False
                if not ok:
                    v = verdict("INDETERMINATE", [("STALE", "a matched record is not fresh")])
                    v["stale"] = True
                    break
    if c["kind"] == "field_equals":
        v["expected_value"] = c["value"]
    v["contract_hash"] = contract_hash(c)
    v["result"] = classify(v)
    del v["matched"]
    v.pop("stale", None)
    v.pop("unavailable", None)
    return v


def classify(v):
    if v["verdict"] == "CONFIRMED":
        return "confirmed"
    if v.get("stale"):
        return "stale"
    if v["verdict"] == "INDETERMINATE":
        return "unavailable" if v.get("unavailable") else "indeterminate"
    loss = any(r["code"] in ("COLLATERAL_LOSS", "SET_SCOPE_LOSS") for r in v["reasons"])
    if (v["observed_count"] or 0) > 0 or loss:
        return "conflicting"
    return "refuted"


def run(case):
    if not isinstance(case, dict) or not isinstance(case.get("effects"), list) or not case["effects"]:
        raise Refusal("INVALID_CASE", "a case needs effects", "effects")
    for side in ("before", "after"):
        s = case.get(side)
        if not isinstance(s, dict) or not isinstance(s.get("reachable"), bool):
            raise Refusal("INVALID_CASE", "a read is {reachable, records}", side)
        if s["reachable"] and not isinstance(s.get("records"), list):
            raise Refusal("INVALID_CASE", "a reachable read needs records", side + ".records")
    params = case.get("params") or {}
    contracts = [load_effect(e, params, "effects[%d]" % i) for i, e in enumerate(case["effects"])]
    fresh = None
    if case.get("freshness"):
        now = parse_ts(case["now"]) if case.get("now") else datetime.datetime.now(datetime.timezone.utc)
        fresh = (case["freshness"]["field"], float(case["freshness"]["window_s"]), now)
    effects = [judge(c, case["before"], case["after"], fresh) for c in contracts]
    results = [e["result"] for e in effects]
    if all(r == "confirmed" for r in results):
        outcome = "VERIFIED"
    elif all(r == "refuted" for r in results):
        outcome = "HALTED_BEFORE_EFFECT"
    else:
        outcome = "RECONCILIATION_REQUIRED"
    return {"outcome": outcome, "effects": effects}


def load(fp):
    return json.load(fp, parse_float=decimal.Decimal)


def main(argv):
    if len(argv) == 3 and argv[1] == "--check":
        import glob
        import os
        bad = 0
        files = sorted(glob.glob(os.path.join(argv[2], "*.json")))
        for path in files:
            with open(path) as f:
                doc = load(f)
            want = doc["expect"]
            try:
                out, code = run(doc["case"]), 0
            except Refusal as r:
                out, code = {"error": {"code": r.code}}, 2
            ok = code == want["exit"]
            if ok and code == 2:
                ok = out["error"]["code"] == want.get("error_code")
            elif ok:
                ok = out["outcome"] == want["outcome"] and len(out["effects"]) == len(want["effects"])
                for g, w in zip(out["effects"], want["effects"]):
                    ok = ok and [g["verdict"], g["result"], [r["code"] for r in g["reasons"]],
                                 g["observed_count"], g["contract_hash"]] == \
                        [w["verdict"], w["result"], w["codes"], w.get("observed_count"), w["contract_hash"]]
            if not ok:
                bad += 1
                print("MISMATCH", os.path.basename(path), json.dumps(out)[:300])
        print("%d/%d cases agree" % (len(files) - bad, len(files)))
        return 1 if bad else 0
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    with (sys.stdin if argv[1] == "-" else open(argv[1])) as f:
        case = load(f)
    try:
        out, code = run(case), 0
    except Refusal as r:
        out, code = {"error": {"code": r.code, "message": r.message, "path": r.path}}, 2
    json.dump(out, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv))
