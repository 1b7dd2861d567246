// A real verifierd on loopback for the tests: the binaries `make build`
// leaves in .cache/bin (or $VERIFIERD_BIN), its own data dir, the demo's
// SQLite clinic database, deployment and workflow.
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdtempSync, openSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const repo = resolve(dirname(fileURLToPath(import.meta.url)), "../../..");
export const bin = process.env.VERIFIERD_BIN || join(repo, ".cache", "bin");

function freePort() {
  return new Promise((ok, fail) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => ok(port));
    });
    s.on("error", fail);
  });
}

export class Daemon {
  static async start({ token } = {}) {
    for (const name of ["verifierd", "verifyctl", "clinic"]) {
      if (!existsSync(join(bin, name))) {
        throw new Error(`${name} not found in ${bin}: run \`make build\`, or set VERIFIERD_BIN`);
      }
    }
    const d = new Daemon();
    d.token = token;
    d.dir = mkdtempSync(join(tmpdir(), "verifierd-node-"));
    d.db = join(d.dir, "clinic.db");
    d.clinic("init");
    const read = "SELECT id, patient_id, type, note, created_at FROM encounters WHERE patient_id = :patient_id ORDER BY id";
    writeFileSync(join(d.dir, "deployment.yaml"),
      `effects:\n  kind: sql\n  sqlite_database: ${d.db}\n  sql_query: ${read}\n  sql_query_params:\n    patient_id: {param: patient_id}\n` +
      `  census:\n    sql_query: SELECT id FROM encounters\n`);
    copyFileSync(join(repo, "examples", "demo", "workflow.yaml"), join(d.dir, "workflow.yaml"));
    copyFileSync(join(repo, "examples", "demo", "visit.yaml"), join(d.dir, "visit.yaml"));
    let config = "deployments:\n  clinic: deployment.yaml\nworkflows:\n  triage: workflow.yaml\n  visit: visit.yaml\n";
    const env = { ...process.env };
    if (token) {
      config += "api:\n  bearer_token_env: VERIFIERD_NODE_TOKEN\n";
      env.VERIFIERD_NODE_TOKEN = token;
    }
    writeFileSync(join(d.dir, "daemon.yaml"), config);
    const http = `127.0.0.1:${await freePort()}`;
    const grpc = `127.0.0.1:${await freePort()}`;
    d.url = `http://${http}`;
    d.grpc = grpc;
    const log = openSync(join(d.dir, "verifierd.log"), "w");
    d.proc = spawn(join(bin, "verifierd"), ["--listen", grpc, "--http-listen", http, "--data-dir", join(d.dir, "data"),
      "--config", join(d.dir, "daemon.yaml"), "--log-level", "warn"], { stdio: ["ignore", log, log], env });
    d.exited = new Promise((ok) => d.proc.on("exit", (code) => ok(code)));
    await d.ready();
    const auth = token ? ["--token-env", "VERIFIERD_NODE_TOKEN"] : [];
    d.key = JSON.parse(execFileSync(join(bin, "verifyctl"), ["key", "--addr", grpc, ...auth], { env }).toString());
    return d;
  }

  // Waits until the HTTP listener answers /health, or the daemon exits;
  // no wall-clock bound a busy machine could miss but a generous one.
  async ready() {
    const deadline = Date.now() + 180_000;
    for (;;) {
      const code = await Promise.race([this.exited, new Promise((ok) => setTimeout(() => ok(undefined), 100))]);
      if (code !== undefined) {
        throw new Error(`verifierd exited ${code}:\n${this.output()}`);
      }
      try {
        const r = await fetch(`${this.url}/health`);
        if (r.ok) return;
      } catch {
        // not listening yet
      }
      if (Date.now() > deadline) {
        throw new Error(`verifierd did not answer within 180 s:\n${this.output()}`);
      }
    }
  }

  clinic(...args) {
    return execFileSync(join(bin, "clinic"), [args[0], this.db, ...args.slice(1)]).toString();
  }

  save(patient, note, times = 1, type = "Triage") {
    this.clinic("save", patient, type, note, String(times));
  }

  output() {
    try {
      return readFileSync(join(this.dir, "verifierd.log"), "utf8");
    } catch {
      return "";
    }
  }

  async stop() {
    this.proc.kill("SIGTERM");
    await this.exited;
    rmSync(this.dir, { recursive: true, force: true });
  }
}
