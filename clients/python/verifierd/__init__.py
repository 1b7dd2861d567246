"""Client for the verifierd daemon's HTTP/JSON API (standard library only).

    from verifierd import Client
    client = Client("http://127.0.0.1:7444")
    with client.step(deployment="clinic", workflow="triage", step="save_triage",
                     params={"patient_id": "p1", "note": "Follow-up"}):
        save_triage_note()  # the consequential action; NotConfirmed unless VERIFIED
"""

from .client import (
    BegunEffect,
    Candidate,
    Client,
    EffectResult,
    NotConfirmed,
    Reason,
    ReconciliationTask,
    Refused,
    RegisteredStep,
    Session,
    Step,
    StepResult,
    VerifierError,
)

__all__ = [
    "BegunEffect",
    "Candidate",
    "Client",
    "EffectResult",
    "NotConfirmed",
    "Reason",
    "ReconciliationTask",
    "Refused",
    "RegisteredStep",
    "Session",
    "Step",
    "StepResult",
    "VerifierError",
]

__version__ = "0.1.0"
