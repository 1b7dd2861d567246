// The TypeScript client against a real verifierd (the binaries `make
// build` leaves), a real SQLite clinic database and the demo's workflows.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client, NotConfirmed, ReceiptError, Refused, VerifierError, parseExact, stringifyExact, verifyReceipt } from "../dist/index.js";
import { Daemon } from "./daemon.mjs";

let d;
let client;
before(async () => {
  d = await Daemon.start({ token: "node-test-token-0123" });
  client = new Client({ url: d.url, token: d.token, receiptKey: d.key });
});
after(async () => {
  await d?.stop();
});

const triage = (patient, note) => ({ deployment: "clinic", workflow: "triage", step: "save_triage", params: { patient_id: patient, note } });

describe("step", () => {
  test("an honest save is VERIFIED with a receipt checked offline", async () => {
    let ran = 0;
    const done = await client.step(triage("p1", "Follow-up"), (s) => {
      ran++;
      assert.match(s.sessionId, /^ses_/);
      d.save("p1", "Follow-up");
      return "saved";
    });
    assert.equal(ran, 1);
    assert.equal(done.value, "saved");
    assert.equal(done.result.outcome, "VERIFIED");
    assert.deepEqual(done.result.effects.map((e) => `${e.verdict}/${e.result}`), ["CONFIRMED/confirmed", "CONFIRMED/confirmed"]);
    assert.equal(done.result.effects[0].observedCount, 1);
    assert.equal(done.result.effects[0].newness, "census");
    assert.equal(done.result.effects[0].matchedRecords[0].patient_id, "p1");
    const payload = verifyReceipt(done.result.receipt, d.key, { session: done.session.sessionId, deployment: "clinic", step: "save_triage" });
    assert.equal(payload.session_id, done.session.sessionId);
    assert.throws(() => verifyReceipt(done.result.receipt, d.key, { step: "another_step" }), (e) => e instanceof ReceiptError && e.field === "step");
    // A receipt whose payload was altered no longer verifies.
    const forged = { ...done.result.receipt, payload: Buffer.from(Buffer.from(done.result.receipt.payload, "base64").toString().replace("VERIFIED", "VERIFIEd")).toString("base64") };
    assert.throws(() => verifyReceipt(forged, d.key), (e) => e instanceof ReceiptError && /no signature/.test(e.message));
  });

  test("a double submit is NotConfirmed RECONCILIATION_REQUIRED with COUNT_OVER", async () => {
    const err = await client.step(triage("p2", "twice"), () => d.save("p2", "twice", 2)).then(() => null, (e) => e);
    assert.ok(err instanceof NotConfirmed, String(err));
    assert.equal(err.outcome, "RECONCILIATION_REQUIRED");
    assert.equal(err.effects[0].verdict, "REFUTED");
    assert.equal(err.effects[0].result, "conflicting");
    assert.deepEqual(err.effects[0].reasons.map((r) => r.code), ["COUNT_OVER"]);
    assert.equal(err.effects[0].observedCount, 2);
    assert.equal(err.effects[0].reconciliationTask.suggestedAction, "REMOVE_DUPLICATES");
  });

  test("nothing saved is NotConfirmed HALTED_BEFORE_EFFECT", async () => {
    const err = await client.step(triage("p3", "never"), () => {}).then(() => null, (e) => e);
    assert.ok(err instanceof NotConfirmed, String(err));
    assert.equal(err.outcome, "HALTED_BEFORE_EFFECT");
    assert.deepEqual(err.effects.map((e) => e.result), ["refuted", "refuted"]);
  });

  test("a refused Begin throws Refused and never runs the action", async () => {
    let ran = false;
    const err = await client.step({ deployment: "no-such-deployment", workflow: "triage", step: "save_triage", params: { patient_id: "p4", note: "x" } }, () => {
      ran = true;
    }).then(() => null, (e) => e);
    assert.ok(err instanceof VerifierError, String(err));
    assert.equal(ran, false);
    const inline = await client.begin({ deployment: "clinic", effects: "[{kind: record_written, match: {patient_id: p4}}]", params: { patient_id: "p4" } }).then(() => null, (e) => e);
    assert.ok(inline instanceof Refused, String(inline));
    assert.equal(inline.code, "PERMISSION_DENIED");
    assert.equal(inline.rule, "registered_contracts_required");
  });

  test("the action's error passes through, and Verify was attempted", async () => {
    const boom = new Error("the save button was not found");
    let seen;
    const err = await client.step(triage("p5", "half"), () => {
      d.save("p5", "half");
      throw boom;
    }, { onVerifiedAfterError: (r) => { seen = r; } }).then(() => null, (e) => e);
    assert.equal(err, boom);
    assert.equal(seen?.outcome, "VERIFIED");
  });

  test("a wrong token is UNAUTHENTICATED", async () => {
    const other = new Client({ url: d.url, token: "wrong-token-000000" });
    const err = await other.begin(triage("p6", "x")).then(() => null, (e) => e);
    assert.ok(err instanceof VerifierError);
    assert.equal(err.code, "UNAUTHENTICATED");
    assert.equal(err.httpStatus, 401);
  });
});

describe("runs", () => {
  test("a visit run is VERIFIED, its handoff taken from the verified triage", async () => {
    const { run, value } = await client.run("visit", "clinic", { patient_id: "p7", note: "Chest pain" }, async (r) => {
      const t = await r.step("triage", {}, () => d.save("p7", "Chest pain"));
      const triageId = String(t.result.effects[0].matchedRecords[0].id);
      await r.step("follow_up", {}, () => d.save("p7", triageId, 1, "FollowUp"));
      return triageId;
    });
    assert.equal(run.outcome, "VERIFIED");
    assert.ok(value);
    assert.deepEqual(run.steps.map((s) => `${s.step}:${s.outcome}`), ["triage:VERIFIED", "follow_up:VERIFIED"]);
    verifyReceipt(run.receipt, d.key, { run: run.runId });
  });

  test("a run whose step was double submitted is NotConfirmed", async () => {
    const err = await client.run("visit", "clinic", { patient_id: "p8", note: "twice" }, async (r) => {
      await r.step("triage", {}, () => d.save("p8", "twice", 2));
    }).then(() => null, (e) => e);
    assert.ok(err instanceof NotConfirmed, String(err));
    assert.equal(err.outcome, "RECONCILIATION_REQUIRED");
  });
});

describe("exact numbers", () => {
  test("ids past 2^53 and decimals keep their digits", () => {
    const v = parseExact('{"id": 9007199254740993, "small": 36, "amount": 1234.50, "f": 0.5, "neg": -12345678901234567890}');
    assert.equal(v.id, 9007199254740993n);
    assert.equal(v.small, 36);
    assert.equal(v.amount, "1234.50");
    assert.equal(v.f, 0.5);
    assert.equal(v.neg, -12345678901234567890n);
    assert.equal(stringifyExact({ id: 9007199254740993n, s: "bigint-x" }), '{"id":9007199254740993,"s":"bigint-x"}');
    assert.throws(() => parseExact('{"a": 1, "a": 2}'), /duplicate key/);
  });

  test("a 64-bit id and a decimal sent as params bind exactly (Judge over HTTP)", async () => {
    const answer = await client.call("POST", "/v1/judge", {
      effects: "[{kind: record_written, match: {id: {param: id}, amount: {param: amount, as: decimal}}}]",
      params: { id: 9007199254740993n, amount: "1234.50" },
      before: { reachable: true, records: [] },
      after: { reachable: true, records: [{ id: "9007199254740993", amount: "1234.5" }] },
    });
    assert.equal(answer.outcome, "VERIFIED");
    assert.equal(answer.effects[0].matchedRecords[0].id, "9007199254740993");
  });
});
