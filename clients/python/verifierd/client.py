"""The verifierd HTTP/JSON client: Begin, Verify, TestConnection and the
``step`` context manager that wraps one consequential action.

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
import json
import re
import urllib.error
import urllib.parse
import urllib.request
import warnings
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Dict, List, Mapping, Optional, Type, Union

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
    "Session",
    "Step",
    "StepResult",
    "UnusedParamsWarning",
    "VerifierError",
    "check_receipt_subject",
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
    # How the read proved a record new (census, whole_read, newly_matching)
    # and what its loss checks saw (collection, subject); "" from Judge.
    newness: str = ""
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


class NotConfirmed(Exception):
    """Verify did not answer VERIFIED: the step's effects are not proven.
    Carries the outcome, the per-effect verdicts and the reconciliation
    tasks a person must work through."""

    def __init__(self, result: StepResult) -> None:
        codes = sorted({r.code for e in result.effects for r in e.reasons})
        super().__init__(
            "session %s: %s%s"
            % (result.session_id, result.outcome, " (%s)" % ", ".join(codes) if codes else "")
        )
        self.result = result
        self.session_id = result.session_id
        self.outcome = result.outcome
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
    def __init__(self, client: "Client", begin_args: Dict[str, Any]) -> None:
        self._client = client
        self._begin_args = begin_args
        self._step: Optional[Step] = None

    def __enter__(self) -> Step:
        # A refusal raises here, before the body runs: nothing is actuated.
        self._step = Step(self._client.begin(**self._begin_args))
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
                stacklevel=2,
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
            dict(
                deployment=deployment,
                effects=effects,
                workflow=workflow,
                step=step,
                params=params,
                deployment_yaml=deployment_yaml,
            ),
        )

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
) -> Dict[str, Any]:
    """Check that a verdict receipt is about the expected session, registered
    deployment and workflow step, and return its decoded payload.

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
    for field_name, want in (("session", session), ("deployment", deployment), ("step", step)):
        if want is None:
            continue
        path, got = found[field_name]
        if got != want:
            raise ReceiptSubjectMismatch(field_name, path, want, got)
    return payload
