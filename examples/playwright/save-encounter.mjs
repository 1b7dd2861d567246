// A browser automation's "Save", checked by verifierd: the script fills
// the clinic's encounter form and clicks Save inside client.step(...), so
// it goes on only when the daemon has read the clinic database and found
// exactly one new encounter for this patient with this note.
//
//   node save-encounter.mjs APP_URL PATIENT NOTE
//
// Environment: VERIFIERD_URL (default http://127.0.0.1:7444),
// VERIFIERD_TOKEN, CHROMIUM (default /usr/bin/chromium).
import { chromium } from "playwright-core";
import { Client, NotConfirmed } from "@verifierd/client";

/** Fills and saves one encounter in the clinic web app at appUrl. */
export async function fillAndSave(page, appUrl, patient, note, { clicks = 1 } = {}) {
  await page.goto(appUrl);
  await page.fill("#patient_id", patient);
  await page.selectOption("#type", "Triage");
  await page.fill("#note", note);
  await page.click("#save", { clickCount: 1 });
  for (let i = 1; i < clicks; i++) {
    await page.click("#save"); // an impatient second click: the button stays enabled
  }
  await page.waitForSelector("#status:has-text('Saved')");
}

/** Launches Debian's Chromium (no browser download). */
export function launch() {
  return chromium.launch({
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update", "--no-first-run"],
  });
}

async function main([appUrl, patient, note]) {
  const client = new Client({ url: process.env.VERIFIERD_URL || "http://127.0.0.1:7444", token: process.env.VERIFIERD_TOKEN });
  const browser = await launch();
  try {
    const page = await browser.newPage();
    const { result } = await client.step(
      { deployment: "clinic", workflow: "triage", step: "save_triage", params: { patient_id: patient, note } },
      () => fillAndSave(page, appUrl, patient, note),
    );
    console.log(`${result.outcome}: session ${result.sessionId}`);
  } catch (e) {
    if (e instanceof NotConfirmed) {
      console.error(`not confirmed: ${e.message}`);
      process.exitCode = 4;
      return;
    }
    throw e;
  } finally {
    await browser.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await main(process.argv.slice(2));
}
