// @verifierd/client: a TypeScript client for the verifierd daemon's
// HTTP/JSON API, with no runtime dependencies (Node >= 18: fetch, and
// node:crypto for Ed25519 receipts).
export { Client, NotConfirmed, Refused, Run, VerifierError } from "./client.js";
export type { ClientOptions, StepDone, StepHooks } from "./client.js";
export { RUN_RECEIPT_TYPE, ReceiptError, VERDICT_RECEIPT_TYPE, keyId, pae, verifyReceipt } from "./receipt.js";
export type { Envelope, Expect, PublicKeyInput } from "./receipt.js";
export { parseExact, stringifyExact } from "./json.js";
export type { JsonObject, JsonValue } from "./json.js";
export type * from "./types.js";
