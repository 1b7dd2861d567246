// The verifierd HTTP/JSON client: Begin before a consequential action,
// Verify after it, and only a VERIFIED outcome lets the automation go on.

import { createHash } from "node:crypto";
import { parseExact, stringifyExact, type JsonObject, type JsonValue } from "./json.js";
import { verifyReceipt, type Envelope, type Expect, type PublicKeyInput } from "./receipt.js";
import type {
  ArtifactRequest, ArtifactResult, BeginRequest, EffectResult, Outcome, Params, Reason, RollbackResult,
  RunResult, Session, StepResult,
} from "./types.js";

const GRPC_CODES = [
  "OK", "CANCELLED", "UNKNOWN", "INVALID_ARGUMENT", "DEADLINE_EXCEEDED", "NOT_FOUND", "ALREADY_EXISTS",
  "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION", "ABORTED", "OUT_OF_RANGE",
  "UNIMPLEMENTED", "INTERNAL", "UNAVAILABLE", "DATA_LOSS", "UNAUTHENTICATED",
];

/** The daemon refused a call (or could not be reached: httpStatus 0). */
export class VerifierError extends Error {
  readonly httpStatus: number;
  /** The gRPC code name: PERMISSION_DENIED, NOT_FOUND, ... */
  readonly code: string;
  /** The status details (google.rpc.BadRequest, ErrorInfo, ...). */
  readonly details: JsonObject[];
  constructor(httpStatus: number, code: string, message: string, details: JsonObject[] = []) {
    super(`${code} (HTTP ${httpStatus}): ${message}`);
    this.name = "VerifierError";
    this.httpStatus = httpStatus;
    this.code = code;
    this.details = details;
  }

  /** The daemon's rule, e.g. inline_deployment_refused (ErrorInfo of domain verifierd). */
  get rule(): string | undefined {
    for (const d of this.details) {
      if (String(d["@type"] ?? "").endsWith("google.rpc.ErrorInfo") && d.domain === "verifierd") {
        return typeof d.reason === "string" ? d.reason : undefined;
      }
    }
    return undefined;
  }
}

/** Begin was refused: no session was opened and the action must not run. */
export class Refused extends VerifierError {
  constructor(e: VerifierError) {
    super(e.httpStatus, e.code, e.message.replace(/^[A-Z_]+ \(HTTP \d+\): /, ""), e.details);
    this.name = "Refused";
  }
}

/**
 * Verify (or a run's finish) did not answer VERIFIED: the effects are not
 * proven. `result` is the StepResult (or the RunResult of a run).
 */
export class NotConfirmed extends Error {
  readonly result: StepResult | RunResult;
  readonly outcome: Outcome | null;
  readonly sessionId: string;
  readonly runId: string;
  readonly reasons: Reason[];
  readonly effects: EffectResult[];
  constructor(result: StepResult | RunResult) {
    const isRun = "runId" in result;
    const reasons = isRun ? result.reasons : result.effects.flatMap((e) => e.reasons);
    const codes = [...new Set(reasons.map((r) => r.code))].sort();
    const subject = isRun ? `run ${result.runId} (attempt ${result.attempt})` : `session ${result.sessionId}`;
    super(`${subject}: ${result.outcome}${codes.length ? ` (${codes.join(", ")})` : ""}`);
    this.name = "NotConfirmed";
    this.result = result;
    this.outcome = result.outcome;
    this.sessionId = isRun ? "" : result.sessionId;
    this.runId = isRun ? result.runId : "";
    this.reasons = reasons;
    this.effects = isRun ? [] : result.effects;
  }
}

/** How to reach the daemon. */
export interface ClientOptions {
  /** The daemon's HTTP listener, e.g. http://127.0.0.1:7444. */
  url: string;
  /** Sent as Authorization: Bearer <token>. */
  token?: string;
  /**
   * The daemon's public key (what `verifyctl key` prints, or its base64).
   * With it every StepResult and RunResult the client returns carries a
   * receipt checked offline to be signed by that key and about the very
   * session, step or run asked for (a ReceiptError otherwise).
   */
  receiptKey?: PublicKeyInput;
  /** Per call, in milliseconds (default 60000). */
  timeoutMs?: number;
}

/** What `step` resolves to. */
export interface StepDone<T> {
  session: Session;
  result: StepResult;
  /** What the action returned. */
  value: T;
}

/** Called with the result of the Verify that follows an action that threw. */
export interface StepHooks {
  onVerifiedAfterError?: (result: StepResult) => void;
}

function str(v: JsonValue | undefined): string {
  return typeof v === "string" ? v : "";
}

function num(v: JsonValue | undefined): number {
  return typeof v === "number" ? v : typeof v === "string" && v !== "" ? Number(v) : 0;
}

function list(v: JsonValue | undefined): JsonValue[] {
  return Array.isArray(v) ? v : [];
}

function obj(v: JsonValue | undefined): JsonObject {
  return v !== null && typeof v === "object" && !Array.isArray(v) && typeof v !== "bigint" ? v : {};
}

function outcomeOrNull(v: JsonValue | undefined): Outcome | null {
  const s = str(v);
  return s === "" || s === "OUTCOME_UNSPECIFIED" ? null : (s as Outcome);
}

function reasons(v: JsonValue | undefined): Reason[] {
  return list(v).map((r) => ({ code: str(obj(r).code), message: str(obj(r).message) }));
}

function envelope(v: JsonValue | undefined): Envelope | null {
  const e = obj(v);
  return typeof e.payloadType === "string" ? (e as unknown as Envelope) : null;
}

/** The StepResult of a Verify answer (or a re-verification's result). */
function stepResult(d: JsonObject): StepResult {
  return {
    sessionId: str(d.sessionId),
    outcome: str(d.outcome) as Outcome,
    terminalOutcome: str(d.terminalOutcome) as Outcome,
    effects: list(d.effects).map((x) => effectResult(obj(x))),
    registeredStep: d.registeredStep ? (obj(d.registeredStep) as unknown as StepResult["registeredStep"]) : null,
    receipt: envelope(d.receipt),
  };
}

function effectResult(e: JsonObject): EffectResult {
  const out: EffectResult = {
    verdict: str(e.verdict) as EffectResult["verdict"],
    result: str(e.result) as EffectResult["result"],
    reasons: reasons(e.reasons),
    matchedRecords: list(e.matchedRecords).map(obj),
    contractHash: str(e.contractHash),
    tier: num(e.tier),
    oracleRung: num(e.oracleRung),
    substrate: str(e.substrate),
    newness: str(e.newness),
    collateralScope: str(e.collateralScope),
  };
  if (e.observedCount !== undefined) out.observedCount = num(e.observedCount);
  if (e.expectedCount !== undefined) out.expectedCount = num(e.expectedCount);
  if (typeof e.observedValue === "string") out.observedValue = e.observedValue;
  if (typeof e.expectedValue === "string") out.expectedValue = e.expectedValue;
  if (e.reconciliationTask) {
    const t = obj(e.reconciliationTask);
    out.reconciliationTask = {
      id: str(t.id), kind: str(t.kind), substrate: str(t.substrate), effectKind: str(t.effectKind),
      contractHash: str(t.contractHash), verdict: str(t.verdict) as EffectResult["verdict"],
      reasonCodes: list(t.reasonCodes).map((c) => str(c)), suggestedAction: str(t.suggestedAction), evidence: obj(t.evidence),
    };
  }
  return out;
}

function runResult(run: JsonObject, receipt: JsonValue | undefined): RunResult {
  const state = str(run.state);
  return {
    runId: str(run.runId),
    workflow: str(run.workflow),
    deploymentName: str(run.deploymentName),
    state: state === "RUN_STATE_UNSPECIFIED" ? "" : state,
    outcome: outcomeOrNull(run.outcome),
    attempt: num(run.attempt),
    tier: num(run.tier),
    oracleRung: num(run.oracleRung),
    steps: list(run.steps).map((x) => {
      const s = obj(x);
      return {
        step: str(s.step), consequential: s.consequential === true, sessionId: str(s.sessionId), outcome: outcomeOrNull(s.outcome),
        tier: num(s.tier), oracleRung: num(s.oracleRung), receiptDigest: str(s.receiptDigest),
      };
    }),
    artifacts: list(run.artifacts).map((x) => {
      const a = obj(x);
      const verdict = str(a.verdict);
      const size = a.size;
      return {
        artifact: str(a.artifact), fromStep: str(a.fromStep),
        verdict: verdict === "" || verdict === "VERDICT_UNSPECIFIED" ? null : (verdict as EffectResult["verdict"]),
        sha256: str(a.sha256), size: typeof size === "bigint" ? size : typeof size === "string" ? BigInt(size || "0") : num(size),
        receiptDigest: str(a.receiptDigest),
      };
    }),
    reasons: reasons(run.reasons),
    receipt: envelope(receipt),
  };
}

/** A verifierd client over the HTTP/JSON API. */
export class Client {
  readonly url: string;
  private readonly token?: string;
  private readonly receiptKey?: PublicKeyInput;
  private readonly timeoutMs: number;

  constructor(opts: ClientOptions) {
    if (!opts || !opts.url) {
      throw new TypeError("new Client({url}) needs the daemon's HTTP listener, e.g. http://127.0.0.1:7444");
    }
    this.url = opts.url.replace(/\/+$/, "");
    this.token = opts.token;
    this.receiptKey = opts.receiptKey;
    this.timeoutMs = opts.timeoutMs ?? 60_000;
  }

  /** Opens a session before the action. Throws Refused when the daemon says not to act. */
  async begin(req: BeginRequest): Promise<Session> {
    const body: JsonObject = { deploymentName: req.deployment, params: encodeParams(req.params) };
    if (req.workflow !== undefined) body.workflow = req.workflow;
    if (req.step !== undefined) body.step = req.step;
    if (req.effects !== undefined) body.effects = req.effects;
    return this.beginBody(body);
  }

  /** @internal Begin with a prepared body (a run's step). */
  async beginBody(body: JsonObject): Promise<Session> {
    let d: JsonObject;
    try {
      d = await this.call("POST", "/v1/sessions", body);
    } catch (e) {
      if (e instanceof VerifierError && (e.code === "PERMISSION_DENIED" || e.code === "FAILED_PRECONDITION")) {
        throw new Refused(e);
      }
      throw e;
    }
    return {
      sessionId: str(d.sessionId),
      effects: list(d.effects).map((x) => {
        const e = obj(x);
        return { contractHash: str(e.contractHash), tier: num(e.tier), candidate: str(e.candidate), candidateIndex: num(e.candidateIndex) };
      }),
      registeredStep: d.registeredStep ? (obj(d.registeredStep) as unknown as Session["registeredStep"]) : null,
      unusedParams: list(d.unusedParams).map((p) => str(p)),
    };
  }

  /** Judges the session after the action; any outcome is returned, not thrown. */
  async verify(sessionId: string): Promise<StepResult> {
    const r = stepResult(await this.call("POST", `/v1/sessions/${encodeURIComponent(sessionId)}:verify`, {}));
    this.checkReceipt(r.receipt, { session: sessionId });
    return r;
  }

  /**
   * Begin, the action, Verify: the action runs only when Begin was not
   * refused (Refused is thrown and nothing runs), Verify runs whenever the
   * action ran, even when it threw (the action may have partly happened;
   * its error is then thrown unchanged, and hooks.onVerifiedAfterError
   * sees the result), and anything but VERIFIED throws NotConfirmed.
   */
  async step<T>(req: BeginRequest, action: (session: Session) => Promise<T> | T, hooks: StepHooks = {}): Promise<StepDone<T>> {
    return this.stepWith(() => this.begin(req), action, hooks, req.deployment, req.step);
  }

  /** @internal step with a given Begin. */
  async stepWith<T>(begin: () => Promise<Session>, action: (session: Session) => Promise<T> | T, hooks: StepHooks, deployment?: string, step?: string): Promise<StepDone<T>> {
    const session = await begin();
    let value: T;
    try {
      value = await action(session);
    } catch (actionError) {
      try {
        const r = await this.verify(session.sessionId);
        hooks.onVerifiedAfterError?.(r);
      } catch {
        // The action's error is what the caller needs; the session stays
        // begun and can be verified again.
      }
      throw actionError;
    }
    const result = await this.verify(session.sessionId);
    if (result.outcome !== "VERIFIED") {
      throw new NotConfirmed(result);
    }
    this.checkReceipt(result.receipt, { session: session.sessionId, deployment, step: step ?? session.registeredStep?.step });
    return { session, result, value };
  }

  /** Judges a fresh read of a finished session after a repair (reason says what was repaired). */
  async reverify(sessionId: string, reason: string): Promise<StepResult> {
    const d = await this.call("POST", `/v1/sessions/${encodeURIComponent(sessionId)}:reverify`, { reason });
    const rev = obj(d.reverification);
    const r = stepResult({ ...obj(rev.result), sessionId: str(d.sessionId) || sessionId, receipt: rev.receipt ?? null });
    this.checkReceipt(r.receipt, { session: sessionId });
    return r;
  }

  /** Asks whether the registered document deployment holds exactly these bytes (only their SHA-256 and size leave). */
  async verifyArtifact(req: ArtifactRequest, run?: { runId: string; artifact: string; step: string }): Promise<ArtifactResult> {
    const body: JsonObject = {
      deploymentName: req.deployment,
      artifact: { sha256: createHash("sha256").update(req.data).digest("hex"), size: req.data.length, name: req.name ?? "", mediaType: req.mediaType ?? "" },
    };
    if (run) Object.assign(body, { runId: run.runId, runArtifact: run.artifact, step: run.step });
    const d = await this.call("POST", "/v1/artifacts:verify", body);
    return { ...d, verdict: str(d.verdict) as ArtifactResult["verdict"], reasons: reasons(d.reasons), tier: num(d.tier), oracleRung: num(d.oracleRung), receipt: envelope(d.receipt) };
  }

  /**
   * A run of a registered workflow: begins it, runs body with its handle,
   * and finishes it unless body did (NotConfirmed unless VERIFIED). When
   * body throws, the run is finished all the same and the error is thrown.
   */
  async run<T>(workflow: string, deployment: string, params: Params, body: (run: Run) => Promise<T> | T, opts: { runId?: string } = {}): Promise<{ run: RunResult; value: T }> {
    const run = await this.beginRun(workflow, deployment, params, opts);
    let value: T;
    try {
      value = await body(run);
    } catch (e) {
      if (!run.result) {
        try {
          run.result = await this.finishRun(run.runId);
        } catch {
          // The body's error is what the caller needs.
        }
      }
      throw e;
    }
    const result = run.result ?? (await run.finish());
    if (result.outcome !== "VERIFIED") {
      throw new NotConfirmed(result);
    }
    return { run: result, value };
  }

  /** Opens a run (BeginRun); the same runId with the same arguments is the same run. */
  async beginRun(workflow: string, deployment: string, params: Params = {}, opts: { runId?: string } = {}): Promise<Run> {
    const body: JsonObject = { workflow, deploymentName: deployment, params: encodeParams(params) };
    if (opts.runId) body.runId = opts.runId;
    const d = await this.call("POST", "/v1/runs", body);
    return new Run(this, str(d.runId));
  }

  /** A handle on a run begun earlier (no call). */
  openRun(runId: string): Run {
    return new Run(this, runId);
  }

  /** Classifies and seals the run; any outcome is returned (Run.finish throws). */
  async finishRun(runId: string): Promise<RunResult> {
    const d = await this.call("POST", `/v1/runs/${encodeURIComponent(runId)}:finish`, {});
    const r = runResult(obj(d.run), d.receipt);
    this.checkReceipt(r.receipt, { run: runId });
    return r;
  }

  /** The run as it stands. */
  async getRun(runId: string): Promise<RunResult> {
    const d = await this.call("GET", `/v1/runs/${encodeURIComponent(runId)}`);
    return runResult(obj(d.run), d.receipt);
  }

  /** Re-reads every begun step of the run against its baseline. */
  async rollbackCheck(runId: string): Promise<RollbackResult> {
    const d = await this.call("POST", `/v1/runs/${encodeURIComponent(runId)}:rollbackCheck`, {});
    const run = runResult(obj(d.run), d.receipt);
    return {
      rolledBack: d.rolledBack === true,
      run,
      remains: list(d.remains).map((x) => {
        const m = obj(x);
        return { step: str(m.step), sessionId: str(m.sessionId), effectIndex: num(m.effectIndex), contractHash: str(m.contractHash), reasons: reasons(m.reasons) };
      }),
    };
  }

  private checkReceipt(receipt: Envelope | null, expect: Expect): void {
    if (this.receiptKey === undefined) {
      return;
    }
    // A run that was never sealed has no receipt yet; a sealed one and
    // every Verify answer carry one.
    if (receipt === null) {
      if (expect.run === undefined) {
        throw new VerifierError(200, "DATA_LOSS", "the answer carries no signed receipt, and a receiptKey was given");
      }
      return;
    }
    verifyReceipt(receipt, this.receiptKey, expect);
  }

  /** @internal One call of the API. */
  async call(method: "GET" | "POST", path: string, body?: JsonObject): Promise<JsonObject> {
    const headers: Record<string, string> = { Accept: "application/json" };
    if (body !== undefined) headers["Content-Type"] = "application/json";
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    let res: Response;
    try {
      res = await fetch(this.url + path, {
        method, headers, body: body === undefined ? undefined : stringifyExact(body), signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (e) {
      throw new VerifierError(0, "UNAVAILABLE", `${this.url}: ${(e as Error).message}`);
    }
    const text = await res.text();
    let d: JsonValue = {};
    try {
      d = text ? parseExact(text) : {};
    } catch {
      if (res.ok) throw new VerifierError(res.status, "UNKNOWN", "the daemon's answer is not JSON");
    }
    if (!res.ok) {
      throw httpError(res.status, obj(d), text);
    }
    if (d === null || typeof d !== "object" || Array.isArray(d) || typeof d === "bigint") {
      throw new VerifierError(res.status, "UNKNOWN", "the daemon answered JSON that is not an object");
    }
    return d;
  }
}

function httpError(status: number, body: JsonObject, text: string): VerifierError {
  if (body.code !== undefined) {
    const code = typeof body.code === "number" ? (GRPC_CODES[body.code] ?? String(body.code)) : String(body.code);
    return new VerifierError(status, code, str(body.message), list(body.details).map(obj));
  }
  const names: Record<number, string> = { 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED", 404: "NOT_FOUND", 413: "RESOURCE_EXHAUSTED", 429: "RESOURCE_EXHAUSTED" };
  return new VerifierError(status, names[status] ?? "UNKNOWN", str(body.detail) || str(body.error) || text.slice(0, 1024));
}

/** Params as the daemon takes them: strings, numbers (a bigint as its digits), booleans. */
function encodeParams(params: Params = {}): JsonObject {
  const out: JsonObject = {};
  for (const [k, v] of Object.entries(params)) {
    if (typeof v === "number" && !Number.isFinite(v)) {
      throw new TypeError(`params.${k}: ${v} is not a number the daemon can bind; send it as a string`);
    }
    if (!["string", "number", "bigint", "boolean"].includes(typeof v)) {
      throw new TypeError(`params.${k}: a run parameter is a string, number, bigint or boolean`);
    }
    out[k] = v;
  }
  return out;
}

/** A run of a registered workflow (Client.run, beginRun, openRun). */
export class Run {
  /** Set once the run was finished through this handle. */
  result?: RunResult;
  constructor(private readonly client: Client, readonly runId: string) {}

  /** Begins one step of the run; the workflow and deployment come from the run, params are the step's own. */
  begin(step: string, params: Params = {}): Promise<Session> {
    return this.client.beginBody({ runId: this.runId, step, params: encodeParams(params) });
  }

  /** Client.step for one step of the run. */
  step<T>(step: string, params: Params, action: (session: Session) => Promise<T> | T, hooks: StepHooks = {}): Promise<StepDone<T>> {
    return this.client.stepWith(() => this.begin(step, params), action, hooks, undefined, step);
  }

  /** Records an artifact the step produced, checked against the registered document deployment. */
  verifyArtifact(artifact: string, step: string, req: ArtifactRequest): Promise<ArtifactResult> {
    return this.client.verifyArtifact(req, { runId: this.runId, artifact, step });
  }

  /** Seals the run; NotConfirmed unless VERIFIED. */
  async finish(): Promise<RunResult> {
    this.result = await this.client.finishRun(this.runId);
    if (this.result.outcome !== "VERIFIED") {
      throw new NotConfirmed(this.result);
    }
    return this.result;
  }

  /** The run as it stands. */
  get(): Promise<RunResult> {
    return this.client.getRun(this.runId);
  }
}
