// The shapes of the daemon's HTTP/JSON API (docs/http-api.md) as this
// client returns them: the daemon's lowerCamelCase keys, enum values
// without a type prefix, records as objects with exact numbers (a bigint
// past 2^53, a string for a decimal a double would not reproduce).

import type { JsonObject, JsonValue } from "./json.js";
import type { Envelope } from "./receipt.js";

/** A run parameter: its text is what the daemon binds. */
export type ParamValue = string | number | bigint | boolean;
/** Run parameters by name. */
export type Params = Record<string, ParamValue>;

/** A step outcome (VERIFIED, RECONCILIATION_REQUIRED, HALTED_BEFORE_EFFECT; as a terminal outcome also REJECTED_POLICY, FAILED_PLATFORM). */
export type Outcome = "VERIFIED" | "RECONCILIATION_REQUIRED" | "HALTED_BEFORE_EFFECT" | "REJECTED_POLICY" | "FAILED_PLATFORM" | "ROLLED_BACK_VERIFIED" | "OUTCOME_UNSPECIFIED";
/** A verdict on one effect. */
export type Verdict = "CONFIRMED" | "REFUTED" | "INDETERMINATE";
/** A verdict's result class. */
export type ResultClass = "confirmed" | "stale" | "unavailable" | "indeterminate" | "conflicting" | "refuted";

/** Begin of a session outside a run: a registered deployment and a registered workflow step (or, where the operator allows, the step's own effects). */
export interface BeginRequest {
  deployment: string;
  workflow?: string;
  step?: string;
  /** The step's contracts as YAML/JSON text, where the daemon's policy lets a caller send them. */
  effects?: string;
  params?: Params;
}

/** A reason of a verdict or a run. */
export interface Reason {
  code: string;
  message: string;
}

/** The registered workflow step a session judges. */
export interface RegisteredStep {
  workflow: string;
  workflowDigest: string;
  step: string;
}

/** The candidate Begin pinned for one effect. */
export interface BegunEffect {
  contractHash: string;
  tier: number;
  candidate: string;
  candidateIndex: number;
}

/** What Begin answered. */
export interface Session {
  sessionId: string;
  effects: BegunEffect[];
  registeredStep: RegisteredStep | null;
  /** Run parameters nothing of the step references (a misspelt name?). */
  unusedParams: string[];
}

/** A request for a person to repair state (carries no field or selector values). */
export interface ReconciliationTask {
  id: string;
  kind: string;
  substrate: string;
  effectKind: string;
  contractHash: string;
  verdict: Verdict;
  reasonCodes: string[];
  suggestedAction: string;
  evidence: JsonObject;
}

/** The verdict on one effect, with its (already redacted) evidence. */
export interface EffectResult {
  verdict: Verdict;
  result: ResultClass;
  reasons: Reason[];
  observedCount?: number;
  expectedCount?: number;
  observedValue?: string;
  expectedValue?: string;
  matchedRecords: JsonObject[];
  contractHash: string;
  tier: number;
  oracleRung: number;
  substrate: string;
  newness: string;
  collateralScope: string;
  reconciliationTask?: ReconciliationTask;
}

/** What Verify (or a re-verification) answered. */
export interface StepResult {
  sessionId: string;
  outcome: Outcome;
  terminalOutcome: Outcome;
  effects: EffectResult[];
  registeredStep: RegisteredStep | null;
  /** The signed receipt (DSSE envelope); check it with verifyReceipt. */
  receipt: Envelope | null;
}

/** One step of a run: its latest session and that session's outcome. */
export interface RunStep {
  step: string;
  consequential: boolean;
  sessionId: string;
  outcome: Outcome | null;
  tier: number;
  oracleRung: number;
  receiptDigest: string;
}

/** An artifact edge of a run. */
export interface RunArtifact {
  artifact: string;
  fromStep: string;
  verdict: Verdict | null;
  sha256: string;
  /** 64-bit: kept exact. */
  size: number | bigint;
  receiptDigest: string;
}

/** A run as FinishRun and GetRun report it. */
export interface RunResult {
  runId: string;
  workflow: string;
  deploymentName: string;
  state: string;
  /** null while never sealed. */
  outcome: Outcome | null;
  attempt: number;
  tier: number;
  oracleRung: number;
  steps: RunStep[];
  artifacts: RunArtifact[];
  reasons: Reason[];
  receipt: Envelope | null;
}

/** One effect of a run still there after a rollback (or not shown gone). */
export interface RollbackRemainder {
  step: string;
  sessionId: string;
  effectIndex: number;
  contractHash: string;
  reasons: Reason[];
}

/** What RollbackCheck found. */
export interface RollbackResult {
  rolledBack: boolean;
  run: RunResult;
  remains: RollbackRemainder[];
}

/** An artifact to check: its bytes stay in this process; only its SHA-256 and size are sent. */
export interface ArtifactRequest {
  deployment: string;
  data: Uint8Array;
  name?: string;
  mediaType?: string;
}

/** What VerifyArtifact answered. */
export interface ArtifactResult {
  verdict: Verdict;
  reasons: Reason[];
  tier: number;
  oracleRung: number;
  receipt: Envelope | null;
  [key: string]: JsonValue | Envelope | null | undefined | Reason[];
}
