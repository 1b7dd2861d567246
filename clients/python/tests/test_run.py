"""Runs through the Python client against the real daemon.

The daemon (from VERIFIERD_BIN, as in test_client.py) registers the claims
workflow of the end-to-end tests (e2e/testdata/runs/workflow.yaml: intake,
posting with the intake record's id handed off, letter producing the
letter document, send consuming it), a SQLite deployment of one table the
tests write to as the automation, and a document-hash deployment of the
letters' folder.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Dict, List

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
sys.path.insert(0, str(HERE.parent))

from verifierd import (  # noqa: E402
    Client,
    NotConfirmed,
    Refused,
    VerifierError,
    check_run_receipt_subject,
)

BIN = Path(os.environ.get("VERIFIERD_BIN") or REPO / ".cache" / "bin")


def _free_port() -> int:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RunDaemon:
    """verifierd on loopback with the claims workflow and its system of record."""

    def __init__(self) -> None:
        if not (BIN / "verifierd").is_file():
            raise RuntimeError(
                "verifierd not found in %s: run `make build` (or `make python-test`), "
                "or set VERIFIERD_BIN to the folder of the built binaries" % BIN
            )
        self.dir = Path(tempfile.mkdtemp(prefix="verifierd-pyrun-"))
        self.db_path = self.dir / "claims.db"
        self.letters = self.dir / "letters"
        self.letters.mkdir()
        self.db = sqlite3.connect(str(self.db_path), isolation_level=None)
        self.db.execute(
            "CREATE TABLE records (id INTEGER PRIMARY KEY AUTOINCREMENT, kind TEXT NOT NULL, "
            "patient_id TEXT NOT NULL, intake_id INTEGER, note TEXT)"
        )
        (self.dir / "deployment.yaml").write_text(
            "effects:\n  kind: sql\n  sqlite_database: %s\n"
            "  sql_query: SELECT id, kind, patient_id, intake_id, note FROM records "
            "WHERE patient_id = :patient_id ORDER BY id\n"
            "  sql_query_params: {patient_id: {param: patient_id}}\n"
            "  census: {sql_query: SELECT id FROM records}\n" % self.db_path
        )
        (self.dir / "letters.yaml").write_text(
            'effects:\n  kind: document-hash\n  root: %s\n  glob: "letter-*.txt"\n' % self.letters
        )
        shutil.copy(REPO / "e2e" / "testdata" / "runs" / "workflow.yaml", self.dir / "workflow.yaml")
        (self.dir / "daemon.yaml").write_text(
            "deployments:\n  ledger: deployment.yaml\n  letters: letters.yaml\n"
            "workflows:\n  claims: workflow.yaml\n"
        )
        self.http = "127.0.0.1:%d" % _free_port()
        self.log = open(self.dir / "verifierd.log", "wb")
        self.args = [
            str(BIN / "verifierd"),
            "--listen", "127.0.0.1:%d" % _free_port(),
            "--http-listen", self.http,
            "--data-dir", str(self.dir / "data"),
            "--config", str(self.dir / "daemon.yaml"),
            "--log-level", "warn",
        ]
        self.url = "http://" + self.http
        self.start()

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 15
        client = Client(self.url, timeout=2)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("verifierd exited %d:\n%s" % (self.proc.returncode, self.output()))
            try:
                client._call("GET", "/v1/info", None)
                break
            except VerifierError:
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError("verifierd did not answer on %s" % self.url)
                time.sleep(0.1)

    def kill9_and_restart(self) -> None:
        """Kill the daemon with SIGKILL, as a crash would, and start it
        again on the same data dir and ports."""
        self.proc.kill()
        self.proc.wait()
        self.start()

    def output(self) -> str:
        self.log.flush()
        return (self.dir / "verifierd.log").read_text(errors="replace")

    def insert(self, kind: str, patient: str, intake_id: Any = None, note: str = "") -> int:
        cur = self.db.execute(
            "INSERT INTO records (kind, patient_id, intake_id, note) VALUES (?, ?, ?, ?)",
            (kind, patient, intake_id, note),
        )
        return int(cur.lastrowid or 0)

    def delete(self, record_id: int) -> None:
        self.db.execute("DELETE FROM records WHERE id = ?", (record_id,))

    def letter(self, patient: str) -> bytes:
        data = ("Dear patient %s, your claim is booked.\n" % patient).encode()
        (self.letters / ("letter-%s.txt" % patient)).write_bytes(data)
        return data

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        self.db.close()
        shutil.rmtree(self.dir, ignore_errors=True)


def _codes(run_result: Any) -> List[str]:
    return [r.code for r in run_result.reasons]


class RunTest(unittest.TestCase):
    daemon: RunDaemon
    client: Client

    @classmethod
    def setUpClass(cls) -> None:
        cls.daemon = RunDaemon()
        cls.client = Client(cls.daemon.url)

    @classmethod
    def tearDownClass(cls) -> None:
        cls.daemon.stop()

    def _letter_and_send(self, run: Any, patient: str) -> None:
        with run.step("letter"):
            self.daemon.insert("letter", patient)
            data = self.daemon.letter(patient)
        answer = run.verify_artifact("letter", "letter", "letters", data, name="letter-%s.txt" % patient)
        self.assertEqual(answer["verdict"], "CONFIRMED", answer)
        with run.step("send"):
            self.daemon.insert("dispatch", patient)

    def test_run_verified(self) -> None:
        d = self.daemon
        with self.client.run("claims", "ledger", {"patient_id": "py1"}) as run:
            self.assertTrue(run.run_id)
            with run.step("intake") as intake:
                intake_id = d.insert("intake", "py1")
            assert intake.result is not None
            self.assertEqual(intake.result.outcome, "VERIFIED")
            with run.step("posting", {"note": "Booked"}) as posting:
                d.insert("posting", "py1", intake_id, "Booked")
            self.assertEqual(posting.result.outcome if posting.result else None, "VERIFIED")
            self._letter_and_send(run, "py1")
        # The with block finished the run: VERIFIED, so nothing was raised.
        result = run.result
        assert result is not None
        self.assertEqual(result.outcome, "VERIFIED")
        self.assertEqual(result.state, "sealed")
        self.assertEqual(result.attempt, 1)
        self.assertEqual([(s.step, s.outcome) for s in result.steps],
                         [("intake", "VERIFIED"), ("posting", "VERIFIED"), ("letter", "VERIFIED"), ("send", "VERIFIED")])
        self.assertEqual(result.artifacts[0].verdict, "CONFIRMED")
        self.assertEqual(result.reasons, [])
        payload = check_run_receipt_subject(result, run=run.run_id)
        self.assertEqual(payload["outcome"], "VERIFIED")
        self.assertEqual(payload["attempt"], 1)
        self.assertEqual(self.client.get_run(run.run_id).outcome, "VERIFIED")

    def test_run_refusals(self) -> None:
        d = self.daemon
        with self.assertRaises(NotConfirmed) as caught:
            with self.client.run("claims", "ledger", {"patient_id": "py2"}) as run:
                ran: List[bool] = []
                with self.assertRaises(Refused) as early:
                    with run.step("posting", {"note": "Booked"}):
                        ran.append(True)
                self.assertEqual(ran, [], "the body must not run when the step is refused")
                self.assertIn("step_out_of_order", (early.exception.rule or "") + early.exception.message)
                with run.step("intake"):
                    intake_id = d.insert("intake", "py2")
                # A value for the handed-off parameter is refused, even the
                # right one: it comes from intake's record, not the caller.
                with self.assertRaises(VerifierError) as forged:
                    run.begin("posting", {"note": "Booked", "intake_id": intake_id})
                self.assertIn("intake_id", forged.exception.message)
                with self.assertRaises(Refused) as consumer:
                    run.begin("send")
                self.assertIn("step_out_of_order", (consumer.exception.rule or "") + consumer.exception.message)
        # Leaving the block finished the run: intake landed and nothing
        # else did, so the run needs reconciling.
        err = caught.exception
        self.assertEqual(err.outcome, "RECONCILIATION_REQUIRED")
        self.assertEqual(err.run_id, run.run_id)
        self.assertIn("step_not_begun", _codes(err.result))

    def test_consumer_before_artifact(self) -> None:
        d = self.daemon
        run = self.client.begin_run("claims", "ledger", {"patient_id": "py3"})
        with run.step("intake"):
            intake_id = d.insert("intake", "py3")
        with run.step("posting", {"note": "Booked"}):
            d.insert("posting", "py3", intake_id, "Booked")
        with run.step("letter"):
            d.insert("letter", "py3")
            d.letter("py3")
        with self.assertRaises(Refused) as caught:
            run.begin("send")
        self.assertIn("artifact_unverified", (caught.exception.rule or "") + caught.exception.message)

    def test_double_submit_repaired(self) -> None:
        d = self.daemon
        run = self.client.begin_run("claims", "ledger", {"patient_id": "py4"})
        with run.step("intake"):
            intake_id = d.insert("intake", "py4")
        with self.assertRaises(NotConfirmed) as double:
            with run.step("posting", {"note": "Booked"}):
                d.insert("posting", "py4", intake_id, "Booked")
                dup = d.insert("posting", "py4", intake_id, "Booked")
        self.assertEqual(double.exception.outcome, "RECONCILIATION_REQUIRED")
        with self.assertRaises(NotConfirmed) as first:
            run.finish()
        self.assertEqual(first.exception.outcome, "RECONCILIATION_REQUIRED")
        self.assertEqual(first.exception.result.attempt, 1)
        self.assertIn("step_not_verified", _codes(first.exception.result))
        d.delete(dup)
        again = self.client.reverify(double.exception.session_id, "removed the duplicate posting")
        self.assertEqual(again.outcome, "VERIFIED")
        # Sealed RECONCILIATION_REQUIRED, the run goes on with its steps.
        self._letter_and_send(run, "py4")
        result = run.finish()
        self.assertEqual(result.outcome, "VERIFIED")
        self.assertEqual(result.attempt, 2)
        self.assertEqual(check_run_receipt_subject(result, run=run.run_id)["attempt"], 2)

    def test_nothing_saved_halted(self) -> None:
        with self.assertRaises(NotConfirmed) as caught:
            with self.client.run("claims", "ledger", {"patient_id": "py5"}) as run:
                with run.step("intake"):
                    pass  # the automation saved nothing
        self.assertEqual(caught.exception.outcome, "HALTED_BEFORE_EFFECT")  # the step's
        assert run.result is not None
        self.assertEqual(run.result.outcome, "HALTED_BEFORE_EFFECT")  # the run's, finished on the way out

    def test_rollback_check(self) -> None:
        d = self.daemon
        run = self.client.begin_run("claims", "ledger", {"patient_id": "py6"})
        with run.step("intake"):
            intake_id = d.insert("intake", "py6")
        check = self.client.rollback_check(run.run_id)
        self.assertFalse(check.rolled_back)
        self.assertEqual([r.step for r in check.remains], ["intake"])
        d.delete(intake_id)
        check = self.client.rollback_check(run.run_id)
        self.assertTrue(check.rolled_back)
        self.assertEqual(check.remains, [])
        self.assertEqual(check.run.outcome, "ROLLED_BACK_VERIFIED")
        self.assertEqual(check_run_receipt_subject(check.run, run=run.run_id)["outcome"], "ROLLED_BACK_VERIFIED")

    def test_idempotent_run_id(self) -> None:
        params: Dict[str, Any] = {"patient_id": "py7"}
        first = self.client.begin_run("claims", "ledger", params, run_id="py7-run")
        again = self.client.begin_run("claims", "ledger", params, run_id="py7-run")
        self.assertEqual((first.run_id, again.run_id), ("py7-run", "py7-run"))
        with self.assertRaises(VerifierError) as caught:
            self.client.begin_run("claims", "ledger", {"patient_id": "someone-else"}, run_id="py7-run")
        self.assertEqual(caught.exception.code, "ALREADY_EXISTS")


class RunRestartTest(unittest.TestCase):
    """A run survives kill -9 of the daemon between two steps and between
    the last Verify and FinishRun (its own daemon, which it kills)."""

    def setUp(self) -> None:
        self.daemon = RunDaemon()
        self.addCleanup(self.daemon.stop)

    def test_run_survives_kill9(self) -> None:
        d = self.daemon
        client = Client(d.url)
        run = client.begin_run("claims", "ledger", {"patient_id": "pk"}, run_id="pk-run")
        with run.step("intake"):
            intake_id = d.insert("intake", "pk")
        d.kill9_and_restart()  # between two steps
        run = client.open_run("pk-run")
        with run.step("posting", {"note": "Booked"}):
            d.insert("posting", "pk", intake_id, "Booked")
        with run.step("letter"):
            d.insert("letter", "pk")
            data = d.letter("pk")
        self.assertEqual(run.verify_artifact("letter", "letter", "letters", data, name="letter-pk.txt")["verdict"], "CONFIRMED")
        with run.step("send"):
            d.insert("dispatch", "pk")
        d.kill9_and_restart()  # between the last Verify and FinishRun
        result = client.open_run("pk-run").finish()
        self.assertEqual(result.outcome, "VERIFIED")
        self.assertEqual(result.attempt, 1)
        self.assertEqual([s.outcome for s in result.steps], ["VERIFIED"] * 4)


if __name__ == "__main__":
    unittest.main()
