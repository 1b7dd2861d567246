"""The Python client against the real daemon.

Each test class starts ``verifierd`` from VERIFIERD_BIN (``make python-test``
builds it into .cache/bin and sets the variable) on free loopback ports, with
a daemon config registering a SQLite deployment of the demo clinic and the
demo's ``triage`` workflow; the ``clinic`` binary beside it plays the
automation that saves the record. The daemon is stopped by its PID.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
import warnings
from decimal import Decimal
from pathlib import Path
from typing import Dict, List, Optional

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))

from verifierd import (  # noqa: E402
    Client,
    NotConfirmed,
    ReceiptSubjectMismatch,
    Refused,
    UnusedParamsWarning,
    VerifierError,
    check_receipt_subject,
)

BIN = Path(os.environ.get("VERIFIERD_BIN") or REPO / ".cache" / "bin")

TRIAGE_EFFECTS = [
    {
        "kind": "record_written",
        "match": {"patient_id": {"param": "patient_id"}, "type": "Triage"},
        "expected_count": 1,
        "count_new_only": True,
        "risk": "irreversible",
        "timeout_s": 2,
    },
    {
        "kind": "field_equals",
        "match": {"patient_id": {"param": "patient_id"}, "type": "Triage"},
        "field": "note",
        "value": {"param": "note"},
        "timeout_s": 2,
    },
]


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Daemon:
    """One verifierd process on loopback, with its own data dir and clinic DB."""

    def __init__(self, token: Optional[str] = None) -> None:
        for name in ("verifierd", "clinic"):
            if not (BIN / name).is_file():
                raise RuntimeError(
                    "%s not found in %s: run `make build` (or `make python-test`), "
                    "or set VERIFIERD_BIN to the folder of the built binaries" % (name, BIN)
                )
        self.token = token
        self.dir = Path(tempfile.mkdtemp(prefix="verifierd-pytest-"))
        self.db = self.dir / "clinic.db"
        self.clinic("init")
        query = (
            "SELECT id, patient_id, type, note, created_at FROM encounters "
            "WHERE patient_id = :patient_id ORDER BY id"
        )
        (self.dir / "deployment.yaml").write_text(
            "effects:\n  kind: sql\n  sqlite_database: %s\n  sql_query: %s\n"
            "  sql_query_params:\n    patient_id: {param: patient_id}\n"
            "  census:\n    sql_query: SELECT id FROM encounters\n" % (self.db, query)
        )
        # A query naming a table the database does not have: Begin cannot read
        # the baseline and refuses.
        (self.dir / "deployment-broken.yaml").write_text(
            "effects:\n  kind: sql\n  sqlite_database: %s\n"
            "  sql_query: SELECT id, patient_id FROM encunters WHERE patient_id = :patient_id\n"
            "  sql_query_params:\n    patient_id: {param: patient_id}\n"
            "  census:\n    sql_query: SELECT id FROM encounters\n" % self.db
        )
        shutil.copy(REPO / "examples" / "demo" / "workflow.yaml", self.dir / "workflow.yaml")
        config = (
            "deployments:\n  clinic: deployment.yaml\n  clinic-broken: deployment-broken.yaml\n"
            "workflows:\n  triage: workflow.yaml\n"
            # The tests exercise the client's effects= argument too, so the
            # operator's policy lets a caller send its own contracts.
            "policy:\n  require_change_claim: true\n  require_registered_contracts: false\n"
        )
        env = dict(os.environ)
        if token is not None:
            config += "api:\n  bearer_token_env: VERIFIERD_PYTEST_TOKEN\n"
            env["VERIFIERD_PYTEST_TOKEN"] = token
        (self.dir / "daemon.yaml").write_text(config)
        self.http = "127.0.0.1:%d" % free_port()
        self.grpc = "127.0.0.1:%d" % free_port()
        self.log = open(self.dir / "verifierd.log", "wb")
        self.proc = subprocess.Popen(
            [
                str(BIN / "verifierd"),
                "--listen", self.grpc,
                "--http-listen", self.http,
                "--data-dir", str(self.dir / "data"),
                "--config", str(self.dir / "daemon.yaml"),
                "--log-level", "warn",
            ],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            env=env,
        )
        self.url = "http://" + self.http
        try:
            self._wait_ready()
        except Exception:
            self.stop()
            raise

    def _wait_ready(self) -> None:
        client = Client(self.url, token=self.token, timeout=2)
        deadline = time.monotonic() + 15
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("verifierd exited %d:\n%s" % (self.proc.returncode, self.output()))
            try:
                client.preflight("clinic", params={"patient_id": "ready"})
                return
            except VerifierError:
                if time.monotonic() > deadline:
                    raise RuntimeError("verifierd did not answer on %s:\n%s" % (self.url, self.output()))
                time.sleep(0.1)

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "verifierd.log").read_text(errors="replace")

    def clinic(self, *args: str) -> None:
        subprocess.run([str(BIN / "clinic"), args[0], str(self.db), *args[1:]], check=True)

    def save(self, patient: str, note: str, times: int = 1) -> None:
        self.clinic("save", patient, "Triage", note, str(times))

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        shutil.rmtree(self.dir, ignore_errors=True)


class ClientTest(unittest.TestCase):
    daemon: Daemon
    client: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon()
        cls.client = Client(cls.daemon.url)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop()

    def test_step_workflow_verified(self) -> None:
        params = {"patient_id": "p1", "note": "Follow-up"}
        with self.client.step(deployment="clinic", workflow="triage", step="save_triage", params=params) as step:
            self.assertTrue(step.session_id)
            self.assertEqual(len(step.effects), 2)
            self.assertEqual(step.effects[0].candidate, "sql")
            self.assertIsNotNone(step.registered_step)
            self.daemon.save("p1", "Follow-up")
        assert step.result is not None
        self.assertEqual(step.result.outcome, "VERIFIED")
        self.assertEqual([e.verdict for e in step.result.effects], ["CONFIRMED", "CONFIRMED"])
        self.assertEqual([(e.newness, e.collateral_scope) for e in step.result.effects], [("census", "collection")] * 2)
        self.assertEqual([e.oracle_rung for e in step.result.effects], [2, 2])
        self.assertEqual(step.result.registered_step.step, "save_triage")  # type: ignore[union-attr]
        self.assertTrue(step.result.receipt_json.startswith(b"{"))
        # The daemon's own answer: the outcome at the top, unprefixed; the
        # receipt an object.
        self.assertEqual(step.result.raw["outcome"], "VERIFIED")
        self.assertEqual(step.result.receipt["payloadType"], "application/vnd.verifierd.verdict-receipt.v1+json")
        self.assertEqual(json.loads(step.result.receipt_json), step.result.raw["receipt"])

    def test_receipt_subject(self) -> None:
        params = {"patient_id": "p10", "note": "Subject"}
        with self.client.step(deployment="clinic", workflow="triage", step="save_triage", params=params) as step:
            self.daemon.save("p10", "Subject")
        result = step.result
        assert result is not None
        payload = check_receipt_subject(result, session=step.session_id, deployment="clinic", step="save_triage")
        self.assertEqual(payload["session_id"], step.session_id)
        # A receipt of another session (valid, by the same daemon) is refused
        # naming the field.
        other = self.client.begin("clinic", workflow="triage", step="save_triage", params={"patient_id": "p11", "note": "x"})
        for kwargs, field_name in (
            ({"session": other.session_id}, "session"),
            ({"session": step.session_id, "deployment": "billing"}, "deployment"),
            ({"step": "send_invoice"}, "step"),
        ):
            with self.assertRaises(ReceiptSubjectMismatch) as caught:
                check_receipt_subject(result.receipt_json, **kwargs)
            self.assertEqual(caught.exception.field, field_name)
            self.assertIn(field_name, str(caught.exception))
        self.assertEqual(caught.exception.found, "save_triage")
        # Only the signed payload counts: an answer whose unsigned session id
        # was swapped still carries the receipt of the first session.
        wrapped = json.dumps({"session_id": other.session_id, "receipt": json.loads(result.receipt_json)})
        with self.assertRaises(ReceiptSubjectMismatch) as caught:
            check_receipt_subject(wrapped, session=other.session_id)
        self.assertEqual(caught.exception.found, step.session_id)
        with self.assertRaises(ValueError):
            check_receipt_subject({"payloadType": "application/vnd.verifierd.ledger-checkpoint.v1+json", "payload": ""})
        # A refused Begin's receipt names the deployment and step, but nothing
        # was verified: it fails an expectation unless accept_refusal.
        refusal = {"payloadType": "application/vnd.verifierd.verdict-receipt.v1+json", "payload": base64.b64encode(json.dumps(
            {"kind": "begin_refused", "deployment": {"name": "clinic"}, "workflow": {"name": "triage", "step": "save_triage"}}).encode()).decode()}
        with self.assertRaises(ReceiptSubjectMismatch) as caught:
            check_receipt_subject(refusal, deployment="clinic", step="save_triage")
        self.assertEqual(caught.exception.field, "kind")
        self.assertEqual(check_receipt_subject(refusal, deployment="clinic", step="save_triage", accept_refusal=True)["kind"], "begin_refused")

    def test_double_submit_not_confirmed(self) -> None:
        params: Dict[str, str] = {"patient_id": "p2", "note": "Follow-up"}
        with self.assertRaises(NotConfirmed) as caught:
            with self.client.step(deployment="clinic", effects=TRIAGE_EFFECTS, params=params):
                self.daemon.save("p2", "Follow-up", times=2)
        err = caught.exception
        self.assertEqual(err.outcome, "RECONCILIATION_REQUIRED")
        self.assertEqual(err.effects[0].verdict, "REFUTED")
        self.assertEqual(err.effects[0].result_class, "conflicting")
        self.assertEqual(err.effects[0].reasons[0].code, "COUNT_OVER")
        self.assertEqual(err.effects[0].observed_count, 2)
        self.assertEqual(err.effects[0].raw["observedCount"], 2)  # a JSON number
        self.assertEqual(len(err.effects[0].matched_records), 2)
        self.assertEqual({r["patient_id"] for r in err.effects[0].matched_records}, {"p2"})
        self.assertEqual(err.reconciliation_tasks[0].kind, "effect_refuted")
        # The read-back of the note is ambiguous too: its step is
        # irreversible, so it carries a task of its own.
        self.assertEqual(len(err.reconciliation_tasks), 2)
        self.assertEqual(err.reconciliation_tasks[0].suggested_action, "REMOVE_DUPLICATES")
        self.assertEqual(err.reconciliation_tasks[1].suggested_action, "REMOVE_DUPLICATES")
        self.assertIn("COUNT_OVER", str(err))

    def test_begin_verify_with_yaml_effects(self) -> None:
        effects = (REPO / "examples" / "demo" / "effects.yaml").read_text()
        session = self.client.begin("clinic", effects=effects, params={"patient_id": "p3", "note": "x"})
        self.assertIsNone(session.registered_step)
        # Nothing saved: every effect is affirmatively absent.
        result = self.client.verify(session.session_id)
        self.assertFalse(result.verified)
        self.assertEqual(result.outcome, "HALTED_BEFORE_EFFECT")
        # Verifying a finished session returns the recorded result.
        self.assertEqual(self.client.verify(session.session_id).receipt_json, result.receipt_json)

    def test_body_exception_still_verified_and_propagates(self) -> None:
        params = {"patient_id": "p4", "note": "late"}
        with self.assertRaises(RuntimeError):
            with self.client.step(deployment="clinic", workflow="triage", step="save_triage", params=params) as step:
                self.daemon.save("p4", "late")
                raise RuntimeError("the automation crashed after saving")
        assert step.result is not None
        self.assertEqual(step.result.outcome, "VERIFIED")

    def test_inline_deployment_refused(self) -> None:
        ran: List[bool] = []
        with self.assertRaises(Refused) as caught:
            with self.client.step(
                deployment_yaml={"effects": {"kind": "sql", "sqlite_database": str(self.daemon.db)}},
                effects=TRIAGE_EFFECTS,
                params={"patient_id": "p5", "note": "x"},
            ):
                ran.append(True)
        self.assertEqual(ran, [], "the body must not run when Begin is refused")
        err = caught.exception
        self.assertEqual(err.http_status, 403)
        self.assertEqual(err.code, "PERMISSION_DENIED")
        self.assertEqual(err.rule, "inline_deployment_refused")
        self.assertIsInstance(err, VerifierError)

    def test_unreadable_baseline_refused(self) -> None:
        with self.assertRaises(Refused) as caught:
            self.client.begin("clinic-broken", workflow="triage", step="save_triage",
                              params={"patient_id": "p6", "note": "x"})
        self.assertEqual(caught.exception.code, "FAILED_PRECONDITION")
        self.assertEqual(caught.exception.http_status, 400)

    def test_preflight(self) -> None:
        candidates = self.client.preflight("clinic", params={"patient_id": "p1"})
        self.assertEqual(len(candidates), 1)
        self.assertEqual(candidates[0].kind, "sql")
        self.assertTrue(candidates[0].reachable)
        self.assertEqual(candidates[0].tier, 1)

    def test_number_and_boolean_params(self) -> None:
        # 36 binds as the text 36 and True as true (never Python's "True"):
        # the honest save of patient "36" with note "true" is VERIFIED.
        params = {"patient_id": 36, "note": True}
        with warnings.catch_warnings():
            warnings.simplefilter("error", UnusedParamsWarning)
            with self.client.step(deployment="clinic", workflow="triage", step="save_triage", params=params) as step:
                self.assertEqual(step.session.unused_params, [])
                self.daemon.save("36", "true")
        assert step.result is not None
        self.assertEqual(step.result.outcome, "VERIFIED")
        readback = step.result.effects[1]
        self.assertEqual(readback.verdict, "CONFIRMED")
        self.assertEqual(readback.expected_value, "true")

    def test_param_text(self) -> None:
        from verifierd.client import _encode_params

        self.assertEqual(
            _encode_params({"a": 36, "b": True, "c": False, "d": 1234.5, "e": Decimal("1234.50"), "f": "x"}),
            {"a": 36, "b": True, "c": False, "d": 1234.5, "e": "1234.50", "f": "x"},
        )
        with self.assertRaises(TypeError) as caught:
            _encode_params({"note": None})
        self.assertIn("params.note", str(caught.exception))
        with self.assertRaises(TypeError):
            _encode_params({"note": ["a"]})
        with self.assertRaises(ValueError) as nan:
            _encode_params({"amount": float("nan")})
        self.assertIn("params.amount", str(nan.exception))

    def test_daemon_takes_json_scalars(self) -> None:
        # The HTTP/JSON API itself takes a JSON number, and refuses null
        # naming the parameter (not a parser error).
        answer = self.client._call(
            "POST", "/v1/connection-tests", {"deploymentName": "clinic", "params": {"patient_id": 36}}
        )
        self.assertTrue(answer["candidates"][0]["reachable"])
        with self.assertRaises(VerifierError) as caught:
            self.client._call("POST", "/v1/connection-tests", {"deploymentName": "clinic", "params": {"patient_id": None}})
        self.assertEqual(caught.exception.http_status, 400)
        self.assertEqual(caught.exception.code, "INVALID_ARGUMENT")
        self.assertTrue(caught.exception.message.startswith("params.patient_id: "), caught.exception.message)

    def test_unused_params_warned(self) -> None:
        with self.assertWarns(UnusedParamsWarning) as caught:
            session = self.client.begin(
                "clinic", workflow="triage", step="save_triage",
                params={"patient_id": "p7", "note": "x", "tennant": "t1", "age": 36},
            )
        self.assertEqual(session.unused_params, ["age", "tennant"])
        self.assertIn("age, tennant", str(caught.warning))
        # The session was begun all the same: nothing saved, nothing landed.
        self.assertEqual(self.client.verify(session.session_id).outcome, "HALTED_BEFORE_EFFECT")

    def test_unknown_session(self) -> None:
        with self.assertRaises(VerifierError) as caught:
            self.client.verify("ses_nope")
        self.assertNotIsInstance(caught.exception, Refused)
        self.assertEqual(caught.exception.http_status, 404)
        self.assertEqual(caught.exception.code, "NOT_FOUND")


class TokenTest(unittest.TestCase):
    daemon: Daemon

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = Daemon(token="pytest-secret")

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop()

    def test_missing_token(self) -> None:
        with self.assertRaises(VerifierError) as caught:
            Client(self.daemon.url).preflight("clinic", params={"patient_id": "p1"})
        self.assertEqual(caught.exception.http_status, 401)
        self.assertEqual(caught.exception.code, "UNAUTHENTICATED")

    def test_wrong_token(self) -> None:
        with self.assertRaises(VerifierError) as caught:
            Client(self.daemon.url, token="wrong").preflight("clinic", params={"patient_id": "p1"})
        self.assertEqual(caught.exception.http_status, 401)

    def test_with_token(self) -> None:
        client = Client(self.daemon.url, token="pytest-secret")
        with client.step("clinic", workflow="triage", step="save_triage",
                         params={"patient_id": "t1", "note": "ok"}) as step:
            self.daemon.save("t1", "ok")
        self.assertEqual(step.result.outcome if step.result else None, "VERIFIED")


if __name__ == "__main__":
    unittest.main()
