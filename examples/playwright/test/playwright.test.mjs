// The Playwright step through a real verifierd: Debian's Chromium driven by
// playwright-core fills the clinic web app's form (`clinic serve`, over the
// same SQLite database the daemon reads), wrapped in client.step.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { after, before, test } from "node:test";
import { Client, NotConfirmed } from "@verifierd/client";
import { Daemon, bin } from "../../../clients/node/test/daemon.mjs";
import { fillAndSave, launch } from "../save-encounter.mjs";

let d, client, browser, app, appUrl;

before(async () => {
  d = await Daemon.start();
  client = new Client({ url: d.url, receiptKey: d.key });
  app = spawn(join(bin, "clinic"), ["serve", d.db, "127.0.0.1:0"], { stdio: ["ignore", "pipe", "inherit"] });
  appUrl = await new Promise((ok, fail) => {
    createInterface({ input: app.stdout }).once("line", (l) => ok(l.replace("clinic listening on ", "")));
    app.once("exit", (code) => fail(new Error(`clinic serve exited ${code}`)));
  });
  browser = await launch();
});

after(async () => {
  await browser?.close();
  app?.kill("SIGTERM");
  await d?.stop();
});

const triage = (patient, note) => ({ deployment: "clinic", workflow: "triage", step: "save_triage", params: { patient_id: patient, note } });

test("an honest save is VERIFIED", async () => {
  const page = await browser.newPage();
  const { result } = await client.step(triage("pw1", "Chest pain"), () => fillAndSave(page, appUrl, "pw1", "Chest pain"));
  assert.equal(result.outcome, "VERIFIED");
  assert.equal(result.effects[1].observedValue, "Chest pain");
  await page.close();
});

test("a double click is RECONCILIATION_REQUIRED (two encounters landed)", async () => {
  const page = await browser.newPage();
  const err = await client.step(triage("pw2", "Fever"), async () => {
    await fillAndSave(page, appUrl, "pw2", "Fever", { clicks: 2 });
    // Both clicks' POSTs must have reached the app before Verify reads;
    // the screen already says "Saved" after the first.
    await page.waitForFunction(() => performance.getEntriesByType("resource").filter((e) => e.name.endsWith("/encounters")).length >= 2);
  }).then(() => null, (e) => e);
  assert.ok(err instanceof NotConfirmed, String(err));
  assert.equal(err.outcome, "RECONCILIATION_REQUIRED");
  assert.deepEqual(err.effects[0].reasons.map((r) => r.code), ["COUNT_OVER"]);
  assert.equal(err.effects[0].observedCount, 2);
  await page.close();
});

test("a save that never reaches the server is HALTED_BEFORE_EFFECT, though the screen says Saved", async () => {
  const page = await browser.newPage();
  await page.route("**/encounters", (route) => route.abort("internetdisconnected"));
  const err = await client.step(triage("pw3", "Cough"), () => fillAndSave(page, appUrl, "pw3", "Cough")).then(() => null, (e) => e);
  assert.ok(err instanceof NotConfirmed, String(err));
  assert.equal(err.outcome, "HALTED_BEFORE_EFFECT");
  assert.equal(await page.textContent("#status"), "Saved");
  await page.close();
});
