// Offline receipt verification: a DSSE envelope signed with the daemon's
// Ed25519 key, checked with node:crypto alone, and then checked to be
// about what the caller expected (session, deployment, workflow step,
// run). The fields are read from the signed payload, never from anything
// around the envelope.

import { createHash, createPublicKey, verify as verifySignature, type KeyObject } from "node:crypto";
import { parseExact, type JsonObject, type JsonValue } from "./json.js";

/** The payload type of a step's verdict receipt. */
export const VERDICT_RECEIPT_TYPE = "application/vnd.verifierd.verdict-receipt.v1+json";
/** The payload type of a run receipt. */
export const RUN_RECEIPT_TYPE = "application/vnd.verifierd.run-receipt.v1+json";

/** A DSSE envelope as the daemon sends it (`receipt` of an answer). */
export interface Envelope {
  payloadType: string;
  /** base64 of the signed payload (JSON). */
  payload: string;
  signatures: { keyid?: string; sig: string }[];
}

/** What a receipt must be about; an absent field is not checked. */
export interface Expect {
  session?: string;
  deployment?: string;
  step?: string;
  /** A run receipt (payload type RUN_RECEIPT_TYPE) of this run. */
  run?: string;
  /**
   * Accept the receipt of a refused Begin (kind begin_refused) as
   * matching: without it such a receipt fails every expectation, since it
   * proves the step was refused, not verified.
   */
  acceptRefusal?: boolean;
}

/** A receipt that is not valid or not about what was expected. */
export class ReceiptError extends Error {
  /** session, deployment, step, run or kind when a subject differs; "" for a bad signature or envelope. */
  readonly field: string;
  readonly expected: string;
  readonly found: string;
  constructor(message: string, field = "", expected = "", found = "") {
    super(message);
    this.name = "ReceiptError";
    this.field = field;
    this.expected = expected;
    this.found = found;
  }
}

/**
 * The daemon's public key: the raw 32 bytes, their base64, or what
 * `verifyctl key` prints ({"public_key": base64, "key_id": ...}).
 */
export type PublicKeyInput = Uint8Array | string | { public_key: string };

/** The id the daemon names its key by: sha256: and the hex of its SHA-256. */
export function keyId(raw: Uint8Array): string {
  return "sha256:" + createHash("sha256").update(raw).digest("hex");
}

function rawKey(k: PublicKeyInput): Uint8Array {
  let raw: Uint8Array;
  if (k instanceof Uint8Array) {
    raw = k;
  } else {
    const text = typeof k === "string" ? k.trim() : k.public_key;
    if (typeof k === "string" && text.startsWith("{")) {
      return rawKey(JSON.parse(text) as { public_key: string });
    }
    raw = Buffer.from(text, "base64");
  }
  if (raw.length !== 32) {
    throw new ReceiptError(`the public key has ${raw.length} bytes, want 32 (an Ed25519 key: what \`verifyctl key\` prints)`);
  }
  return raw;
}

function ed25519Key(raw: Uint8Array): KeyObject {
  return createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: Buffer.from(raw).toString("base64url") }, format: "jwk" });
}

/** DSSE's pre-authentication encoding of a payload. */
export function pae(payloadType: string, payload: Uint8Array): Buffer {
  const head = Buffer.from(`DSSEv1 ${Buffer.byteLength(payloadType)} ${payloadType} ${payload.length} `, "utf8");
  return Buffer.concat([head, payload]);
}

function envelopeOf(receipt: Envelope | string | Uint8Array): Envelope {
  if (typeof receipt === "string" || receipt instanceof Uint8Array) {
    const v = parseExact(typeof receipt === "string" ? receipt : Buffer.from(receipt).toString("utf8"));
    const inner = (v as JsonObject)?.receipt;
    return ((v as JsonObject)?.payloadType === undefined && inner ? inner : v) as unknown as Envelope;
  }
  return receipt;
}

/**
 * Checks a receipt's signature under the daemon's key and that its signed
 * payload is about `expect`; returns the payload. Throws ReceiptError.
 */
export function verifyReceipt(receipt: Envelope | string | Uint8Array, key: PublicKeyInput, expect: Expect = {}): JsonObject {
  const env = envelopeOf(receipt);
  if (!env || typeof env.payloadType !== "string" || typeof env.payload !== "string" || !Array.isArray(env.signatures)) {
    throw new ReceiptError("not a DSSE envelope: it needs payloadType, payload and signatures");
  }
  const raw = rawKey(key);
  const id = keyId(raw);
  const payload = Buffer.from(env.payload, "base64");
  const message = pae(env.payloadType, payload);
  const pub = ed25519Key(raw);
  const signed = env.signatures.some(
    (s) => (!s.keyid || s.keyid === id) && verifySignature(null, message, pub, Buffer.from(s.sig, "base64")),
  );
  if (!signed) {
    throw new ReceiptError(`no signature of the receipt verifies under the key ${id}`);
  }
  let body: JsonValue;
  try {
    body = parseExact(payload.toString("utf8"));
  } catch (e) {
    throw new ReceiptError(`the signed payload is not JSON: ${(e as Error).message}`);
  }
  if (body === null || typeof body !== "object" || Array.isArray(body)) {
    throw new ReceiptError("the signed payload is not a JSON object");
  }
  checkSubject(env.payloadType, body, expect);
  return body;
}

function text(v: JsonValue | undefined): string {
  return typeof v === "string" ? v : "";
}

function checkSubject(payloadType: string, p: JsonObject, want: Expect): void {
  const anyExpect = want.session !== undefined || want.deployment !== undefined || want.step !== undefined || want.run !== undefined;
  if (!anyExpect) {
    return;
  }
  if (p.kind === "begin_refused" && !want.acceptRefusal) {
    throw new ReceiptError(
      "the receipt records a refused Begin (kind begin_refused): nothing was verified; pass acceptRefusal to accept it as evidence of the refusal",
      "kind", "a verified step", "begin_refused");
  }
  if (want.run !== undefined) {
    if (payloadType !== RUN_RECEIPT_TYPE) {
      throw new ReceiptError(`the receipt is a ${payloadType}, not a run receipt`, "run", want.run, payloadType);
    }
  }
  const dep = p.deployment;
  const wf = p.workflow;
  const found: Record<string, [string, string]> = {
    session: ["session_id", text(p.session_id)],
    deployment: ["deployment.name", dep && typeof dep === "object" && !Array.isArray(dep) ? text(dep.name) : text(dep)],
    step: ["workflow.step", wf && typeof wf === "object" && !Array.isArray(wf) ? text(wf.step) : ""],
    run: ["run_id", text(p.run_id)],
  };
  for (const field of ["session", "deployment", "step", "run"] as const) {
    const w = want[field];
    if (w === undefined) {
      continue;
    }
    const [path, got] = found[field];
    if (got !== w) {
      throw new ReceiptError(`the receipt is about ${field} ${JSON.stringify(got)} (${path}), not the expected ${JSON.stringify(w)}`, field, w, got);
    }
  }
}
