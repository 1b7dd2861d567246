"""The verifierd HTTP/JSON client: Begin, Verify, TestConnection, the
``step`` context manager that wraps one consequential action, and runs:
``run`` wraps a whole workflow whose steps hand off only verified values.

The daemon answers JSON (lowerCamelCase keys; docs/http-api.md): the
outcome at the top of Verify's answer, enum values as they read
(``"VERIFIED"``, ``"CONFIRMED"``, ``"conflicting"``), counts as numbers,
matched records and the receipt as objects. The dataclasses here give
snake_case attributes with the same values and keep the daemon's dict as
``raw``.
"""

from __future__ import annotations

import base64
import decimal
import hashlib
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Callable, Dict, List, Mapping, Optional, Type, Union

__all__ = [
    "BegunEffect",
    "Candidate",
    "Client",
    "EffectResult",
    "NotConfirmed",
    "Reason",
    "ReceiptSubjectMismatch",
    "ReconciliationTask",
    "Refused",
    "RegisteredStep",
    "RollbackRemainder",
    "RollbackResult",
    "Run",
    "RunArtifact",
    "RunResult",
    "RunStep",
    "Session",
    "Step",
    "StepResult",
    "UnusedParamsWarning",
    "VerifierError",
    "check_receipt_subject",
    "check_run_receipt_subject",
]

# A document the daemon takes as YAML or JSON bytes: the text itself (str or
# bytes), or a parsed list/dict that the client sends as JSON.
Document = Union[str, bytes, List[Any], Dict[str, Any]]
Params = Mapping[str, Any]

# google.rpc.Code numbers, as the gateway's error body carries them.
_GRPC_CODES = {
    0: "OK",
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}

# Begin refusals that mean "do not actuate": the policy or a precondition
# (a baseline that could not be read, a contract guard) said no.
_REFUSAL_CODES = ("PERMISSION_DENIED", "FAILED_PRECONDITION")


def _enum(value: Any, prefix: str) -> str:
    """An enum value as the daemon writes it; its zero value
    (OUTCOME_UNSPECIFIED, sent where nothing is set) -> UNSPECIFIED."""
    if not value:
        return "UNSPECIFIED"
    text = str(value)
    return text[len(prefix):] if text.startswith(prefix) else text


def _int(value: Any) -> Optional[int]:
    # Counts are JSON numbers; absent when the verdict has none.
    return None if value is None else int(value)


def _envelope(value: Any) -> bytes:
    """A receipt (a DSSE envelope, a JSON object in the answer) as JSON
    bytes with sorted keys; b"" when there is none. Its signature covers
    the envelope's payload, so these bytes verify like any encoding."""
    if not value:
        return b""
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode("utf-8")


def _encode_document(doc: Document) -> str:
    """A deployment or effects document as the text the daemon takes."""
    if isinstance(doc, bytes):
        return doc.decode("utf-8")
    if isinstance(doc, str):
        return doc
    if isinstance(doc, (list, dict)):
        return json.dumps(doc)
    raise TypeError(
        "a document must be YAML/JSON text (str or bytes) or a list/dict, not %s"
        % type(doc).__name__
    )


# The JSON number grammar (RFC 8259): the text the daemon keeps as written.
_JSON_NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")


def _param_value(name: str, value: Any) -> Union[str, int, float, bool]:
    """A run parameter as the JSON scalar sent: a string, a boolean, an int
    or a finite float as themselves (the daemon binds ``36``, ``true``,
    ``1234.5``, an int's digits exactly whatever its size); a ``Decimal``
    as the string of its digits, which binds the same text
    (``Decimal("1234.50")`` binds ``1234.50``). Anything else is refused
    here, naming the parameter, as the daemon would refuse it."""
    if isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, (float, decimal.Decimal)):
        text = json.dumps(value) if isinstance(value, float) else str(value)
        if not _JSON_NUMBER.fullmatch(text):
            raise ValueError(
                "params.%s: %r is not a JSON number (NaN and infinities have none); "
                "send a finite number or a string" % (name, value)
            )
        return value if isinstance(value, float) else text
    raise TypeError(
        "params.%s: a run parameter is a string, a number or a boolean, not %s"
        % (name, "None" if value is None else type(value).__name__)
    )


def _encode_params(params: Optional[Params]) -> Dict[str, Union[str, int, float, bool]]:
    if not params:
        return {}
    return {str(k): _param_value(str(k), v) for k, v in params.items()}


class VerifierError(Exception):
    """The daemon refused a call: the HTTP status, the gRPC code name
    (``PERMISSION_DENIED``, ``NOT_FOUND``, ...), its message and the status
    details (``google.rpc.BadRequest``, ``ErrorInfo``, ...) as dicts.
    ``http_status`` is 0 when the daemon could not be reached."""

    def __init__(
        self,
        http_status: int,
        code: str,
        message: str,
        details: Optional[List[Dict[str, Any]]] = None,
    ) -> None:
        super().__init__("%s (HTTP %d): %s" % (code, http_status, message))
        self.http_status = http_status
        self.code = code
        self.message = message
        self.details: List[Dict[str, Any]] = list(details or [])

    @property
    def rule(self) -> Optional[str]:
        """The daemon's rule name, e.g. ``inline_deployment_refused``
        (the ``ErrorInfo`` detail of domain ``verifierd``), if any."""
        for d in self.details:
            if d.get("@type", "").endswith("google.rpc.ErrorInfo") and d.get("domain") == "verifierd":
                return d.get("reason") or None
        return None


class UnusedParamsWarning(UserWarning):
    """Begin named run parameters that nothing of the step references
    (``Session.unused_params``); the session was begun all the same."""


class Refused(VerifierError):
    """Begin was refused (PermissionDenied or FailedPrecondition): no
    session was opened and the action must not be performed."""


@dataclass(frozen=True)
class Reason:
    code: str
    message: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Reason":
        return cls(code=d.get("code", ""), message=d.get("message", ""))


@dataclass(frozen=True)
class RegisteredStep:
    workflow: str
    workflow_digest: str
    step: str

    @classmethod
    def from_json(cls, d: Optional[Mapping[str, Any]]) -> Optional["RegisteredStep"]:
        if not d:
            return None
        return cls(d.get("workflow", ""), d.get("workflowDigest", ""), d.get("step", ""))


@dataclass(frozen=True)
class BegunEffect:
    """Which candidate Begin pinned for one effect."""

    contract_hash: str
    tier: int
    candidate: str
    candidate_index: int

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "BegunEffect":
        return cls(
            contract_hash=d.get("contractHash", ""),
            tier=int(d.get("tier") or 0),
            candidate=d.get("candidate", ""),
            candidate_index=int(d.get("candidateIndex") or 0),
        )


@dataclass(frozen=True)
class Session:
    """What Begin answered."""

    session_id: str
    effects: List[BegunEffect]
    registered_step: Optional[RegisteredStep]
    # Run parameters that no contract or candidate of the step references
    # (most often a misspelt name); the session is begun all the same.
    unused_params: List[str] = field(default_factory=list)
    raw: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Session":
        return cls(
            session_id=d.get("sessionId", ""),
            effects=[BegunEffect.from_json(e) for e in d.get("effects") or []],
            registered_step=RegisteredStep.from_json(d.get("registeredStep")),
            unused_params=list(d.get("unusedParams") or []),
            raw=d,
        )


@dataclass(frozen=True)
class ReconciliationTask:
    """A request for a person to repair state (no field or selector values)."""

    id: str
    kind: str  # effect_refuted, effect_indeterminate, compensation_failed
    substrate: str
    effect_kind: str
    contract_hash: str
    verdict: str
    reason_codes: List[str]
    suggested_action: str  # RESTORE_ACCESS, REMOVE_DUPLICATES, MANUAL_REPAIR, REVERIFY_BEFORE_RETRY, UNSPECIFIED
    evidence: Dict[str, Any]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "ReconciliationTask":
        return cls(
            id=d.get("id", ""),
            kind=_enum(d.get("kind"), "RECONCILIATION_KIND_").lower(),
            substrate=d.get("substrate", ""),
            effect_kind=d.get("effectKind", ""),
            contract_hash=d.get("contractHash", ""),
            verdict=_enum(d.get("verdict"), "VERDICT_"),
            reason_codes=list(d.get("reasonCodes") or []),
            suggested_action=_enum(d.get("suggestedAction"), "SUGGESTED_ACTION_"),
            evidence=dict(d.get("evidence") or {}),
            raw=d,
        )


@dataclass(frozen=True)
class EffectResult:
    """The verdict on one effect, with its (already redacted) evidence."""

    verdict: str  # CONFIRMED, REFUTED, INDETERMINATE
    result_class: str  # confirmed, stale, unavailable, indeterminate, conflicting, refuted
    reasons: List[Reason]
    observed_count: Optional[int]
    expected_count: Optional[int]
    observed_value: Optional[str]
    expected_value: Optional[str]
    matched_records: List[Dict[str, Any]]
    contract_hash: str
    tier: int
    substrate: str
    reconciliation_task: Optional[ReconciliationTask]
    raw: Dict[str, Any] = field(repr=False, compare=False)
    # How the read proved a record new (census, whole_read,
    # whole_read_declared, newly_matching), whether a census was proven
    # whole or declared (census_scope: proven, declared) and what its loss
    # checks saw (collection, subject); "" from Judge.
    newness: str = ""
    census_scope: str = ""
    collateral_scope: str = ""
    # The read's rung of the oracle ladder: 0 a screen, 1 a separate
    # session of the application, 2 the system of record, 3 a
    # counterparty; 0 from Judge.
    oracle_rung: int = 0

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "EffectResult":
        task = d.get("reconciliationTask")
        return cls(
            verdict=_enum(d.get("verdict"), "VERDICT_"),
            result_class=_enum(d.get("result"), "RESULT_CLASS_").lower(),
            reasons=[Reason.from_json(r) for r in d.get("reasons") or []],
            observed_count=_int(d.get("observedCount")),
            expected_count=_int(d.get("expectedCount")),
            observed_value=d.get("observedValue"),
            expected_value=d.get("expectedValue"),
            matched_records=[dict(r) for r in d.get("matchedRecords") or []],
            contract_hash=d.get("contractHash", ""),
            tier=int(d.get("tier") or 0),
            substrate=d.get("substrate", ""),
            reconciliation_task=ReconciliationTask.from_json(task) if task else None,
            raw=d,
            newness=d.get("newness", ""),
            census_scope=d.get("censusScope", ""),
            collateral_scope=d.get("collateralScope", ""),
            oracle_rung=int(d.get("oracleRung") or 0),
        )


@dataclass(frozen=True)
class StepResult:
    """What Verify answered: the step's outcome (VERIFIED,
    RECONCILIATION_REQUIRED, HALTED_BEFORE_EFFECT), one result per effect and
    the signed receipt (a DSSE envelope: ``receipt`` as the dict the daemon
    sent, ``receipt_json`` as JSON bytes)."""

    session_id: str
    outcome: str
    terminal_outcome: str
    effects: List[EffectResult]
    registered_step: Optional[RegisteredStep]
    receipt_json: bytes = field(repr=False)
    raw: Dict[str, Any] = field(repr=False, compare=False)
    receipt: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def verified(self) -> bool:
        return self.outcome == "VERIFIED"

    @property
    def reconciliation_tasks(self) -> List[ReconciliationTask]:
        return [e.reconciliation_task for e in self.effects if e.reconciliation_task is not None]

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "StepResult":
        return cls(
            session_id=d.get("sessionId", ""),
            outcome=_enum(d.get("outcome"), "OUTCOME_"),
            terminal_outcome=_enum(d.get("terminalOutcome"), "OUTCOME_"),
            effects=[EffectResult.from_json(e) for e in d.get("effects") or []],
            registered_step=RegisteredStep.from_json(d.get("registeredStep")),
            receipt_json=_envelope(d.get("receipt")),
            raw=d,
            receipt=dict(d.get("receipt") or {}),
        )


@dataclass(frozen=True)
class Candidate:
    """One candidate of a deployment, configured and probed by preflight."""

    candidate_index: int
    kind: str
    tier: int
    reachable: bool
    message: str
    warnings: List[str]
    raw: Dict[str, Any] = field(repr=False, compare=False)

    @classmethod
    def from_json(cls, d: Dict[str, Any]) -> "Candidate":
        return cls(
            candidate_index=int(d.get("candidateIndex") or 0),
            kind=d.get("kind", ""),
            tier=int(d.get("tier") or 0),
            reachable=bool(d.get("reachable")),
            message=d.get("message", ""),
            warnings=list(d.get("warnings") or []),
            raw=d,
        )


def _outcome_or_none(value: Any) -> Optional[str]:
    """A run's or a run step's outcome; None while it has none."""
    text = _enum(value, "OUTCOME_")
    return None if text == "UNSPECIFIED" else text


@dataclass(frozen=True)
class RunStep:
    """One step of a run's workflow: its latest session in the run and
    that session's latest outcome (after any re-verification)."""

    step: str
    consequential: bool  # risk irreversible or reversible: the run needs it VERIFIED
    session_id: str  # "" while the step never began
    outcome: Optional[str]  # None while not verified
    tier: int
    oracle_rung: int
    receipt_digest: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunStep":
        return cls(
            step=d.get("step", ""),
            consequential=bool(d.get("consequential")),
            session_id=d.get("sessionId", ""),
            outcome=_outcome_or_none(d.get("outcome")),
            tier=int(d.get("tier") or 0),
            oracle_rung=int(d.get("oracleRung") or 0),
            receipt_digest=d.get("receiptDigest", ""),
        )


@dataclass(frozen=True)
class RunArtifact:
    """An artifact edge of a run: what a step produced, its latest
    verification verdict in the run and the exact digest it confirmed."""

    artifact: str
    from_step: str
    verdict: Optional[str]  # None while never checked
    sha256: str
    size: int
    receipt_digest: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RunArtifact":
        verdict = _enum(d.get("verdict"), "VERDICT_")
        return cls(
            artifact=d.get("artifact", ""),
            from_step=d.get("fromStep", ""),
            verdict=None if verdict == "UNSPECIFIED" else verdict,
            sha256=d.get("sha256", ""),
            size=int(d.get("size") or 0),  # an int64: a JSON string
            receipt_digest=d.get("receiptDigest", ""),
        )


@dataclass(frozen=True)
class RunResult:
    """A run as the daemon reports it (FinishRun, GetRun): ``outcome`` is
    the run classifier's answer (VERIFIED, HALTED_BEFORE_EFFECT,
    REJECTED_POLICY, FAILED_PLATFORM, RECONCILIATION_REQUIRED,
    ROLLED_BACK_VERIFIED; None while never sealed), ``attempt`` counts the
    seals, ``reasons`` say why it is not VERIFIED, and ``receipt`` is the
    latest signed run receipt (a DSSE envelope dict; ``receipt_json`` as
    bytes)."""

    run_id: str
    workflow: str
    deployment: str
    state: str  # open, sealed
    outcome: Optional[str]
    attempt: int
    tier: int
    oracle_rung: int
    steps: List[RunStep]
    artifacts: List[RunArtifact]
    reasons: List[Reason]
    receipt_json: bytes = field(repr=False)
    raw: Dict[str, Any] = field(repr=False, compare=False)
    receipt: Dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def verified(self) -> bool:
        return self.outcome == "VERIFIED"

    def step(self, name: str) -> Optional[RunStep]:
        """The run's entry for the workflow step ``name``."""
        for s in self.steps:
            if s.step == name:
                return s
        return None

    @classmethod
    def from_json(cls, run: Mapping[str, Any], receipt: Any = None) -> "RunResult":
        state = run.get("state") or ""
        return cls(
            run_id=run.get("runId", ""),
            workflow=run.get("workflow", ""),
            deployment=run.get("deploymentName", ""),
            state="" if state == "RUN_STATE_UNSPECIFIED" else state,
            outcome=_outcome_or_none(run.get("outcome")),
            attempt=int(run.get("attempt") or 0),
            tier=int(run.get("tier") or 0),
            oracle_rung=int(run.get("oracleRung") or 0),
            steps=[RunStep.from_json(s) for s in run.get("steps") or []],
            artifacts=[RunArtifact.from_json(a) for a in run.get("artifacts") or []],
            reasons=[Reason.from_json(r) for r in run.get("reasons") or []],
            receipt_json=_envelope(receipt),
            raw=dict(run),
            receipt=dict(receipt or {}),
        )


@dataclass(frozen=True)
class RollbackRemainder:
    """One effect of a run whose change is still there (or could not be
    shown gone)."""

    step: str
    session_id: str
    effect_index: int
    contract_hash: str
    reasons: List[Reason]

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RollbackRemainder":
        return cls(
            step=d.get("step", ""),
            session_id=d.get("sessionId", ""),
            effect_index=int(d.get("effectIndex") or 0),
            contract_hash=d.get("contractHash", ""),
            reasons=[Reason.from_json(r) for r in d.get("reasons") or []],
        )


@dataclass(frozen=True)
class RollbackResult:
    """What a rollback check found: ``rolled_back`` when every change the
    run made is gone (the run is then sealed ROLLED_BACK_VERIFIED, with
    ``run.receipt``), otherwise ``remains`` lists what is still there and
    the run is unchanged."""

    rolled_back: bool
    run: RunResult
    remains: List[RollbackRemainder]


class NotConfirmed(Exception):
    """Verify did not answer VERIFIED: the step's effects are not proven.
    Carries the outcome, the per-effect verdicts and the reconciliation
    tasks a person must work through.

    Raised by ``Run.finish`` too, for a run sealed with any outcome but
    VERIFIED: then ``result`` is the ``RunResult``, ``run_id`` names the
    run, ``reasons`` say why, and ``session_id`` is ""."""

    def __init__(self, result: Union[StepResult, "RunResult"]) -> None:
        self.result = result
        self.outcome = result.outcome
        if isinstance(result, RunResult):
            codes = sorted({r.code for r in result.reasons})
            super().__init__(
                "run %s (attempt %d): %s%s"
                % (result.run_id, result.attempt, result.outcome, " (%s)" % ", ".join(codes) if codes else "")
            )
            self.run_id = result.run_id
            self.session_id = ""
            self.reasons: List[Reason] = list(result.reasons)
            self.effects: List[EffectResult] = []
            self.reconciliation_tasks: List[ReconciliationTask] = []
            return
        codes = sorted({r.code for e in result.effects for r in e.reasons})
        super().__init__(
            "session %s: %s%s"
            % (result.session_id, result.outcome, " (%s)" % ", ".join(codes) if codes else "")
        )
        self.run_id = ""
        self.session_id = result.session_id
        self.reasons = sorted({r for e in result.effects for r in e.reasons}, key=lambda r: (r.code, r.message))
        self.effects = result.effects
        self.reconciliation_tasks = result.reconciliation_tasks


class Step:
    """The session of one ``with client.step(...)`` block. ``result`` is set
    once the block has been verified."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.result: Optional[StepResult] = None
        self.verify_error: Optional[BaseException] = None

    @property
    def session_id(self) -> str:
        return self.session.session_id

    @property
    def effects(self) -> List[BegunEffect]:
        return self.session.effects

    @property
    def registered_step(self) -> Optional[RegisteredStep]:
        return self.session.registered_step

    def __repr__(self) -> str:
        outcome = self.result.outcome if self.result else None
        return "Step(session_id=%r, outcome=%r)" % (self.session_id, outcome)


class _StepContext:
    def __init__(self, client: "Client", begin: Callable[[], Session]) -> None:
        self._client = client
        self._begin = begin
        self._step: Optional[Step] = None

    def __enter__(self) -> Step:
        # A refusal raises here, before the body runs: nothing is actuated.
        self._step = Step(self._begin())
        return self._step

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        step = self._step
        assert step is not None
        if exc is not None:
            # The action may have partly happened: verify anyway so the
            # daemon records the outcome (and any reconciliation task), then
            # let the body's exception propagate unchanged.
            try:
                step.result = self._client.verify(step.session_id)
            except Exception as verify_exc:  # noqa: BLE001 - kept on the step
                step.verify_error = verify_exc
            return False
        step.result = self._client.verify(step.session_id)
        if not step.result.verified:
            raise NotConfirmed(step.result)
        return False


class Run:
    """A run of a registered workflow: ``with client.run(...) as run:``.
    Its steps begin inside the run (``run.step(name, params)``, with
    ``client.step``'s semantics) and ``run.finish()`` seals it, raising
    NotConfirmed unless the whole run is VERIFIED."""

    def __init__(self, client: "Client", run_id: str, workflow: str = "", deployment: str = "") -> None:
        self._client = client
        self.run_id = run_id
        self.workflow = workflow
        self.deployment = deployment
        self.result: Optional[RunResult] = None
        self.finish_error: Optional[BaseException] = None

    def begin(self, step: str, params: Optional[Params] = None) -> Session:
        """Begin the session of one step of the run: the workflow and the
        deployment come from the run; ``params`` are the step's own only
        (a run parameter or a handed-off one sent here is refused). A step
        out of order, a consumer before its artifact is confirmed or a
        forged handoff raises Refused."""
        return self._client._begin_body(
            {"runId": self.run_id, "step": step, "params": _encode_params(params)}, stacklevel=3
        )

    def step(self, step: str, params: Optional[Params] = None) -> "_StepContext":
        """``with run.step("intake", {...}) as s:`` Begins the step in the
        run on enter (a refusal raises Refused and the body never runs)
        and Verifies on exit, raising NotConfirmed unless the step is
        VERIFIED; a body that raises is verified all the same."""
        return _StepContext(self._client, lambda: self.begin(step, params))

    def verify_artifact(
        self,
        artifact: str,
        step: str,
        deployment: str,
        data: bytes,
        *,
        name: str = "",
        media_type: str = "",
    ) -> Dict[str, Any]:
        """Ask whether the registered document store ``deployment`` holds
        exactly ``data`` (its SHA-256 and size), recording the answer in
        the run as the artifact ``artifact`` that ``step`` produced. A
        CONFIRMED answer lets the consuming step begin. Returns the
        daemon's answer (``verdict``, ``reasons``, ``receipt``)."""
        return self._client.verify_artifact(
            deployment, data, name=name, media_type=media_type, run_id=self.run_id, artifact=artifact, step=step
        )

    def finish(self) -> RunResult:
        """Classify and seal the run with a signed run receipt. Returns the
        result when it is VERIFIED; raises NotConfirmed (``result`` the
        RunResult) for any other outcome. A run sealed
        RECONCILIATION_REQUIRED goes on: after a ``reverify`` of the
        offending step its remaining steps may begin, and finishing it
        again seals the next ``attempt``."""
        self.result = self._client.finish_run(self.run_id)
        if not self.result.verified:
            raise NotConfirmed(self.result)
        return self.result

    def get(self) -> RunResult:
        """The run as it stands (GetRun)."""
        return self._client.get_run(self.run_id)

    def __repr__(self) -> str:
        outcome = self.result.outcome if self.result else None
        return "Run(run_id=%r, outcome=%r)" % (self.run_id, outcome)


class _RunContext:
    def __init__(self, client: "Client", workflow: str, deployment: str, params: Optional[Params], run_id: Optional[str]) -> None:
        self._client = client
        self._args = (workflow, deployment, params, run_id)
        self._run: Optional[Run] = None

    def __enter__(self) -> Run:
        workflow, deployment, params, run_id = self._args
        self._run = self._client.begin_run(workflow, deployment, params, run_id=run_id)
        return self._run

    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> bool:
        run = self._run
        assert run is not None
        if run.result is not None:
            return False  # finished in the body
        if exc is not None:
            # Something failed inside the run (a refusal, a step not
            # confirmed, the action's own error): seal the run so the
            # daemon records its outcome, then let the exception go on.
            try:
                run.result = self._client.finish_run(run.run_id)
            except Exception as finish_exc:  # noqa: BLE001 - kept on the run
                run.finish_error = finish_exc
            return False
        run.finish()
        return False


class Client:
    """A verifierd HTTP/JSON client: ``Client("http://127.0.0.1:7444",
    token=...)``. ``token`` is sent as ``Authorization: Bearer <token>``."""

    def __init__(self, url: str, token: Optional[str] = None, timeout: float = 60.0) -> None:
        self.url = url.rstrip("/")
        self.token = token
        self.timeout = timeout

    # -- the API -----------------------------------------------------------

    def begin(
        self,
        deployment: Optional[str] = None,
        *,
        effects: Optional[Document] = None,
        workflow: Optional[str] = None,
        step: Optional[str] = None,
        params: Optional[Params] = None,
        deployment_yaml: Optional[Document] = None,
    ) -> Session:
        """Open a session before the action: name a registered
        ``deployment`` and either a registered ``workflow`` and ``step`` or
        the step's ``effects`` (YAML/JSON text, or a list of contracts).
        Raises Refused when the daemon says not to actuate."""
        if (deployment is None) == (deployment_yaml is None):
            raise ValueError("give exactly one of deployment (a registered name) or deployment_yaml")
        body: Dict[str, Any] = {"params": _encode_params(params)}
        if deployment is not None:
            body["deploymentName"] = deployment
        else:
            body["deploymentYaml"] = _encode_document(deployment_yaml)  # type: ignore[arg-type]
        if effects is not None:
            body["effects"] = _encode_document(effects)
        if workflow is not None:
            body["workflow"] = workflow
        if step is not None:
            body["step"] = step
        return self._begin_body(body, stacklevel=3)

    def _begin_body(self, body: Dict[str, Any], stacklevel: int) -> Session:
        try:
            answer = self._call("POST", "/v1/sessions", body)
        except VerifierError as e:
            if e.code in _REFUSAL_CODES:
                raise Refused(e.http_status, e.code, e.message, e.details) from None
            raise
        session = Session.from_json(answer)
        if session.unused_params:
            warnings.warn(
                "verifierd: no contract or candidate of the step uses the run parameter(s) %s "
                "(a misspelt name?); the session was begun" % ", ".join(session.unused_params),
                UnusedParamsWarning,
                stacklevel=stacklevel,
            )
        return session

    def verify(self, session_id: str) -> StepResult:
        """Judge the session after the action. Any outcome is returned, not
        raised; see ``StepResult.verified``."""
        path = "/v1/sessions/%s:verify" % urllib.parse.quote(session_id, safe="")
        return StepResult.from_json(self._call("POST", path, {}))

    def preflight(
        self,
        deployment: Optional[str] = None,
        *,
        params: Optional[Params] = None,
        deployment_yaml: Optional[Document] = None,
    ) -> List[Candidate]:
        """Configure and probe every candidate of a deployment (never writes)."""
        if (deployment is None) == (deployment_yaml is None):
            raise ValueError("give exactly one of deployment (a registered name) or deployment_yaml")
        body: Dict[str, Any] = {"params": _encode_params(params)}
        if deployment is not None:
            body["deploymentName"] = deployment
        else:
            body["deploymentYaml"] = _encode_document(deployment_yaml)  # type: ignore[arg-type]
        answer = self._call("POST", "/v1/connection-tests", body)
        return [Candidate.from_json(c) for c in answer.get("candidates") or []]

    def step(
        self,
        deployment: Optional[str] = None,
        *,
        effects: Optional[Document] = None,
        workflow: Optional[str] = None,
        step: Optional[str] = None,
        params: Optional[Params] = None,
        deployment_yaml: Optional[Document] = None,
    ) -> _StepContext:
        """``with client.step(...) as s:`` Begins on enter (a refusal raises
        Refused and the body never runs) and Verifies on exit, raising
        NotConfirmed unless the outcome is VERIFIED. When the body raises,
        the session is still verified (the action may have partly
        happened; the result is on ``s.result``) and the body's exception
        propagates."""
        return _StepContext(
            self,
            lambda: self.begin(
                deployment=deployment,
                effects=effects,
                workflow=workflow,
                step=step,
                params=params,
                deployment_yaml=deployment_yaml,
            ),
        )

    # -- runs --------------------------------------------------------------

    def run(
        self,
        workflow: str,
        deployment: str,
        params: Optional[Params] = None,
        *,
        run_id: Optional[str] = None,
    ) -> _RunContext:
        """``with client.run("claims", "ledger", {"patient_id": "p1"}) as
        run:`` begins a run of a registered workflow against a registered
        deployment on enter, and finishes it on exit unless the body did
        (``run.finish()``): NotConfirmed unless the whole run is VERIFIED.
        When the body raises, the run is finished all the same (its
        outcome recorded on ``run.result``) and the exception propagates.
        ``run_id`` is an optional id of your choosing: the same id with
        the same arguments is the same run."""
        return _RunContext(self, workflow, deployment, params, run_id)

    def begin_run(
        self,
        workflow: str,
        deployment: str,
        params: Optional[Params] = None,
        *,
        run_id: Optional[str] = None,
    ) -> Run:
        """Open a run (BeginRun) and return its handle, without finishing
        it on any exit: for a run whose steps span processes."""
        body: Dict[str, Any] = {"workflow": workflow, "deploymentName": deployment, "params": _encode_params(params)}
        if run_id:
            body["runId"] = run_id
        answer = self._call("POST", "/v1/runs", body)
        return Run(self, answer.get("runId", ""), workflow, deployment)

    def open_run(self, run_id: str) -> Run:
        """A handle on a run begun earlier (makes no call)."""
        return Run(self, run_id)

    def finish_run(self, run_id: str) -> RunResult:
        """Classify and seal the run; any outcome is returned, not raised
        (``Run.finish`` raises)."""
        path = "/v1/runs/%s:finish" % urllib.parse.quote(run_id, safe="")
        answer = self._call("POST", path, {})
        return RunResult.from_json(answer.get("run") or {}, answer.get("receipt"))

    def get_run(self, run_id: str) -> RunResult:
        """The run, its steps and artifacts, and its latest receipt."""
        answer = self._call("GET", "/v1/runs/%s" % urllib.parse.quote(run_id, safe=""), None)
        return RunResult.from_json(answer.get("run") or {}, answer.get("receipt"))

    def rollback_check(self, run_id: str) -> RollbackResult:
        """Re-read every begun step of the run against its original
        baseline: sealed ROLLED_BACK_VERIFIED when every change is gone,
        otherwise what remains (the run unchanged)."""
        path = "/v1/runs/%s:rollbackCheck" % urllib.parse.quote(run_id, safe="")
        answer = self._call("POST", path, {})
        return RollbackResult(
            rolled_back=bool(answer.get("rolledBack")),
            run=RunResult.from_json(answer.get("run") or {}, answer.get("receipt")),
            remains=[RollbackRemainder.from_json(r) for r in answer.get("remains") or []],
        )

    def reverify(self, session_id: str, reason: str) -> StepResult:
        """Judge a fresh read of a finished session against its original
        baseline after a repair (``reason`` says what was repaired); the
        latest result is what a run's FinishRun classifies."""
        path = "/v1/sessions/%s:reverify" % urllib.parse.quote(session_id, safe="")
        answer = self._call("POST", path, {"reason": reason})
        rev = answer.get("reverification") or {}
        result = dict(rev.get("result") or {})
        result.setdefault("sessionId", answer.get("sessionId", session_id))
        result["receipt"] = rev.get("receipt")
        return StepResult.from_json(result)

    def verify_artifact(
        self,
        deployment: str,
        data: bytes,
        *,
        name: str = "",
        media_type: str = "",
        run_id: str = "",
        artifact: str = "",
        step: str = "",
    ) -> Dict[str, Any]:
        """Ask whether the registered document-hash or file deployment
        holds exactly ``data`` (SHA-256 and size; the bytes never leave
        this process). With ``run_id``, ``artifact`` and ``step`` the
        answer is recorded in the run. Returns the daemon's answer."""
        body: Dict[str, Any] = {
            "deploymentName": deployment,
            "artifact": {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "name": name, "mediaType": media_type},
        }
        if run_id:
            body.update({"runId": run_id, "runArtifact": artifact, "step": step})
        return self._call("POST", "/v1/artifacts:verify", body)

    # -- transport ---------------------------------------------------------

    def _call(self, method: str, path: str, body: Optional[Dict[str, Any]]) -> Dict[str, Any]:
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        req = urllib.request.Request(self.url + path, data=data, headers=headers, method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                raw = resp.read()
        except urllib.error.HTTPError as e:
            raise _http_error(e.code, e.read()) from None
        except urllib.error.URLError as e:
            raise VerifierError(0, "UNAVAILABLE", "%s: %s" % (self.url, e.reason)) from e
        answer = json.loads(raw) if raw else {}
        if not isinstance(answer, dict):
            raise VerifierError(200, "UNKNOWN", "the daemon answered a JSON %s, not an object" % type(answer).__name__)
        return answer


def _http_error(status: int, raw: bytes) -> VerifierError:
    try:
        body = json.loads(raw) if raw else {}
    except ValueError:
        body = {}
    if not isinstance(body, dict):
        body = {}
    if "code" in body:
        # The gRPC status as JSON: {code, message, details}.
        code = body["code"]
        name = _GRPC_CODES.get(code, str(code)) if isinstance(code, int) else str(code)
        return VerifierError(status, name, str(body.get("message", "")), body.get("details") or [])
    # The listener's own answers (e.g. 401 without a token): {error, detail}.
    name = {401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 413: "RESOURCE_EXHAUSTED"}.get(
        status, "UNKNOWN"
    )
    message = str(body.get("detail") or body.get("error") or raw[:1024].decode("utf-8", "replace"))
    return VerifierError(status, name, message)


# The payload type of a verdict receipt (receipt.PayloadTypeVerdict).
VERDICT_RECEIPT_TYPE = "application/vnd.verifierd.verdict-receipt.v1+json"


class ReceiptSubjectMismatch(ValueError):
    """A receipt is about another session, deployment or step than the one
    the caller expected. ``field`` is ``session``, ``deployment`` or
    ``step``; ``path`` is where the signed payload says it
    (``session_id``, ``deployment.name``, ``workflow.step``)."""

    def __init__(self, field: str, path: str, expected: str, found: str) -> None:
        super().__init__(
            "the receipt is about %s %r (%s), not the expected %r" % (field, found, path, expected)
        )
        self.field = field
        self.path = path
        self.expected = expected
        self.found = found


def _receipt_envelope(receipt: Union[StepResult, bytes, str, Mapping[str, Any]]) -> Mapping[str, Any]:
    if isinstance(receipt, StepResult):
        receipt = receipt.receipt_json
    if isinstance(receipt, (bytes, str)):
        receipt = json.loads(receipt)
    if not isinstance(receipt, Mapping):
        raise TypeError("receipt: give the DSSE envelope (JSON text, bytes or dict) or a StepResult")
    # `verifyctl verify` prints the envelope under "receipt".
    inner = receipt.get("receipt")
    if "payloadType" not in receipt and isinstance(inner, Mapping):
        receipt = inner
    return receipt


def check_receipt_subject(
    receipt: Union[StepResult, bytes, str, Mapping[str, Any]],
    *,
    session: Optional[str] = None,
    deployment: Optional[str] = None,
    step: Optional[str] = None,
    accept_refusal: bool = False,
) -> Dict[str, Any]:
    """Check that a verdict receipt is about the expected session, registered
    deployment and workflow step, and return its decoded payload.

    The receipt of a refused Begin (``kind`` ``begin_refused``) names its
    deployment and step but proves that nothing was verified: it fails every
    expectation (``ReceiptSubjectMismatch`` with field ``kind``) unless
    ``accept_refusal`` is true.

    The fields are read from the envelope's ``payload``: the bytes the
    daemon's Ed25519 signature covers, never from the daemon's answer around
    the receipt (``StepResult.session_id``, ``raw``). This function does NOT
    check the signature: the standard library has no Ed25519. Check it
    first with ``verifyctl receipt verify --receipt FILE --public-key KEY``
    (which also takes ``--expect-session``/``--expect-deployment``/
    ``--expect-step``), the Go package ``receipt``, or the ``cryptography``
    package (docs/receipts.md); a receipt whose signature was not checked
    proves nothing, whatever subject it names.

    Raises ``ReceiptSubjectMismatch`` naming the first field that differs,
    ``ValueError`` for an envelope that is not a verdict receipt.
    """
    env = _receipt_envelope(receipt)
    if env.get("payloadType") != VERDICT_RECEIPT_TYPE:
        raise ValueError("receipt: payloadType is %r, not a verdict receipt (%s)" % (env.get("payloadType"), VERDICT_RECEIPT_TYPE))
    try:
        payload = json.loads(base64.b64decode(env.get("payload") or "", validate=True))
    except (ValueError, TypeError) as e:
        raise ValueError("receipt: the payload is not base64 of JSON: %s" % e) from None
    if not isinstance(payload, dict):
        raise ValueError("receipt: the payload is not a JSON object")
    dep = payload.get("deployment")
    workflow = payload.get("workflow")
    found = {
        "session": ("session_id", payload.get("session_id") or ""),
        "deployment": ("deployment.name", (dep.get("name") if isinstance(dep, dict) else dep) or ""),
        "step": ("workflow.step", (workflow.get("step") if isinstance(workflow, dict) else "") or ""),
    }
    expects = (("session", session), ("deployment", deployment), ("step", step))
    if payload.get("kind") == "begin_refused" and not accept_refusal and any(w is not None for _, w in expects):
        raise ReceiptSubjectMismatch("kind", "kind", "a verified step (verify or reverify)", "begin_refused")
    for field_name, want in expects:
        if want is None:
            continue
        path, got = found[field_name]
        if got != want:
            raise ReceiptSubjectMismatch(field_name, path, want, got)
    return payload


# The payload type of a run receipt (receipt.PayloadTypeRun).
RUN_RECEIPT_TYPE = "application/vnd.verifierd.run-receipt.v1+json"


def check_run_receipt_subject(
    receipt: Union[RunResult, bytes, str, Mapping[str, Any]],
    *,
    run: Optional[str] = None,
) -> Dict[str, Any]:
    """Check that a run receipt (a ``RunResult``, or the envelope as JSON
    text, bytes or dict) is a run receipt and, with ``run``, that its
    signed payload is about that run; return the decoded payload.

    As ``check_receipt_subject``, this reads the signed payload only and
    does NOT check the signature: do that with ``verifyctl receipt verify
    --receipt FILE --public-key KEY --expect-run RUN``. Raises
    ``ReceiptSubjectMismatch`` (field ``run``, path ``run_id``) for another
    run, ``ValueError`` for an envelope that is not a run receipt."""
    if isinstance(receipt, RunResult):
        receipt = receipt.receipt_json
    env = _receipt_envelope(receipt)  # type: ignore[arg-type]
    if env.get("payloadType") != RUN_RECEIPT_TYPE:
        raise ValueError("receipt: payloadType is %r, not a run receipt (%s)" % (env.get("payloadType"), RUN_RECEIPT_TYPE))
    try:
        payload = json.loads(base64.b64decode(env.get("payload") or "", validate=True))
    except (ValueError, TypeError) as e:
        raise ValueError("receipt: the payload is not base64 of JSON: %s" % e) from None
    if not isinstance(payload, dict) or not payload.get("run_id"):
        raise ValueError("receipt: the payload names no run_id")
    if run is not None and payload.get("run_id") != run:
        raise ReceiptSubjectMismatch("run", "run_id", run, str(payload.get("run_id")))
    return payload
