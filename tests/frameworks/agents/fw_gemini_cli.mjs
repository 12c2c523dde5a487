// gemini-cli: the real CLI in headless mode (`gemini -p PROMPT --yolo`), on the Gemini API
// client pointed at the stub (GOOGLE_GEMINI_BASE_URL), with its own telemetry exported over
// OTLP/HTTP to the generator's receiver (traces only are kept). Its built-in read_file tool
// stands for the scripted tools: the generator renames the calls, and this wrapper lays out
// the files they read in a scratch workspace (a missing one for the failing tool). HOME is
// scratch too, with settings that keep the CLI offline (no usage statistics, no update check).
import { spawnSync } from "node:child_process";
import { mkdirSync, mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parseArgs } from "node:util";

const { values: args } = parseArgs({
  options: { scenario: { type: "string" }, layout: { type: "string" }, out: { type: "string" } },
});
const root = mkdtempSync(join(tmpdir(), "stall-gemini-"));
const home = join(root, "home");
const work = join(root, "work");
mkdirSync(join(home, ".gemini"), { recursive: true });
mkdirSync(work, { recursive: true });
for (const city of ["Paris", "London"]) {
  writeFileSync(join(work, `weather in ${city}.txt`), `No results found for 'weather in ${city}'.\n`);
}
for (let page = 1; page <= 4; page++) {
  writeFileSync(join(work, `page${page}.txt`), `Page ${page}: items ${page * 10}..${page * 10 + 9}\n`);
}
const system = join(root, "system.md");
writeFileSync(system, "You are a careful research assistant. [agent:main]\n");
writeFileSync(
  join(home, ".gemini", "settings.json"),
  JSON.stringify({
    general: { enableAutoUpdate: false, enableAutoUpdateNotification: false },
    privacy: { usageStatisticsEnabled: false },
    security: { auth: { selectedType: "gemini-api-key" }, folderTrust: { enabled: false } },
    telemetry: { enabled: true, target: "local", otlpProtocol: "http", traces: true },
  }),
);
const endpoint = process.env.OTLP_TRACES_URL.replace(/\/v1\/traces$/, "");
const gemini = join(dirname(fileURLToPath(import.meta.url)), "node_modules", ".bin", "gemini");
const run = spawnSync(gemini, ["-p", `Please help with the '${args.scenario}' task.`, "--yolo"], {
  cwd: work,
  env: {
    ...process.env,
    HOME: home,
    GEMINI_API_KEY: "offline-stub",
    GEMINI_SYSTEM_MD: system,
    GEMINI_TELEMETRY_ENABLED: "true",
    GEMINI_TELEMETRY_TRACES_ENABLED: "true",
    GEMINI_TELEMETRY_TARGET: "local",
    GEMINI_TELEMETRY_OTLP_ENDPOINT: endpoint,
    GEMINI_TELEMETRY_OTLP_PROTOCOL: "http",
  },
  encoding: "utf-8",
  timeout: 240_000,
});
process.stdout.write(run.stdout ?? "");
process.stderr.write(run.stderr ?? "");
process.exit(run.status ?? 1);
